"""Imports into campaigns: ``--config`` for arms that declare configuration files,
results older than the protocol refused at import time (exit 1) unless the protocol is
``retrospective``, which every verdict then says, and ``--sign`` as ``run --sign``.
The AIPerf fixtures were made before any protocol here: their results predate it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import main
from tests.helpers.repos import git

FIXTURES = paths.FIXTURES / "aiperf"
RETRO = "retrospective: protocol registered after these results"


def _protocol(extra: str = "", candidate: str = "") -> str:
    return (
        f'name = "ai"\n{extra}[timing]\nmin_runs = 2\n'
        '[[condition]]\nname = "chat"\nworkload = "inputs.json"\nharness = "aiperf"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
        f'[[arm]]\nname = "candidate"\nruns = 2\n{candidate}'
    )


def _init(tmp_path: Path, text: str, files: dict[str, bytes] | None = None) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    git(root, "init", "-q")
    proto = tmp_path / "proto"
    proto.mkdir()
    shutil.copy(FIXTURES / "baseline-1" / "inputs.json", proto / "inputs.json")
    for rel, data in (files or {}).items():
        (proto / rel).parent.mkdir(parents=True, exist_ok=True)
        (proto / rel).write_bytes(data)
    (proto / "protocol.toml").write_text(text)
    assert main(["campaign", "init", "ai", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    return root


def _import(root: Path, run: str, arm: str, *extra: str) -> int:
    return main(["import", "aiperf", str(FIXTURES / run), "--name", run, "--arm", arm,
                 "--campaign", "ai", "--condition", "chat", "--root", str(root),
                 *extra])  # fmt: skip


def test_results_older_than_the_protocol_are_refused_at_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: imported as complete (exit 0), then silently excluded as
    started-before-protocol. Now exit 1 naming both times, nothing registered."""
    root = _init(tmp_path, _protocol())
    capsys.readouterr()
    assert _import(root, "baseline-1", "baseline") == 1
    err = capsys.readouterr().err
    assert "these results started at" in err and "before its protocol (committed at" in err
    assert "retrospective = true" in err
    assert err.rstrip().endswith("or import without --campaign")  # the CLI words its flag
    assert not (root / "evidence" / "baseline-1").exists()


def test_retrospective_protocol_counts_them_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _init(tmp_path, _protocol("retrospective = true\n"))
    for arm in ("baseline", "candidate"):
        for k in (1, 2):
            assert _import(root, f"{arm}-{k}", arm) == 0
    git(root, "add", "-A")
    git(root, "commit", "-qm", "runs")
    capsys.readouterr()
    main(["campaign", "status", "ai", "--json", "--root", str(root)])
    status = json.loads(capsys.readouterr().out)
    assert status["excluded"] == []
    assert status["notes"][0] == RETRO
    cand = next(c for c in status["cells"] if c["arm"] == "candidate")
    assert cand["lossless"] == "PASS" and cand["runs_done"] == 2
    main(["campaign", "status", "ai", "--root", str(root)])
    assert RETRO in capsys.readouterr().out
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate

    ev = evaluate(root, load_campaign(root, "ai"))
    assert ev.adjudications["chat/candidate"].reasons[0] == RETRO
    assert ev.claims["chat/candidate"].notes[0] == RETRO
    out = tmp_path / "ai.html"
    assert main(["report", "ai", "-o", str(out), "--root", str(root)]) == 0
    assert RETRO in out.read_text()


def test_import_config_for_arms_that_declare_configs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: refused ("files given (0)") with no way to give them."""
    engine = b"max_num_seqs: 16\n"
    root = _init(
        tmp_path,
        _protocol("retrospective = true\n", 'configs = ["engine.yaml"]\n'),
        {"engine.yaml": engine},
    )
    capsys.readouterr()
    assert _import(root, "candidate-1", "candidate") == 2
    assert "declares the configuration files engine.yaml" in capsys.readouterr().err
    wrong = tmp_path / "engine.yaml"
    wrong.write_bytes(b"max_num_seqs: 8\n")
    assert _import(root, "candidate-1", "candidate", "--config", str(wrong)) == 2
    assert not (root / "evidence" / "candidate-1").exists()
    wrong.write_bytes(engine)
    assert _import(root, "candidate-1", "candidate", "--config", str(wrong)) == 0
    from evidencestore.runs import load_run

    record = load_run(root, "candidate-1")
    assert list(record.configs) == ["configs/engine.yaml"]


def test_import_sign_like_run_sign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: no --sign; an import into a signed campaign exited 0 and was later
    excluded as unsigned-run."""
    keys = tmp_path / "keys"
    keys.mkdir()
    assert main(["attest", "keygen", str(keys / "lab")]) == 0
    pub = (keys / "lab.pub").read_bytes()
    root = _init(
        tmp_path,
        _protocol('retrospective = true\n[signing]\nkeys = ["keys/lab.pub"]\n'),
        {"keys/lab.pub": pub},
    )
    capsys.readouterr()
    assert _import(root, "baseline-1", "baseline") == 2
    assert "counts only runs signed by one of its keys" in capsys.readouterr().err
    # The library's importers apply the same rule (not only `evstore import`).
    from evidencestore.campaign import campaign_rules
    from evidencestore.dsse import load_private_key
    from evidencestore.errors import CampaignFitError
    from evidencestore.runs.aiperf import import_aiperf

    assert main(["attest", "keygen", str(keys / "other")]) == 0
    rules = campaign_rules(root, "ai")
    for key, words in ((None, r"counts only runs signed by one of its keys \(\w+\): give signing_key$"),
                       (load_private_key(keys / "other"), "is not one campaign 'ai' allows")):  # fmt: skip
        with pytest.raises(CampaignFitError, match=words):
            import_aiperf(root, FIXTURES / "baseline-1", "baseline-1", arm="baseline",
                          campaign=rules, condition="chat", signing_key=key)  # fmt: skip
    assert not (root / "evidence" / "baseline-1").exists()
    assert _import(root, "baseline-1", "baseline", "--sign", str(keys / "lab")) == 0
    assert (root / "evidence" / "baseline-1" / "run.dsse.json").is_file()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "runs")
    capsys.readouterr()
    main(["campaign", "status", "ai", "--json", "--root", str(root)])
    status = json.loads(capsys.readouterr().out)
    assert not any(e["run"] == "baseline-1" for e in status["excluded"]), status["excluded"]
    assert any("signed" in n for n in status["notes"])
