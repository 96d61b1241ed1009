"""The seed campaign end to end: real runs over HTTP against the reference video server,
a real git history, and every campaign command through the CLI.

Conditions "5s" and "15s" are stood in for by 1 s and 2 s clips at 64x48 (distinct
workloads, distinct digests); the timing rule is the protocol's, unchanged. The run is the
unit of replication, so an arm whose claim must stand has 3 runs (``min_runs``), and its
speedup is real: the server answers the baseline's run ``i`` after ``SLOW[i - 1]`` seconds,
the candidate's after ``FAST[i - 1]``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")
pytest.importorskip("numpy")

import numpy as np
from helpers.campaigns import (
    FAST,
    OFFLOAD,
    SECONDS,
    SLOW,
    TINY,
    Campaign,
    commit,
    init_git_repo,
    lsb_render,
    protocol_text,
    write_protocol,
)

from evidencestore.campaign.protocol import load_campaign
from evidencestore.cli import main
from evidencestore.runs import load_run, open_run
from evidencestore.testing.video_server import VideoServer, sample_workload


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer) -> Iterator[Campaign]:
    """The seed campaign: baseline twice and candidates at 5 s and 15 s, committed after the
    protocol. Arms: ``rank-local`` (exactly equal), ``lsb-audio`` (one LSB of audio
    differs), ``resident-16`` (its server fails before inference)."""
    root = tmp_path_factory.mktemp("seed") / "repo"
    init_git_repo(root)
    src = write_protocol(
        tmp_path_factory.mktemp("proto"),
        protocol_text(
            "h3-lossless",
            [("baseline", 3), ("rank-local", 3), ("lsb-audio", 1), ("resident-16", 1)],
        ),
    )
    c = Campaign(root, video_server, None)
    code = main(["campaign", "init", "h3-lossless", "--protocol", str(src), "--root", str(root)])
    assert code == 0
    commit(root, "protocol", ".gitignore", "evidence/h3-lossless")
    for cond in SECONDS:
        for i, (slow, fast) in enumerate(zip(SLOW, FAST, strict=True), start=1):
            assert c.run("h3-lossless", cond, "baseline", f"baseline-{cond}-{i}", latency=slow) == 0
            assert (
                c.run("h3-lossless", cond, "rank-local", f"rank-local-{cond}-{i}", latency=fast)
                == 0
            )
        assert (
            c.run("h3-lossless", cond, "lsb-audio", f"lsb-audio-{cond}-1", render=lsb_render()) == 0
        )
    assert c.run("h3-lossless", "5s", "resident-16", "resident-16-5s-1", startup_error=OFFLOAD) == 1
    commit(root, "runs", "evidence")
    yield c


def test_protocol_registered_by_digest(seed: Campaign) -> None:
    campaign = load_campaign(seed.root, "h3-lossless")
    reg = json.loads((seed.root / "evidence/h3-lossless/bundle.json").read_text())
    entries = {e["path"]: e for e in reg["manifest"]["entries"]}
    assert reg["manifest"]["metadata"]["annotations"]["kind"] == "campaign-protocol"
    assert set(entries) == {"protocol.toml", "workloads/5s.toml", "workloads/15s.toml"}
    assert campaign.digest == entries["protocol.toml"]["descriptor"]["digest"]
    run = load_run(seed.root, "rank-local-5s-1")
    assert run.protocol_digest == campaign.digest
    assert run.workload_digest == entries["workloads/5s.toml"]["descriptor"]["digest"]
    assert campaign.workload_digest("5s") != campaign.workload_digest("15s")


def test_verify_all_runs_after_protocol(seed: Campaign, capsys: pytest.CaptureFixture[str]) -> None:
    seed.capsys = capsys
    code, out, _ = seed.cli("campaign", "verify", "h3-lossless", "--json")
    result = json.loads(out)
    assert code == 0, result
    assert result["ok"] is True and result["findings"] == []
    assert len(result["runs"]) == 15
    assert all(len(commit) == 40 for commit in result["runs"].values())


def test_status_matrix(seed: Campaign, capsys: pytest.CaptureFixture[str]) -> None:
    seed.capsys = capsys
    code, out, _ = seed.cli("campaign", "status", "h3-lossless", "--json")
    status = json.loads(out)
    assert code == 1
    assert status["verdict"] == "NOT_ACCEPTED"
    cells = {(c["condition"], c["arm"]): c for c in status["cells"]}
    for cond in SECONDS:
        assert cells[(cond, "baseline")]["repeatability"] == "exact"
        assert cells[(cond, "baseline")]["runs_done"] == 3
        exact = cells[(cond, "rank-local")]
        assert exact["lossless"] == "PASS" and exact["qualified"] is True, exact
        assert exact["speedup"]["low"] <= exact["speedup"]["ratio"] <= exact["speedup"]["high"]
        lsb = cells[(cond, "lsb-audio")]
        assert lsb["lossless"] in ("FAIL", "INCONCLUSIVE")  # never PASS
        assert lsb["qualified"] is False
    failed = cells[("5s", "resident-16")]
    assert (failed["runs_done"], failed["runs_failed"]) == (0, 1)
    assert failed["failed_runs"] == ["resident-16-5s-1"]
    assert failed["lossless"] is None and failed["speedup"] is None
    remaining = status["remaining"]
    assert "15s: candidate resident-16 has 0 of 1 required runs" in remaining
    assert "5s: candidate resident-16 has 0 of 1 required runs" in remaining
    assert (
        "5s: candidate resident-16 run resident-16-5s-1 failed (failed-before-inference)"
        in remaining
    )
    # A definite verdict is a rejection in its cell, not something that "remains".
    lsb5 = cells[("5s", "lsb-audio")]
    assert lsb5["conclusion"] == "rejected"
    assert any(
        r.startswith(f"5s: candidate lsb-audio is {lsb['lossless']}") for r in lsb5["reasons"]
    )
    assert not any("lsb-audio" in r for r in remaining)
    assert not any("rank-local" in r for r in remaining)
    assert failed["conclusion"] == "open"
    arms = {a["arm"]: a for a in status["arms"]}
    assert {k: a["conclusion"] for k, a in arms.items()} == {
        "baseline": "qualified", "rank-local": "qualified", "lsb-audio": "rejected",
        "resident-16": "open",
    }  # fmt: skip
    assert status["accept"] == "every-arm" and status["missing"] == []


def test_lsb_audio_not_lossless_names_audio(seed: Campaign) -> None:
    from evidencestore.campaign.status import evaluate

    ev = evaluate(seed.root, load_campaign(seed.root, "h3-lossless"))
    from evidencestore._canonical import decode
    from evidencestore.config import local_store
    from evidencestore.media.records import ComparisonRecord

    adj = ev.adjudications["5s/lsb-audio"]
    assert adj.verdict != "PASS" and adj.baseline_repeatable
    comp = adj.comparisons[0]
    assert comp.record is not None and comp.audio_max_abs_diff is not None
    assert comp.audio_max_abs_diff > 0
    # The comparison record it cites: video exactly equal, audio not.
    record = decode(local_store(seed.root).get(comp.record), ComparisonRecord)
    assert {e.type: e.equal for e in record.equality} == {"video": True, "audio": False}
    assert ev.adjudications["15s/rank-local"].verdict == "PASS"


def test_each_output_decoded_once_and_a_second_status_decodes_and_writes_nothing(
    seed: Campaign, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: within one evaluation each distinct output is decoded once (the metrics
    of an unequal pair read the frames its analysis decoded); an unchanged campaign is
    reused whole: nothing decoded, nothing written; frames over the memory budget are
    decoded again, to the same records."""
    import shutil

    import av
    import msgspec

    from evidencestore.campaign import decoded
    from evidencestore.campaign.status import evaluate

    opened: list[object] = []
    real_open = av.open

    def counting_open(*args: Any, **kwargs: Any) -> Any:
        opened.append(args[0])
        return real_open(*args, **kwargs)

    monkeypatch.setattr(av, "open", counting_open)
    campaign = load_campaign(seed.root, "h3-lossless")
    memo = seed.root / ".evstore" / "memo"
    shutil.rmtree(memo, ignore_errors=True)
    first = evaluate(seed.root, campaign)
    comparisons = [
        *(c for r in first.repeatability.values() for c in r.comparisons),
        *(c for a in first.adjudications.values() for c in a.comparisons),
    ]
    pairs = {(c.reference, c.candidate) for c in comparisons if c.record is not None}
    measured = {d for pair in pairs for d in pair}
    # lsb-audio's output and the baseline's, per condition (the requests share a seed)
    assert len(pairs) == 2 and len(measured) == 4
    assert first.adjudications["5s/lsb-audio"].comparisons[0].audio_max_abs_diff
    # One container opened, one decoding pass, per distinct output: metrics included.
    assert not first.reused and first.decoded == len(opened) == len(measured)

    def state() -> dict[Path, tuple[int, int]]:
        files = (p for p in (seed.root / ".evstore").rglob("*") if p.is_file())
        return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}

    before, opened[:] = state(), []
    again = evaluate(seed.root, campaign)
    assert again.reused and again.decoded == 0 and opened == []
    assert state() == before  # a memo hit writes nothing
    assert again.status == first.status

    def records(ev: Any) -> Any:
        return msgspec.to_builtins((ev.status, ev.repeatability, ev.adjudications, ev.claims))

    monkeypatch.setattr(decoded, "FRAME_BUDGET", 0)
    shutil.rmtree(memo)
    tight = evaluate(seed.root, campaign)
    # Each measured output decoded once more per stream kind (video, audio) per pair.
    assert tight.decoded == len(measured) + 2 * 2 * len(pairs)
    assert records(tight) == records(first)


