"""What every ``evstore`` command group shares: exit codes, the parser setup (arguments
as data, the common ones such as ``--root`` and ``--json``, one call per subcommand),
verbosity, and the hint that names the extra to install for a missing optional
dependency."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import Repository
    from ..progress import Line

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PIPE = 141
"""128 + SIGPIPE: stdout was closed before the command's verdict was known."""


Argument = tuple[tuple[str, ...], dict[str, Any]]
"""One ``add_argument`` call as data: its flags (or name) and its options."""

Adder = Argument | Callable[[argparse.ArgumentParser], None]
"""An :data:`Argument`, or a function that adds several (an argument group)."""


def arg(*flags: str, **options: Any) -> Argument:
    """``add_argument(*flags, **options)``, as data for :meth:`Commands.add`."""
    return flags, options


ROOT = arg("--root", metavar="DIR", help="evidence repository root (default: found from here)")
NAME = arg("name", metavar="NAME")
BUNDLES = arg("bundles", nargs="*", metavar="BUNDLE", help="default: every bundle")


def switch(*flags: str, help: str) -> Argument:
    """An option that is off unless given (``store_true``)."""
    return arg(*flags, action="store_true", help=help)


def json_flag(what: str) -> Argument:
    """``--json``: print ``what`` as JSON instead of text."""
    return switch("--json", help=f"print {what} as JSON")


def repeatable(flag: str, metavar: str, help: str) -> Argument:
    """An option that may be given several times, collected in a list (empty by default)."""
    return arg(flag, action="append", default=[], metavar=metavar, help=help)


def add_arguments(p: argparse.ArgumentParser, arguments: Iterable[Adder]) -> None:
    """Add ``arguments`` to ``p``, in order (the order of its usage line)."""
    for a in arguments:
        if callable(a):
            a(p)
        else:
            flags, options = a
            p.add_argument(*flags, **options)


