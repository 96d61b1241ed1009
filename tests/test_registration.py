"""The one registration path (bundle.register_bundle) and the repository as an object.

Issue 20's two bugs, through the CLI and the library: a run named ``Foo`` beside ``foo``
(refused like ``bundle create``), and a repository given explicitly that was walked up
again (its blobs went to the outer repository's store). Issue 19's race: the loser of
two runs racing for one name keeps its measurements under a fresh name.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from evidencestore import config as config_module
from evidencestore.bundle import RepoFile, create_bundle, register_bundle, trusted_digest
from evidencestore.campaign.records import claim_records, evaluation_records, register_records
from evidencestore.cli import main
from evidencestore.config import Repository, init_repository, local_store
from evidencestore.errors import BundleError, BundleNameTaken, ConfigError, ManifestError
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import load_run, open_run
from evidencestore.runs.runner import run_workload
from evidencestore.testing import assert_bundle
from evidencestore.testing.video_server import VideoServer, sample_workload
from evidencestore.verify import verify_repository

TINY = {"size": "64x48", "fps": 8}


@pytest.fixture
def wl(tmp_path: Path) -> Path:
    path = tmp_path / "workload.toml"
    path.write_text(sample_workload(seconds=(1,), **TINY))  # type: ignore[arg-type]
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _no_walking_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any attempt to resolve a repository from a path again fail loudly."""

    def refuse(*args: Any, **kwargs: Any) -> Path:
        raise AssertionError(f"find_root called again with {args}: a repository was walked up")

    monkeypatch.setattr(config_module, "find_root", refuse)


def _no_temporary(*args: Any, **kwargs: Any) -> str:
    raise AssertionError("a temporary directory was made")


# -- bug 1: a run bypassed the bundle-name rules ------------------------------------------------
def test_a_run_named_like_a_bundle_but_for_case_is_refused_before_sending(
    tmp_path: Path,
    repo: Path,
    wl: Path,
    fresh_video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "f.txt").write_text("x")
    create_bundle(repo, "foo", [tmp_path / "f.txt"], store=local_store(repo))
    code, _, err = _cli(
        capsys, "run", str(wl), "--arm", "a", "--server", fresh_video_server.url, "--name", "Foo",
        "--root", str(repo),
    )  # fmt: skip
    assert code == 2
    assert "bundle 'Foo': evidence/foo differs only in letter case" in err
    assert fresh_video_server.requests == 0
    assert sorted(p.name for p in (repo / "evidence").iterdir()) == ["foo"]
    with pytest.raises(BundleNameTaken, match="differs only in letter case"):
        open_run(repo, "FOO", arm="a", workload=b"w")
    with pytest.raises(BundleNameTaken, match="differs only in letter case"):
        run_workload(repo, wl, arm="a", server=fresh_video_server.url, name="fOo")
    assert fresh_video_server.requests == 0
    assert verify_repository(repo, store=local_store(repo)).ok


def test_library_callers_get_max_git_file_size(tmp_path: Path, repo: Path) -> None:
    (repo / "evstore.toml").write_text("[bundle]\nmax_git_file_size = 10\n")
    (tmp_path / "big.bin").write_bytes(b"x" * 11)
    (tmp_path / "small.bin").write_bytes(b"x" * 10)
    store = local_store(repo)
    with pytest.raises(BundleError, match=r"1 file would go to git over max_git_file_size = 10"):
        create_bundle(repo, "b", [tmp_path / "big.bin", tmp_path / "small.bin"], store=store)
    assert list((repo / "evidence").iterdir()) == []
    assert list(store.upkeep.iter_blobs()) == []
    # to the store it may go; an explicit limit overrides the configuration
    reg = create_bundle(repo, "b", [tmp_path / "big.bin"], store=store, external=["big.bin"])
    assert [e.location for e in reg.manifest.entries] == ["store"]
    reg = create_bundle(repo, "c", [tmp_path / "big.bin"], store=store, max_git_file_size=None)
    assert [e.location for e in reg.manifest.entries] == ["repo"]
    with pytest.raises(BundleError, match="big.json \\(11 bytes\\)"):
        register_bundle(Repository(repo), "d", files={"big.json": RepoFile(b"y" * 11)})
    assert not (repo / "evidence" / "d").exists()


