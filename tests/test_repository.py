"""The evidence repository is resolved once, by one rule, and handed down."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.remotes import blobs, make_repo, run, set_remotes

import evidencestore.config as config_module
from evidencestore.config import Repository, as_repository, find_root
from evidencestore.remotes import pull, push
from evidencestore.verify import verify_repository


def test_as_repository_is_the_one_rule(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    sub = root / "evidence" / "run1"
    repo = as_repository(sub)
    assert repo.root == root == find_root(sub)
    assert as_repository(repo) is repo  # a resolved repository is handed back as it is
    assert os.fspath(repo) == str(repo) == str(root)
    assert repo / "evidence" == root / "evidence"
    # a path that is no repository, nor inside one, is its own root
    plain = tmp_path / "plain"
    plain.mkdir()
    assert as_repository(plain).root == plain


def test_configuration_is_read_once(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    repo = Repository(root)
    first = repo.config
    (root / "evstore.toml").write_text("[store]\npath = 'elsewhere'\n")
    assert repo.config is first
    assert Repository(root).config.store.path == "elsewhere"  # a new resolution reads it


def test_nothing_below_the_entry_point_walks_up_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    data = blobs(3)
    make_repo(root, data)
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    repo = Repository(root)
    assert repo.config.remotes  # read before the guards go in

    def no_walk(*_: object, **__: object) -> Path:
        raise AssertionError("find_root called below the entry point")

    def no_read(*_: object, **__: object) -> object:
        raise AssertionError("evstore.toml read again below the entry point")

    monkeypatch.setattr(config_module, "find_root", no_walk)
    monkeypatch.setattr(config_module, "load_config", no_read)
    assert push(repo).transferred == 3
    for blob in (root / ".evstore" / "blobs").rglob("*"):
        if blob.is_file():
            blob.unlink()
    assert pull(repo).transferred == 3
    report = verify_repository(repo, store=repo.local_store(), require_available=True)
    assert report.totals.errors == 0 and report.totals.bundles == 1


def test_cli_takes_root_as_given(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    inner = root / "notes"
    inner.mkdir()
    # --root names the repository root itself: a directory inside one is not walked up from
    code, out, _ = run("verify", "--root", str(inner))
    assert code == 1
    assert f"{inner}" in out and "no evidence directory" in out
    code, out, _ = run("verify", "--root", str(root))
    assert code == 0 and "1 bundle, 2 entries" in out


def test_a_library_root_is_resolved_by_the_one_rule(tmp_path: Path) -> None:
    """Every documented library function takes a plain path as the CLI takes the current
    directory: a plain subfolder is its repository, for bundles, records and runs alike
    (they used to register under the subfolder while its blobs went to the parent's
    store); a Repository names its root exactly."""
    from evidencestore.bundle import create_bundle
    from evidencestore.campaign.records import register_records
    from evidencestore.inventory import registration_path
    from evidencestore.runs import load_run, open_run

    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    sub = root / "notes"
    sub.mkdir()
    (tmp_path / "f.bin").write_bytes(b"x" * 100)
    store = Repository(root).local_store()
    create_bundle(sub, "b", [tmp_path / "f.bin"], external=["*.bin"], store=store)
    run = open_run(sub, "r", arm="a", workload=b"# w\n")
    assert run.store.root == store.root
    _, record = run.seal()
    register_records(sub, "recs", {"run.json": record}, campaign="c", protocol_digest="x")
    for name in ("b", "r", "recs"):
        assert registration_path(root, name).is_file(), name
    assert list(sub.iterdir()) == []  # nothing under the subfolder
    assert load_run(sub, "r") == record
    assert verify_repository(root, store=store).ok
    # named exactly, the subfolder is a root of its own
    own = Repository(sub)
    open_run(own, "mine", arm="a", workload=b"# w\n").seal()
    assert registration_path(sub, "mine").is_file() and (sub / ".evstore").is_dir()
