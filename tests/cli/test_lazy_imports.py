"""The CLI imports only the group module of the command it runs (issue 14)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from evidencestore import cli as _cli


def _commands(parser: argparse.ArgumentParser) -> dict[str, str]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: p.prog for name, p in sub.choices.items()}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {action.dest: action.help for action in sub._choices_actions}


def test_the_command_table_is_what_each_group_registers_with_its_help() -> None:
    for group in _cli._groups():
        own = {name for name, info in _cli.COMMANDS.items() if info.module == group}
        [name, *_] = sorted(own)
        parser = _cli.build_parser([name])  # imports and registers this group alone
        assert set(_commands(parser)) == own, group
        assert _helps(parser) == {n: _cli.COMMANDS[n].summary for n in own}
    assert set(_commands(_cli.build_parser())) == set(_cli.COMMANDS)


def test_a_table_that_disagrees_with_a_group_fails_on_every_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = dict(_cli.COMMANDS)
    # A command the table gives the core group, which does not register it.
    monkeypatch.setattr(_cli, "COMMANDS", {**table, "ghost": _cli.CommandInfo("core", "boo")})
    with pytest.raises(LookupError, match=r"gives ghost to cli/core\.py"):
        _cli.build_parser(["verify"])
    with pytest.raises(LookupError, match="ghost"):
        _cli.build_parser(["--help"])
    # A command the group registers that the table lacks (or gives another group).
    del table["prove"]
    monkeypatch.setattr(_cli, "COMMANDS", table)
    with pytest.raises(LookupError, match="'prove' is not this group's"):
        _cli.build_parser(["verify"])
    monkeypatch.setattr(_cli, "COMMANDS", {**table, "prove": _cli.CommandInfo("remote", "x")})
    with pytest.raises(LookupError, match="'prove' is not this group's"):
        _cli.build_parser(["verify"])


def test_a_group_cannot_give_a_command_a_help_line_of_its_own() -> None:
    from evidencestore.cli._common import Commands

    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(TypeError, match="help line is the command table's"):
        Commands(sub, {"x": "from the table"}).add("x", lambda a: 0, help="its own")
    commands = Commands(sub, {"x": "from the table"})
    commands.add("x", lambda a: 0)
    assert commands.added == ["x"] and sub.choices["x"] is not None
    assert [a.help for a in sub._choices_actions] == ["from the table"]


def test_a_command_line_registers_only_its_group_and_help_lists_all() -> None:
    everything = _commands(_cli.build_parser())
    assert {"verify", "push", "media", "run", "report"} <= set(everything)
    assert set(_commands(_cli.build_parser(["-q", "verify", "--json"]))) == {
        "init",
        "hash",
        "bundle",
        "verify",
        "prove",
        "check-proof",
        "schema",
    }
    assert set(_commands(_cli.build_parser(["--help"]))) == set(everything)
    assert set(_commands(_cli.build_parser(["no-such-command"]))) == set(everything)


def test_unknown_command_still_lists_every_choice(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'no-such-command'" in err
    assert "'verify'" in err and "'attest'" in err


def test_verify_does_not_import_other_groups() -> None:
    code = (
        "import sys; from evidencestore.cli import main\n"
        "try:\n    main(['verify', '--root', '/nonexistent-evstore-root'])\n"
        "finally:\n    print(sorted(m for m in sys.modules if m.startswith('evidencestore.cli')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "['evidencestore.cli', 'evidencestore.cli._common', 'evidencestore.cli.core']"
    )


def test_verify_of_an_empty_repository_imports_no_shutil_json_or_logging(tmp_path: Path) -> None:
    assert _cli.main(["init", "--root", str(tmp_path)]) == 0
    code = (
        "import sys; from evidencestore.cli import main\n"
        f"code = main(['verify', '--root', {str(tmp_path)!r}])\n"
        "print(code, sorted({'shutil', 'json', 'logging'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "0 []"


@pytest.mark.parametrize("columns", [None, "57", "0", "junk"])
def test_help_is_as_wide_as_argparse_would_make_it(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _cli._columns() == shutil.get_terminal_size().columns
    parser = _cli.build_parser(["verify"])
    plain = argparse.ArgumentParser(prog="evstore", description=parser.description)
    assert parser._get_formatter()._width == plain._get_formatter()._width  # type: ignore[attr-defined]


def _python(code: str) -> list[str]:
    """The lines ``code`` prints, run in a fresh interpreter (a process of its own)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_the_evstore_program_starts_without_typing_extensions(tmp_path: Path) -> None:
    assert _cli.main(["init", "--root", str(tmp_path)]) == 0
    code = (
        "import sys; from evidencestore.cli import console\n"
        f"sys.argv = ['evstore', 'verify', '--root', {str(tmp_path)!r}]\n"
        "code = console()\n"
        "print(code, sorted({'typing_extensions', 'inspect'} & set(sys.modules)))\n"
        "import typing_extensions  # still importable afterwards\n"
        "print(typing_extensions.__name__)"
    )
    assert _python(code)[-2:] == ["0 []", "typing_extensions"]


