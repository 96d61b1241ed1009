"""The ledger's authority (issue 36), with real runs over HTTP in real git
repositories. A registered status or claim is history, never the verdict (a forged one is
``record-mismatch``); of two copies of a run the one first by ancestry counts, whatever
the committer dates say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from helpers.ledger import (
    CAMPAIGN,
    NAMES,
    RUNS,
    SLOW,
    cli,
    commit,
    findings,
    git,
    init,
    new_repo,
    protocol,
    reseal,
    run,
    verify,
)

from evidencestore.testing.video_server import VideoServer


def _campaign(tmp: Path, video_server: VideoServer, text: str) -> Path:
    root = new_repo(tmp, text)
    assert init(root, tmp) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    for arm, name in RUNS:
        assert run(root, video_server, arm, name) == 0
    commit(root, "runs")
    return root


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer) -> Path:
    """The ledger's honest campaign: accepted."""
    return _campaign(tmp_path_factory.mktemp("honest"), video_server, protocol())


@pytest.fixture(scope="module")
def rejected(tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer) -> Path:
    """The same runs under a protocol asking for a speedup above 50: truth NOT_ACCEPTED
    (the candidate is about 4x faster, its claim does not clear 50)."""
    text = protocol().replace("min_runs = 3\n", "min_runs = 3\nmin_speedup = 50\n")
    return _campaign(tmp_path_factory.mktemp("rejected"), video_server, text)


def _copy(src: Path, tmp: Path) -> Path:
    root = tmp / "repo"
    shutil.copytree(src, root, symlinks=True)
    return root


def _status(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, Any]:
    code, out, _ = cli(capsys, root, "campaign", "status", CAMPAIGN, "--json", *extra)
    return code, json.loads(out)


