"""The one rule for names inside a bundle: entry paths, and names that collide elsewhere.

A bundle is checked out on Linux, macOS and Windows, and read by people in terminals and
code review. So an entry path must be a normalised relative POSIX path (no ``..``, no
absolute path, no backslash, no control character), must not *look like* something it is
not (bidirectional controls, zero-width and other format characters, look-alike dots
and slashes), and no two names of one bundle may fold to the same name on a
case-insensitive or normalisation-insensitive file system (``Readme.TXT`` / ``readme.txt``,
NFC / NFD spellings of ``café``, ``BUNDLE.JSON`` beside the registration). Bundle
creation refuses what this module reports, and verification reports it; both call these
functions, so the rule lives here only.

The common case (printable ASCII without dot segments) is decided by one regular
expression match, so checking 100,000 entries stays cheap.
"""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import NamedTuple  # not dataclasses: cheaper to define, on verify's import path

__all__ = [
    "REGISTRATION_NAME",
    "Collision",
    "PathProblem",
    "all_plain",
    "entry_path_problem",
    "fold_name",
    "name_collisions",
    "path_problem",
    "readlink",
    "resolve",
    "shown",
    "within",
]

REGISTRATION_NAME = "bundle.json"

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")
# Printable ASCII but '/' and '\\', in '/'-separated segments: needs no further look.
_PLAIN_PATH = re.compile(r"[ -.0-\[\]-~]+(?:/[ -.0-\[\]-~]+)*")
# The same characters as _PLAIN_PATH, and the newline that joins paths for all_plain.
_PLAIN_LINES = re.compile(r"[ -.0-\[\]-~/\n]*")
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")

# Characters that display as a dot or a slash (or backslash) without being one. NFKC
# maps some of them to the ASCII character (fullwidth forms), others it leaves alone.
_LOOKALIKES = {
    "\u2024": "ONE DOT LEADER",
    "\u2025": "TWO DOT LEADER",
    "\ufe52": "SMALL FULL STOP",
    "\uff0e": "FULLWIDTH FULL STOP",
    "\u0702": "SYRIAC SUBLINEAR FULL STOP",
    "\ua4f8": "LISU LETTER TONE MYA TI",
    "\u2044": "FRACTION SLASH",
    "\u2215": "DIVISION SLASH",
    "\u2216": "SET MINUS",
    "\u2571": "BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT",
    "\u2572": "BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT",
    "\u29f5": "REVERSE SOLIDUS OPERATOR",
    "\u29f8": "BIG SOLIDUS",
    "\u29f9": "BIG REVERSE SOLIDUS",
    "\ufe68": "SMALL REVERSE SOLIDUS",
    "\uff0f": "FULLWIDTH SOLIDUS",
    "\uff3c": "FULLWIDTH REVERSE SOLIDUS",
}


class PathProblem(NamedTuple):
    """Why an entry path is refused: ``code`` is ``bad-path`` or ``misleading-name``."""

    code: str
    reason: str


class Collision(NamedTuple):
    """Two names of one bundle that one file system would merge: ``first`` < ``second``."""

    first: str
    second: str

    @property
    def reason(self) -> str:
        """A sentence saying what collides and why."""
        a, b = self.first, self.second
        if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
            how = "differ only in Unicode normalisation (NFC/NFD)"
        else:
            how = "differ only in letter case"
        return (
            f"{a!r} and {b!r} {how}: a case- or normalisation-insensitive file system "
            "(macOS, Windows) would merge them"
        )


def _char_name(c: str) -> str:
    return f"U+{ord(c):04X} {unicodedata.name(c, '')}".rstrip()