def test_register_bundle_checks_every_name_before_writing(repo: Path) -> None:
    r = Repository(repo)
    reg = register_bundle(
        r, "mem", files={"a/x.json": RepoFile(b"{}", media_type="application/json", role="r")}
    )
    (entry,) = reg.manifest.entries
    assert (entry.path, entry.location, entry.role, entry.descriptor.size) == (
        "a/x.json", "repo", "r", 2,
    )  # fmt: skip
    assert (repo / "evidence/mem/a/x.json").read_bytes() == b"{}"
    assert_bundle(repo, "mem", store=local_store(repo))
    with pytest.raises(BundleNameTaken, match="already registered"):
        register_bundle(r, "mem", files={"y": RepoFile(b"1")})
    with pytest.raises(BundleError, match="entry names collide"):
        register_bundle(r, "coll", files={"A.txt": RepoFile(b"1"), "a.txt": RepoFile(b"2")})
    with pytest.raises(BundleError, match="'..' segment"):
        register_bundle(r, "dots", files={"../x": RepoFile(b"1")})
    assert sorted(p.name for p in (repo / "evidence").iterdir()) == ["mem"]
    (repo / "evidence" / "plain").write_text("a file where a bundle would go")
    with pytest.raises(BundleNameTaken, match="exists and is not a directory"):
        register_bundle(r, "plain", files={"y": RepoFile(b"1")})


