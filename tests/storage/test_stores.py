import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import fsspec
import pytest

from evidencestore.digest import hash_bytes
from evidencestore.errors import IntegrityError
from evidencestore.storage import (
    BlobStore,
    FsspecBlobStore,
    LocalBlobStore,
    MemoryBlobStore,
    blob_key,
    open_store,
)
from evidencestore.testing.store_suite import BlobStoreSuite


class TestLocalStore(BlobStoreSuite):
    @pytest.fixture
    def store(self, tmp_path: Path) -> BlobStore:
        return LocalBlobStore(tmp_path / "store")

    def corrupt(self, store: BlobStore, digest: str, data: bytes) -> None:
        assert isinstance(store, LocalBlobStore)
        path = store.path_of(digest)
        os.chmod(path, 0o644)
        path.write_bytes(data)


class TestLocalReadOnly(BlobStoreSuite):
    writable = False

    @pytest.fixture
    def store(self, tmp_path: Path) -> BlobStore:
        return LocalBlobStore(tmp_path / "store", read_only=True)

    def seed(self, store: BlobStore, data: bytes) -> str:
        assert isinstance(store, LocalBlobStore)
        return LocalBlobStore(store.root).put(data).digest

    def corrupt(self, store: BlobStore, digest: str, data: bytes) -> None:
        TestLocalStore.corrupt(self, store, digest, data)  # type: ignore[arg-type]


class TestMemoryStore(BlobStoreSuite):
    @pytest.fixture
    def store(self) -> BlobStore:
        return MemoryBlobStore()


class TestFsspecMemoryStore(BlobStoreSuite):
    @pytest.fixture
    def store(self, request: pytest.FixtureRequest) -> BlobStore:
        fs = fsspec.filesystem("memory")
        root = f"/evstore-test-{request.node.name}-{os.getpid()}"
        if fs.exists(root):
            fs.rm(root, recursive=True)
        return open_store(f"memory://{root}")


class TestFsspecFileStore(BlobStoreSuite):
    """The fsspec path with the temporary-key-then-move write (not atomic PUT)."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> BlobStore:
        fs = fsspec.filesystem("file")
        return FsspecBlobStore(str(tmp_path / "fs"), fs=fs)


def test_open_store_dispatch(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path), LocalBlobStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalBlobStore)
    assert isinstance(open_store("memory://x"), FsspecBlobStore)


def test_layout_and_read_only_files(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    desc = store.put(b"layout")
    hexd = desc.digest.split(":")[1]
    path = tmp_path / "blobs" / "blake3" / hexd[:2] / hexd
    assert blob_key(desc.digest) == f"blobs/blake3/{hexd[:2]}/{hexd}"
    assert path.read_bytes() == b"layout"
    assert path.stat().st_mode & 0o222 == 0
    assert not list(path.parent.glob(".tmp-*"))


def test_put_file_changed_while_storing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"a" * 1000)
    store = LocalBlobStore(tmp_path / "store")
    import evidencestore.digest as dg

    real = dg.hash_file

    def hash_then_modify(path: str, expected_size: int | None = None) -> dg.Hashed:
        out = real(path, expected_size)
        Path(path).write_bytes(b"b" * 1000)
        return out

    monkeypatch.setattr(dg, "hash_file", hash_then_modify)
    with pytest.raises(IntegrityError, match="changed while being stored"):
        store.put_file(src)
    assert list(store.iter_digests()) == []
    assert not list(store.upkeep.iter_temporaries())


def _put_many(root: str, seed: int) -> list[str]:
    store = LocalBlobStore(root)
    out = []
    for i in range(40):
        out.append(store.put(f"shared blob {i}".encode() * 500).digest)
        out.append(store.put(f"own blob {seed}-{i}".encode() * 300).digest)
    return out


def test_concurrent_puts_from_processes(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    with ProcessPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_put_many, [root] * 4, range(4)))
    expected = {d for r in results for d in r}
    store = LocalBlobStore(root)
    assert set(store.iter_digests()) == expected
    assert len(expected) == 40 + 4 * 40
    for digest in expected:
        store.verify(digest)
    assert not list(store.upkeep.iter_temporaries())


def test_interrupted_write_leaves_no_visible_blob(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ready = tmp_path / "ready"
    data_len = 5 << 20
    script = textwrap.dedent(
        f"""
        import os, time
        from evidencestore.storage import LocalBlobStore
        real_fsync = os.fsync
        def stall(fd):
            open({str(ready)!r}, "w").close()
            time.sleep(60)
        os.fsync = stall
        LocalBlobStore({str(root)!r}).put(b"z" * {data_len})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, "writer exited early"
            assert time.monotonic() < deadline, "writer never reached fsync"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    store = LocalBlobStore(root)
    digest = hash_bytes(b"z" * data_len).digest
    assert not store.has(digest)
    assert list(store.iter_digests()) == []
    temps = list(store.upkeep.iter_temporaries())
    assert len(temps) == 1  # left for gc, never visible under the final name
    # A rerun completes and verifies.
    store.put(b"z" * data_len)
    store.verify(digest, data_len)


# gc only touches what evstore wrote
def test_non_atomic_backend_temporaries(tmp_path: Path) -> None:
    from fsspec.implementations.local import LocalFileSystem

    base = tmp_path / "remote"
    base.mkdir()
    store = FsspecBlobStore(str(base), fs=LocalFileSystem())
    assert not store.atomic_put
    desc = store.put(b"via a temporary")
    assert (base / blob_key(desc.digest)).read_bytes() == b"via a temporary"
    assert not [p for p in (base / "blobs" / ".tmp").iterdir()]  # cleaned up
    ours = base / "blobs" / ".tmp" / ("0f" * 16)
    ours.write_bytes(b"half")
    (base / "blobs" / ".tmp" / "notes.txt").write_text("not ours")
    (base / "tmp").mkdir()
    (base / "tmp" / ("0f" * 16)).write_text("not ours either")
    assert [k for k, _ in store.upkeep.iter_temporaries()] == [str(ours)]
