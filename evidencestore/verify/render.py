"""Rendering a :class:`~evidencestore.models.VerifyReport` for people and for CI.

One :class:`View` decides, once, what each finding says and where it points; the
human text, GitHub workflow annotations and the ``$GITHUB_STEP_SUMMARY`` table are
three renderings of it, so they can never disagree about which bundle failed.

- Unavailable store entries (absent from the local store, not required) collapse into
  one notice with a count unless ``each`` is asked for: a fresh CI checkout has no
  local store, and hundreds of warnings would bury the real errors.
- Annotation paths are relative to the git work tree (``--root ml`` gives ``ml/...``).
  A finding about a ``repo`` entry points at its file; one about a ``store`` entry
  points at the registration, on the line of that entry.
- A bundle is FAILED when any error is about it, repository-wide ones included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

import msgspec

from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME
from ..models import BundleReport, Finding, Registration, VerifyReport
from ..paths import shown as shown_name

__all__ = [
    "RegisteredEntries",
    "UnavailableMode",
    "View",
    "append_step_summary",
    "describe",
    "plural",
    "worktree_prefix",
]

UnavailableMode = Literal["summary", "each", "error"]


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 bundle``, ``2 bundles``; ``many`` for irregular plurals (``entries``)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def describe(f: Finding) -> str:
    """``code: message``, with the path only when the message does not already name it."""
    if f.path and f.path not in f.message:
        return f"{f.code}: {f.path}: {f.message}"
    return f"{f.code}: {f.message}"


def worktree_prefix(root: Path) -> str:
    """The path of ``root`` inside its git work tree (``ml/``), or relative to the
    current directory when it is not in one; ``""`` for the top."""
    from ..errors import GitError
    from ..gitrefs import try_git

    try:
        prefix = try_git(root, "rev-parse", "--show-prefix")
    except GitError:  # git is not installed
        prefix = None
    if prefix is not None:
        return prefix.decode("utf-8", "surrogateescape").strip()
    try:
        rel = root.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel + "/"


class Item(NamedTuple):  # not a dataclass: dataclasses costs verify 15 ms to import
    """A finding as shown: its text and where an annotation points."""

    finding: Finding
    file: str | None
    line: int | None


def _entry_lines(registration_file: Path) -> dict[str, int]:
    """Entry path -> line of its ``"path"`` key in a pretty-printed registration."""
    try:
        text = registration_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    import json  # only for --github annotations: off the start-up path

    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.strip().partition(": ")
        if sep and key == '"path"':
            try:
                path = json.loads(value.rstrip(","))
            except ValueError:
                continue
            if isinstance(path, str):
                out.setdefault(path, number)
    return out


class View:
    """What a report shows: per-bundle status and findings with their locations.

    Where it tells the reader what to pass to ``verify_repository`` it names the
    parameter as ``name`` words it: the parameter itself by default, the flag for the
    CLI (``flag_of``)."""

    def __init__(
        self,
        report: VerifyReport,
        root: Path,
        registrations: Mapping[str, Registration] | RegisteredEntries,
        *,
        unavailable: UnavailableMode = "summary",
        prefix: str = "",
        name: Callable[[str], str] | None = None,
    ) -> None:
        self.report = report
        self.name = name or (lambda parameter: parameter)
        self.root = root
        self.prefix = prefix
        self.mode = unavailable
        self._entries = (
            registrations
            if isinstance(registrations, RegisteredEntries)
            else RegisteredEntries.of(registrations)
        )
        self._lines: dict[str, dict[str, int]] = {}
        self.hidden: list[Finding] = []  # unavailable warnings collapsed into the notice
        self.per_bundle: dict[str, list[Item]] = {}
        for b in report.bundles:
            items = []
            for f in b.findings:
                if self._collapsed(f):
                    self.hidden.append(f)
                else:
                    items.append(self._item(f))
            self.per_bundle[b.name] = items
        self.general: list[Item] = []
        for f in report.findings:
            item = self._item(f)
            if f.bundle in self.per_bundle:
                self.per_bundle[f.bundle].append(item)
            else:
                self.general.append(item)

    def _collapsed(self, f: Finding) -> bool:
        return self.mode == "summary" and f.code == "unavailable" and f.severity != "error"

    def failed(self, b: BundleReport) -> bool:
        """Whether any error is about bundle ``b``."""
        return any(i.finding.severity == "error" for i in self.per_bundle[b.name])

    def _item(self, f: Finding) -> Item:
        base = f"{self.prefix}{EVIDENCE_DIR}"
        if f.path and (f.path == EVIDENCE_DIR or f.path.startswith(EVIDENCE_DIR + "/")):
            return Item(f, f"{self.prefix}{f.path}", None)  # already repository-relative
        if not f.bundle:
            return Item(f, base if f.path is None else f"{base}/{f.path}", None)
        bdir = f"{base}/{f.bundle}"
        entries = self._entries.get(f.bundle)
        if not f.path or f.path == REGISTRATION_NAME or entries is None:
            return Item(f, f"{bdir}/{REGISTRATION_NAME}" if entries is not None else bdir, None)
        entry = entries.get(f.path)
        if entry is not None and entry[0] == "repo":
            return Item(f, f"{bdir}/{f.path}", None)
        if entry is None and f.code == "unregistered-file":
            return Item(f, f"{bdir}/{f.path}", None)
        lines = self._lines.get(f.bundle)
        if lines is None:
            lines = _entry_lines(self.root / EVIDENCE_DIR / f.bundle / REGISTRATION_NAME)
            self._lines[f.bundle] = lines
        return Item(f, f"{bdir}/{REGISTRATION_NAME}", lines.get(f.path))

    def unavailable_notice(self) -> str | None:
        """The one line that stands for every collapsed unavailable entry."""
        if not self.hidden:
            return None
        size = sum(self._entries.size_of(f) for f in self.hidden)
        bundles = len({f.bundle for f in self.hidden})
        return (
            f"{plural(len(self.hidden), 'store entry', 'store entries')} of "
            f"{plural(bundles, 'bundle')} ({size} bytes) are not in the local store and "
            f"were not checked: run `evstore pull` first, or verify with {self.name('remote')} "
            f"NAME or {self.name('require_available')}"
        )

    def totals_line(self) -> str:
        """``2 bundles, 5 entries, 4 hashes checked, ...``."""
        t = self.report.totals
        shown = sum(
            f.code == "unavailable" and f.severity == "warning"
            for b in self.report.bundles
            for f in b.findings
        ) - len(self.hidden)
        how = (
            " (not checked: 1 notice)"
            if self.hidden and not shown
            else " (not checked: a warning each)"
            if shown
            else ""
        )
        other = "other " if shown else ""
        return (
            f"{plural(t.bundles, 'bundle')}, {plural(t.entries, 'entry', 'entries')}, "
            f"{plural(t.checked, 'hash', 'hashes')} checked, {t.unavailable} unavailable{how}, "
            f"{plural(t.errors, 'error')}, {plural(t.warnings, other + 'warning')}"
        )

    # -- renderings -----------------------------------------------------------------
    def human(self, out: IO[str], *, verbosity: int = 0, extra: Sequence[str] = ()) -> None:
        """The text report; ``verbosity`` < 0 shows errors only, > 0 adds info."""

        def shown(f: Finding) -> bool:
            if verbosity < 0:
                return f.severity == "error"
            return f.severity != "info" or verbosity > 0 or not self.report.bundles

        if verbosity >= 0:
            out.write(f"evstore verify {self.report.root}\n")
        for b in self.report.bundles:
            failed = self.failed(b)
            if verbosity >= 0 or failed:
                out.write(
                    f"  {b.name}: {plural(b.entries, 'entry', 'entries')}, {b.checked} hashed, "
                    f"{b.unavailable} unavailable: {'FAILED' if failed else 'ok'}\n"
                )
            for item in self.per_bundle[b.name]:
                if shown(item.finding):
                    out.write(f"    {item.finding.severity}: {describe(item.finding)}\n")
        for item in self.general:
            if shown(item.finding):
                where = f" [{item.finding.bundle}]" if item.finding.bundle else ""
                out.write(f"  {item.finding.severity}:{where} {describe(item.finding)}\n")
        notice = self.unavailable_notice()
        if notice and verbosity >= 0:
            out.write(f"  notice: {notice}\n")
        for line in extra:
            if verbosity >= 0:
                out.write(f"  notice: {line}\n")
        out.write(self.totals_line() + "\n")
        out.write("verified\n" if self.report.ok else "verification FAILED\n")

    def github(self, out: IO[str], *, extra: Sequence[str] = ()) -> None:
        """GitHub workflow commands: one annotation per finding, one notice for the rest."""
        items = [i for b in self.report.bundles for i in self.per_bundle[b.name]]
        for item in [*items, *self.general]:
            f = item.finding
            level = "notice" if f.severity == "info" else f.severity
            props = [] if item.file is None else [f"file={_gh_property(item.file)}"]
            if item.line is not None:
                props.append(f"line={item.line}")
            props.append(f"title={_gh_property('evstore ' + f.code)}")
            out.write(f"::{level} {','.join(props)}::{_gh_data(describe(f))}\n")
        notice = self.unavailable_notice()
        for line in ([notice] if notice else []) + list(extra):
            out.write(f"::notice title=evstore::{_gh_data(line)}\n")
        out.write(f"evstore: {self.totals_line()}: {'verified' if self.report.ok else 'FAILED'}\n")

    def step_summary(self, extra: Sequence[str] = ()) -> str:
        """A Markdown section for ``$GITHUB_STEP_SUMMARY``."""
        ok = self.report.ok
        lines = [
            f"### evstore verify: {'verified' if ok else 'FAILED'}",
            "",
            self.totals_line(),
            "",
            "| bundle | entries | hashed | unavailable | status |",
            "|---|---:|---:|---:|---|",
        ]
        for b in self.report.bundles:
            status = "FAILED" if self.failed(b) else "ok"
            lines.append(
                f"| {_md(b.name)} | {b.entries} | {b.checked} | {b.unavailable} | {status} |"
            )
        problems = [
            i
            for i in (
                *(i for b in self.report.bundles for i in self.per_bundle[b.name]),
                *self.general,
            )
            if i.finding.severity != "info"
        ]
        if problems:
            lines += ["", "| severity | code | where | message |", "|---|---|---|---|"]
            for i in problems[:100]:
                where = i.file + (f":{i.line}" if i.line else "") if i.file else "-"
                lines.append(
                    f"| {i.finding.severity} | {i.finding.code} | `{_md(where)}` | "
                    f"{_md(i.finding.message)} |"
                )
            if len(problems) > 100:
                lines.append(f"\n... and {len(problems) - 100} more")
        notice = self.unavailable_notice()
        lines += [f"\n{_md(x)}" for x in ([notice] if notice else []) + list(extra)]
        return "\n".join(lines) + "\n\n"


class RegisteredEntries:
    """What a :class:`View` needs of each registered bundle: its entries' locations and
    sizes, by path (the first entry of a path), read when first asked for."""

    def __init__(self, read: Callable[[str], Registration | dict[str, Any] | None]) -> None:
        self._read = read
        self._cache: dict[str, dict[str, tuple[str, int]] | None] = {}

    @classmethod
    def of(cls, registrations: Mapping[str, Registration]) -> RegisteredEntries:
        """From registrations already loaded (an inventory's), found by directory name
        or by the name a finding shows for it."""
        by_name = {shown_name(name): reg for name, reg in registrations.items()}
        by_name.update(registrations)
        return cls(by_name.get)

    @classmethod
    def on_disk(cls, report: VerifyReport, root: str | os.PathLike[str]) -> RegisteredEntries:
        """Read from the registrations of the bundles ``report`` verified, for a report
        made without an inventory at hand: only a bundle that is looked up is read, as
        plain JSON (verification has already decoded and checked it strictly)."""
        registered = {b.name for b in report.bundles}
        evidence = Path(root) / EVIDENCE_DIR
        on_disk: dict[str, str] = {}  # the name a finding shows -> the directory's name

        def read(name: str) -> dict[str, Any] | None:
            if not on_disk:
                with contextlib.suppress(OSError):
                    on_disk.update((shown_name(d), d) for d in os.listdir(evidence))
            directory = on_disk.get(name)
            if directory is None or name not in registered:
                return None
            try:
                data = (evidence / directory / REGISTRATION_NAME).read_bytes()
                value = msgspec.json.decode(data)
            except (OSError, msgspec.DecodeError):
                return None
            return value if isinstance(value, dict) else None

        return cls(read)

    def get(self, bundle: str | None) -> dict[str, tuple[str, int]] | None:
        """Entry path -> (location, size) for ``bundle``; None when it is not registered."""
        if bundle is None:
            return None
        if bundle not in self._cache:
            self._cache[bundle] = _entries_of(self._read(bundle))
        return self._cache[bundle]

    def size_of(self, f: Finding) -> int:
        """The size of the entry a finding is about (0 when unknown)."""
        entries = self.get(f.bundle or "")
        entry = entries.get(f.path or "") if entries is not None else None
        return entry[1] if entry is not None else 0


def _entries_of(reg: Registration | dict[str, Any] | None) -> dict[str, tuple[str, int]] | None:
    if reg is None:
        return None
    out: dict[str, tuple[str, int]] = {}
    if isinstance(reg, Registration):
        for e in reg.manifest.entries:
            out.setdefault(e.path, (e.location, e.descriptor.size))
        return out
    try:
        for e in reg["manifest"]["entries"]:
            out.setdefault(e["path"], (e["location"], e["descriptor"]["size"]))
    except (KeyError, TypeError):
        return None
    return out


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def append_step_summary(text: str) -> None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when it is set (silently skipped otherwise)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass  # a summary is a courtesy; the verdict is the exit code
