"""The campaign ledger against manipulation, in real git repositories with real runs over
HTTP: a run edited and re-sealed, arms swapped, the protocol amended, the same run under
a second name, runs started before the protocol, a rebased history, a shallow clone, a
renamed registration, a changed server, signed runs; and an honest campaign that still
verifies and is accepted."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")
pytest.importorskip("cryptography")

from helpers.ledger import (
    CAMPAIGN,
    NAMES,
    RUNS,
    claim,
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

from evidencestore.cli import main
from evidencestore.digest import hash_bytes
from evidencestore.runs.recorder import RUN_SIGNATURE
from evidencestore.runs.runner import run_workload
from evidencestore.testing.video_server import VideoServer


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer) -> Path:
    """Protocol committed on main, then three baseline runs and three candidate runs."""
    tmp = tmp_path_factory.mktemp("honest")
    root = new_repo(tmp)
    assert init(root, tmp) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    for arm, name in RUNS:
        assert run(root, video_server, arm, name) == 0
    commit(root, "runs")
    return root


@pytest.fixture
def ledger_copy(honest: Path, tmp_path: Path) -> Path:
    """A copy of the honest campaign (work tree, git history and store) to manipulate."""
    root = tmp_path / "repo"
    shutil.copytree(honest, root, symlinks=True)
    return root


def test_honest_campaign_verifies_and_is_accepted(
    ledger_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = verify(capsys, ledger_copy)
    assert code == 0 and result["findings"] == []
    assert sorted(result["runs"]) == NAMES
    assert (
        "ordering rests on this branch's own history (no base revision)" in result["protection"][0]
    )
    assert "runs: not signed" in result["protection"][1]
    code, result = verify(capsys, ledger_copy, "--base", "main")
    assert code == 0 and result["findings"] == []
    added = git(ledger_copy, "log", "--diff-filter=A", "--format=%H", "--",
                f"evidence/{CAMPAIGN}/bundle.json").split()[-1]  # fmt: skip
    # Named by the protocol's commit, not the ref's spelling or its tip (issue 38).
    assert result["protection"][0] == (
        f"ordering: the protocol's commit {added[:12]} is on the protected branch (the base revision), "
        "and every run comes after it there or on top of it"
    )
    code, out, _ = cli(capsys, ledger_copy, "campaign", "status", CAMPAIGN, "--json")
    status = json.loads(out)
    assert code == 0 and status["verdict"] == "ACCEPTED", status["remaining"]
    assert any("ordering rests on" in n for n in status["notes"])
    c = claim(capsys, ledger_copy)
    assert c["stands"] and (c["n_baseline"], c["n_candidate"]) == (9, 9)
    code, out, _ = cli(capsys, ledger_copy, "campaign", "verify", CAMPAIGN, "--base", "nope")
    assert code == 2


def test_resealed_run_is_excluded_naming_commits(
    ledger_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = git(ledger_copy, "rev-parse", "HEAD").strip()

    def faster(run: dict[str, Any]) -> None:
        for r in run["requests"]:
            r["e2e_s"] = r["e2e_s"] * 0.1

    reseal(ledger_copy, "c1", faster)
    code, out, _ = cli(capsys, ledger_copy, "verify", "--bundle", "c1")
    assert code == 0, out  # the bundle on its own is consistent: only history shows the edit
    edit = commit(ledger_copy, "faster")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    what, message = findings(result)["c1"]
    assert what == "changed-since-commit"
    assert f"first committed in {first[:12]} and changed since in commit(s) {edit[:12]}" in message
    assert "c1" not in result["runs"]
    c = claim(capsys, ledger_copy)
    assert not c["stands"] and c["n_candidate"] == 6
    assert "5s: arm 'fast' has 2 of 3 required complete runs" in c["reasons"]
    # An edit not yet committed is named too.
    reseal(ledger_copy, "b1", lambda r: r.update(started="2001-01-01T00:00:00.000000Z"))
    code, result = verify(capsys, ledger_copy)
    what, message = findings(result)["b1"]
    assert what == "changed-since-commit" and "differs in the working tree" in message


def test_swapped_arms_are_excluded(ledger_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reseal(ledger_copy, "b1", lambda r: r.update(arm="fast"))
    reseal(ledger_copy, "c1", lambda r: r.update(arm="baseline"))
    commit(ledger_copy, "swap the arms")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    got = findings(result)
    assert got["b1"][0] == got["c1"][0] == "changed-since-commit"
    assert sorted(result["runs"]) == ["b2", "b3", "c2", "c3"]
    code, out, _ = cli(capsys, ledger_copy, "campaign", "status", CAMPAIGN, "--json")
    assert code == 1 and json.loads(out)["verdict"] == "NOT_ACCEPTED"


def test_amended_protocol_is_a_finding(
    ledger_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = git(ledger_copy, "log", "--format=%H", "--reverse").split()[0]
    proto = ledger_copy / f"evidence/{CAMPAIGN}/protocol.toml"
    proto.write_text(proto.read_text().replace("min_runs = 3", "min_runs = 2"))
    reseal(ledger_copy, CAMPAIGN, entry="protocol.toml")
    digest = hash_bytes(proto.read_bytes()).digest
    for name in NAMES:
        reseal(ledger_copy, name, lambda r: r.update(protocol_digest=digest))
    amend = commit(ledger_copy, "lower min_runs")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    got = [(f["code"], f["message"]) for f in result["findings"] if f["run"] == ""]
    assert (
        "protocol-changed",
        f"the protocol {CAMPAIGN!r} was first committed in {first[:12]} and changed since in "
        f"commit(s) {amend[:12]}: a registration is never edited; record a new one under a "
        "new name",
    ) in got
    assert {f["code"] for f in result["findings"] if f["run"]} == {"changed-since-commit"}
    code, out, _ = cli(capsys, ledger_copy, "campaign", "status", CAMPAIGN, "--json")
    status = json.loads(out)
    assert code == 1 and any("first committed in" in r for r in status["remaining"])


@pytest.mark.parametrize(
    "edit",
    [
        None,  # the same run.json bytes
        lambda r: r.update(name="c1-again"),
        lambda r: r.update(name="c1-again", started="2031-01-01T00:00:00.000000Z"),
        lambda r: r.update(name="c1-again", arm="baseline"),  # counted for the other arm
    ],
    ids=["same-bytes", "name-edited", "start-faked", "other-arm"],
)
def test_duplicate_run_counts_once(
    ledger_copy: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None] | None,
) -> None:
    reseal(ledger_copy, "c1", edit, new_name="c1-again")
    commit(ledger_copy, "pad the candidate")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    what, message = findings(result)["c1-again"]
    assert what == "duplicate-run"
    assert "is run 'c1' again" in message and "counts once, as the one first committed ('c1')" in (
        message
    )
    assert sorted(result["runs"]) == NAMES
    c = claim(capsys, ledger_copy)
    assert (c["n_baseline"], c["n_candidate"]) == (9, 9)


def test_copied_body_of_a_nondeterministic_request_is_a_duplicate(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A request whose repetitions never gave the same bytes cannot give them to another
    run: a second run holding them (its timings re-written) was copied. A deterministic
    server's identical bodies, unseeded requests included, are not copies."""
    root = new_repo(tmp_path)
    wl = tmp_path / "protocol-src/workloads/5s.toml"
    wl.write_text(wl.read_text().replace("seed = 42\n", ""))
    assert "seed" not in wl.read_text()
    assert init(root, tmp_path) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    assert run(root, video_server, "baseline", "b1") == 0  # the server seeds unseeded requests
    assert run(root, video_server, "baseline", "b2") == 0  # itself: the same bodies, two runs
    original = video_server.render
    video_server.render = lambda f, n: original({**f, "seed": str(n)}, n)  # type: ignore[method-assign]
    try:
        assert run(root, video_server, "fast", "c1") == 0
        assert run(root, video_server, "fast", "c0") == 0  # honest: other bodies
    finally:
        del video_server.render

    def shifted(r: dict[str, Any]) -> None:
        r["name"] = "c2"
        for q in r["requests"]:
            for k in ("sent_ns", "end_ns", "first_byte_ns", "last_byte_ns", "headers_ns"):
                q[k] += 1000

    reseal(root, "c1", shifted, new_name="c2")
    commit(root, "runs")
    code, result = verify(capsys, root)
    assert code == 1
    assert [f["run"] for f in result["findings"]] == ["c2"]
    what, message = findings(result)["c2"]
    assert what == "duplicate-run" and "is run 'c1' again" in message
    assert "the same response body blake3:" in message and "never gave the same body" in message
    assert sorted(result["runs"]) == ["b1", "b2", "c0", "c1"]


