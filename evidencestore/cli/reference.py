"""The CLI reference, docs/cli.md, generated from the argparse definitions.

``python -m evidencestore.cli.reference [PATH]`` writes it (default ``docs/cli.md``);
``--check`` exits 1 when PATH differs from what the parser gives now. Every command's
``--help`` is taken as ``evstore ... --help`` prints it, at a fixed width of 100 columns,
so the page is the same on every machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

WIDTH = "100"

_HEADER = """\
# CLI reference

Generated from the argparse definitions by `python -m evidencestore.cli.reference`; do not
edit by hand (`tests/cli/test_reference.py` fails when this page and the parser differ).
Exit codes everywhere: 0 success, 1 a check or verdict failed, 2 usage or environment
error (each command's description says more). Global options go before the command:
`evstore -q verify`, `evstore --root DIR status`.
"""


def _help(path: Sequence[str]) -> str:
    from . import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([*path, "--help"])
    if code != 0:
        raise RuntimeError(f"`evstore {' '.join(path)} --help` exits {code}")
    return out.getvalue().rstrip() + "\n"


def _paths() -> Iterator[list[str]]:
    """Every command path, depth first, in the order ``evstore --help`` lists them."""
    from . import build_parser

    def groups(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen: set[int] = set()
                for name, sub in action.choices.items():
                    if id(sub) not in seen:  # aliases once
                        seen.add(id(sub))
                        yield name, sub

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[list[str]]:
        for name, sub in groups(parser):
            yield [*path, name]
            yield from walk(sub, [*path, name])
            # a command that parses its own subcommands (``run show`` ...) lists them
            # on its parser, not as argparse groups
            yield from ([*path, name, c] for c in sub.get_default("subcommands") or ())

    yield from walk(build_parser(), [])


def render() -> str:
    """The text of docs/cli.md."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = [_HEADER, "## evstore\n", "```text\n" + _help([]) + "```\n"]
        for path in _paths():
            title = " ".join(["evstore", *path])
            parts += [f"## {title}\n", "```text\n" + _help(path) + "```\n"]
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the reference; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m evidencestore.cli.reference")
    parser.add_argument("path", nargs="?", default="docs/cli.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when PATH is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        try:
            current = Path(args.path).read_text(encoding="utf-8")
        except OSError:
            current = ""
        if current != text:
            print(f"{args.path} is out of date: run python -m evidencestore.cli.reference")
            return 1
        return 0
    Path(args.path).write_text(text, encoding="utf-8")
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