def test_the_evstore_program_imports_msgspec_only_for_a_command_that_uses_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "f").write_bytes(b"x")
    code = (
        "import sys; from evidencestore.cli import console\n"
        f"sys.argv = ['evstore', 'hash', {str(tmp_path / 'f')!r}]\n"
        "code = console()\n"
        "print(code, 'msgspec' in sys.modules)\n"
        "import msgspec, msgspec._utils  # a later import is the lean one\n"
        "print(msgspec._utils._get_type_hints.__module__, 'typing_extensions' in sys.modules)"
    )
    assert _python(code)[-2:] == ["0 False", "typing False"]


def test_the_lean_msgspec_writes_the_same_schemas_and_errors(tmp_path: Path) -> None:
    # msgspec falls back to typing.get_type_hints: the schemas and the validation
    # messages that come out of the program must be the ones the library gives.
    bad = tmp_path / "bundle.json"
    bad.write_text('{"digest": "blake3:00", "root": 1, "manifest": {}}')
    probe = (
        "from evidencestore import _schemas\n"
        "from evidencestore.inventory import decode_registration\n"
        "print(_schemas.stale())\n"
        "print(sorted(_schemas.generate().items()))\n"
        "try:\n"
        f"    decode_registration(open({str(bad)!r}, 'rb').read(), 'x')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    lean = "import sys; from evidencestore.cli import lean_msgspec; lean_msgspec()\n"
    runs = [
        subprocess.run([sys.executable, "-c", prefix + probe], capture_output=True, text=True)
        for prefix in ("", lean)
    ]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[1].stdout == runs[0].stdout
    assert runs[0].stdout.startswith("[]\n")  # the committed schemas are current
    assert "ManifestError" in runs[0].stdout and "blake3:" in runs[0].stdout


def test_the_lean_import_asks_the_finders_after_it_in_order(tmp_path: Path) -> None:
    # A finder ahead of the path finder serves its own msgspec: the lean import must
    # still get that one (with typing_extensions hidden while it runs), not skip it.
    alt = tmp_path / "alt" / "msgspec"
    alt.mkdir(parents=True)
    (alt / "__init__.py").write_text(
        "try:\n    import typing_extensions\n    HIDDEN = False\n"
        "except ImportError:\n    HIDDEN = True\n"
    )
    code = (
        "import sys\n"
        "from importlib.machinery import PathFinder\n"
        "class Alt:\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        f"        return PathFinder.find_spec(name, [{str(alt.parent)!r}]) if name == 'msgspec' else None\n"
        "class Nothing:\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        "        return None\n"
        "sys.meta_path[:0] = [Nothing, Alt]\n"
        "from evidencestore.cli import lean_msgspec\n"
        "lean_msgspec()\n"
        "import msgspec\n"
        "print(msgspec.__file__.startswith(" + repr(str(alt)) + "), msgspec.HIDDEN)\n"
        "import typing_extensions\n"
        "print(typing_extensions.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["True True", "typing_extensions"]
