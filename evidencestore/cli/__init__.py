"""The ``evstore`` command line: a thin layer over the library.

Exit codes: 0 verified / success, 1 verification failed, 2 usage or environment
error (``evstore media`` adds 3 INCONCLUSIVE and 4 UNAVAILABLE).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import EvidenceStoreError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_USAGE,
    Commands,
    GuardedStream,
    add_root,
    flag_of,
    missing_extra_hint,
    repo_root,
    verbosity,
)

__all__ = [
    "COMMANDS",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "CommandInfo",
    "add_root",
    "build_parser",
    "console",
    "lean_msgspec",
    "main",
    "missing_extra_hint",
    "repo_root",
    "verbosity",
]


def _columns() -> int:
    """The terminal width as ``shutil.get_terminal_size`` gives it (``COLUMNS``, the
    terminal, else 80), without importing shutil on every command's start-up."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, sized by :func:`_columns` (argparse builds one for
    every argument it adds, and its own sizing imports shutil)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog, indent_increment, max_help_position, _columns() - 2 if width is None else width
        )


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise _UsageError(f"{self.prog}: error: {message}")


class _UsageError(Exception):
    pass


class CommandInfo(NamedTuple):
    """One ``evstore`` command: the group module under ``evidencestore.cli`` that
    registers it (imported only when the command runs, or for ``--help``) and its help
    line."""

    module: str
    summary: str


# The one command table (pip's ``commands_dict``): a command line imports only the group
# module of the command it names, and every help line comes from here. A group's
# ``register`` adding a command this table does not give it, or lacking one it does, is
# an error on any command line that imports the group (``Commands``, ``_register``).
COMMANDS: dict[str, CommandInfo] = {
    "init": CommandInfo("core", "make this directory an evidence repository"),
    "hash": CommandInfo("core", "print blake3 digests and sizes of files, or check a digest list"),
    "bundle": CommandInfo("core", "create and list bundles"),
    "verify": CommandInfo("core", "verify every bundle (exit 0 verified, 1 failed, 2 usage error)"),
    "prove": CommandInfo("core", "print an inclusion proof of one entry as JSON"),
    "check-proof": CommandInfo("core", "check an inclusion proof without the other entries"),
    "schema": CommandInfo("core", "list, print or write the JSON Schemas"),
    "show": CommandInfo("inspection", "a bundle's digest, metadata and entries"),
    "status": CommandInfo(
        "inspection", "per bundle: store entries missing locally (or on a remote)"
    ),
    "diff": CommandInfo(
        "inspection", "entries added, removed and changed between two bundles (exit 1 if any)"
    ),
    "checkout": CommandInfo("inspection", "write a bundle's files, verified, into a directory"),
    "remote": CommandInfo("remote", "add, remove and list remotes"),
    "push": CommandInfo("remote", "upload store entries a remote lacks or holds damaged"),
    "pull": CommandInfo("remote", "fetch every store entry of bundles into the local store"),
    "fetch": CommandInfo("remote", "get blobs by digest, verified, into the local store"),
    "cat": CommandInfo("remote", "write one entry or blob, verified, to stdout"),
    "gc": CommandInfo("remote", "remove unreferenced blobs (dry run unless --yes)"),
    "media": CommandInfo("media", "probe, check and compare media by path or digest"),
    "lpips": CommandInfo("lpips", "authenticated LPIPS scorer weights"),
    "run": CommandInfo(
        "run", "run a workload against a server and register the run; show, diff, determinism"
    ),
    "campaign": CommandInfo(
        "campaign", "campaign protocols, verification, speedup claims and status"
    ),
    "report": CommandInfo(
        "report", "write a self-contained HTML report of a comparison, run or campaign"
    ),
    "attest": CommandInfo(
        "report", "sign an in-toto statement about a bundle or record, or verify one"
    ),
    "import": CommandInfo("imports", "import a benchmark harness's results as a registered run"),
}


def _groups() -> tuple[str, ...]:
    """The group modules, in the order ``evstore --help`` lists their commands."""
    return tuple(dict.fromkeys(info.module for info in COMMANDS.values()))


