"""Error families by source: every error type in ``errors.py``; a failed git command is a
``GitError``, a run that does not fit its campaign a ``CampaignFitError``, a remote that
cannot be used a ``RemoteConfigError`` (each still a ``ConfigError``); library messages
name library parameters, and the CLI words them as its flags."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers.repos import git as run_git

from evidencestore import errors
from evidencestore.cli import main
from evidencestore.cli._common import flag_of
from evidencestore.errors import (
    CampaignFitError,
    ConfigError,
    GitError,
    RemoteConfigError,
)

PACKAGE = Path(errors.__file__).parent


def _error_classes() -> dict[str, list[str]]:
    """Module -> the exception classes it defines (bases named ...Error / Exception)."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b).split(".")[-1].endswith(("Error", "Exception")) for b in node.bases
            ):
                found.setdefault(rel, []).append(node.name)
    return found


def test_every_error_type_lives_in_errors_py() -> None:
    """Private control-flow exceptions (``_Name``, never raised to a caller) may stay
    where they are caught."""
    elsewhere = {
        rel: [n for n in names if not n.startswith("_")]
        for rel, names in _error_classes().items()
        if rel != "errors.py"
    }
    assert {rel: names for rel, names in elsewhere.items() if names} == {}
    # The old import paths still name the same classes.
    from evidencestore.digest import NotRegularFileError
    from evidencestore.records import UnknownRecordKind
    from evidencestore.runs.importing import ResultsPredateProtocol
    from evidencestore.storage._fsspec import TransferDeadlineError
    from evidencestore.testing.interleave import InterleavingError

    assert NotRegularFileError is errors.NotRegularFileError
    assert UnknownRecordKind is errors.UnknownRecordKind
    assert TransferDeadlineError is errors.TransferDeadlineError
    assert InterleavingError is errors.InterleavingError
    assert ResultsPredateProtocol is errors.ResultsPredateProtocol
    assert issubclass(ResultsPredateProtocol, errors.CampaignFitError)


_FLAG = re.compile(r"--[a-z][\w-]*")


def _cli_flags() -> set[str]:
    """Every flag ``evstore`` defines: the flag strings written in ``cli/``."""
    return {
        node.value
        for path in (PACKAGE / "cli").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _FLAG.fullmatch(node.value)
    }


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string of a module but its docstrings and git's arguments, an f-string as
    one text (``{}`` for what it formats)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("git"):
            skip.update(id(a) for a in node.args)  # git's own flags
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            out.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


# Where a command to type may start: a backtick, an opening parenthesis, a clause's end.
_COMMAND_START = re.compile(r"`|\(|[.,;:]\s")


def _speaks_in_flags(text: str, flags: set[str]) -> list[str]:
    """The ``evstore`` flags ``text`` names outside a command to type: a flag is words
    for people only within a command (``evstore push --remote {}``, ``git fetch
    --unshallow``), from its ``evstore `` or ``git `` to the flag with no backtick,
    parenthesis or clause between. A flag alone in backticks, or beside its library
    spelling, still speaks in flags."""
    found = []
    for m in _FLAG.finditer(text):
        before = text[: m.start()]
        command = _COMMAND_START.split(before)[-1].lstrip()
        if (
            m.group() not in flags
            or (m.start() and before[-1] not in " ('\"\n`")
            or command.startswith(("evstore ", "git "))
        ):
            continue
        found.append(m.group())
    return found


def test_library_messages_name_no_cli_flag() -> None:
    """Outside ``cli/`` no string of the package (an error, a warning, a ``where``, a
    reason kept in a record) names one of ``evstore``'s flags: it names the library
    parameter, as a placeholder the CLI words as its flag. Harnesses' own flags
    (AIPerf's ``--num-profile-runs``) and the reference servers' (``testing/``) are
    theirs."""
    flags = _cli_flags()
    assert {"--server", "--server-log", "--launch", "--config", "--name"} <= flags
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("cli/", "testing/")) or rel == "_demo.py":
            continue
        for line, text in _strings(ast.parse(path.read_text())):
            found += [f"{rel}:{line}: {flag} in {text!r}" for flag in _speaks_in_flags(text, flags)]
    assert found == []


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("--server {}: expected an http:// URL", ["--server"]),
        ("while keeping --server-log {}", ["--server-log"]),
        ("{}; choose another --name", ["--name"]),
        ("a run needs an arm name (--arm)", ["--arm"]),
        ("--launch: an empty command", ["--launch"]),
        ("choose another {name}", []),
        ("upload it with `evstore push --remote {}`", []),
        ("register it with `evstore campaign void --sign KEY`", []),
        ("(git fetch --unshallow) and verify again", []),
        ("AIPerf's --num-profile-runs", []),
        # in backticks, or beside the library's spelling, a flag is still a flag
        ("register it with `--sign KEY`", ["--sign"]),
        ("pass --follow-symlinks (follow_symlinks=True) to copy", ["--follow-symlinks"]),
        ("run `evstore pull` first, or verify with `--remote NAME`", ["--remote"]),
        ("`evstore pull`, or with --require-available", ["--require-available"]),
    ],
)
def test_the_flag_scan_finds_a_flag_put_back(text: str, named: list[str]) -> None:
    """The scan above is not vacuous: each string the library once said in flags is
    found, and a command to type is not."""
    assert _speaks_in_flags(text, _cli_flags()) == named


