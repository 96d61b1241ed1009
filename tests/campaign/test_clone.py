"""A campaign's verdict is a function of its commit: pushed to an S3 remote (moto) and
evaluated in a fresh git clone it gives byte-identical status and claim records; with the
remote missing it is UNAVAILABLE, naming what is missing and `evstore pull`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")
pytest.importorskip("boto3")
pytest.importorskip("s3fs")

from helpers.campaigns import FAST, SLOW, commit, git, init_git_repo, lsb_render, write_protocol
from helpers.remotes import run, set_remotes

from evidencestore.cli import main
from evidencestore.testing.s3 import s3_options
from evidencestore.testing.video_server import serve_video

PROTOCOL = """name = "clone"
[timing]
min_runs = 3
[[condition]]
name = "5s"
workload = "workloads/5s.toml"
[[arm]]
name = "baseline"
baseline = true
runs = 3
configs = ["configs/base.yaml"]
[[arm]]
name = "fast"
runs = 3
[[arm]]
name = "lsb"
runs = 1
"""


def _author(tmp_path: Path) -> tuple[Path, Path]:
    """The author's repository, every run committed; returns (root, fast's config)."""
    root = tmp_path / "author"
    init_git_repo(root)
    src = write_protocol(tmp_path / "p", PROTOCOL.replace("5s.toml", "5s.toml"))
    (tmp_path / "p/configs").mkdir()
    (tmp_path / "p/configs/base.yaml").write_text("offload:\n  resident_layers: 0\n")
    fast_cfg = tmp_path / "fast.yaml"  # not declared by the protocol: in the store only
    fast_cfg.write_text("offload:\n  resident_layers: 16\n")
    assert main(["campaign", "init", "clone", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/clone")
    workload = str(root / "evidence/clone/workloads/5s.toml")
    with serve_video() as server:

        def rec(arm: str, name: str, config: Path | None, **knobs: object) -> None:
            for k, v in knobs.items():
                setattr(server, k, v)
            try:
                argv = ["-q", "run", workload, "--arm", arm, "--server", server.url,
                        "--name", name, "--campaign", "clone", "--condition", "5s",
                        "--root", str(root)]  # fmt: skip
                argv += ["--config", str(config)] if config else []
                assert main(argv) == 0
            finally:
                server.__dict__.pop("render", None)
                server.latency = 0.0

        for i in (1, 2, 3):
            rec("baseline", f"b{i}", tmp_path / "p/configs/base.yaml", latency=SLOW[i - 1])
            rec("fast", f"f{i}", fast_cfg, latency=FAST[i - 1])
        rec("lsb", "l1", None, render=lsb_render())
    commit(root, "runs", "evidence")
    return root, fast_cfg


def _status_and_claim(root: Path) -> tuple[int, str, str]:
    code, status, _ = run("campaign", "status", "clone", "--json", "--root", str(root))
    _, claim, _ = run("campaign", "claim", "clone", "--condition", "5s", "--arm", "fast",
                      "--json", "--root", str(root))  # fmt: skip
    return code, status, claim


def test_fresh_clone_gives_byte_identical_records(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    root, _ = _author(tmp_path)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint)})
    commit(root, "remote", "evstore.toml")
    code, out, err = run("push", "--remote", "s3", "--root", str(root))
    assert code == 0, err
    a_code, a_status, a_claim = _status_and_claim(root)
    status = json.loads(a_status)
    assert a_code == 1 and status["verdict"] == "NOT_ACCEPTED"  # lsb is not lossless
    arms = {a["arm"]: a["conclusion"] for a in status["arms"]}
    assert arms == {"baseline": "qualified", "fast": "qualified", "lsb": "rejected"}
    claim = json.loads(a_claim)
    assert claim["verdict"] == "STANDS" and claim["config_diff"], claim

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert not (clone / ".evstore").exists()
    c_code, c_status, c_claim = _status_and_claim(clone)
    assert (c_code, c_status, c_claim) == (a_code, a_status, a_claim)
    # A second status on the unchanged clone is reused whole: it decodes nothing.
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate

    again = evaluate(clone, load_campaign(clone, "clone"))
    assert again.reused and again.decoded == 0
    assert json.loads(c_status) == json.loads(json.dumps(_builtins(again.status)))

    # The remote missing: UNAVAILABLE, naming each missing input and `evstore pull`.
    bare = tmp_path / "bare"
    git(tmp_path, "clone", "-q", str(root), str(bare))
    set_remotes(bare)
    code, out, _ = run("campaign", "status", "clone", "--json", "--root", str(bare))
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "UNAVAILABLE", status
    assert "evstore pull" in status["remaining"][0]
    missing = {m["digest"]: m["needed_by"] for m in status["missing"]}
    lsb_out = json.loads((root / "evidence/l1/run.json").read_text())["requests"][0]["body"]
    assert lsb_out["digest"] in missing and "output of run 'l1'" in missing[lsb_out["digest"]]
    code, out, _ = run("campaign", "claim", "clone", "--condition", "5s", "--arm", "fast",
                       "--json", "--root", str(bare))  # fmt: skip
    claim = json.loads(out)
    assert code == 1 and claim["verdict"] == "UNAVAILABLE" and claim["stands"] is False
    assert "is unavailable" in claim["unavailable"][0]
    assert "evstore pull" in claim["unavailable"][0]
    code, out, _ = run("campaign", "status", "clone", "--root", str(bare))
    assert out.rstrip().splitlines()[-len(status["remaining"]) - 1] == "UNAVAILABLE"
    # Pulling what the runs cite gives the author's answer again, byte for byte.
    set_remotes(bare, s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint)})
    assert run("pull", "--root", str(bare))[0] == 0
    shutil.rmtree(bare / ".evstore" / "memo", ignore_errors=True)
    assert _status_and_claim(bare) == (a_code, a_status, a_claim)

    # A registered status is history, never a verdict (issue 36): a fresh clone with no
    # store and no remote recomputes, finds the outputs missing, and says UNAVAILABLE; the
    # record is listed, not checked there. With the outputs it agrees with the record.
    code, _, err = run("campaign", "status", "clone", "--register", "clone-status-1",
                       "--root", str(root))  # fmt: skip
    assert code == 1, err
    reg = json.loads((root / "evidence/clone-status-1/bundle.json").read_text())
    key = reg["manifest"]["metadata"]["annotations"]["evaluation"]
    commit(root, "status", "evidence/clone-status-1")
    third = tmp_path / "third"
    git(tmp_path, "clone", "-q", str(root), str(third))
    set_remotes(third)  # no remote: nothing could be fetched
    again = evaluate(third, load_campaign(third, "clone"))
    assert not again.reused and again.key == key
    assert again.status.verdict == "UNAVAILABLE"
    checks = {c.entry: c for c in again.status.records}
    assert checks["status.json"].agrees is None and "not checked here" in (
        checks["status.json"].message
    )
    mine = evaluate(root, load_campaign(root, "clone"))
    assert mine.key == key and {c.agrees for c in mine.status.records} == {True}
    assert mine.core is not None and json.loads(msgspec.json.encode(mine.core)) == json.loads(
        a_status
    )


def _builtins(obj: object) -> object:
    import msgspec

    return msgspec.to_builtins(obj)