def test_campaign_records_are_registered_from_memory(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidencestore.campaign.models import Claim

    monkeypatch.setattr(tempfile, "mkdtemp", _no_temporary)
    digest = "blake3:" + "0" * 64
    claim = Claim(
        protocol_digest=digest, condition="5s", arm="fast", baseline_arm="base", refused=True,
        reasons=("too few runs",), confidence=0.95,
    )  # fmt: skip
    records = claim_records(claim)
    assert list(records) == ["claims/5s-fast.json"]
    reg = register_records(repo, "recs", records, campaign="c", protocol_digest=digest)
    assert [e.path for e in reg.manifest.entries] == ["claims/5s-fast.json"]
    assert reg.manifest.metadata.annotations == {
        "kind": "campaign-record",
        "campaign": "c",
        "protocol_digest": digest,
    }
    assert_bundle(repo, "recs", store=local_store(repo))
    assert evaluation_records  # the status records are named by the same module


# -- issue 19: two runs racing for one name ------------------------------------------------------
def test_the_loser_of_a_race_for_a_name_keeps_its_measurements(
    tmp_path: Path, repo: Path, wl: Path, fresh_video_server: VideoServer
) -> None:
    (tmp_path / "f.txt").write_text("winner")

    def race(k: int, n: int, record: Any) -> None:
        if k == 1:  # another process registers the name while this run is measured
            create_bundle(repo, "race", [tmp_path / "f.txt"], store=local_store(repo))

    reg, record = run_workload(
        repo, wl, arm="a", server=fresh_video_server.url, name="race", progress=race
    )
    assert record.name == "race-2" == reg.manifest.name
    assert record.outcome == "complete" and record.counts["measured"].requests == 3
    assert load_run(repo, "race-2").requests == record.requests
    assert [
        e.path for e in load_registration(registration_path(repo, "race")).manifest.entries
    ] == ["f.txt"]
    assert verify_repository(repo, store=local_store(repo)).ok
    assert sorted(p.name for p in (repo / "evidence").iterdir()) == ["race", "race-2"]
    harness = open_run(repo, "h", arm="a", workload=b"# w\n")
    assert harness.renamed is None
    create_bundle(repo, "h", [tmp_path / "f.txt"], store=local_store(repo))
    create_bundle(repo, "h-2", [tmp_path / "f.txt"], store=local_store(repo))
    _, record = harness.seal()
    assert record.name == harness.name == "h-3"
    assert harness.renamed == (
        "bundle 'h' was registered by another process while this run was recorded; its "
        "measurements are kept as bundle 'h-3'"
    )


def test_a_race_lost_at_the_rename_is_kept_and_said(
    tmp_path: Path,
    repo: Path,
    wl: Path,
    fresh_video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other process wins between the name check and the rename of the staging
    directory: the rename fails ("Directory not empty") and the run is kept as race-2."""
    import evidencestore.bundle as bundle_module

    (tmp_path / "f.txt").write_text("winner")
    real_seal = bundle_module.seal
    raced: list[str] = []

    def seal_then_lose(manifest: Any) -> Any:
        registration = real_seal(manifest)
        if manifest.name == "race" and not raced:
            raced.append(manifest.name)
            create_bundle(repo, "race", [tmp_path / "f.txt"], store=local_store(repo))
        return registration

    monkeypatch.setattr(bundle_module, "seal", seal_then_lose)
    code, out, err = _cli(
        capsys, "run", str(wl), "--arm", "a", "--server", fresh_video_server.url, "--name", "race",
        "--root", str(repo),
    )  # fmt: skip
    assert raced == ["race"]
    assert code == 0, err
    assert (
        "bundle 'race' was registered by another process while this run was recorded; its "
        "measurements are kept as bundle 'race-2'"
    ) in err
    assert "registered evidence/race-2/" in out
    assert load_run(repo, "race-2").name == "race-2"
    assert sorted(p.name for p in (repo / "evidence").iterdir()) == ["race", "race-2"]
    assert verify_repository(repo, store=local_store(repo)).ok


# -- bug 2: a repository given explicitly was walked up again --------------------------------------
@pytest.fixture
def nested(tmp_path: Path) -> tuple[Path, Path]:
    outer = tmp_path / "outer"
    init_repository(outer)
    new = outer / "sub" / "new"
    new.mkdir(parents=True)
    return outer, new


def _blobs(root: Path) -> int:
    return sum(1 for _ in local_store(Repository(root)).upkeep.iter_blobs())


def test_evstore_root_names_the_repository_through_the_cli(
    nested: tuple[Path, Path],
    wl: Path,
    fresh_video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outer, new = nested
    _no_walking_up(monkeypatch)
    code, out, err = _cli(
        capsys, "run", str(wl), "--arm", "a", "--server", fresh_video_server.url, "--name", "r1",
        "--root", str(new),
    )  # fmt: skip
    assert code == 0, err
    assert (new / "evidence/r1/bundle.json").is_file()
    assert not (outer / "evidence" / "r1").exists()
    assert _blobs(outer) == 0 and _blobs(new) > 0
    code, out, err = _cli(capsys, "verify", "--root", str(new))
    assert code == 0, err
    code, out, err = _cli(capsys, "run", "show", "r1", "--json", "--root", str(new))
    assert code == 0 and '"outcome": "complete"' in out


def test_a_repository_object_is_never_walked_up_by_the_library(
    nested: tuple[Path, Path],
    wl: Path,
    fresh_video_server: VideoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outer, new = nested
    _no_walking_up(monkeypatch)
    r = Repository(new)
    reg, record = run_workload(r, wl, arm="a", server=fresh_video_server.url, name="lib")
    assert record.outcome == "complete"
    assert (new / "evidence/lib/bundle.json").is_file() and _blobs(outer) == 0
    harness = open_run(r, "harness", arm="a", workload=b"# w\n")
    assert harness.store.root == new / ".evstore"
    harness.seal()
    reg = register_records(r, "recs", {"status.json": record}, campaign="c", protocol_digest="x")
    assert reg.manifest.name == "recs" and (new / "evidence/recs/status.json").is_file()
    assert r.local_store().root == new / ".evstore"
    assert trusted_digest(r, "lib") == load_registration(registration_path(new, "lib")).digest
    assert verify_repository(r, store=r.local_store()).ok


def test_trusted_digest_refuses_a_registration_that_disagrees(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    reg = create_bundle(repo, "t", [tmp_path / "f.txt"], store=local_store(repo))
    assert trusted_digest(Repository(repo), "t") == reg.digest
    path = registration_path(repo, "t")
    path.write_text(path.read_text().replace(reg.digest, "blake3:" + "1" * 64))
    with pytest.raises(ManifestError, match="does not match its manifest"):
        trusted_digest(Repository(repo), "t")


def test_init_repository_is_a_library_function(tmp_path: Path) -> None:
    done = init_repository(tmp_path / "a" / "b")
    assert done.wrote_config and done.ignored == (".evstore/", "evstore.local.toml")
    assert (tmp_path / "a/b/evidence").is_dir()
    assert (tmp_path / "a/b/.gitignore").read_text() == ".evstore/\nevstore.local.toml\n"
    again = init_repository(tmp_path / "a" / "b")
    assert (again.wrote_config, again.ignored) == (False, ())
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot initialise"):
        init_repository(tmp_path / "file")


PROTOCOL = """name = "nested"

[timing]
min_runs = 3
confidence = 0.95

[quality]
non_repeatable_baseline = "inconclusive"

[[condition]]
name = "1s"
workload = "workloads/1s.toml"

[[arm]]
name = "base"
baseline = true
runs = 2

[[arm]]
name = "fast"
runs = 1
"""


def test_a_whole_campaign_under_an_explicit_root_never_walks_up(
    tmp_path: Path,
    nested: tuple[Path, Path],
    fresh_video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/architecture.md: a root is resolved once, at the entry point, and nothing
    below walks up again: campaign init, runs, status with its records, report."""
    pytest.importorskip("jinja2")
    outer, new = nested
    src = tmp_path / "p"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/1s.toml").write_text(sample_workload(seconds=(1,), **TINY))  # type: ignore[arg-type]
    (src / "protocol.toml").write_text(PROTOCOL)
    _no_walking_up(monkeypatch)
    root = ("--root", str(new))
    with monkeypatch.context() as m:  # the protocol bundle is registered from memory too
        m.setattr(tempfile, "mkdtemp", _no_temporary)
        code, _, err = _cli(
            capsys, "campaign", "init", "nested", "--protocol", str(src / "protocol.toml"), *root
        )
    assert code == 0, err
    protocol = load_registration(registration_path(new, "nested")).manifest
    assert [(e.path, e.role) for e in protocol.entries] == [
        ("protocol.toml", "protocol"),
        ("workloads/1s.toml", None),
    ]
    wl = str(new / "evidence/nested/workloads/1s.toml")
    for arm, name in (("base", "b1"), ("base", "b2"), ("fast", "f1")):
        code, _, err = _cli(
            capsys, "-q", "run", wl, "--arm", arm, "--server", fresh_video_server.url, "--name", name,
            "--campaign", "nested", "--condition", "1s", *root,
        )  # fmt: skip
        assert code == 0, err
    code, out, err = _cli(
        capsys, "campaign", "status", "nested", "--register", "st", "--json", *root
    )
    assert code in (0, 1), err
    assert json.loads(out)["kind"] == "evidencestore/campaign-status"
    code, _, err = _cli(capsys, "report", "st", "-o", str(tmp_path / "st.html"), *root)
    assert code == 0, err
    code, _, err = _cli(capsys, "verify", *root)
    assert code == 0, err
    assert sorted(p.name for p in (new / "evidence").iterdir()) == [
        "b1",
        "b2",
        "f1",
        "nested",
        "st",
    ]
    assert list((outer / "evidence").iterdir()) == [] and _blobs(outer) == 0
    reg = load_registration(registration_path(new, "st"))
    assert "status.json" in {e.path for e in reg.manifest.entries}


def _racer(root: str, name: str, tag: str, barrier: Any) -> str:
    run = open_run(root, name, arm=tag, workload=b"# racing\n")
    from evidencestore.runs.transport import Observation

    seen = Observation(
        sent_ns=1, first_byte_ns=2, last_byte_ns=3, end_ns=4, status=200, media_type="text/plain"
    )
    run.record_request(seen, phase="measured", payload=tag.encode(), body=f"of {tag}".encode())
    barrier.wait()
    _, record = run.seal()
    return record.name


def test_runs_racing_for_one_name_in_processes_all_keep_their_measurements(repo: Path) -> None:
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    racers = 4
    with ctx.Manager() as manager, ctx.Pool(racers) as pool:
        for round_ in range(5):
            name = f"round{round_}"
            barrier = manager.Barrier(racers)
            names = pool.starmap(
                _racer, [(str(repo), name, f"arm{i}", barrier) for i in range(racers)]
            )
            assert sorted(names) == [name] + [f"{name}-{k}" for k in range(2, racers + 1)]
            arms = {load_run(repo, n).arm for n in names}
            assert arms == {f"arm{i}" for i in range(racers)}  # every racer's run is kept
    leftovers = [p.name for p in (repo / "evidence").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert verify_repository(repo, store=local_store(repo)).ok