class Commands:
    """The subcommands of one parser, added one call each.

    At the top level (``summaries`` given by :func:`evidencestore.cli.build_parser`) a
    command's help line is its entry in the command table (``cli.COMMANDS``): a name the
    table does not give this group, or a help line of its own, is refused, and
    :attr:`added` is what the group registered, compared with the table afterwards.
    """

    def __init__(
        self,
        action: argparse._SubParsersAction[Any],
        summaries: Mapping[str, str] | None = None,
    ) -> None:
        self.action = action
        self._summaries = summaries
        self.added: list[str] = []

    def _options(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        if self._summaries is None:
            return options
        if "help" in options:
            raise TypeError(f"command {name!r}: its help line is the command table's")
        if name not in self._summaries:
            raise LookupError(f"command {name!r} is not this group's in the command table")
        self.added.append(name)
        return {**options, "help": self._summaries[name]}

    def add(
        self,
        name: str,
        func: Callable[[argparse.Namespace], int],
        arguments: Iterable[Adder] = (),
        **options: Any,
    ) -> argparse.ArgumentParser:
        """Add subcommand ``name`` (``options`` as for ``add_parser``) that runs ``func``."""
        p: argparse.ArgumentParser = self.action.add_parser(name, **self._options(name, options))
        add_arguments(p, arguments)
        p.set_defaults(func=func)
        return p

    def group(self, name: str, *, metavar: str = "SUBCOMMAND", **options: Any) -> Commands:
        """Add command ``name`` with subcommands of its own, one of them required (the one
        given is ``args.<name>_command``)."""
        p = self.action.add_parser(name, **self._options(name, options))
        action = p.add_subparsers(dest=f"{name}_command", metavar=metavar)
        action.required = True
        return Commands(action)


class _Reader:
    """Whether the reader of one command's stdout has gone (``evstore verify | head -1``)."""

    gone = False


def reader_gone() -> bool:
    """Whether this command's stdout was closed by its reader: what is still written is
    dropped, and a command whose verdict is known already may stop producing output."""
    out = sys.stdout
    return isinstance(out, GuardedStream) and out.reader.gone


class GuardedStream:
    """A stream (``sys.stdout`` or its ``buffer``, which share ``reader``) whose writes,
    once the reader has closed it, are dropped instead of raising
    :class:`BrokenPipeError`: the command runs on to its verdict and its exit code,
    whatever the reader kept."""

    def __init__(self, stream: Any, reader: _Reader | None = None, *, gone: bool = False) -> None:
        self._stream = stream
        self.reader = reader or _Reader()
        self.reader.gone = self.reader.gone or gone  # gone: no reader from the start
        self._buffer: GuardedStream | None = None

    def _guard(self, call: Callable[..., Any], *args: Any) -> None:
        if self.reader.gone:
            return
        try:
            call(*args)
        except BrokenPipeError:
            self.reader.gone = True

    def write(self, data: Any) -> int:
        self._guard(self._stream.write, data)
        return len(data)

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    @property
    def buffer(self) -> GuardedStream:
        if self._buffer is None:
            self._buffer = GuardedStream(self._stream.buffer, self.reader)
        return self._buffer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def add_root(p: argparse.ArgumentParser) -> None:
    """Add ``--root DIR`` to a subcommand."""
    add_arguments(p, [ROOT])


def repo_root(args: argparse.Namespace) -> Repository:
    """Return the evidence repository, resolved once for the whole command: ``--root``
    (checked, taken as the root as given) or the one found from the current directory;
    outside one, refuse (``not an evidence repository``) rather than take the current
    directory, so nothing lands in a plain git repository by mistake."""
    from ..config import Repository, require_root

    if getattr(args, "root", None):
        root = Path(args.root)
        if not root.is_dir():
            raise ConfigError(f"--root {args.root}: not a directory")
        return Repository(root)  # named explicitly: taken as the repository root
    return Repository(require_root())


def found_repository(args: argparse.Namespace) -> Repository:
    """``--root`` (checked, taken as given) or the repository at or above the current
    directory, the directory itself outside one: for commands that also work on plain
    files (``media``, ``lpips``)."""
    from ..config import Repository, as_repository

    if getattr(args, "root", None):
        root = Path(args.root)
        if not root.is_dir():
            raise ConfigError(f"--root {args.root}: not a directory")
        return Repository(root)
    return as_repository()


# A library parameter whose flag is not ``--`` + its name with dashes.
_FLAGS = {
    "base_rev": "--base",
    "command": "--launch",
    "configs": "--config",
    "pilots": "--pilot",
    "revs": "--rev",
    "server_logs": "--server-log",
    "signing_key": "--sign",
}


def flag_of(parameter: str) -> str:
    """The command-line flag for a library parameter an error names (``condition`` ->
    ``--condition``, ``configs`` -> ``--config``): the CLI's words for the library's."""
    return _FLAGS.get(parameter, "--" + parameter.replace("_", "-"))


def verbosity(args: argparse.Namespace) -> int:
    """The global ``-q`` (-1) / ``-v`` (+1) level; 0 by default."""
    return int(getattr(args, "verbosity", 0) or 0)


def progress_line(args: argparse.Namespace) -> Line:
    """The progress line of a long command: drawn on standard error when it is a terminal
    and ``-q`` was not given, silent otherwise (``evidencestore/progress.py``). Use it as
    a context manager, so the line is cleared before the command's own output."""
    from ..progress import Line

    return Line(None if verbosity(args) < 0 else sys.stderr)


def missing_extra_hint(exc: BaseException) -> str | None:
    """``pip install 'evidencestore[s3]'`` when ``exc`` (or what it was raised from) is
    a missing optional dependency, whatever way its package words it."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ImportError):
            names = [(cur.name or "").split(".")[0], *str(cur).replace("'", " ").split()]
            for name in names:
                extra = _EXTRAS.get(name)
                if extra:
                    return f"pip install 'evidencestore[{extra}]'"
        cur = cur.__cause__ or cur.__context__
    return None


# Optional dependencies and the extra that installs each.
_EXTRAS = {
    "av": "media",
    "numpy": "media",
    "torch": "lpips",
    "torchvision": "lpips",
    "lpips": "lpips",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "adlfs": "azure",
    "aiohttp": "http",
    "requests": "http",
    "yaml": "run",
    "jinja2": "report",
    "matplotlib": "report",
    "cryptography": "attest",
    "securesystemslib": "attest",
    "scipy": "campaign",
}