def test_forged_status_record_never_decides_the_verdict(
    rejected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's attack: a registered status edited to ACCEPTED and re-sealed, carrying
    the evaluation key. The verdict is recomputed (NOT_ACCEPTED) here, with --base, and
    on a fresh clone; the record is a ``record-mismatch`` in status and campaign verify."""
    root = _copy(rejected, tmp_path)
    code, truth = _status(capsys, root, "--register", "st-1")
    assert code == 1 and truth["verdict"] == "NOT_ACCEPTED"
    assert {c["arm"]: c["claim"] for c in truth["cells"] if not c["baseline"]} == {
        "fast": "NOT_CLEARED"
    }
    code, out, _ = cli(capsys, root, "campaign", "claim", CAMPAIGN, "--condition", "5s",
                       "--arm", "fast", "--register", "cl-1")  # fmt: skip
    assert code == 1
    commit(root, "records")
    code, again = _status(capsys, root)
    assert code == 1 and {(r["bundle"], r["agrees"]) for r in again["records"]} == {
        ("st-1", True),
        ("cl-1", True),
    }
    assert {k: v for k, v in again.items() if k != "records"} == {
        k: v for k, v in truth.items() if k != "records"
    }
    code, result = verify(capsys, root)
    assert code == 0 and result["findings"] == []

    def forge_status(s: dict[str, Any]) -> None:
        s.update(verdict="ACCEPTED", remaining=[])
        for a in s["arms"]:
            a.update(conclusion="qualified", reasons=[])

    def forge_claim(c: dict[str, Any]) -> None:
        c.update(verdict="STANDS", stands=True)

    reseal(root, "st-1", forge_status, entry="status.json")
    reseal(root, "cl-1", forge_claim, entry="claims/5s-fast.json")
    commit(root, "forged records")
    assert cli(capsys, root, "verify")[0] == 0  # the bundles themselves are sealed well
    for extra in ((), ("--base", "main")):
        code, status = _status(capsys, root, *extra)
        assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
        assert status["cells"] == truth["cells"]
        wrong = {r["bundle"]: r for r in status["records"] if r["agrees"] is False}
        assert set(wrong) == {"st-1", "cl-1"}
        assert "says ACCEPTED, but its inputs give NOT_ACCEPTED" in wrong["st-1"]["message"]
        assert "says STANDS, but its inputs give NOT_CLEARED" in wrong["cl-1"]["message"]
        assert any(r.startswith("record-mismatch: record st-1/status.json") for r in
                   status["remaining"])  # fmt: skip
        code, result = verify(capsys, root, *extra)
        assert code == 1
        assert {(f["run"], f["code"]) for f in result["findings"]} == {
            ("st-1", "record-mismatch"),
            ("cl-1", "record-mismatch"),
        }
    code, out, _ = cli(capsys, root, "campaign", "status", CAMPAIGN)
    assert code == 1 and "registered MISMATCH: record-mismatch: record st-1" in out
    assert out.splitlines()[-len(status["remaining"]) - 1] == "NOT_ACCEPTED"
    # A fresh clone recomputes, and finds the same.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert not (clone / ".evstore").exists()
    for extra in ((), ("--base", "origin/main")):
        code, status = _status(capsys, clone, *extra)
        assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
        assert {r["bundle"] for r in status["records"] if r["agrees"] is False} == {
            "st-1",
            "cl-1",
        }
    # The report recomputes too.
    page = tmp_path / "report.html"
    assert cli(capsys, clone, "report", CAMPAIGN, "-o", str(page))[0] in (0, 1)
    html = page.read_text()
    assert "NOT_ACCEPTED" in html and "record-mismatch" in html


def test_forged_record_blocks_an_accepted_campaign(
    honest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registered record that is not what its inputs give is a finding: while it stands
    nothing is ACCEPTED (the ledger holds a false record)."""
    root = _copy(honest, tmp_path)
    code, status = _status(capsys, root)
    assert code == 0 and status["verdict"] == "ACCEPTED"
    code, _, _ = cli(capsys, root, "campaign", "claim", CAMPAIGN, "--condition", "5s",
                       "--arm", "fast", "--register", "cl-1")  # fmt: skip
    assert code == 0
    reseal(root, "cl-1", lambda c: c["speedup"].update(low=0.5), entry="claims/5s-fast.json")
    commit(root, "a claim record altered")
    code, status = _status(capsys, root)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    assert [r["agrees"] for r in status["records"]] == [False]
    assert [c["conclusion"] for c in status["cells"]] == ["qualified", "qualified"]


def test_campaign_verify_resolves_a_subfolder_once(
    honest: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``verify_campaign`` handed a plain subfolder of the repository: the repository is
    found once, by the one rule, and handed to the ledger, the store, the evaluation and
    the evaluation without ``base`` that a record registered without one is held against;
    nothing below walks up again or reads ``evstore.toml`` twice."""
    from helpers.walks import walks_and_reads

    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.verify import verify_campaign

    root = _copy(honest, tmp_path)
    assert _status(capsys, root, "--register", "st-1")[0] == 0
    commit(root, "a status record")
    sub = root / "notes"
    sub.mkdir()
    campaign = load_campaign(root, CAMPAIGN)
    walks, reads = walks_and_reads(monkeypatch)
    result = verify_campaign(sub, campaign, base="main")
    assert (walks, reads) == ([sub], [root])
    assert result.findings == [] and sorted(result.runs) == NAMES
    assert not (sub / ".evstore").exists() and list(sub.iterdir()) == []


def test_backdated_copy_never_evicts_the_honest_run(
    honest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of a candidate run relabelled to the baseline and committed later with a
    committer date of 2001: the honest run, first by ancestry, counts; the copy is the
    duplicate, with or without a base holding the original."""
    root = _copy(honest, tmp_path)
    reseal(root, "c1", lambda r: r.update(name="c1-again", arm="baseline"), new_name="c1-again")
    commit(root, "a back-dated copy", date="2001-01-01T00:00:00Z")
    assert git(root, "log", "-1", "--format=%cI").startswith("2001-01-01")
    for extra in ((), ("--base", "main"), ("--base", "main~1")):
        code, result = verify(capsys, root, *extra)
        assert code == 1
        got = findings(result)
        assert got["c1-again"][0] == "duplicate-run", got
        assert "counts once, as the one first committed ('c1')" in got["c1-again"][1]
        assert sorted(result["runs"]) == NAMES


@pytest.fixture(scope="module")
def signed(
    tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer
) -> tuple[Path, Path]:
    """The ledger's campaign with ``[signing]``: every run signed by the lab's key."""
    from evidencestore.cli import main

    tmp = tmp_path_factory.mktemp("signed")
    assert main(["attest", "keygen", str(tmp / "lab")]) == 0
    text = protocol('[signing]\nkeys = ["keys/lab.pub"]\n')
    root = new_repo(tmp, text, {"keys/lab.pub": tmp / "lab.pub"})
    assert init(root, tmp) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    for arm, name in RUNS:
        assert run(root, video_server, arm, name, "--sign", str(tmp / "lab")) == 0
    commit(root, "runs")
    return root, tmp / "lab"


def _reseal_manifest(root: Path, name: str, change: Any) -> None:
    """Seal bundle ``name`` again with its entries passed through ``change``."""
    from evidencestore._canonical import decode, pretty
    from evidencestore.bundle import make_manifest, seal
    from evidencestore.models import Registration

    path = root / "evidence" / name / "bundle.json"
    reg = decode(path.read_bytes(), Registration)
    entries = change(list(reg.manifest.entries))
    manifest = make_manifest(
        name, entries, created=reg.manifest.metadata.created,
        annotations=reg.manifest.metadata.annotations,
    )  # fmt: skip
    path.write_bytes(pretty(seal(manifest)))


def test_signature_binds_every_entry_of_the_run(
    signed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 8: a signed run's envelope names every entry of its bundle, so an
    entry swapped after signing (another blob, run.json untouched) is
    ``changed-after-signing``, naming the entry."""
    root = _copy(signed[0], tmp_path)
    code, result = verify(capsys, root)
    assert code == 0 and sorted(result["runs"]) == NAMES
    envelope = json.loads((root / "evidence/c1/run.dsse.json").read_text())
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    entries = json.loads((root / "evidence/c1/bundle.json").read_text())["manifest"]["entries"]
    assert [s["name"] for s in statement["subject"]][1:] == sorted(
        f"evidence/c1/{e['path']}"
        for e in entries
        if e["path"] not in ("run.json", "run.dsse.json")
    )

    def swap(entries: list[Any]) -> list[Any]:
        other = next(e for e in entries if e.path == "server/health")
        return [
            type(e)(path=e.path, descriptor=other.descriptor, location=e.location, role=e.role)
            if e.path == "server/v1/models"
            else e
            for e in entries
        ]

    git(root, "reset", "-q", "HEAD~1")  # the runs as registered, before their commit
    _reseal_manifest(root, "c1", swap)
    commit(root, "runs, one entry swapped before committing")
    code, result = verify(capsys, root)
    assert code == 1
    what, message = findings(result)["c1"]
    assert what == "changed-after-signing"
    assert "entry 'server/v1/models' is blake3:" in message and "changed after it was signed" in (
        message
    )
    assert sorted(result["runs"]) == sorted(set(NAMES) - {"c1"})


def test_a_run_signed_in_the_earlier_form_counts_and_is_named(
    signed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run signed before signatures bound the manifest (one subject: run.json) still
    counts, as it did; the protection line names it as binding run.json only."""
    from evidencestore._canonical import pretty
    from evidencestore.dsse import (
        PREDICATE_RUN,
        Statement,
        load_private_key,
        sign_statement,
        subject_of,
    )

    root = _copy(signed[0], tmp_path)
    git(root, "reset", "-q", "HEAD~1")  # the runs as registered, before their commit
    data = (root / "evidence/c2/run.json").read_bytes()
    old = Statement(subject=(subject_of("c2", "run.json", data),), predicate_type=PREDICATE_RUN,
                    predicate={"run": "c2"})  # fmt: skip
    (root / "evidence/c2/run.dsse.json").write_bytes(
        pretty(sign_statement(old, load_private_key(str(signed[1]))))
    )
    reseal(root, "c2", entry="run.dsse.json")
    commit(root, "runs, c2 in the earlier form")
    code, result = verify(capsys, root)
    assert code == 0 and "c2" in result["runs"] and result["findings"] == [], result["findings"]
    assert any(
        line.startswith("runs c2: signed in the earlier form, which binds run.json only")
        for line in result["protection"]
    )


def test_unsigned_set_asides_take_no_effect_in_a_signed_campaign(
    signed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 4: unsigned voids of two signed candidate runs remove nothing (the
    claim is unchanged) and are ``unsigned-set-aside``; a void signed by the pinned key
    takes effect; a withdrawal signed by another key does not."""
    from evidencestore.cli import main

    root = _copy(signed[0], tmp_path)
    before = _claim(capsys, root)
    for run_name in ("c1", "c2"):
        code, _, err = cli(capsys, root, "campaign", "void", CAMPAIGN, "--run", run_name,
                           "--reason", "slow", "--record", f"void-{run_name}")  # fmt: skip
        assert code == 0, err
    assert main(["attest", "keygen", str(tmp_path / "other")]) == 0
    code, _, err = cli(capsys, root, "campaign", "withdraw", CAMPAIGN, "--arm", "fast",
                       "--reason", "x", "--record", "wd", "--sign", str(tmp_path / "other"))  # fmt: skip
    assert code == 0, err
    commit(root, "set-asides nobody pinned signed")
    code, result = verify(capsys, root)
    assert code == 1
    got = findings(result)
    assert {k: v[0] for k, v in got.items()} == {
        "void-c1": "unsigned-set-aside",
        "void-c2": "unsigned-set-aside",
        "wd": "unsigned-set-aside",
    }
    assert "record 'void-c1' is not signed" in got["void-c1"][1]
    assert "register it with `evstore campaign void --sign KEY`" in got["void-c1"][1]
    assert "no signature of its envelope verifies with a key the protocol pins" in got["wd"][1]
    assert sorted(result["runs"]) == NAMES and result["voided"] == []
    assert _claim(capsys, root) == before  # nothing removed: the same claim
    code, _, err = cli(capsys, root, "campaign", "void", CAMPAIGN, "--run", "c3", "--reason",
                       "wrong config", "--record", "void-c3", "--sign", str(signed[1]))  # fmt: skip
    assert code == 0, err
    commit(root, "a signed void")
    code, result = verify(capsys, root)
    assert [v["run"] for v in result["voided"]] == ["c3"]
    assert "c3" not in result["runs"]


def _claim(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, Any]:
    _, out, _ = cli(capsys, root, "campaign", "claim", CAMPAIGN, "--condition", "5s",
                    "--arm", "fast", "--json")  # fmt: skip
    claim: dict[str, Any] = json.loads(out)
    return claim


def _two_candidates(
    tmp: Path, video_server: VideoServer, quality: str = "", accept: str = "every-arm"
) -> Path:
    """Baseline, a candidate about 4x faster ("fast") and one twice as slow as the
    baseline ("slow": rejected, its claim does not clear 1.0). Twice, not equal: with a
    true ratio of 1.0 the load of the machine drifting between the arms' runs alone
    could clear it."""
    from evidencestore.cli import main

    text = protocol() + '[[arm]]\nname = "slow"\nruns = 3\n' + quality
    text = text.replace(f'name = "{CAMPAIGN}"\n', f'name = "{CAMPAIGN}"\naccept = "{accept}"\n', 1)
    root = new_repo(tmp, text)
    assert init(root, tmp) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    for arm, name in [*RUNS, ("slow", "s1"), ("slow", "s2"), ("slow", "s3")]:
        if arm != "slow":
            assert run(root, video_server, arm, name) == 0
            continue
        video_server.latency = 2 * SLOW
        try:
            assert main(["-q", "run", str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml"),
                         "--arm", arm, "--server", video_server.url, "--name", name, "--campaign",
                         CAMPAIGN, "--condition", "5s", "--root", str(root)]) == 0  # fmt: skip
        finally:
            video_server.latency = 0.0
    commit(root, "runs")
    return root


def test_withdrawal_after_results_is_in_the_verdict(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 5: withdrawing the rejected arm after its results turns NOT_ACCEPTED
    into ACCEPTED only with the withdrawal in the verdict line, the status, the report and
    the attestation; the withdrawn arm's verdicts stay visible."""
    from evidencestore.attest import statement_for

    root = _two_candidates(tmp_path, video_server)
    code, status = _status(capsys, root)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED" and status["qualifier"] is None
    assert {a["arm"]: a["conclusion"] for a in status["arms"]}["slow"] == "rejected"
    code, _, err = cli(capsys, root, "campaign", "withdraw", CAMPAIGN, "--arm", "slow",
                       "--reason", "not promising", "--record", "wd-slow")  # fmt: skip
    assert code == 0, err
    commit(root, "withdraw the rejected arm")
    code, status = _status(capsys, root, "--register", "st-after")
    assert code == 0 and status["verdict"] == "ACCEPTED"
    assert status["qualifier"] == "with 1 arm withdrawn after its results"
    [after] = status["set_aside_after_results"]
    assert (
        after["run"] == "wd-slow"
        and "3 run(s) committed before the withdrawal" in (after["message"])
    )
    slow = next(c for c in status["cells"] if c["arm"] == "slow")
    assert slow["conclusion"] == "withdrawn" and slow["claim"] == "NOT_CLEARED"
    assert slow["lossless"] == "PASS" and slow["speedup"]["low"] < 1.0 and slow["runs_done"] == 3
    code, out, _ = cli(capsys, root, "campaign", "status", CAMPAIGN)
    assert "verdict ACCEPTED with 1 arm withdrawn after its results (accept = every-arm)" in out
    assert out.rstrip().splitlines()[-1] == "ACCEPTED with 1 arm withdrawn after its results"
    page = tmp_path / "report.html"
    cli(capsys, root, "report", CAMPAIGN, "-o", str(page))
    assert "ACCEPTED with 1 arm withdrawn after its results" in page.read_text()
    statement = statement_for(root, str(root / "evidence/st-after/status.json"))
    assert statement.predicate["verdict"] == "ACCEPTED with 1 arm withdrawn after its results"


def test_protocol_may_refuse_set_asides_after_results(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """``[quality] set_aside_after_results = "refuse"``: a withdrawal after results takes
    no effect (``set-aside-after-results``): the rejected arm keeps the campaign from
    being accepted."""
    quality = '[quality]\nset_aside_after_results = "refuse"\n'
    root = _two_candidates(tmp_path, video_server, quality)
    code, _, err = cli(capsys, root, "campaign", "withdraw", CAMPAIGN, "--arm", "slow",
                       "--reason", "not promising", "--record", "wd-slow")  # fmt: skip
    assert code == 0, err
    commit(root, "withdraw the rejected arm")
    code, status = _status(capsys, root)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED" and status["qualifier"] is None
    code, result = verify(capsys, root)
    assert code == 1 and findings(result)["wd-slow"][0] == "set-aside-after-results"


def test_any_arm_claims_name_their_family_correction(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 6: under ``any-arm`` with two candidate arms each claim is one of a
    family of 2, stated at Bonferroni's 97.5 % so the family covers at 95 %: the claim
    names it, and its interval is the Welch interval at 97.5 % over its runs' values."""
    from evidencestore.campaign.estimator import welch_log_interval

    root = _two_candidates(tmp_path, video_server, accept="any-arm")
    claim = _claim(capsys, root)
    assert (claim["correction"], claim["family_size"]) == ("bonferroni", 2)
    assert claim["confidence"] == 0.95 and claim["interval_confidence"] == pytest.approx(0.975)
    values = {a: [r["value"] for r in claim["runs"] if r["arm"] == a] for a in ("baseline", "fast")}
    want = welch_log_interval(values["baseline"], values["fast"], 0.975)
    assert (claim["speedup"]["low"], claim["speedup"]["high"]) == pytest.approx(
        (want.low, want.high), rel=1e-12
    )
    code, out, _ = cli(capsys, root, "campaign", "claim", CAMPAIGN, "--condition", "5s",
                       "--arm", "fast")  # fmt: skip
    assert code == 0 and "family-wise over 2 claims (bonferroni: each at 97.5%)" in out