def test_status_imports_only_what_it_computes_with(seed: Campaign) -> None:
    """A first status imports PyAV and NumPy (decoding, metrics), never scipy.stats,
    asyncio or fsspec (no remote is configured); its claims, and scipy.special with them,
    are computed in a forked child while the outputs decode (here, with forking off, or
    when the child dies), to the same records. A second, reused from the memo, imports
    none of them."""
    import shutil
    import sys

    from evidencestore._fork import cpu_count

    heavy = ("asyncio", "av", "fsspec", "numpy", "scipy.special", "scipy.stats")
    code = (
        "import os, sys\n"
        "if os.environ.get('TEST_CLAIMS_CHILD_DIES'):\n"
        "    import evidencestore.campaign.claims as c\n"
        "    parent, real = os.getpid(), c.make_claim\n"
        "    c.make_claim = lambda *a: os._exit(3) if os.getpid() != parent else real(*a)\n"
        "from evidencestore._canonical import canonical\n"
        "from evidencestore.campaign.protocol import load_campaign\n"
        "from evidencestore.campaign.status import evaluate\n"
        f"ev = evaluate({str(seed.root)!r}, load_campaign({str(seed.root)!r}, 'h3-lossless'))\n"
        "print(canonical([ev.status, ev.repeatability, ev.adjudications, ev.claims]).decode())\n"
        f"print('imported:', *(m for m in {heavy!r} if m in sys.modules))\n"
    )

    def first(**env: str) -> tuple[list[str], str]:
        shutil.rmtree(seed.root / ".evstore" / "memo", ignore_errors=True)
        return again(**env)

    def again(**env: str) -> tuple[list[str], str]:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={**os.environ, **env},
        )  # fmt: skip
        status, _, last = out.stdout.rstrip("\n").rpartition("\n")
        return last.split()[1:], status

    alone, records = first(EVSTORE_NO_FORK="1")
    assert alone == ["av", "numpy", "scipy.special"]
    status, _, _, claims = json.loads(records)
    assert status["verdict"] == "NOT_ACCEPTED" and claims["5s/rank-local"]["verdict"] == "STANDS"
    if cpu_count() > 1:
        assert first() == (["av", "numpy"], records)  # the same records, claims included
        # A child that dies: the claims are computed in the parent, to the same records.
        assert first(TEST_CLAIMS_CHILD_DIES="1") == (alone, records)
    assert again() == ([], records)


