"""docs/cli.md is generated from the argparse definitions and fails here when it drifts."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import build_parser, reference

PAGE = paths.DOCS / "cli.md"


def test_the_cli_reference_is_the_parser_now() -> None:
    assert PAGE.read_text() == reference.render(), (
        "docs/cli.md is out of date: run `python -m evidencestore.cli.reference`"
    )


def test_every_command_has_its_section() -> None:
    text = PAGE.read_text()
    top = next(a for a in build_parser()._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    for name in top:
        assert f"\n## evstore {name}\n" in text, name
    for path in ("campaign status", "run show", "run determinism", "import aiperf"):
        assert f"\n## evstore {path}\n" in text, path
    section = text.split("\n## evstore report\n", 1)[1].split("\n## ", 1)[0]
    assert "--base REV" in section and "-o OUT.html, --output OUT.html" in section


def test_runs_own_subcommands_are_one_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run`` dispatches on its own subcommands; the page documents exactly those, and
    its usage error names every one: a subcommand added to the one list is documented
    and named without a second list to keep in step."""
    from evidencestore.cli import main, run

    names = tuple(run._SUBCOMMANDS)
    assert names == ("show", "diff", "determinism")
    top = next(a for a in build_parser()._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    assert top["run"].get_default("subcommands") == names
    assert [p[1] for p in reference._paths() if p[0] == "run" and len(p) == 2] == list(names)
    assert main(["run"]) == 2
    assert "WORKLOAD (or show / diff / determinism)" in capsys.readouterr().err
    extra = ("bogus", ("X", run._show_parser, run._show))
    monkeypatch.setattr(run, "_SUBCOMMANDS", dict([*run._SUBCOMMANDS.items(), extra]))
    assert [p[1] for p in reference._paths() if p[0] == "run" and len(p) == 2] == [
        *names,
        "bogus",
    ]


def test_a_changed_option_is_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The negative control: an option added to a command changes the page, and --check
    says the file is out of date (exit 1); the file as written passes (exit 0)."""
    from evidencestore.cli import core
    from evidencestore.cli._common import Commands

    written = tmp_path / "cli.md"
    assert reference.main([str(written)]) == 0
    assert reference.main(["--check", str(written)]) == 0
    original = core.register

    def register(commands: Commands) -> None:
        original(commands)
        commands.action.choices["verify"].add_argument("--frobnicate", help="new")

    monkeypatch.setattr(core, "register", register)
    assert "--frobnicate" in reference.render()
    capsys.readouterr()
    assert reference.main(["--check", str(written)]) == 1
    assert "out of date" in capsys.readouterr().out