def test_run_started_before_the_protocol_commit_is_excluded(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = new_repo(tmp_path)
    assert init(root, tmp_path) == 0
    assert run(root, video_server, "baseline", "early") == 0  # executed before the protocol commit
    later = f"@{int(time.time()) + 3600} +0000"
    protocol_commit = commit(root, "protocol", ".gitignore", f"evidence/{CAMPAIGN}", date=later)
    commit(root, "the early run, committed after", date=later)
    code, result = verify(capsys, root)
    assert code == 1
    what, message = findings(result)["early"]
    assert what == "started-before-protocol"
    assert "before the protocol was committed" in message and protocol_commit[:12] in message


def _reorder_editor(tmp: Path) -> str:
    script = tmp / "reorder.py"
    script.write_text(
        "import sys\n"
        "p = sys.argv[1]\n"
        "picks = [x for x in open(p).read().splitlines() if x.startswith('pick')]\n"
        "open(p, 'w').write('\\n'.join(picks[::-1]) + '\\n')\n"
    )
    return f"{sys.executable} {script}"


def test_rebase_is_caught_by_the_base_anchor(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = new_repo(tmp_path)
    commit(root, "start", ".gitignore")
    assert init(root, tmp_path) == 0
    assert run(root, video_server, "baseline", "r1") == 0
    commit(root, "a run before its protocol", "evidence/r1")
    commit(root, "the protocol")
    code, result = verify(capsys, root)
    assert code == 1 and findings(result)["r1"][0] == "before-protocol"
    # A committer reorders the history (protocol first) and dates it in the past.
    git(root, "checkout", "-q", "-b", "rewritten")
    env_editor = _reorder_editor(tmp_path)
    os.environ["GIT_SEQUENCE_EDITOR"] = env_editor
    try:
        git(root, "rebase", "-q", "-i", "HEAD~2", date="978307200 +0000")
    finally:
        del os.environ["GIT_SEQUENCE_EDITOR"]
    log = git(root, "log", "--format=%s").splitlines()
    assert log[:2] == ["a run before its protocol", "the protocol"]
    code, result = verify(capsys, root)
    assert code == 0, result  # the branch's own history cannot show it ...
    assert "no base revision" in result["protection"][0]
    code, result = verify(capsys, root, "--base", "main")  # ... the protected branch does
    assert code == 1
    got = {f["code"]: f["message"] for f in result["findings"]}
    assert "is not on main" in got["protocol-not-on-base"]
    code, out, _ = cli(capsys, root, "campaign", "verify", CAMPAIGN, "--base", "main")
    assert code == 1 and "protocol-not-on-base" in out and "is not on main" in out
    code, out, _ = cli(capsys, root, "campaign", "status", CAMPAIGN, "--base", "main", "--json")
    status = json.loads(out)
    assert code == 1 and any("is not on main" in r for r in status["remaining"])
    assert any("on the protected branch (the base revision)" in n for n in status["notes"])


def test_shallow_clone_is_named(
    honest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{honest}", str(clone))
    code, result = verify(capsys, clone)
    assert code == 1
    got = [f for f in result["findings"] if f["code"] == "shallow-clone"]
    assert len(got) == 1 and "is a shallow clone" in got[0]["message"]
    assert "git fetch --unshallow" in got[0]["message"]
    runs = {f["run"]: f["message"] for f in result["findings"] if f["run"]}
    assert set(runs) == set(NAMES)
    assert all("shallow clone cuts the history" in m for m in runs.values())
    git(clone, "fetch", "-q", "--unshallow")
    code, result = verify(capsys, clone)
    assert code == 0, result


def test_renamed_registration_is_committed_where_it_appears(
    ledger_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reseal(ledger_copy, "c1", new_name="c1-renamed")
    shutil.rmtree(ledger_copy / "evidence/c1")
    rename = commit(ledger_copy, "rename c1")
    status = git(ledger_copy, "show", "--stat", "-M", "--format=", "HEAD")
    assert "=>" in status  # git records it as a rename
    code, result = verify(capsys, ledger_copy)
    assert code == 0, result
    assert result["runs"]["c1-renamed"] == rename


def test_changed_server_within_an_arm(
    ledger_copy: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    video_server.model = "another-model"
    try:
        assert run(ledger_copy, video_server, "baseline", "b4") == 0
    finally:
        video_server.model = "reference-video"
    commit(ledger_copy, "a fourth baseline run, another server")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    (finding,) = [f for f in result["findings"] if f["code"] == "server-changed"]
    assert finding["run"] == "b4" and finding["arm"] == "baseline"
    assert "model ids [another-model]" in finding["message"]
    assert "model ids [reference-video]" in finding["message"]
    code, out, _ = cli(capsys, ledger_copy, "campaign", "verify", CAMPAIGN)
    assert code == 1 and "  finding   b4: server-changed: arm 'baseline'" in out
    assert "  ok        b4" in out  # counted, but no claim rests on the arm
    c = claim(capsys, ledger_copy)
    assert not c["stands"] and any("different servers" in r for r in c["reasons"])


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("keys")
    for who in ("lab", "other"):
        assert main(["attest", "keygen", str(tmp / who)]) == 0
    return {"lab": tmp / "lab", "other": tmp / "other"}


def test_signed_runs(
    tmp_path: Path,
    video_server: VideoServer,
    keys: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = protocol('[signing]\nkeys = ["keys/lab.pub"]\n')
    root = new_repo(tmp_path, text, {"keys/lab.pub": keys["lab"].with_name("lab.pub")})
    assert init(root, tmp_path) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    lab, other = str(keys["lab"]), str(keys["other"])
    for arm, name in RUNS:
        assert run(root, video_server, arm, name, "--sign", lab) == 0
    # `evstore run` refuses what would not count, before sending anything.
    sent = video_server.requests
    capsys.readouterr()
    assert run(root, video_server, "fast", "unsigned") == 2
    assert "counts only runs signed by one of its keys" in capsys.readouterr().err
    assert run(root, video_server, "fast", "other", "--sign", other) == 2
    assert "is not one campaign 'ledger' allows" in capsys.readouterr().err
    assert video_server.requests == sent
    # The library's pre-flight refuses them too, with the same words, before a server
    # is started or a byte sent (the signing rule is not the CLI's).
    from evidencestore.campaign import campaign_rules
    from evidencestore.campaign.protocol import Campaign
    from evidencestore.dsse import load_private_key
    from evidencestore.errors import CampaignFitError
    from evidencestore.runs.launch import launch_and_run

    wl = str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml")
    common: dict[str, Any] = {"arm": "fast", "server": video_server.url, "condition": "5s",
                              "campaign": campaign_rules(root, CAMPAIGN)}  # fmt: skip
    started = tmp_path / "server-started"
    argv = (sys.executable, "-c", f"open({str(started)!r}, 'w')")
    for key, words in ((None, "counts only runs signed by one of its keys"),
                       (load_private_key(other), "is not one campaign 'ledger' allows")):  # fmt: skip
        with pytest.raises(CampaignFitError, match=words) as refused:
            run_workload(root, wl, name="refused", signing_key=key, **common)
        assert "signing_key" in str(refused.value)  # the library's parameter, not --sign
        with pytest.raises(CampaignFitError, match=words):
            launch_and_run(root, wl, command=argv, name="refused", signing_key=key, **common)
    assert video_server.requests == sent and not started.exists()
    assert not (root / "evidence" / "refused").exists()
    # What a harness that skips the pre-flight (its own recorder) can still register:
    with monkeypatch.context() as skipped:
        skipped.setattr(Campaign, "signer_problem", lambda self, root, key: None)
        run_workload(root, wl, name="unsigned", **common)
        run_workload(root, wl, name="other", signing_key=load_private_key(other), **common)
    run_workload(root, wl, name="edited", signing_key=load_private_key(lab), **common)
    reseal(root, "edited", lambda r: r["requests"][0].update(e2e_s=0.001))  # before committing
    commit(root, "runs")
    code, result = verify(capsys, root)
    assert code == 1
    got = findings(result)
    assert got["unsigned"][0] == "unsigned-run"
    assert "record it with `evstore run --sign KEY`" in got["unsigned"][1]
    assert (
        got["other"][0] == "other-signer" and "which the protocol does not allow" in got["other"][1]
    )
    assert got["edited"][0] == "changed-after-signing"
    assert "the run record changed after it was signed" in got["edited"][1]
    assert sorted(result["runs"]) == NAMES
    assert result["protection"][1] == "runs: signed by a key the protocol pins"
    c = claim(capsys, root)
    assert c["stands"] and c["n_candidate"] == 9
    # The run's envelope is an in-toto statement `attest verify` checks, about c1 only.
    envelope = root / "evidence/c1" / RUN_SIGNATURE
    statement = json.loads(base64.b64decode(json.loads(envelope.read_text())["payload"]))
    assert statement["predicateType"] == "https://evidencestore.dev/attestation/run/v1"
    assert statement["subject"][0]["name"] == "evidence/c1/run.json"
    pub = str(keys["lab"].with_name("lab.pub"))
    code, out, _ = cli(
        capsys, root, "attest", "verify", str(envelope), "--key", pub, "--subject", "c1"
    )
    assert code == 0 and "is about c1 (blake3:" in out
    code, out, _ = cli(
        capsys, root, "attest", "verify", str(envelope), "--key", pub, "--subject", "b1"
    )
    assert code == 1 and "subject 'evidence/c1/run.json' is not part of bundle 'b1'" in out


def test_protocol_registered_under_another_name_is_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`campaign init` refuses it; one registered some other way is named by verify."""
    from evidencestore.bundle import create_bundle
    from evidencestore.config import local_store

    root = new_repo(tmp_path, protocol().replace(f'name = "{CAMPAIGN}"', 'name = "elsewhere"'))
    assert init(root, tmp_path) == 2
    assert "name = 'elsewhere', but the campaign is 'ledger'" in capsys.readouterr().err
    src = tmp_path / "protocol-src"
    create_bundle(
        root, CAMPAIGN, [str(src / "protocol.toml"), str(src / "workloads")],
        store=local_store(root), annotations={"kind": "campaign-protocol", "campaign": CAMPAIGN},
        roles={"protocol.toml": "protocol"},
    )  # fmt: skip
    commit(root, "protocol", ".gitignore", "evidence")
    code, result = verify(capsys, root)
    assert code == 1
    assert [(f["code"], f["message"]) for f in result["findings"]] == [
        (
            "protocol-name",
            "campaign 'ledger': its protocol.toml says name = 'elsewhere'; a protocol is "
            "registered under its own name",
        )
    ]


def test_run_amended_in_place_is_caught_against_the_base(
    ledger_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committer amends the commit that added the runs (an edit no later commit shows):
    the branch's own history cannot tell; the protected branch can."""
    git(ledger_copy, "checkout", "-q", "-b", "amended")
    reseal(ledger_copy, "c1", lambda r: [q.update(e2e_s=q["e2e_s"] * 0.5) for q in r["requests"]])
    git(ledger_copy, "add", "-A", "evidence")
    git(ledger_copy, "commit", "-q", "--amend", "--no-edit")
    code, result = verify(capsys, ledger_copy)
    assert code == 0, result  # unchanged since the first commit this history shows
    code, result = verify(capsys, ledger_copy, "--base", "main")
    assert code == 1
    got = findings(result)
    assert got["c1"][0] == "changed-since-commit"
    assert "differs from its registration on main" in got["c1"][1]
    for name in ("b1", "b2"):
        assert got[name][0] == "history-rewritten"
        assert "which is not on main: the history was rewritten" in got[name][1]
    assert result["runs"] == {}


def test_configuration_differing_within_an_arm_refuses_the_claim(
    ledger_copy: Path, video_server: VideoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The claim's configuration difference stands for every run, not the first only."""
    cfg = tmp_path / "engine.yaml"
    cfg.write_text("offload:\n  resident_layers: 16\n")
    assert run(ledger_copy, video_server, "fast", "c4", "--config", str(cfg)) == 0
    commit(ledger_copy, "a fourth candidate run, another configuration")
    c = claim(capsys, ledger_copy)
    assert not c["stands"]
    assert (
        "arm 'fast': run 'c4' has another configuration than 'c1' (configs/engine.yaml): one "
        "arm is one configuration" in c["reasons"]
    )


def test_deleted_run_is_a_finding(
    ledger_copy: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cherry-picking: a fourth candidate run is made and the first one deleted."""
    assert run(ledger_copy, video_server, "fast", "c4") == 0
    commit(ledger_copy, "another candidate run")
    git(ledger_copy, "rm", "-rq", "evidence/c1")
    deletion = commit(ledger_copy, "drop the slower one")
    code, result = verify(capsys, ledger_copy)
    assert code == 1
    (finding,) = result["findings"]
    assert (finding["run"], finding["code"], finding["arm"]) == ("c1", "deleted-run", "fast")
    assert f"deleted in commit {deletion[:12]}" in finding["message"]
    c = claim(capsys, ledger_copy)
    assert not c["stands"] and any("is never removed" in r for r in c["reasons"])


def test_runs_merged_from_parallel_branches_verify(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The honest workflow: the protocol lands on main, runs arrive in pull requests from
    parallel branches, merged; verified against the protected branch."""
    root = new_repo(tmp_path)
    assert init(root, tmp_path) == 0
    commit(root, "protocol", ".gitignore", "evidence")
    for branch, arm, name in (("pr-1", "baseline", "b1"), ("pr-2", "baseline", "b2"),
                              ("pr-3", "fast", "c1")):  # fmt: skip
        git(root, "checkout", "-q", "-b", branch, "main")
        assert run(root, video_server, arm, name) == 0
        commit(root, f"run {name}")
    git(root, "checkout", "-q", "main")
    for branch in ("pr-1", "pr-2", "pr-3"):
        git(root, "merge", "-q", "--no-ff", "-m", f"merge {branch}", branch)
    code, result = verify(capsys, root, "--base", "main")
    assert code == 0, result
    assert sorted(result["runs"]) == ["b1", "b2", "c1"]
    assert all(commit_id for commit_id in result["runs"].values())
    # A pull request verified against main before it is merged: on top of the base.
    git(root, "checkout", "-q", "-b", "pr-4", "main")
    assert run(root, video_server, "fast", "c2") == 0
    commit(root, "run c2")
    code, result = verify(capsys, root, "--base", "main")
    assert code == 0, result
    assert "c2" in result["runs"]