def test_a_tampered_memo_never_changes_a_verdict(seed: Campaign) -> None:
    """A memo entry naming another computation's record, a record altered in place, one
    whose verdicts contradict its own numbers, or one holding a status (the issue's forged
    memo: the right key, ACCEPTED while its cells say rejected) is a miss or is never
    read: the status is always concluded from the cells, to the same record."""
    import msgspec

    from evidencestore._canonical import canonical
    from evidencestore.campaign.memo import Memo, memo_key
    from evidencestore.campaign.models import Evaluation
    from evidencestore.campaign.status import evaluate
    from evidencestore.config import local_store
    from evidencestore.digest import digest_hex

    campaign = load_campaign(seed.root, "h3-lossless")
    first = evaluate(seed.root, campaign)
    assert first.status.verdict == "NOT_ACCEPTED"
    assert "rejected" in {a.conclusion for a in first.status.arms}
    memo_dir = seed.root / ".evstore" / "memo"
    store = local_store(seed.root)

    def index(key: str) -> Path:
        return memo_dir / digest_hex(key)[:2] / digest_hex(key)

    assert index(first.key).is_file()
    kept = evaluate(seed.root, campaign)
    assert kept.reused and kept.status == first.status
    # The forged memo of the issue: under the right key, a status saying ACCEPTED.
    forged = msgspec.structs.replace(first.status, verdict="ACCEPTED", remaining=())
    rec = {"status": msgspec.to_builtins(forged), "repeatability": first.repeatability,
           "adjudications": first.adjudications, "claims": first.claims}  # fmt: skip
    desc = store.put(canonical({"key": first.key, "record": rec}), "application/json")
    index(first.key).write_text(f"{desc.digest} {desc.size}\n")
    ev = evaluate(seed.root, campaign)
    assert ev.status.verdict == "NOT_ACCEPTED" and ev.status == first.status
    # Another key's record named under this evaluation's key.
    other = memo_key("campaign-evaluation", {"another": "campaign"})
    Memo(store, memo_dir).put(other, Evaluation())
    index(first.key).write_text(index(other).read_text())
    ev = evaluate(seed.root, campaign)
    assert not ev.reused and ev.status == first.status
    assert evaluate(seed.root, campaign).reused  # kept again, under its own key
    # A kept adjudication flipped to PASS while its comparisons say otherwise.
    flipped = {
        k: msgspec.structs.replace(a, verdict="PASS") for k, a in first.adjudications.items()
    }
    assert any(a.verdict != "PASS" for a in first.adjudications.values())
    Memo(store, memo_dir).put(
        first.key,
        Evaluation(repeatability=first.repeatability, adjudications=flipped,
                   claims=first.claims),
    )  # fmt: skip
    ev = evaluate(seed.root, campaign)
    assert not ev.reused and ev.status == first.status
    # The record altered in place: its digest no longer matches, a miss.
    digest, _ = index(first.key).read_text().split()
    blob = store.path_of(digest)
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes().replace(b'"STANDS"', b'"NOT_CLEARED"'))
    ev = evaluate(seed.root, campaign)
    assert not ev.reused and ev.status == first.status


