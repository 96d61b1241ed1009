"""``bundle create --link hardlink|reflink|copy`` into the local store (issue 12, item 10)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.digest import hash_bytes
from evidencestore.errors import IntegrityError
from evidencestore.storage import LocalBlobStore

DATA = b"weights" * 1000


def _create(root: Path, link: str | None) -> Path:
    src = root / "in" / "w.bin"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(DATA)
    argv = ["bundle", "create", "b", str(src), "--external", "*.bin", "--root", str(root)]
    assert main(argv + (["--link", link] if link else [])) == 0
    return src


@pytest.mark.parametrize("link", [None, "copy", "reflink"])
def test_copies_are_independent_of_the_source(tmp_path: Path, link: str | None) -> None:
    src = _create(tmp_path, link)
    blob = local_store(tmp_path).path_of(hash_bytes(DATA).digest)
    assert blob.read_bytes() == DATA
    assert os.stat(blob).st_ino != os.stat(src).st_ino  # a clone or copy, never a link
    assert main(["verify", "--root", str(tmp_path)]) == 0


def test_hardlink_shares_the_inode_and_verify_catches_edits(tmp_path: Path) -> None:
    src = _create(tmp_path, "hardlink")
    blob = local_store(tmp_path).path_of(hash_bytes(DATA).digest)
    assert os.stat(blob).st_ino == os.stat(src).st_ino
    assert os.stat(src).st_mode & 0o222 == 0  # made read-only, as every blob is
    assert main(["verify", "--root", str(tmp_path)]) == 0
    os.chmod(src, 0o644)
    with open(src, "r+b") as fh:  # an in-place edit of the linked file
        fh.write(b"X")
    assert main(["verify", "--root", str(tmp_path)]) == 1


def test_a_linked_file_is_hashed_where_it_lands(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "s", link="hardlink")
    src = tmp_path / "f"
    src.write_bytes(b"abc")
    with pytest.raises(IntegrityError, match="changed while being stored"):
        store._write_file(hash_bytes(b"abd").digest, str(src), 3)  # as if it changed after hashing
    assert (
        list((tmp_path / "s").rglob("*.tmp-*")) == []
        and store.size(hash_bytes(b"abd").digest) is None
    )
    with pytest.raises(ValueError, match="link must be one of"):
        LocalBlobStore(tmp_path / "s", link="symlink")  # type: ignore[arg-type]
