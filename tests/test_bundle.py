from pathlib import Path

import pytest
from helpers.repos import add_bundle, make_files

from evidencestore import merkle
from evidencestore.bundle import create_bundle, make_manifest, seal
from evidencestore.digest import hash_bytes
from evidencestore.errors import BundleError
from evidencestore.inventory import load_registration, registration_path
from evidencestore.models import Descriptor, Entry
from evidencestore.remotes import local_store


def _entry(path: str, data: bytes = b"x") -> Entry:
    h = hash_bytes(data)
    return Entry(path=path, descriptor=Descriptor(digest=h.digest, size=h.size), location="repo")


def test_create_bundle_repo_and_store_entries(tmp_path: Path) -> None:
    reg = add_bundle(
        tmp_path,
        "run-1",
        {
            "results/table.csv": b"a,b\n1,2\n",
            "logs/host.log": b"L" * 5000,
            "weights.bin": b"W" * 9000,
        },
        external=("*.bin", "logs/*"),
        refs=("PR-12",),
    )
    by_path = {e.path: e for e in reg.manifest.entries}
    assert list(by_path) == sorted(by_path)
    assert by_path["results/table.csv"].location == "repo"
    assert by_path["results/table.csv"].descriptor.media_type == "text/csv"
    assert by_path["logs/host.log"].location == "store"
    assert by_path["weights.bin"].location == "store"
    bdir = tmp_path / "evidence" / "run-1"
    assert (bdir / "results" / "table.csv").read_bytes() == b"a,b\n1,2\n"
    assert not (bdir / "weights.bin").exists()
    store = local_store(tmp_path)
    assert store.get(by_path["weights.bin"].descriptor.digest) == b"W" * 9000
    assert load_registration(registration_path(tmp_path, "run-1")) == reg
    assert reg.manifest.metadata.references == ("PR-12",)
    assert reg.root == merkle.entries_root(reg.manifest.entries)
    assert reg.digest == merkle.bundle_digest(reg.manifest)


def test_registration_never_overwritten(tmp_path: Path) -> None:
    add_bundle(tmp_path, "b", {"a.txt": b"1"})
    before = registration_path(tmp_path, "b").read_bytes()
    with pytest.raises(BundleError, match="already registered.*immutable"):
        add_bundle(tmp_path, "b", {"a.txt": b"2"})
    assert registration_path(tmp_path, "b").read_bytes() == before


def test_failed_create_leaves_nothing(tmp_path: Path) -> None:
    src = make_files(tmp_path / "in", {"x/a.txt": b"1", "y/a.txt": b"2"})
    with pytest.raises(BundleError, match="would both be entry 'a.txt'"):
        create_bundle(tmp_path, "dup", src, store=local_store(tmp_path))
    assert not (tmp_path / "evidence" / "dup").exists()
    assert [p.name for p in (tmp_path / "evidence").iterdir()] == []


@pytest.mark.parametrize("name", ["", "-x", "a/b", "..", "a b", "x" * 129, "é"])
def test_bad_bundle_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(BundleError, match="invalid bundle name"):
        create_bundle(tmp_path, name, [tmp_path], store=local_store(tmp_path))


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../x", "'..' segment"),
        ("/abs", "absolute"),
        ("a\\b", "backslash"),
        ("a\x00b", "NUL"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("./a", "'.' segment"),
        ("C:/x", "absolute"),
        ("bundle.json", "reserved"),
    ],
)
def test_make_manifest_rejects_paths(path: str, why: str) -> None:
    with pytest.raises(BundleError, match=why):
        make_manifest("b", [_entry(path)], created="2026-01-01T00:00:00Z", producer="t")


def test_make_manifest_rejects_duplicates() -> None:
    with pytest.raises(BundleError, match="duplicate entry path 'a'"):
        make_manifest(
            "b", [_entry("a"), _entry("a", b"y")], created="2026-01-01T00:00:00Z", producer="t"
        )


def test_digest_binds_name_metadata_and_entries() -> None:
    base = make_manifest(
        "b", [_entry("a"), _entry("c")], created="2026-01-01T00:00:00Z", producer="t"
    )
    d0 = seal(base).digest
    renamed = make_manifest("b2", base.entries, created="2026-01-01T00:00:00Z", producer="t")
    later = make_manifest("b", base.entries, created="2026-01-01T00:00:01Z", producer="t")
    other = make_manifest(
        "b", [_entry("a"), _entry("c", b"z")], created="2026-01-01T00:00:00Z", producer="t"
    )
    digests = {d0, seal(renamed).digest, seal(later).digest, seal(other).digest}
    assert len(digests) == 4
    # deterministic
    assert (
        seal(
            make_manifest(
                "b", [_entry("c"), _entry("a")], created="2026-01-01T00:00:00Z", producer="t"
            )
        ).digest
        == d0
    )