def test_a_failed_git_command_is_a_git_error(tmp_path: Path) -> None:
    from evidencestore.gitrefs import git, is_git_repository, registration_blobs

    run_git(tmp_path, "init", "-q")
    with pytest.raises(GitError) as caught:
        git(tmp_path, "rev-parse", "--verify", "no-such-rev^{commit}")
    assert caught.value.command == "git rev-parse --verify"
    assert "no-such-rev" in caught.value.stderr or "Needed a single revision" in str(caught.value)
    assert isinstance(caught.value, ConfigError)  # callers' ``except ConfigError`` still hold
    with pytest.raises(GitError, match=r"not a git revision of .*no-such-rev"):
        registration_blobs(tmp_path, "no-such-rev")
    assert not is_git_repository(tmp_path / "nowhere")


def test_history_reads_a_git_failure_as_no_history_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``registration_history`` means "git failed" when it finds no commit; a
    ConfigError that is not a GitError (a bug, a bad argument) is not swallowed."""
    from evidencestore.campaign import history

    run_git(tmp_path, "init", "-q")
    assert history.registration_history(tmp_path, ["a"]) == {}  # no commit yet: git fails

    def broken(*args: object, **kwargs: object) -> bytes:
        raise ConfigError("not git's failure")

    monkeypatch.setattr(history, "git", broken)
    with pytest.raises(ConfigError, match="not git's failure"):
        history.registration_history(tmp_path, ["a"])


def test_campaign_fit_names_parameters_and_the_cli_its_flags(tmp_path: Path) -> None:
    from helpers.protocols import SMALLEST, protocol_tree

    from evidencestore.campaign.fit import campaign_rules

    src = protocol_tree(tmp_path, SMALLEST.replace('"h3-lossless"', '"h3"', 1))
    root = tmp_path / "repo"
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    rules = campaign_rules(root, "h3")
    with pytest.raises(CampaignFitError) as caught:
        rules.check_run(arm="baseline", condition=None, workload_digest="x")
    assert str(caught.value) == (
        "campaign needs condition (the protocol condition this run is for)"
    )
    assert caught.value.diagnostics(flag_of) == (
        "--campaign needs --condition (the protocol condition this run is for)"
    )
    with pytest.raises(CampaignFitError, match=r"^arm 'nope': campaign 'h3' declares the arms"):
        rules.check_run(arm="nope", condition="5s", workload_digest="x")
    with pytest.raises(CampaignFitError, match=r"^campaign nothing: no campaign bundle"):
        campaign_rules(root, "nothing")
    assert flag_of("configs") == "--config" and flag_of("signing_key") == "--sign"


def test_run_errors_name_parameters_and_the_cli_its_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run_workload`` and ``--launch`` name ``server``, ``server_logs``, ``configs``
    and ``command``; ``evstore run`` says ``--server``, ``--server-log``, ``--config``
    and ``--launch`` for the same errors."""
    from evidencestore.runs.launch import parse_command
    from evidencestore.runs.runner import check_server_url, run_workload
    from evidencestore.testing.video_server import sample_workload

    with pytest.raises(ConfigError) as bad_url:
        check_server_url("ftp://x")
    assert str(bad_url.value) == "server 'ftp://x': expected an http:// or https:// URL with a host"
    assert bad_url.value.diagnostics(flag_of).startswith("--server 'ftp://x': expected")
    with pytest.raises(ConfigError) as empty:
        parse_command("  ")
    assert (str(empty.value), empty.value.diagnostics(flag_of)) == (
        "command: an empty command",
        "--launch: an empty command",
    )

    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    workload = root / "workload.toml"
    workload.write_text(sample_workload())
    log_dir = root / "logs"
    log_dir.mkdir()
    missing = root / "missing.yaml"
    given = {"arm": "a", "server": "http://127.0.0.1:9", "name": "r"}
    cases = [
        ({"server_logs": [log_dir]}, f"server_logs {log_dir}: {log_dir} is a directory",
         ["--server-log", str(log_dir)], f"--server-log {log_dir}: {log_dir} is a directory"),
        ({"configs": [missing]}, f"configs {missing}: no such file",
         ["--config", str(missing)], f"--config {missing}: no such file"),
    ]  # fmt: skip
    for kwargs, library, argv, cli in cases:
        with pytest.raises(ConfigError) as caught:
            run_workload(root, workload, **given, **kwargs)  # type: ignore[arg-type]
        assert str(caught.value).startswith(library)
        capsys.readouterr()
        code = main(["run", str(workload), "--arm", "a", "--server", given["server"],
                     "--name", "r", *argv, "--root", str(root)])  # fmt: skip
        assert code == 2
        assert f"evstore: error: {cli}" in capsys.readouterr().err
    assert not (root / "evidence" / "r").exists()


def test_set_aside_reason_is_worded_per_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.protocols import SMALLEST, protocol_tree

    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.setaside import withdraw_arm
    from evidencestore.config import Repository

    src = protocol_tree(tmp_path, SMALLEST.replace('"h3-lossless"', '"h3"', 1))
    root = tmp_path / "repo"
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    with pytest.raises(ConfigError, match=r"^reason: say why the arm is withdrawn$"):
        withdraw_arm(Repository(root), load_campaign(root, "h3"), "rank-local", " ", "w")
    capsys.readouterr()
    argv = ["campaign", "withdraw", "h3", "--arm", "rank-local", "--reason", " ", "--record", "w"]
    assert main([*argv, "--root", str(root)]) == 2
    assert "evstore: error: --reason: say why the arm is withdrawn" in capsys.readouterr().err


def test_an_unknown_remote_is_a_remote_config_error(tmp_path: Path) -> None:
    from evidencestore.remotes import configured_remotes

    assert main(["init", "--root", str(tmp_path)]) == 0
    with pytest.raises(RemoteConfigError, match=r"unknown remote 'nope' \(remotes: none"):
        configured_remotes(tmp_path, "nope")
