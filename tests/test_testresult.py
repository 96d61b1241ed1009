"""Verdicts as in-toto test-result statements: made by ``evstore attest --predicate
test-result`` over the legacy corpus (whose verdicts are known) and over verdicts made
here for real (an INCONCLUSIVE media comparison, a NOT_ACCEPTED campaign), validated by the
``in-toto-attestation`` package's own protobuf models (outside evstore), and refused by
``attest verify`` when the signed result, tests or subjects are not what the evidence
gives."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

pytest.importorskip("securesystemslib")
pytest.importorskip("in_toto_attestation")

import google.protobuf.json_format as pb_json
from helpers.paths import DATA
from helpers.remotes import run
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement as InTotoStatement

from evidencestore._canonical import decode
from evidencestore.campaign.models import StatusRecord
from evidencestore.dsse import Statement, load_private_key, sign_statement
from evidencestore.media.records import Verdict
from evidencestore.testresult import PREDICATE_TEST_RESULT, RESULTS

LEGACY = DATA / "legacy_corpus" / "repo"
EV = "evidence"


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the legacy corpus (no blob store: its store entries are unavailable),
    and a key pair."""
    repo = tmp_path / "repo"
    shutil.copytree(LEGACY, repo)
    assert run("attest", "keygen", str(tmp_path / "k"))[0] == 0
    return repo, tmp_path / "k", tmp_path / "k.pub"


def _attest(repo: Path, target: str, key: Path, out: Path) -> dict[str, Any]:
    code, _, err = run(
        "attest", target, "--key", str(key), "--predicate", "test-result", "-o", str(out),
        "--root", str(repo),
    )  # fmt: skip
    assert code == 0, err
    statement: dict[str, Any] = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))
    return statement


def _verify(repo: Path, envelope: Path, pub: Path, subject: str) -> tuple[int, str]:
    code, out, err = run(
        "attest", "verify", str(envelope), "--key", str(pub), "--subject", subject,
        "--root", str(repo),
    )  # fmt: skip
    return code, out + err


def in_toto_validate(statement: dict[str, Any]) -> test_result_pb2.TestResult:  # type: ignore[name-defined]
    """The in-toto-attestation package's validation: the Statement v1 proto (every subject
    a resource descriptor with a digest), then the test-result v0 predicate parsed
    strictly (an unknown field is an error) and each configuration descriptor valid."""
    pb = pb_json.ParseDict(statement, statement_pb2.Statement())  # type: ignore[attr-defined]
    InTotoStatement.copy_from_pb(pb).validate()
    assert pb.predicate_type == "https://in-toto.io/attestation/test-result/v0.1"
    predicate = pb_json.ParseDict(statement["predicate"], test_result_pb2.TestResult())  # type: ignore[attr-defined]
    assert predicate.result in ("PASSED", "WARNED", "FAILED")
    for rd in predicate.configuration:
        ResourceDescriptor.copy_from_pb(rd).validate()
        assert len(rd.digest) > 0
    for subject in pb.subject:
        assert len(subject.digest["sha256"]) == 64 and len(subject.digest["blake3"]) == 64
    return predicate


def test_the_mapping_covers_every_verdict() -> None:
    assert RESULTS == {
        "PASS": "PASSED", "ACCEPTED": "PASSED",
        "INCONCLUSIVE": "WARNED", "UNAVAILABLE": "WARNED",
        "FAIL": "FAILED", "NOT_ACCEPTED": "FAILED",
    }  # fmt: skip
    status_verdicts = get_args(get_type_hints(StatusRecord)["verdict"])
    assert set(get_args(Verdict)) | set(status_verdicts) == set(RESULTS)