def _register(sub: argparse._SubParsersAction[Any], group: str) -> None:
    """Import group module ``group`` and register its commands, which must be exactly
    the ones the command table gives it."""
    import importlib

    summaries = {name: info.summary for name, info in COMMANDS.items() if info.module == group}
    commands = Commands(sub, summaries)
    importlib.import_module(f".{group}", __package__).register(commands)
    if missing := sorted(set(summaries) - set(commands.added)):
        raise LookupError(
            f"the command table gives {', '.join(missing)} to cli/{group}.py, "
            "which does not register them"
        )


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named by ``argv`` (of the global options only ``--root`` takes a
    value), or None."""
    args = iter(argv)
    for arg in args:
        if arg == "--":
            return None
        if arg == "--root":
            next(args, None)
            continue
        if not arg.startswith("-"):
            return arg
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered.

    Given the command line ``argv``, only the group module of the command it names is
    imported and registered (start-up cost); ``evstore --help`` still lists every command.
    """
    from .._version import __version__

    parser = _Parser(prog="evstore", description="A content-addressed evidence store.")
    parser.add_argument("--version", action="version", version=f"evstore {__version__}")
    parser.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=-1,
        default=0,
        help="print only errors and the final line",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=1,
        help="print more detail (every finding, every blob)",
    )
    # Before the command, as after it (where the subcommand's own --root wins when both
    # are given and differ: see main). A dest of its own, since a subcommand's default
    # would overwrite it.
    parser.add_argument(
        "--root",
        dest="global_root",
        metavar="DIR",
        default=None,
        help="evidence repository root, for any command (default: found from here)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    command = _command_of(argv) if argv is not None else None
    info = COMMANDS.get(command or "")
    for group in (info.module,) if info is not None else _groups():
        _register(sub, group)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evstore`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    given = getattr(args, "global_root", None)
    if given is not None:
        if getattr(args, "root", None) not in (None, given):
            print(
                f"evstore: error: --root given twice with different directories: {given!r} "
                f"before the command, {args.root!r} after it",
                file=sys.stderr,
            )
            return EXIT_USAGE
        args.root = given
    try:
        code: int = _run(args)
    except EvidenceStoreError as exc:
        hint = missing_extra_hint(exc)
        print(
            f"evstore: error: {exc.diagnostics(flag_of)}"
            + (f" (install it: {hint})" if hint else ""),
            file=sys.stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("evstore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # written past the guard: the verdict is not known
        return EXIT_PIPE
    except ImportError as exc:
        what = repr(exc.name) if exc.name else f"an optional dependency ({exc})"
        print(
            f"evstore: error: this command needs {what}, which is not installed: "
            f"{missing_extra_hint(exc) or 'install it'}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except Exception as exc:  # a bug: report it plainly, never as a verification verdict
        if os.environ.get("EVSTORE_DEBUG"):
            raise
        print(
            f"evstore: internal error: {type(exc).__name__}: {exc} "
            "(set EVSTORE_DEBUG=1 for a traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return code


def _run(args: argparse.Namespace) -> int:
    """Run the command with stdout guarded: a reader that goes away (``| head -1``)
    drops the rest of the output, never the command's exit code."""
    saved = sys.stdout
    with contextlib.ExitStack() as stack:
        if saved is None:  # started with stdout closed (`>&-`): every write is dropped
            guarded = GuardedStream(stack.enter_context(open(os.devnull, "w")), gone=True)
        else:
            guarded = GuardedStream(saved)
        sys.stdout = guarded
        try:
            code: int = args.func(args)
            guarded.flush()
        finally:
            sys.stdout = saved
            _LAST.gone = guarded.reader.gone and saved is not None
    return code


class _Last:
    """Whether the last command's reader went away (for :func:`console`'s exit)."""

    gone = False


_LAST = _Last()


class _HidingLoader:
    """msgspec's own loader, run with typing_extensions hidden (see :func:`lean_msgspec`)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        if "typing_extensions" in sys.modules:
            self._loader.exec_module(module)
            return
        sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # import fails
        try:
            self._loader.exec_module(module)
        finally:
            if sys.modules.get("typing_extensions", 0) is None:
                del sys.modules["typing_extensions"]  # later imports find the real one

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _LeanMsgspecFinder:
    """A meta path finder that, the first time msgspec is imported, asks the finders
    after it for msgspec and wraps the loader they give in :class:`_HidingLoader`; then
    it finds nothing. It stays in ``sys.meta_path`` (removing itself while the import
    system walks that list would make it skip the next finder)."""

    used = False

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "msgspec" or cls.used:
            return None
        cls.used = True
        after = sys.meta_path[sys.meta_path.index(cls) + 1 :] if cls in sys.meta_path else []
        for finder in after:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HidingLoader(spec.loader)
                return spec
        return None


def lean_msgspec() -> None:
    """Have msgspec, when this process first imports it, skip typing_extensions (and the
    inspect, ast and dis that it imports) unless typing_extensions is already imported:
    about 10 ms of each command that uses msgspec, and nothing for one that does not
    (``evstore hash``).

    msgspec takes ``get_type_hints`` and ``Required`` from typing_extensions when it can
    and from ``typing`` otherwise, and on Python 3.11 ``typing`` has both. Only for a
    process of its own (:func:`console`): an embedding program may use
    typing_extensions' own ``TypedDict`` with msgspec, and another thread importing
    typing_extensions while msgspec's module runs would find it hidden (evstore's
    commands import msgspec, with their models, before they start threads).
    """
    if "msgspec" not in sys.modules and _LeanMsgspecFinder not in sys.meta_path:
        _LeanMsgspecFinder.used = False
        sys.meta_path.insert(0, _LeanMsgspecFinder)


def console() -> int:
    """The ``evstore`` program (and ``python -m evidencestore``): :func:`main` in a
    process of its own."""
    lean_msgspec()
    code = main()
    if _LAST.gone:  # what could not be written would fail again at exit's flush
        import contextlib

        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code
