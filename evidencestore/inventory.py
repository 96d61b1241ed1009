"""The inventory: every ``evidence/<name>/bundle.json`` found, strictly decoded.

Nothing pins a global count: totals are computed from the registrations present, so
pull requests that each add one bundle directory merge without touching shared files.

A registration is read only when it is what git tracks: one that is a symlink leaving
the repository is a ``registration-symlink-escape`` finding (like an entry's
``symlink-escape``), a symlink loop is a ``symlink-loop`` finding, and bundle
directories whose names fold together on case-insensitive systems are a
``name-collision``. Directories whose names start with ``.`` are not bundles (a
``bundle create`` stages in ``.<name>.tmp-<hex>``; see ``staging.py``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ._canonical import decode_exact
from .errors import BundleNotFoundError, ConfigError, InvalidDigestError, ManifestError
from .models import Entry, Finding, Registration, Severity
from .paths import REGISTRATION_NAME, name_collisions, resolve, shown, within

__all__ = [
    "EVIDENCE_DIR",
    "REGISTRATION_NAME",
    "BundleDirs",
    "Inventory",
    "decode_registration",
    "find_registration",
    "load_inventory",
    "load_registration",
    "read_entry",
    "read_registration",
    "registration_path",
    "resolve_blob",
]

EVIDENCE_DIR = "evidence"


def registration_path(root: str | os.PathLike[str], name: str) -> Path:
    """Return ``<root>/evidence/<name>/bundle.json``."""
    return Path(root) / EVIDENCE_DIR / name / REGISTRATION_NAME


def decode_registration(data: bytes, source: str) -> Registration:
    """Strictly decode a registration; errors name ``source`` and the JSON path.

    A file that is not exactly its value's encoding (one written with a default
    explicitly, by 0c7be23 or earlier) keeps the hashes of its manifest as it stands
    (``merkle.registration_hashes``), which its digest was computed over.
    """
    try:
        registration, exact = decode_exact(data, Registration)
    except msgspec.ValidationError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{source}: malformed JSON: {exc}") from None
    if not exact:
        from .merkle import keep_stored

        keep_stored(registration, msgspec.json.decode(data)["manifest"])
    return registration


def read_entry(bundle_dir: Path, name: str, entry: Entry, what: str, hint: str = "") -> bytes:
    """Return the bytes of ``repo`` entry ``entry`` of bundle ``name`` (in ``bundle_dir``),
    checked against its registered digest and size; a :class:`ManifestError` names the
    file, ``what`` it holds and, on a mismatch, ``hint``."""
    from .digest import hash_bytes

    path = bundle_dir / entry.path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read {what}: {exc.strerror}") from exc
    observed = hash_bytes(data)
    if (observed.digest, observed.size) != (entry.descriptor.digest, entry.descriptor.size):
        raise ManifestError(
            f"{path}: {what} hashes to {observed.digest} ({observed.size} bytes), but bundle "
            f"{name!r} registered {entry.descriptor.digest}{hint}"
        )
    return data


def read_registration(path: str | os.PathLike[str]) -> bytes:
    """The bytes of one registration file; :class:`BundleNotFoundError` when there is
    none (no bundle of that name is registered)."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise BundleNotFoundError(f"{os.fspath(path)}: no such registration") from None
    except OSError as exc:
        raise ManifestError(f"{os.fspath(path)}: cannot read: {exc.strerror}") from exc


def load_registration(path: str | os.PathLike[str]) -> Registration:
    """Read and decode one registration file; :class:`BundleNotFoundError` when there
    is none (no bundle of that name is registered)."""
    return decode_registration(read_registration(path), os.fspath(path))


