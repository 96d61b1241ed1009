"""The one verification pipeline (issue 14): background hashing, many bundles at once.

The forked workers send back only outcomes that differ from the expected digest; the
bundle checks run while they hash; findings still land in their own bundle, in the
order a sorted directory walk gives.
"""

from __future__ import annotations

import os
from pathlib import Path

from helpers.repos import add_bundle, init_repo

from evidencestore.digest import Hashed, NotRegularFileError, hash_bytes, start_hash_files
from evidencestore.errors import IntegrityError
from evidencestore.remotes import local_store
from evidencestore.verify import verify_registration, verify_repository


def test_forked_workers_report_every_outcome_that_differs(tmp_path: Path) -> None:
    paths: list[str] = []
    sizes: list[int | None] = []
    digests: list[str | None] = []
    for i in range(2100):
        data = i.to_bytes(4, "little") * 8
        p = tmp_path / f"f{i:05d}"
        p.write_bytes(data)
        paths.append(str(p))
        sizes.append(len(data))
        digests.append(hash_bytes(data).digest)
    wrong = hash_bytes(b"not it").digest
    digests[7] = wrong  # hashes fine, to something else
    os.remove(paths[100])  # missing
    sizes[2000] = 31  # size disagrees
    os.remove(paths[2001])
    os.mkdir(paths[2001])  # not a regular file
    sizes[5] = None  # no size: the digest is sent back, not assumed
    os.environ.pop("EVSTORE_NO_FORK", None)
    out = start_hash_files(paths, sizes, threads=2, expected_digests=digests).result()
    assert len(out) == 2100
    assert out[7] == Hashed(hash_bytes((7).to_bytes(4, "little") * 8).digest, 32)
    assert isinstance(out[100], FileNotFoundError) and out[100].filename == paths[100]
    assert isinstance(out[2000], IntegrityError)
    assert "size is 32 bytes, expected 31" in str(out[2000])
    assert isinstance(out[2001], NotRegularFileError)
    assert out[5] == Hashed(hash_bytes((5).to_bytes(4, "little") * 8).digest, 32)
    ok = [o for i, o in enumerate(out) if i not in (7, 100, 2000, 2001) and type(o) is Hashed]
    assert len(ok) == 2096
    assert [o.digest for o in ok] == [
        d for i, d in enumerate(digests) if i not in (7, 100, 2000, 2001)
    ]


def test_many_bundles_in_one_run_keep_their_own_findings(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    for b in range(450):  # 2,250 files: the forked path
        add_bundle(root, f"b{b:03d}", {f"d/f{i}.bin": bytes([b % 256, i]) * 40 for i in range(5)})
    (root / "evidence/b007/d/f3.bin").write_bytes(b"x" * 80)  # same size, other bytes
    (root / "evidence/b300/d/f0.bin").unlink()
    (root / "evidence/b449/d/x").mkdir()
    (root / "evidence/b449/d/x/z").write_bytes(b"z")
    (root / "evidence/b449/d/x-y").write_bytes(b"y")
    report = verify_repository(root, store=local_store(root))
    assert not report.ok and report.totals.bundles == 450
    assert report.totals.checked == 450 * 5 - 2
    bad = {r.name: [(f.code, f.path) for f in r.findings] for r in report.bundles if r.findings}
    assert bad == {
        "b007": [("hash-mismatch", "d/f3.bin")],
        "b300": [("missing-file", "d/f0.bin")],
        # as a walk with each directory sorted meets them: d/x/ before d/x-y
        "b449": [("unregistered-file", "d/x/z"), ("unregistered-file", "d/x-y")],
    }
    [one] = [r for r in report.bundles if r.name == "b007"]
    from evidencestore.inventory import load_inventory

    alone = verify_registration(
        root, load_inventory(root).registrations["b007"], store=local_store(root)
    )
    assert alone == one


def test_symlinked_subdirectory_inside_is_followed_and_outside_is_an_escape(
    tmp_path: Path,
) -> None:
    root = init_repo(tmp_path / "repo")
    add_bundle(root, "inner", {"d/f.bin": b"inside"})
    add_bundle(root, "outer", {"d/f.bin": b"outside"})
    moved = root / "moved"
    (root / "evidence/inner/d").rename(moved)
    (root / "evidence/inner/d").symlink_to(moved)
    elsewhere = tmp_path / "elsewhere"
    (root / "evidence/outer/d").rename(elsewhere)
    (root / "evidence/outer/d").symlink_to(elsewhere)
    report = verify_repository(root, store=local_store(root))
    by = {r.name: r for r in report.bundles}
    assert by["inner"].ok and by["inner"].checked == 1
    [f] = by["outer"].findings
    assert f.code == "symlink-escape" and f.path == "d/f.bin"
    assert str(elsewhere) in f.message