def test_failed_arm_gives_no_claim(seed: Campaign, capsys: pytest.CaptureFixture[str]) -> None:
    seed.capsys = capsys
    code, out, _ = seed.cli(
        "campaign", "claim", "h3-lossless", "--condition", "5s", "--arm", "resident-16", "--json"
    )
    claim = json.loads(out)
    assert code == 1 and claim["refused"] is True and claim["speedup"] is None
    assert claim["reasons"][0] == "5s: arm 'resident-16' has 0 of 1 required complete runs"
    assert "resident-16-5s-1" in claim["reasons"][1] and OFFLOAD in claim["reasons"][1]
    assert all(rv["arm"] == "baseline" for rv in claim["runs"])
    assert claim["failed_runs"] == ["resident-16-5s-1"]
    code, out, _ = seed.cli(
        "campaign", "claim", "h3-lossless", "--condition", "5s", "--arm", "resident-16"
    )
    assert code == 1
    assert out.startswith("5s resident-16 vs baseline: claim refused (min_speedup 1)")
    assert "  failed   resident-16-5s-1: contributes no number" in out
    assert "runs used: 3 baseline (9 requests" in out and "0 resident-16 (0 requests" in out


def test_claim_matches_independent_computation(
    seed: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = pytest.importorskip("scipy.stats")
    seed.capsys = capsys
    code, out, _ = seed.cli(
        "campaign", "claim", "h3-lossless", "--condition", "15s", "--arm", "rank-local", "--json"
    )
    claim = json.loads(out)
    assert code == 0, claim
    values: dict[str, list[float]] = {"baseline": [], "rank-local": []}
    names = [f"{arm}-15s-{i}" for arm in ("baseline", "rank-local") for i in (1, 2, 3)]
    for name in names:
        run = load_run(seed.root, name)
        times = [r.e2e_s for r in run.requests if r.phase == "measured" and r.e2e_s]
        assert len(times) == 3
        values[run.arm].append(float(np.exp(np.log(times).mean())))  # one value per run
    x, y = np.log(values["baseline"]), np.log(values["rank-local"])
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    # every-arm over 2 conditions: a family of 2 claims, each at Bonferroni's 97.5 %
    assert (claim["correction"], claim["family_size"]) == ("bonferroni", 2)
    assert claim["confidence"] == 0.95 and claim["interval_confidence"] == 0.975
    half = stats.t.ppf((1 + 0.975) / 2, df) * math.sqrt(vx + vy)
    d = x.mean() - y.mean()
    s = claim["speedup"]
    assert abs(s["ratio"] - math.exp(d)) < 1e-9
    assert abs(s["low"] - math.exp(d - half)) < 1e-9
    assert abs(s["high"] - math.exp(d + half)) < 1e-9
    assert (claim["n_baseline"], claim["n_candidate"]) == (9, 9)  # requests
    assert (claim["runs_baseline"], claim["runs_candidate"]) == (3, 3)  # the unit
    assert abs(claim["df"] - df) < 1e-9
    assert claim["verdict"] == "STANDS" and claim["stands"] is True
    assert claim["min_speedup"] == 1.0 and claim["clears"] is True and s["low"] > 1.0
    assert {rv["run"] for rv in claim["runs"]} == set(names)
    digests = {rv["digest"] for rv in claim["runs"]}
    for name in names:
        reg = json.loads((seed.root / "evidence" / name / "bundle.json").read_text())
        assert reg["digest"] in digests
    assert claim["estimator"] == "welch-log-t"


def test_claim_and_status_register_as_bundles(
    seed: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    seed.capsys = capsys
    code, _, _ = seed.cli(
        "campaign", "claim", "h3-lossless", "--condition", "5s", "--arm", "rank-local",
        "--register", "claim-5s-rank-local",
    )  # fmt: skip
    assert code == 0
    code, out, _ = seed.cli("verify", "--bundle", "claim-5s-rank-local")
    assert code == 0, out
    reg = json.loads((seed.root / "evidence/claim-5s-rank-local/bundle.json").read_text())
    meta = reg["manifest"]["metadata"]["annotations"]
    assert meta["kind"] == "campaign-record"
    assert meta["protocol_digest"] == load_campaign(seed.root, "h3-lossless").digest
    stored = json.loads(
        (seed.root / "evidence/claim-5s-rank-local/claims/5s-rank-local.json").read_text()
    )
    assert stored["speedup"] is not None and stored["protocol_digest"] == meta["protocol_digest"]


def test_protocol_committed_after_a_run_excludes_it(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(tmp_path / "p", protocol_text("late", [("baseline", 2), ("fast", 1)]))
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "late", "--protocol", str(src), "--root", str(root)]) == 0
    assert c.run("late", "5s", "baseline", "early-run") == 0
    commit(root, "a run before its protocol", ".gitignore", "evidence/early-run")
    commit(root, "the protocol, afterwards", "evidence/late")
    assert c.run("late", "5s", "baseline", "later-run") == 0
    digest = load_campaign(root, "late").digest
    other = open_run(
        root, "other-protocol-run", arm="fast", workload=b"x", campaign="late",
        protocol_digest="blake3:" + "0" * 64, condition="5s",
    )  # fmt: skip
    other.seal()
    commit(root, "later runs", "evidence")
    code, out, _ = c.cli("campaign", "verify", "late", "--json")
    result = json.loads(out)
    assert code == 1
    findings = {f["run"]: f for f in result["findings"]}
    assert findings["early-run"]["code"] == "before-protocol"
    assert "does not descend from" in findings["early-run"]["message"]
    assert findings["other-protocol-run"]["code"] == "other-protocol"
    assert digest in findings["other-protocol-run"]["message"]
    assert list(result["runs"]) == ["later-run"]
    code, out, _ = c.cli("campaign", "status", "late", "--json")
    status = json.loads(out)
    base = next(x for x in status["cells"] if x["condition"] == "5s" and x["arm"] == "baseline")
    assert base["runs_done"] == 1  # the early run never counts
    assert "5s: baseline baseline has 1 of 2 required runs" in status["remaining"]
    code, out, _ = c.cli("campaign", "verify", "late")
    assert code == 1 and "early-run: before-protocol" in out


def _seeded(offset: int) -> Callable[..., Any]:
    return lambda video_server: (
        lambda f, n, r=video_server.render: r({**f, "seed": str(int(f["seed"]) + offset)}, n)
    )


@pytest.mark.parametrize("rule", ["inconclusive", "fail"])
def test_non_repeatable_baseline_follows_declared_rule(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str], rule: str
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    text = protocol_text("seeded", [("baseline", 2), ("rank-local", 1)], ("5s",), rule)
    src = write_protocol(tmp_path / "p", text)
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "seeded", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/seeded")
    assert c.run("seeded", "5s", "baseline", "b1") == 0
    assert c.run("seeded", "5s", "baseline", "b2", render=_seeded(1)(video_server)) == 0  # reseeded
    assert c.run("seeded", "5s", "rank-local", "r1") == 0
    commit(root, "runs", "evidence")
    code, out, _ = c.cli("campaign", "status", "seeded", "--json")
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    cells = {x["arm"]: x for x in status["cells"]}
    assert cells["baseline"]["repeatability"] == "not-exact"
    # r1 is byte-identical with b1, yet never PASS under a non-repeatable baseline.
    assert cells["rank-local"]["lossless"] == ("INCONCLUSIVE" if rule == "inconclusive" else "FAIL")
    assert (
        f"5s: baseline is not repeatable-exact; the protocol declares "
        f"non_repeatable_baseline = '{rule}'"
    ) in cells["baseline"]["reasons"]  # a definite finding: in its cell, not "what remains"
    assert cells["baseline"]["conclusion"] == "rejected"
    assert cells["rank-local"]["conclusion"] == "rejected"


def test_accepted_needs_both_conditions(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(
        tmp_path / "p", protocol_text("both", [("baseline", 3), ("rank-local", 3)])
    )
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "both", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/both")
    for i in (1, 2, 3):
        assert c.run("both", "5s", "baseline", f"b{i}-5s", latency=SLOW[i - 1]) == 0
        assert c.run("both", "5s", "rank-local", f"r{i}-5s", latency=FAST[i - 1]) == 0
    commit(root, "5s runs", "evidence")
    code, out, _ = c.cli("campaign", "status", "both", "--json")
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    assert status["remaining"] == [
        "15s: baseline baseline has 0 of 3 required runs",
        "15s: baseline repeatability not yet qualified",
        "15s: candidate rank-local has 0 of 3 required runs",
    ]
    for i in (1, 2, 3):
        assert c.run("both", "15s", "baseline", f"b{i}-15s", latency=SLOW[i - 1]) == 0
        assert c.run("both", "15s", "rank-local", f"r{i}-15s", latency=FAST[i - 1]) == 0
    code, out, _ = c.cli("campaign", "status", "both", "--json")
    status = json.loads(out)
    assert status["remaining"] == [  # one line, however many runs (issue 38)
        "6 run(s) not committed yet (b1-15s, b2-15s, b3-15s, r1-15s, r2-15s, r3-15s): that "
        "the protocol was frozen before them cannot be proven until they are"
    ]
    commit(root, "15s runs", "evidence")
    code, out, _ = c.cli("campaign", "status", "both", "--json")
    status = json.loads(out)
    assert code == 0 and status["verdict"] == "ACCEPTED" and status["remaining"] == []
    assert len(status["cells"]) == 4 and all(x["qualified"] for x in status["cells"])
    code, out, _ = c.cli("campaign", "status", "both")
    assert code == 0 and out.rstrip().endswith("ACCEPTED")


def test_claims_refused_for_differing_workload_and_small_n(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    text = protocol_text("small", [("baseline", 2), ("fast", 1), ("odd", 1)], ("5s",))
    src = write_protocol(tmp_path / "p", text.replace("min_runs = 3", "min_runs = 4"))
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "small", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/small")
    for name in ("b1", "b2"):
        assert c.run("small", "5s", "baseline", name) == 0
    assert c.run("small", "5s", "fast", "fast-1") == 0
    other = tmp_path / "other.toml"
    other.write_text(sample_workload(seconds=(1,), seed=7, **TINY))  # type: ignore[arg-type]
    # `evstore run` refuses a workload that is not the condition's before sending anything,
    # and so does the library's run_workload (the same rule, campaign.fit); a harness that
    # records by hand can still register one, and claims refuse it.
    code = main(
        ["-q", "run", str(other), "--arm", "odd", "--server", video_server.url, "--name", "odd-1",
         "--campaign", "small", "--condition", "5s", "--root", str(root)]
    )  # fmt: skip
    assert code == 2
    from evidencestore.campaign import campaign_rules
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.errors import ConfigError
    from evidencestore.runs import open_run
    from evidencestore.runs.runner import run_workload

    with pytest.raises(ConfigError, match="but campaign 'small' binds condition '5s' to"):
        run_workload(
            root, other, arm="odd", server=video_server.url, name="odd-1",
            campaign=campaign_rules(root, "small"), condition="5s",
        )  # fmt: skip
    with pytest.raises(ConfigError, match=r"campaign='small': pass the campaign's rules"):
        run_workload(
            root, other, arm="odd", server=video_server.url, name="odd-1",
            campaign="small", condition="5s",  # type: ignore[arg-type]
        )  # fmt: skip
    assert not (root / "evidence" / "odd-1").exists()
    open_run(
        root, "odd-1", arm="odd", workload=other.read_bytes(), campaign="small",
        protocol_digest=load_campaign(root, "small").digest, condition="5s",
    ).seal()  # fmt: skip
    commit(root, "runs", "evidence")
    code, out, _ = c.cli(
        "campaign", "claim", "small", "--condition", "5s", "--arm", "fast", "--json"
    )
    claim = json.loads(out)
    assert code == 1 and claim["speedup"] is None
    assert claim["reasons"] == [
        f"5s: arm {arm!r} has {k} complete runs with measured times, below the protocol's "
        "min_runs = 4 (the run is the unit: more requests per run do not count as more runs)"
        for arm, k in (("baseline", 2), ("fast", 1))
    ]
    assert (claim["n_baseline"], claim["n_candidate"]) == (6, 3)
    assert (claim["runs_baseline"], claim["runs_candidate"]) == (2, 1)
    assert claim["verdict"] == "REFUSED" and claim["stands"] is False
    code, out, _ = c.cli("campaign", "claim", "small", "--condition", "5s", "--arm", "odd")
    assert code == 1 and "claim refused" in out
    assert "5s: arm 'odd' has 0 of 1 required complete runs" in out
    assert "run 'odd-1' ran workload" in out and "the workloads differ" in out
    code, out, _ = c.cli("campaign", "verify", "small", "--json")
    findings = json.loads(out)["findings"]
    assert [(f["run"], f["code"]) for f in findings] == [("odd-1", "workload-mismatch")]


def test_claim_cites_configuration_difference(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    text = protocol_text("cfg", [("baseline", 3), ("resident-16", 3)], ("5s",))
    text = text.replace("baseline = true\n", 'baseline = true\nconfigs = ["configs/base.yaml"]\n')
    text += 'configs = ["configs/resident.yaml"]\n'
    src = write_protocol(tmp_path / "p", text)
    (tmp_path / "p/configs").mkdir()
    base_cfg = tmp_path / "p/configs/base.yaml"
    base_cfg.write_text("offload:\n  resident_layers: 0\n  strategy: stream\n")
    cand_cfg = tmp_path / "p/configs/resident.yaml"
    cand_cfg.write_text("offload:\n  resident_layers: 16\n  strategy: resident\n")
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "cfg", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/cfg")

    def run(arm: str, name: str, config: Path, i: int = 1) -> int:
        video_server.latency = (SLOW if arm == "baseline" else FAST)[i - 1]
        try:
            return main(
                ["-q", "run", str(root / "evidence/cfg/workloads/5s.toml"), "--arm", arm,
                 "--server", video_server.url, "--name", name, "--campaign", "cfg", "--condition",
                 "5s", "--config", str(config), "--root", str(root)]
            )  # fmt: skip
        finally:
            video_server.latency = 0.0

    for i in (1, 2, 3):
        assert run("baseline", f"b{i}", base_cfg, i) == 0
        assert run("resident-16", f"r{i}", cand_cfg, i) == 0
    # The arm's declared configuration files are part of the fit: `evstore run` (and
    # run_workload) refuse another one before sending anything; a harness recording by
    # hand can still register it, and the claim excludes it.
    assert run("resident-16", "wrong-config", base_cfg) == 2
    assert "declares the configuration files configs/resident.yaml for arm" in (
        capsys.readouterr().err
    )
    assert not (root / "evidence" / "wrong-config").exists()
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.runs import open_run

    wl = root / "evidence/cfg/workloads/5s.toml"
    harness = open_run(
        root, "wrong-config", arm="resident-16", workload=wl.read_bytes(), campaign="cfg",
        protocol_digest=load_campaign(root, "cfg").digest, condition="5s",
    )  # fmt: skip
    harness.attach_config(base_cfg)
    harness.seal()
    commit(root, "runs", "evidence")
    code, out, _ = c.cli(
        "campaign", "claim", "cfg", "--condition", "5s", "--arm", "resident-16", "--json"
    )
    claim = json.loads(out)
    assert code == 0, claim
    diffs = {d["key"]: (d["a"], d["b"]) for d in claim["config_diff"]}
    pair = "configs/base.yaml|configs/resident.yaml"
    assert diffs == {
        f"{pair}:offload.resident_layers": (0, 16),
        f"{pair}:offload.strategy": ("stream", "resident"),
    }
    assert [e["run"] for e in claim["excluded"]] == ["wrong-config"]
    assert claim["excluded"][0]["code"] == "config-mismatch"
    assert {rv["run"] for rv in claim["runs"]} == {"b1", "b2", "b3", "r1", "r2", "r3"}
    code, out, _ = c.cli("campaign", "claim", "cfg", "--condition", "5s", "--arm", "resident-16")
    assert code == 0 and "the claim stands (min_speedup 1)" in out
    assert "  excluded wrong-config: config-mismatch: run 'wrong-config'" in out
    # Registrations are immutable: the campaign fails verification until the run is
    # voided by a committed record naming its digest.
    code, out, _ = c.cli("campaign", "verify", "cfg", "--json")
    assert code == 1
    assert [f["code"] for f in json.loads(out)["findings"]] == ["config-mismatch"]
    code, out, _ = c.cli(
        "campaign", "void", "cfg", "--run", "wrong-config", "--reason",
        "launched with the baseline's configuration", "--record", "void-wrong-config",
    )  # fmt: skip
    assert code == 0 and "voided by void-wrong-config" in out
    wrong = json.loads((root / "evidence/wrong-config/bundle.json").read_text())["digest"]
    void = json.loads((root / "evidence/void-wrong-config/void.json").read_text())
    assert void["run"] == "wrong-config" and void["run_digest"] == wrong
    code, out, _ = c.cli("campaign", "verify", "cfg", "--json")
    result = json.loads(out)
    assert code == 1  # not committed yet: no effect
    assert {f["code"] for f in result["findings"]} == {"config-mismatch", "set-aside-not-effective"}
    commit(root, "void the mistaken run", "evidence/void-wrong-config")
    code, out, _ = c.cli("campaign", "verify", "cfg", "--json")
    result = json.loads(out)
    assert code == 0 and result["findings"] == []
    assert [(v["run"], v["code"]) for v in result["voided"]] == [("wrong-config", "voided")]
    assert "wrong-config" not in result["runs"] and len(result["runs"]) == 6
    code, out, _ = c.cli("campaign", "verify", "cfg")
    assert code == 0
    assert "  voided    wrong-config: voided by 'void-wrong-config': launched with" in out
    code, out, _ = c.cli("campaign", "status", "cfg", "--json")
    status = json.loads(out)
    assert code == 0 and status["verdict"] == "ACCEPTED", status
    assert [v["run"] for v in status["voided"]] == ["wrong-config"] and status["excluded"] == []


def test_run_committed_with_its_protocol_is_not_proven(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(tmp_path / "p", protocol_text("same", [("baseline", 2), ("x", 1)]))
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", "same", "--protocol", str(src), "--root", str(root)]) == 0
    assert c.run("same", "5s", "baseline", "together") == 0
    code, out, _ = c.cli("campaign", "verify", "same", "--json")
    assert code == 1
    assert {f["code"] for f in json.loads(out)["findings"]} == {"history", "uncommitted"}
    commit(root, "protocol and a run at once", ".gitignore", "evidence")
    code, out, _ = c.cli("campaign", "verify", "same", "--json")
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["run"] == "together" and finding["code"] == "before-protocol"
    assert "together with the protocol" in finding["message"]


def _one_condition_campaign(
    tmp_path: Path, video_server: VideoServer, capsys: Any, name: str, run_section: str = ""
) -> Campaign:
    """A committed protocol (condition 5s; baseline 2 runs, rank-local 1); ``run_section``
    lines are added to the workload's ``[run]`` before the protocol is registered."""
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(
        tmp_path / "p", protocol_text(name, [("baseline", 2), ("rank-local", 1)], ("5s",))
    )
    if run_section:
        wl = src.parent / "workloads" / "5s.toml"
        wl.write_text(wl.read_text().replace("[run]\n", f"[run]\n{run_section}\n", 1))
    c = Campaign(root, video_server, capsys)
    assert main(["campaign", "init", name, "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", f"evidence/{name}")
    return c


def test_unchecked_outputs_are_never_lossless(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check_media = false`` and both arms one AAC frame short: nothing was checked, so
    losslessness is UNAVAILABLE with the reason and the campaign is not accepted."""
    c = _one_condition_campaign(tmp_path, video_server, capsys, "unchecked", "check_media = false")
    for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("rank-local", "r1")):
        assert c.run("unchecked", "5s", arm, name, audio_short_by=1024) == 0  # not checked
        assert all(r.media is None for r in load_run(c.root, name).requests)
    code, out, _ = c.cli("run", "show", "r1")
    assert code == 0 and "3 output(s) not checked against their request" in out
    commit(root := c.root, "runs", "evidence")
    code, out, _ = c.cli("campaign", "status", "unchecked", "--json")
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    cells = {x["arm"]: x for x in status["cells"]}
    assert cells["baseline"]["repeatability"] == "not-exact"
    assert any(
        r.startswith("5s: baseline repeatability is UNAVAILABLE: 3 output pair(s) not checked")
        for r in status["remaining"]
    ), status["remaining"]
    assert not any("baseline is not repeatable-exact" in r for r in status["remaining"])
    assert cells["rank-local"]["lossless"] == "UNAVAILABLE"
    assert not cells["rank-local"]["qualified"]
    assert any(
        "candidate rank-local is UNAVAILABLE" in r and "not checked against their request" in r
        for r in status["remaining"]
    ), status["remaining"]
    from evidencestore.campaign.status import evaluate

    adj = evaluate(root, load_campaign(root, "unchecked")).adjudications["5s/rank-local"]
    assert adj.verdict == "UNAVAILABLE" and adj.comparisons
    assert all(x.unchecked and x.verdict == "UNAVAILABLE" for x in adj.comparisons)
    assert any("[run] check_media = false" in r for r in adj.reasons)
    assert not any("exactly equal" in r for r in adj.reasons)


def test_equally_truncated_audio_fails_its_runs_and_the_campaign(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's first false PASS: every output 500 samples (10.4 ms) short, both arms
    alike. The MP4 sample table presents 47,500 of 48,000 samples: each run fails (exit 1)
    and the campaign is not accepted."""
    c = _one_condition_campaign(tmp_path, video_server, capsys, "short")
    for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("rank-local", "r1")):
        assert c.run("short", "5s", arm, name, audio_short_by=500) == 1
        record = load_run(c.root, name)
        assert record.outcome != "complete"
        assert all(
            r.failure == "invalid-media" and r.media is not None and "audio.samples" in r.media.failed_checks
            for r in record.requests
        )  # fmt: skip
        message = record.requests[0].media.message  # type: ignore[union-attr]
        assert message is not None and "500 samples short (truncated)" in message
        assert "MP4/MOV sample table" in message
    commit(c.root, "runs", "evidence")
    code, out, _ = c.cli("campaign", "status", "short", "--json")
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    assert not any(x["qualified"] for x in status["cells"])
    # `media check` on one output says so too (exit 1).
    body = load_run(c.root, "r1").requests[0].body
    assert body is not None
    code, out, _ = c.cli("media", "check", body.digest, "--frames", "8", "--samples", "48000", "--json")  # fmt: skip
    assert code == 1 and json.loads(out)["verdict"] == "FAIL"


def test_claims_carry_the_audit_findings_of_their_runs(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    c = _one_condition_campaign(tmp_path, video_server, capsys, "audited")
    # 1 s: no request of b1 or b2 is 3x faster than their first even when that first pays
    # for a fresh process's first encode (up to 1.3 s under load); r1's are, from the cache.
    assert c.run("audited", "5s", "baseline", "b1", latency=1.0) == 0
    assert c.run("audited", "5s", "baseline", "b2", latency=1.0) == 0
    assert c.run("audited", "5s", "rank-local", "r1", latency=1.0, cache=True) == 0
    commit(c.root, "runs", "evidence")
    code, out, _ = c.cli("campaign", "claim", "audited", "--condition", "5s", "--arm", "rank-local", "--json")  # fmt: skip
    claim = json.loads(out)
    assert code in (0, 1) and claim["arm"] == "rank-local"
    runs = {r["run"]: r for r in claim["runs"]}
    assert runs["b1"]["audit_findings"] == [] and runs["b2"]["audit_findings"] == []
    findings = runs["r1"]["audit_findings"]
    assert len(findings) == 2
    assert all(f.startswith("output-caching: request 0:") for f in findings)
    assert all("possible output caching" in f for f in findings)


def test_a_check_that_could_not_run_is_unchecked_not_invalid(
    tmp_path: Path,
    video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The candidate's outputs change under the checker (as a file rewritten while it is
    decoded would): the check cannot run, the media outcome is UNAVAILABLE with the reason,
    and the adjudication is UNAVAILABLE, not FAIL and never PASS."""
    from evidencestore.campaign.status import evaluate
    from evidencestore.errors import MediaError
    from evidencestore.media.source import MediaSource

    c = _one_condition_campaign(tmp_path, video_server, capsys, "errored")
    assert c.run("errored", "5s", "baseline", "b1") == 0
    assert c.run("errored", "5s", "baseline", "b2") == 0

    def changed(self: MediaSource) -> None:
        raise MediaError(f"{self.name}: the file changed while it was being checked")

    with monkeypatch.context() as m:
        m.setattr(MediaSource, "ensure_unchanged", changed)
        assert c.run("errored", "5s", "rank-local", "r1") == 1
    record = load_run(c.root, "r1")
    for r in record.requests:
        assert r.media is not None and r.media.verdict == "UNAVAILABLE"
        assert r.media.failed_checks == ("check",)
        assert r.media.message is not None and "cannot be checked" in r.media.message
    commit(c.root, "runs", "evidence")
    adj = evaluate(c.root, load_campaign(c.root, "errored")).adjudications["5s/rank-local"]
    assert adj.verdict == "UNAVAILABLE"
    assert all(x.unchecked for x in adj.comparisons)
    assert any("its media check could not run" in r for r in adj.reasons)