class Inventory:
    """Registrations by bundle name, and findings about ones that could not be read.

    A plain class, not a dataclass: importing ``dataclasses`` would cost every
    ``evstore verify`` 15 ms.
    """

    def __init__(
        self,
        root: Path,
        registrations: dict[str, Registration] | None = None,
        findings: list[Finding] | None = None,
    ) -> None:
        self.root = root
        self.registrations: dict[str, Registration] = {} if registrations is None else registrations
        self.findings: list[Finding] = [] if findings is None else findings

    def __repr__(self) -> str:
        return (
            f"Inventory(root={self.root!r}, registrations={self.registrations!r}, "
            f"findings={self.findings!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inventory):
            return NotImplemented
        return (self.root, self.registrations, self.findings) == (
            other.root,
            other.registrations,
            other.findings,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __len__(self) -> int:
        return len(self.registrations)

    @property
    def names(self) -> list[str]:
        """Bundle names, sorted."""
        return sorted(self.registrations)


# O_NOFOLLOW: a registration that is a symlink takes the careful path; O_NONBLOCK: a
# FIFO named bundle.json must not hang the open.
_PLAIN_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _careful_problem(
    reg_path: str, rel: str, reg_rel: str, bundle_dir: str, real_root: str
) -> tuple[str, str] | None:
    """Why a registration that is not a plain file is not read, as (code, message); None
    when it is read the careful way (a symlink within the repository, or unreadable)."""
    reg_file = Path(reg_path)
    if reg_file.is_symlink():
        real = resolve(reg_file)
        if real is None:
            return (
                "symlink-loop",
                f"{reg_rel}: a symlink loop ({os.readlink(reg_file)}): no registration to read",
            )
        if not within(real, real_root) and within(os.path.realpath(bundle_dir), real_root):
            return (
                "registration-symlink-escape",
                f"{reg_rel} is a symlink to {real}, outside the repository: it is not "
                "read (a registration must be the file that git tracks)",
            )
    if not reg_file.is_file():
        return ("missing-registration", f"{rel}: no {REGISTRATION_NAME} in this bundle directory")
    return None


def _read_plain(path: str) -> bytes | OSError | None:
    """The bytes of a regular, non-symlink file; None when there is no such file (or
    it is not a regular file); the ``OSError`` when it needs the careful checks."""
    try:
        fd = os.open(path, _PLAIN_OPEN)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return exc  # ELOOP: a symlink; EACCES and others: reported by the careful path
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        # One read of one byte more than fstat says usually does; a read that comes up
        # short (interrupted) or long (the file grew) goes on to EOF.
        last = os.read(fd, st.st_size + 1)
        chunks, total = [last], len(last)
        while last and total != st.st_size:
            last = os.read(fd, 1 << 16)
            chunks.append(last)
            total += len(last)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except OSError as exc:
        return exc
    finally:
        os.close(fd)


def _finding(
    code: str,
    message: str,
    bundle: str | None = None,
    path: str | None = None,
    severity: Severity = "error",
) -> Finding:
    return Finding(
        severity=severity,
        code=code,
        message=shown(message),  # a name on disk need not be UTF-8
        bundle=None if bundle is None else shown(bundle),
        path=None if path is None else shown(path),
    )


class BundleDirs:
    """The bundle directories of a repository, listed once, loaded in any number of
    contiguous parts: ``load_inventory`` is ``load()`` of all of them plus
    :meth:`closing_findings`, and a verifier may load parts in forked workers and join
    them in order (the findings of a part are about its directories only)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.evidence = self.root / EVIDENCE_DIR
        self.findings: list[Finding] = []  # about the evidence directory itself
        self.dirs: list[os.DirEntry[str]] = []
        self.real_root = ""
        self.present = self.evidence.is_dir()
        if not self.present:
            # A freshly initialised repository (evstore.toml, no bundle yet: git keeps
            # no empty directory) holds zero bundles, which verify; anything else is
            # not one.
            initialised = (self.root / "evstore.toml").is_file()
            self.findings.append(
                _finding(
                    "no-evidence-dir",
                    f"{self.evidence}: no evidence directory yet: no bundle is registered"
                    if initialised
                    else f"{self.evidence}: no evidence directory (expected "
                    "evidence/<bundle>/bundle.json)",
                    severity="info" if initialised else "error",
                )
            )
            return
        self.dirs = sorted(
            (p for p in os.scandir(self.evidence) if not p.name.startswith(".")),
            key=lambda p: p.name,
        )
        self.real_root = os.path.realpath(self.root)

    def load(self, dirs: Sequence[os.DirEntry[str]] | None = None) -> Inventory:
        """The registrations of ``dirs`` (default: all), and findings about them."""
        inventory = Inventory(root=self.root)
        for entry in self.dirs if dirs is None else dirs:
            finding = self._load_one(entry, inventory.registrations)
            if finding is not None:
                inventory.findings.append(finding)
        return inventory

    def _load_one(
        self, entry: os.DirEntry[str], registrations: dict[str, Registration]
    ) -> Finding | None:
        rel = f"{EVIDENCE_DIR}/{entry.name}"
        reg_rel = f"{rel}/{REGISTRATION_NAME}"
        if entry.is_symlink() and resolve(entry.path) is None:
            return _finding(
                "symlink-loop",
                f"{rel}: a symlink loop ({rel} -> {os.readlink(entry.path)}): no bundle to read",
                entry.name,
                rel,
            )
        if not entry.is_dir():
            return _finding(
                "stray-file",
                f"{rel}: a file directly under evidence/ (only bundle directories belong there)",
                path=rel,
            )
        reg_path = f"{entry.path}{os.sep}{REGISTRATION_NAME}"
        data = _read_plain(reg_path)
        problem = (
            _careful_problem(reg_path, rel, reg_rel, entry.path, self.real_root)
            if not isinstance(data, bytes)
            else None
        )
        if problem is not None:
            return _finding(*problem, entry.name, reg_rel)
        try:
            if isinstance(data, bytes):
                registration = decode_registration(data, reg_path)
            else:  # a symlink inside the repository, or unreadable: the careful way
                registration = load_registration(Path(reg_path))
        except ManifestError as exc:
            return _finding(
                "invalid-registration",
                str(exc).replace(str(self.root) + os.sep, ""),
                entry.name,
                reg_rel,
            )
        registrations[entry.name] = registration
        if registration.manifest.name != entry.name:
            return _finding(
                "name-mismatch",
                f"{reg_rel}: manifest name {registration.manifest.name!r} "
                f"disagrees with its directory {entry.name!r}",
                entry.name,
                reg_rel,
            )
        return None

    def inventory(self) -> Inventory:
        """Every directory loaded, with every finding: what :func:`load_inventory` gives."""
        inventory = self.load()
        inventory.findings[:0] = self.findings
        inventory.findings.extend(self.closing_findings())
        return inventory

    def closing_findings(self) -> list[Finding]:
        """What is judged over all the directories: names that collide, and none at all."""
        if not self.present:
            return []
        out = [
            _finding(
                "name-collision",
                f"{EVIDENCE_DIR}/{c.first} and {EVIDENCE_DIR}/{c.second}: bundle directories "
                f"{c.reason}",
                c.second,
                f"{EVIDENCE_DIR}/{c.second}",
            )
            for c in name_collisions(p.name for p in self.dirs)
        ]
        if not self.dirs:
            out.append(
                _finding(
                    "empty-evidence-dir",
                    f"{self.evidence}: the evidence directory holds no bundle yet",
                    path=EVIDENCE_DIR,
                    severity="info",
                )
            )
        return out


def load_inventory(root: str | os.PathLike[str]) -> Inventory:
    """Assemble the inventory of the evidence repository at ``root``.

    Unreadable or invalid registrations, and directories without one, become error
    findings rather than exceptions, so a verifier can list every problem.
    """
    return BundleDirs(root).inventory()


# -- naming a bundle or a blob ----------------------------------------------------
def find_registration(root: str | os.PathLike[str], name: str) -> Registration:
    """A registered bundle by name, or a registration file by path; unknown names list
    the closest registered ones."""
    if name.endswith(".json") and os.path.isfile(name):
        return load_registration(name)
    inventory = load_inventory(root)
    reg = inventory.registrations.get(name)
    if reg is not None:
        return reg
    path = Path(root) / EVIDENCE_DIR / name / REGISTRATION_NAME
    if path.is_file():
        return load_registration(path)
    import difflib

    close = difflib.get_close_matches(name, inventory.names, n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    raise ConfigError(
        f"no registered bundle named {name!r} under {Path(root) / EVIDENCE_DIR}{hint}"
    )


def resolve_blob(root: str | os.PathLike[str], text: str) -> tuple[str, int | None, Path | None]:
    """A blob named as ``evstore cat`` takes it: ``BUNDLE:PATH`` (an entry), a full digest, or a
    unique hex prefix of a registered digest (``blake3:`` optional, at least 6 digits).

    Returns (digest, size when known, the file in git for a ``repo`` entry)."""
    from .digest import is_digest

    if is_digest(text):
        return text, None, None
    hexpart = text.removeprefix("blake3:")
    is_hex = bool(hexpart) and all(c in "0123456789abcdef" for c in hexpart)
    after = text.partition(":")[2]
    digest_like = len(after) >= 32 and all(c in "0123456789abcdefABCDEF" for c in after)
    if ":" in text and not text.startswith("blake3:") and not digest_like:
        name, _, path = text.partition(":")
        reg = find_registration(root, name)
        entry = next((e for e in reg.manifest.entries if e.path == path), None)
        if entry is None:
            import difflib

            close = difflib.get_close_matches(path, [e.path for e in reg.manifest.entries], n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise ConfigError(f"bundle {name!r} has no entry {path!r}{hint}")
        d = entry.descriptor
        in_git = (
            Path(root) / EVIDENCE_DIR / reg.manifest.name / path
            if entry.location == "repo"
            else None
        )
        return d.digest, d.size, in_git
    if not is_hex or len(hexpart) < 6 or len(hexpart) >= 64:
        from .digest import parse_digest

        try:
            parse_digest(text)
        except InvalidDigestError as exc:
            raise InvalidDigestError(
                f"{exc}; or give BUNDLE:PATH, or a unique prefix of at least 6 hex digits"
            ) from None
    sizes = {
        e.descriptor.digest: e.descriptor.size
        for reg in load_inventory(root).registrations.values()
        for e in reg.manifest.entries
    }
    found = sorted(d for d in sizes if d[7:].startswith(hexpart))
    if not found:
        raise ConfigError(f"{text!r}: no registered entry's digest starts with {hexpart}")
    if len(found) > 1:
        raise ConfigError(
            f"{text!r}: ambiguous prefix, {len(found)} digests start with it: "
            + ", ".join(found[:5])
        )
    return found[0], sizes[found[0]], None
