"""The ``evstore`` command line: a thin layer over the library.

Exit codes: 0 verified / success, 1 verification failed, 2 usage or environment
error (``evstore media`` adds 3 INCONCLUSIVE and 4 UNAVAILABLE).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigError, EvidenceStoreError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_root(p: argparse.ArgumentParser) -> None:
    """Add ``--root DIR`` to a subcommand."""
    p.add_argument(
        "--root", metavar="DIR", help="evidence repository root (default: found from here)"
    )


def repo_root(args: argparse.Namespace) -> Path:
    """Return ``--root`` (checked) or the repository found from the current directory."""
    from .config import find_root

    if getattr(args, "root", None):
        root = Path(args.root)
        if not root.is_dir():
            raise ConfigError(f"--root {args.root}: not a directory")
        return root.absolute()
    return find_root()


# Optional dependencies and the extra that installs each.
_EXTRAS = {
    "av": "media",
    "numpy": "media",
    "torch": "lpips",
    "torchvision": "lpips",
    "lpips": "lpips",
    "s3fs": "s3",
    "aiohttp": "http",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise _UsageError(f"{self.prog}: error: {message}")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered."""
    from . import (
        __version__,
        _cli_campaign,
        _cli_core,
        _cli_inspect,
        _cli_lpips,
        _cli_media,
        _cli_remote,
        _cli_report,
        _cli_run,
    )

    parser = _Parser(prog="evstore", description="A content-addressed evidence store.")
    parser.add_argument("--version", action="version", version=f"evstore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in (
        _cli_core,
        _cli_inspect,
        _cli_remote,
        _cli_media,
        _cli_lpips,
        _cli_run,
        _cli_campaign,
        _cli_report,
    ):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evstore`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    try:
        code: int = args.func(args)
    except EvidenceStoreError as exc:
        print(f"evstore: error: {exc.diagnostics()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("evstore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        hint = f"pip install 'evidencestore[{extra}]'" if extra else "install it"
        print(
            f"evstore: error: this command needs {exc.name!r}, which is not installed: {hint}",
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