def path_problem(path: str) -> PathProblem | None:
    """Return why ``path`` is not an acceptable entry path, or None when it is.

    ``bad-path``: not a normalised relative POSIX path, or the reserved registration
    name. ``misleading-name``: a name that shows as something else (bidi or other format
    characters, look-alike dots and slashes, a segment that NFKC folds to ``.``/``..``).
    """
    if (
        _PLAIN_PATH.fullmatch(path)
        and "." not in (path[:1], path[-1:])
        and "/." not in path
        and "./" not in path
        and not _WINDOWS_DRIVE.match(path)
    ):
        if path == REGISTRATION_NAME:
            return PathProblem("bad-path", "is reserved for the registration")
        return None  # the common case, decided without splitting
    if not path:
        return PathProblem("bad-path", "is empty")
    if "\x00" in path:
        return PathProblem("bad-path", "contains a NUL byte")
    if "\\" in path:
        return PathProblem("bad-path", "contains a backslash (entry paths use '/')")
    if path.startswith("/") or _WINDOWS_DRIVE.match(path):
        return PathProblem("bad-path", "is absolute")
    parts = path.split("/")
    if "" in parts:
        return PathProblem("bad-path", "has an empty segment ('//' or a trailing '/')")
    if ".." in parts:
        return PathProblem("bad-path", "has a '..' segment")
    if "." in parts:
        return PathProblem("bad-path", "has a '.' segment")
    control = _ASCII_CONTROL.search(path)
    if control:
        return PathProblem("bad-path", f"contains a control character ({_char_name(control[0])})")
    for c in dict.fromkeys(_NON_ASCII.findall(path)):  # in C: only the non-ASCII characters
        category = unicodedata.category(c)
        if category == "Cc":
            return PathProblem("bad-path", f"contains a control character ({_char_name(c)})")
        if category == "Cs":
            if "\udc80" <= c <= "\udcff":  # os.fsdecode's stand-in for a non-UTF-8 byte
                return PathProblem("bad-path", f"is not valid UTF-8 (byte 0x{ord(c) - 0xDC00:02X})")
            return PathProblem("bad-path", f"contains a lone surrogate ({_char_name(c)})")
        if category in ("Cf", "Zl", "Zp", "Co"):
            return PathProblem(
                "misleading-name",
                f"contains an invisible or layout-changing character ({_char_name(c)})",
            )
        if c in _LOOKALIKES:
            return PathProblem(
                "misleading-name", f"contains a look-alike of '.' or '/' ({_char_name(c)})"
            )
    if not unicodedata.is_normalized("NFKC", path):
        for part in parts:
            folded = unicodedata.normalize("NFKC", part)
            if folded in (".", "..") or "/" in folded or "\\" in folded:
                return PathProblem(
                    "misleading-name", f"has a segment {part!r} that reads as {folded!r}"
                )
    if path == REGISTRATION_NAME:
        return PathProblem("bad-path", "is reserved for the registration")
    return None


def all_plain(paths: Sequence[str]) -> bool:
    """True when :func:`path_problem` would take its common case for every one of
    ``paths`` and find nothing: decided by a few scans of the joined paths, in C, with no
    Python call per path. False means "look at each path", not that one is bad.
    """
    if not paths:
        return True
    joined = "\n".join(paths)
    # _PLAIN_PATH, one path a line: only its characters, and no empty segment or line
    # (no '//', no leading or trailing '/', no empty path: no newline next to a '/' or
    # another newline); then path_problem's other common-case conditions.
    return (
        _PLAIN_LINES.fullmatch(joined) is not None
        and joined.count("\n") == len(paths) - 1  # no path holds a newline of its own
        and joined[:1] not in ("", "/", ".", "\n")
        and joined[-1:] not in ("/", ".", "\n")
        and "//" not in joined
        and "\n\n" not in joined
        and "\n/" not in joined
        and "/\n" not in joined
        and "/." not in joined
        and "./" not in joined
        and "\n." not in joined
        and ".\n" not in joined
        and ":" not in joined  # a drive letter; any colon: look at each path
        and REGISTRATION_NAME not in paths
    )


def entry_path_problem(path: str) -> str | None:
    """Return why ``path`` is not an acceptable entry path (a phrase), or None."""
    problem = path_problem(path)
    return problem.reason if problem else None


def fold_name(name: str) -> str:
    """Return the name a case- and normalisation-insensitive file system would store."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def name_collisions(paths: Iterable[str], *, reserved: Iterable[str] = ()) -> list[Collision]:
    """Return every pair of distinct names that fold to the same name.

    Directory prefixes count too (``Res/a`` and ``res/b`` would share one directory),
    and so do ``reserved`` names (such as ``bundle.json``) that sit beside the entries.
    Each colliding spelling is reported once, against the first spelling seen.
    """
    spelled: dict[str, str] = {}
    found: dict[tuple[str, str], Collision] = {}

    def see(name: str) -> None:
        key = fold_name(name)
        other = spelled.setdefault(key, name)
        if other != name:
            a, b = sorted((other, name))
            found.setdefault((a, b), Collision(a, b))

    for name in reserved:
        see(name)
    dirs: set[str] = set()
    for path in paths:
        see(path)
        parent = path.rpartition("/")[0]
        while parent and parent not in dirs:
            dirs.add(parent)
            see(parent)
            parent = parent.rpartition("/")[0]
    return sorted(found.values(), key=lambda c: (c.first, c.second))


def readlink(path: str | os.PathLike[str]) -> str:
    """A symlink's text, or ``?`` when it cannot be read (for a message)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def resolve(path: str | os.PathLike[str]) -> str | None:
    """Return the real path of ``path`` (it need not exist), or None on a symlink loop.

    Unlike ``Path.resolve`` this never raises ``RuntimeError``: a loop anywhere on the
    way is what None means.
    """
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
    return os.path.realpath(path)


def within(path: str, root: str) -> bool:
    """Whether real path ``path`` is ``root`` or below it (both absolute, resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def shown(name: str) -> str:
    """Return ``name`` as it can be reported (in JSON too): bytes of a file name that are
    not UTF-8 (``surrogateescape``) appear as ``\\xNN``, any other surrogate as ``\\uXXXX``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
