"""The library as users call it (issue 27): create, verify, fetch by digest, read a run,
through the public API of ``evidencestore`` only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import evidencestore as es


@pytest.fixture
def weights_bundle(tmp_path: Path) -> tuple[Path, es.Registration]:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "weights.bin").write_bytes(b"w" * 1000)
    (src / "results.json").write_bytes(b'{"ok": true}\n')
    reg = es.create_bundle(
        root,
        "b1",
        [src / "weights.bin", src / "results.json"],
        store=es.local_store(root),
        external=["*.bin"],
    )
    return root, reg


def _stored(reg: es.Registration) -> es.Descriptor:
    return next(e.descriptor for e in reg.manifest.entries if e.location == "store")


def test_verify_defaults_to_the_repositorys_own_store(
    weights_bundle: tuple[Path, es.Registration],
) -> None:
    root, reg = weights_bundle
    report = es.verify_repository(root)
    assert report.ok and report.totals.checked == 2 and report.totals.unavailable == 0
    assert report.totals.warnings == 0
    assert not [f for b in report.bundles for f in b.findings]
    # the default really reads the store: a corrupt blob is an error
    path = es.local_store(root).path_of(_stored(reg).digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"x" * 1000)
    report = es.verify_repository(root)
    assert not report.ok
    assert [f.code for b in report.bundles for f in b.findings] == ["blob-corrupt"]


def test_check_repository_takes_an_inventory(weights_bundle: tuple[Path, es.Registration]) -> None:
    root, _ = weights_bundle
    inventory = es.load_inventory(root)
    report = es.check_repository(root, inventory=inventory)
    assert report.ok and report.totals.bundles == 1 and report.totals.checked == 2
    # the inventory given is the one verified: an empty one verifies no bundle
    empty = es.Inventory(inventory.root)
    assert es.check_repository(root, inventory=empty).totals.bundles == 0


def test_one_not_found_type_and_one_integrity_type(
    weights_bundle: tuple[Path, es.Registration], memory_url: str
) -> None:
    root, reg = weights_bundle
    blob = _stored(reg)
    absent = es.hash_bytes(b"never stored").digest
    remote = es.open_store(memory_url)  # an fsspec store, as a remote is
    remote.put(b"w" * 1000)
    stores = {
        "local store": es.local_store(root),
        "repository store": es.repository_store(root),
        "fsspec store": remote,
    }
    for label, store in stores.items():
        assert store.get(blob.digest, blob.size) == b"w" * 1000, label
        with pytest.raises(es.NotFoundError):
            store.get(absent)
        # a size mismatch is an integrity failure, whichever store answers
        with pytest.raises(es.IntegrityError) as info:
            store.get(blob.digest, blob.size + 1)
        assert blob.digest in str(info.value), label
        assert not isinstance(info.value, es.NotFoundError), label
    # the blob itself is intact: nothing was damaged by asking
    assert es.local_store(root).get(blob.digest, blob.size) == b"w" * 1000
    # a bundle that is not registered: the same not-found type
    with pytest.raises(es.NotFoundError) as missing:
        es.load_run(root, "no-such-run")
    assert isinstance(missing.value, es.BundleNotFoundError)
    assert isinstance(missing.value, es.ManifestError)  # what it was before, still
    assert "no-such-run" in str(missing.value)
    with pytest.raises(es.ManifestError, match="is not a run"):
        es.load_run(root, "b1")  # there, but not a run: not a not-found


def test_run_and_campaign_apis_are_public() -> None:
    for name in (
        "run_workload",
        "open_run",
        "load_run",
        "RunRecord",
        "diff_runs",
        "init_campaign",
        "load_campaign",
        "make_claim",
        "evaluate",
        "verify_campaign",
        "NotFoundError",
    ):
        assert name in es.__all__, name
        assert getattr(es, name) is not None
    from evidencestore.campaign import make_claim
    from evidencestore.runs import load_run

    assert es.load_run is load_run and es.make_claim is make_claim