def test_each_verdict_kind_validates_with_in_toto_attestation(
    corpus: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, key, pub = corpus
    records = repo / EV / "media-records" / "records"
    comparison = json.loads((records / "comparison.json").read_bytes())
    status = json.loads((repo / EV / "status-fox" / "status.json").read_bytes())
    run_b1 = json.loads((repo / EV / "b1" / "run.json").read_bytes())
    # target, the verdict the evidence holds (read here, apart from evstore), its subjects
    cases = [
        ("b1", run_b1["outcome"] == "complete" and "PASS", [f"{EV}/b1/bundle.json", f"{EV}/b1/run.json"]),
        ("status-fox", status["verdict"], [f"{EV}/status-fox/bundle.json", f"{EV}/status-fox/status.json"]),
        (str(records / "comparison.json"), comparison["verdict"], [f"{EV}/media-records/records/comparison.json"]),
        (str(records / "check.json"), json.loads((records / "check.json").read_bytes())["verdict"], None),
        ("single", "PASS", [f"{EV}/single/bundle.json"]),
        ("ltx-5s-lossless", "UNAVAILABLE", [f"{EV}/ltx-5s-lossless/bundle.json"]),
    ]  # fmt: skip
    assert [c[1] for c in cases] == ["PASS", "ACCEPTED", "FAIL", "PASS", "PASS", "UNAVAILABLE"]
    for i, (target, verdict, subjects) in enumerate(cases):
        out = tmp_path / f"{i}.att.json"
        statement = _attest(repo, target, key, out)
        predicate = in_toto_validate(statement)
        assert predicate.result == RESULTS[verdict], target
        if subjects is not None:
            assert [s["name"] for s in statement["subject"]] == subjects
        code, text = _verify(repo, out, pub, target)
        assert code == 0, text
        assert f"predicate {PREDICATE_TEST_RESULT} ({RESULTS[verdict]})" in text
    # What the tests name: cells, requests and audits, checks, entries.
    campaign = _attest(repo, "status-fox", key, tmp_path / "s.json")["predicate"]
    assert campaign["passedTests"] == ["5s/baseline", "5s/fast"]
    assert campaign["warnedTests"] == ["5s/abandoned"]  # withdrawn: neither passed nor failed
    names = {c["name"] for c in campaign["configuration"]}
    assert names == {"protocol of campaign fox", "workload 5s"}
    assert {"name": "protocol of campaign fox", "digest": {"blake3": status["protocol_digest"][7:]}} in campaign["configuration"]  # fmt: skip
    run_pred = _attest(repo, "b1", key, tmp_path / "r.json")["predicate"]
    assert run_pred["passedTests"][:3] == ["outcome complete", "measured/0", "measured/1"]
    assert {"name": "workload", "digest": {"blake3": run_b1["workload_digest"][7:]}, "mediaType": "application/toml"} in run_pred["configuration"]  # fmt: skip
    cmp_pred = _attest(repo, str(records / "comparison.json"), key, tmp_path / "c.json")[
        "predicate"
    ]
    failed = [c["name"] for c in comparison["threshold_checks"] if not c["ok"]]
    assert cmp_pred["failedTests"] == [f"threshold/{n}" for n in failed] and failed
    ltx = _attest(repo, "ltx-5s-lossless", key, tmp_path / "l.json")["predicate"]
    reg = json.loads((repo / EV / "ltx-5s-lossless" / "bundle.json").read_bytes())
    stored = sorted(e["path"] for e in reg["manifest"]["entries"] if e["location"] == "store")
    assert stored and ltx["warnedTests"] == stored  # unavailable here: not checked, not failed


def test_a_failed_verification_and_an_invalid_run(
    corpus: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, key, _pub = corpus
    (repo / EV / "single" / "only.txt").write_bytes(b"changed\n")
    statement = _attest(repo, "single", key, tmp_path / "a.json")
    assert in_toto_validate(statement).result == "FAILED"
    assert statement["predicate"]["failedTests"] == ["only.txt"]
    # A run that ended partial, one request failed: its validity is FAILED.
    run_b1 = json.loads((repo / EV / "b1" / "run.json").read_bytes())
    run_b1["outcome"] = "partial"
    run_b1["requests"][1]["failure"] = "timeout"
    notes = repo / "notes"
    notes.mkdir()
    (notes / "partial.json").write_text(json.dumps(run_b1))
    statement = _attest(repo, str(notes / "partial.json"), key, tmp_path / "p.json")
    assert in_toto_validate(statement).result == "FAILED"
    assert statement["predicate"]["failedTests"] == ["outcome partial", "measured/1"]
    # A record that states no verdict.
    code, _, err = run(
        "attest", str(repo / EV / "claim-fox-fast" / "claims" / "5s-fast.json"), "--key",
        str(key), "--predicate", "test-result", "--root", str(repo),
    )  # fmt: skip
    assert code == 2 and "states no verdict (evidencestore/campaign-claim)" in err


def _forge(statement: dict[str, Any], key: Path, out: Path, **predicate: Any) -> None:
    """Sign ``statement`` with its predicate changed: a valid signature over a lie."""
    forged = decode(json.dumps(statement).encode(), Statement)
    forged = Statement(
        subject=forged.subject,
        predicate_type=forged.predicate_type,
        predicate={**forged.predicate, **predicate},
    )
    out.write_bytes(
        json.dumps(json.loads(_pretty(sign_statement(forged, load_private_key(key))))).encode()
    )


def _pretty(obj: Any) -> bytes:
    from evidencestore._canonical import pretty

    return pretty(obj)


def test_a_signed_statement_that_is_not_the_verdict_is_refused(
    corpus: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, key, pub = corpus
    target = str(repo / EV / "media-records" / "records" / "comparison.json")
    statement = _attest(repo, target, key, tmp_path / "ok.json")
    assert statement["predicate"]["result"] == "FAILED"
    # The wrong mapping: FAIL stated as PASSED, signed with the right key.
    _forge(statement, key, tmp_path / "passed.json", result="PASSED")
    code, out = _verify(repo, tmp_path / "passed.json", pub, target)
    assert code == 1 and "REFUSED" in out
    assert "result 'PASSED': the evidence gives 'FAILED' (comparison verdict FAIL)" in out
    # UNAVAILABLE is WARNED, never PASSED.
    ltx = _attest(repo, "ltx-5s-lossless", key, tmp_path / "ltx.json")
    _forge(ltx, key, tmp_path / "ltx-passed.json", result="PASSED")
    code, out = _verify(repo, tmp_path / "ltx-passed.json", pub, "ltx-5s-lossless")
    assert code == 1 and "the evidence gives 'WARNED' (verify verdict UNAVAILABLE)" in out
    # A failed check moved to the passed tests.
    failed = statement["predicate"]["failedTests"]
    _forge(
        statement, key, tmp_path / "moved.json",
        failedTests=failed[1:], passedTests=[*statement["predicate"]["passedTests"], failed[0]],
    )  # fmt: skip
    code, out = _verify(repo, tmp_path / "moved.json", pub, target)
    assert code == 1 and f"passedTests differ from what the evidence gives: stated but not given [{failed[0]!r}]" in out  # fmt: skip
    # A field in-toto's predicate does not have.
    _forge(statement, key, tmp_path / "extra.json", verdict="PASS")
    code, out = _verify(repo, tmp_path / "extra.json", pub, target)
    assert code == 1 and "predicate fields verdict are not in the recomputed verdict" in out
    with pytest.raises(pb_json.ParseError):  # and in-toto's strict parse refuses it too
        in_toto_validate({**statement, "predicate": {**statement["predicate"], "verdict": "PASS"}})
    # The record changed after signing: its subject no longer hashes, and the verdict moved.
    data = Path(target).read_bytes()
    Path(target).write_bytes(data.replace(b'"verdict": "FAIL"', b'"verdict": "PASS"', 1))
    code, out = _verify(repo, tmp_path / "ok.json", pub, target)
    assert code == 1 and "the bytes in the working tree hash to" in out
    assert "the evidence gives 'PASSED' (comparison verdict PASS)" in out
    # A statement about another bundle.
    _attest(repo, "single", key, tmp_path / "single.json")
    code, out = _verify(repo, tmp_path / "single.json", pub, "b1")
    assert code == 1 and "subject 'evidence/single/bundle.json' is not part of bundle 'b1'" in out


def test_an_inconclusive_comparison_is_warned(
    corpus: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A real INCONCLUSIVE comparison (``evstore media compare``: two valid lossless clips,
    one luma bit apart in one frame, within every threshold) is stated WARNED: the
    unequal stream warned, nothing failed; PASSED over it is refused."""
    from helpers.media import clip, lossless, nudge_frame

    repo, key, pub = corpus
    media = tmp_path / "media"
    media.mkdir()
    ref = clip(media, "ref.mkv", video=lossless())
    cand = clip(media, "cand.mkv", video=lossless(), video_hook=nudge_frame(3))
    (media / "expect.toml").write_text("[video]\nwidth = 64\nheight = 64\nframes = 15\n")
    record = repo / "notes" / "cmp.json"
    record.parent.mkdir()
    code, out, err = run(
        "media", "compare", ref, cand, "--expect", str(media / "expect.toml"), "--record",
        str(record),
    )  # fmt: skip
    assert code == 3 and json.loads(record.read_bytes())["verdict"] == "INCONCLUSIVE", out + err
    statement = _attest(repo, str(record), key, tmp_path / "c.json")
    predicate = in_toto_validate(statement)
    assert predicate.result == "WARNED" and not predicate.failed_tests
    assert [t for t in predicate.warned_tests if t.startswith("equality/")] == list(
        predicate.warned_tests
    ) and predicate.warned_tests  # only the unequal stream is warned
    assert any(t.startswith("threshold/") for t in predicate.passed_tests)
    assert statement["subject"][0]["name"] == "notes/cmp.json"
    code, text = _verify(repo, tmp_path / "c.json", pub, str(record))
    assert code == 0 and f"predicate {PREDICATE_TEST_RESULT} (WARNED)" in text, text
    # Negative control: the same statement claiming PASSED, validly signed.
    _forge(statement, key, tmp_path / "passed.json", result="PASSED")
    code, text = _verify(repo, tmp_path / "passed.json", pub, str(record))
    assert code == 1 and "the evidence gives 'WARNED' (comparison verdict INCONCLUSIVE)" in text


def test_a_not_accepted_campaign_is_failed(
    video_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real NOT_ACCEPTED campaign (runs over HTTP against the reference video server,
    the candidate about 4x faster under a protocol asking for 50x), its status
    registered by ``campaign status --register``, is stated FAILED: the rejected cell
    failed, the baseline passed; PASSED over it is refused."""
    pytest.importorskip("av")
    from helpers.accepted_campaign import CAMPAIGN, REJECTING, accepted_campaign

    repo = accepted_campaign(tmp_path, video_server, REJECTING)
    code, out, err = run("campaign", "status", CAMPAIGN, "--json", "--register", "st", "--root",
                         str(repo))  # fmt: skip
    assert code == 1 and json.loads(out)["verdict"] == "NOT_ACCEPTED", err
    assert run("attest", "keygen", str(tmp_path / "k"))[0] == 0
    key, pub = tmp_path / "k", tmp_path / "k.pub"
    statement = _attest(repo, "st", key, tmp_path / "s.json")
    predicate = in_toto_validate(statement)
    assert predicate.result == "FAILED"
    assert list(predicate.failed_tests) == ["5s/fast"]
    assert list(predicate.passed_tests) == ["5s/baseline"]
    names = {c.name for c in predicate.configuration}
    assert names == {f"protocol of campaign {CAMPAIGN}", "workload 5s"}
    assert [s["name"] for s in statement["subject"]][:2] == [
        f"{EV}/st/bundle.json", f"{EV}/st/status.json",
    ]  # fmt: skip
    code, text = _verify(repo, tmp_path / "s.json", pub, "st")
    assert code == 0 and f"predicate {PREDICATE_TEST_RESULT} (FAILED)" in text, text
    _forge(statement, key, tmp_path / "passed.json", result="PASSED")
    code, text = _verify(repo, tmp_path / "passed.json", pub, "st")
    assert code == 1 and "the evidence gives 'FAILED' (campaign verdict NOT_ACCEPTED)" in text
