"""Protocols: the smallest form as written, strict errors naming the file and field,
registration by digest, and a registered protocol that is never edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import paths
from helpers.campaigns import git
from helpers.cli import cli
from helpers.protocols import SMALLEST, protocol_tree

from evidencestore.campaign.protocol import load_campaign, parse_protocol
from evidencestore.cli import main
from evidencestore.digest import hash_bytes
from evidencestore.errors import ConfigError, ManifestError


def test_smallest_protocol_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = protocol_tree(tmp_path)
    root = tmp_path / "repo"
    assert (
        main(["campaign", "init", "h3-lossless", "--protocol", str(src), "--root", str(root)]) == 0
    )
    out = capsys.readouterr().out
    campaign = load_campaign(root, "h3-lossless")
    assert campaign.digest == hash_bytes(SMALLEST.encode()).digest
    assert f"protocol {campaign.digest}" in out
    assert (root / "evidence/h3-lossless/protocol.toml").read_bytes() == SMALLEST.encode()
    assert campaign.baseline.name == "baseline" and campaign.baseline.runs == 2
    assert [a.name for a in campaign.candidates] == ["rank-local"]
    wl = (tmp_path / "p/workloads/15s.toml").read_bytes()
    assert campaign.workload_digest("15s") == hash_bytes(wl).digest
    assert campaign.protocol.timing.estimator == "welch-log-t"
    # A second registration of the same name is refused: a protocol is never edited.
    assert (
        main(["campaign", "init", "h3-lossless", "--protocol", str(src), "--root", str(root)]) == 2
    )
    assert "already registered" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("runs = 1\n", "runs = 1\nrun = 3\n"),
            r"Object contains unknown field `run` - at `\$.arm\[1\]`",
        ),
        (("baseline = true\n", ""), "exactly one arm must have `baseline = true`, found 0"),
        (("runs = 2 ", "runs = 1 "), "the baseline needs at least 2 runs"),
        (('"inconclusive"', '"pass"'), r"non_repeatable_baseline"),
        (("confidence = 0.95", "confidence = 1.5"), r"confidence"),
        (('name = "15s"', 'name = "5s"'), "condition '5s' is declared twice"),
        (("min_runs = 3", "min_runs = [3"), "not valid TOML"),
    ],
)
def test_bad_protocols_name_file_and_field(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    text = SMALLEST.replace(*edit, 1)
    assert text != SMALLEST
    with pytest.raises(ConfigError, match=message) as info:
        parse_protocol(text.encode(), "p/protocol.toml")
    assert "protocol p/protocol.toml" in str(info.value)


def test_missing_and_mispinned_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = protocol_tree(tmp_path, SMALLEST.replace("workloads/15s.toml", "workloads/20s.toml"))
    root = str(tmp_path / "repo")
    assert main(["campaign", "init", "x", "--protocol", str(src), "--root", root]) == 2
    err = capsys.readouterr().err
    assert "condition '15s': workload workloads/20s.toml: no such file" in err
    pinned = SMALLEST.replace(
        'workload = "workloads/5s.toml"',
        'workload = "workloads/5s.toml"\nworkload_digest = "blake3:' + "0" * 64 + '"',
    )
    src.write_text(pinned)
    assert main(["campaign", "init", "x", "--protocol", str(src), "--root", root]) == 2
    assert "but the protocol pins blake3:000" in capsys.readouterr().err
    assert not (tmp_path / "repo/evidence/x").exists()


def test_edited_protocol_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = protocol_tree(tmp_path, SMALLEST.replace('"h3-lossless"', '"h3"', 1))
    root = tmp_path / "repo"
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    (root / "evidence/h3/protocol.toml").write_text(SMALLEST.replace("0.95", "0.90"))
    with pytest.raises(ManifestError, match="a protocol is never edited"):
        load_campaign(root, "h3")
    capsys.readouterr()
    code = main(["campaign", "status", "h3", "--root", str(root)])
    assert code == 2 and "never edited" in capsys.readouterr().err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = protocol_tree(tmp_path, SMALLEST.replace('"h3-lossless"', '"h3"', 1))
    root = str(tmp_path / "repo")
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", root]) == 0
    capsys.readouterr()
    assert (
        main(["campaign", "claim", "h3", "--condition", "5s", "--arm", "nope", "--root", root]) == 2
    )
    assert "no arm 'nope' (arms: baseline, rank-local)" in capsys.readouterr().err
    assert (
        main(
            ["campaign", "claim", "h3", "--condition", "9s", "--arm", "rank-local", "--root", root]
        )
        == 2
    )
    assert "no condition '9s' (conditions: 5s, 15s)" in capsys.readouterr().err
    assert (
        main(["campaign", "claim", "h3", "--condition", "5s", "--arm", "baseline", "--root", root])
        == 2
    )
    assert "is the baseline itself" in capsys.readouterr().err
    assert main(["campaign", "status", "nothing", "--root", root]) == 2
    assert "no such registration" in capsys.readouterr().err
    assert main(["campaign", "claim", "h3", "--root", root]) == 2
    # No run yet, not a git repository: status says what remains, verify says why.
    assert main(["campaign", "status", "h3", "--json", "--root", root]) == 1
    status = json.loads(capsys.readouterr().out)
    assert status["verdict"] == "NOT_ACCEPTED"
    assert "5s: baseline baseline has 0 of 2 required runs" in status["remaining"]
    assert any("is not a git repository" in r for r in status["remaining"])
    assert main(["campaign", "verify", "h3", "--root", root]) == 1
    assert "is not a git repository" in capsys.readouterr().out


def test_protocol_named_otherwise_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = protocol_tree(tmp_path)
    root = str(tmp_path / "repo")
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", root]) == 2
    err = capsys.readouterr().err
    assert "name = 'h3-lossless', but the campaign is 'h3'" in err
    assert not (tmp_path / "repo/evidence/h3").exists()


def test_a_base_status_is_the_same_on_every_clone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`status --base` names the base by the protocol's commit: the same text with
    `--base main` here, `--base origin/main` in a clone, and after the base moved on;
    the protocol's description, conditions and rule head the report, which takes --base."""
    pytest.importorskip("aiohttp")
    import shutil

    src = paths.DOCS / "quickstart" / "llm"
    a = tmp_path / "a"
    a.mkdir()
    git(a, "init", "-q", "-b", "main")
    assert cli(capsys, "-q", "init", "--root", str(a))[0] == 0
    for f in src.iterdir():
        shutil.copy(f, a / f.name)
    assert cli(capsys, "campaign", "init", "kv-fp8", "--protocol", str(a / "protocol.toml"),
                "--root", str(a))[0] == 0  # fmt: skip
    git(a, "add", "-A")
    git(a, "commit", "-qm", "protocol")
    added = git(a, "rev-parse", "HEAD").strip()

    def status(root: Path, base: str) -> str:
        code, out, err = cli(capsys, "campaign", "status", "kv-fp8", "--base", base, "--json",
                              "--root", str(root))  # fmt: skip
        assert code == 1, err  # no runs yet: NOT_ACCEPTED
        return out

    here = status(a, "main")
    assert (
        f"the protocol's commit {added[:12]} is on the protected branch (the base revision)" in here
    )
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(a), str(b))
    assert status(b, "origin/main") == here
    (a / "notes.txt").write_text("the base moves on\n")
    git(a, "add", "notes.txt")
    git(a, "commit", "-qm", "unrelated")
    assert status(a, "main") == here  # the tip moved; what the status rests on did not
    page = tmp_path / "kv.html"
    code, _, err = cli(capsys, "report", "kv-fp8", "--base", "main", "-o", str(page),
                        "--root", str(a))  # fmt: skip
    assert code == 0, err
    html = page.read_text()
    top = html[: html.index('id="conclusions"')]
    assert "fp8 KV cache: the same tokens as the baseline" in top
    assert "<b>chat</b>: <code>chat.toml</code>" in top and "no timing claim" in top
    assert "every-arm" in top and "<b>kv-fp8</b> (candidate): 1 run(s)" in top
