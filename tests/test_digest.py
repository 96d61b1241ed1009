import io
import os
import subprocess
from pathlib import Path

import pytest
from blake3 import blake3
from helpers.fresh import rerun_fresh

from evidencestore import digest as dg
from evidencestore.errors import IntegrityError, InvalidDigestError

# BLAKE3 of the empty input, from the BLAKE3 specification's test vectors.
EMPTY = "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"


def test_hash_bytes_known_vector() -> None:
    assert dg.hash_bytes(b"") == (EMPTY, 0)
    assert dg.hash_bytes(b"abc").digest == "blake3:" + blake3(b"abc").hexdigest()


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "blake3:",
        "blake3:" + "g" * 64,
        "BLAKE3:" + "0" * 64,
        "blake3:" + "0" * 63,
        "sha256:" + "0" * 64,
        "blake3:" + "0" * 64 + "\n",
    ],
)
def test_parse_digest_rejects(bad: str) -> None:
    with pytest.raises(InvalidDigestError, match="expected 'blake3:' followed by 64 lowercase hex"):
        dg.parse_digest(bad)
    assert not dg.is_digest(bad)


def test_digest_hex() -> None:
    assert dg.digest_hex(EMPTY) == EMPTY[7:]


@pytest.mark.parametrize("size", [0, 1, 1023, 1 << 20, (8 << 20) + 7, (16 << 20) + 1])
def test_hash_file_all_paths(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    expected = dg.hash_bytes(data)
    assert dg.hash_file(path) == expected
    assert dg.hash_file(path, size) == expected
    assert dg.hash_stream(io.BytesIO(data)) == expected


def test_hash_file_size_checked_first(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(b"x" * 10)
    with pytest.raises(IntegrityError, match=r"short.bin: size is 10 bytes, expected 11"):
        dg.hash_file(path, 11)


def test_hash_files_outcomes_in_order(tmp_path: Path) -> None:
    paths, expected = [], []
    for i in range(40):
        p = tmp_path / f"f{i}"
        data = os.urandom(100_000 + i)
        p.write_bytes(data)
        paths.append(str(p))
        expected.append(dg.hash_bytes(data))
    sizes: list[int | None] = [h.size for h in expected]
    sizes[3] = 5  # wrong size: reported, not hashed
    paths[7] = str(tmp_path / "missing")
    out = dg.hash_files(paths, sizes, threads=2)
    assert isinstance(out[3], IntegrityError) and "expected 5" in str(out[3])
    assert isinstance(out[7], FileNotFoundError)
    for i, o in enumerate(out):
        if i not in (3, 7):
            assert o == expected[i]
    single = dg.hash_files(paths, sizes, threads=1)
    assert [o for o in single if isinstance(o, dg.Hashed)] == [
        o for o in out if isinstance(o, dg.Hashed)
    ]


def test_matches_b3sum_when_installed(tmp_path: Path) -> None:
    exe = "/usr/bin/b3sum"
    if not os.path.exists(exe):
        pytest.skip("b3sum not installed")
    path = tmp_path / "x"
    path.write_bytes(os.urandom(3_000_000))
    out = subprocess.run([exe, str(path)], capture_output=True, text=True, check=True).stdout
    assert dg.hash_file(path).digest == "blake3:" + out.split()[0]


def test_forked_small_file_path_matches_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    from evidencestore._fork import can_fork

    if not can_fork():  # an earlier test's thread lives on: hash forked in a fresh process
        return rerun_fresh(request)
    n = dg._FORK_MIN_FILES + 10
    paths = []
    for i in range(n):
        p = tmp_path / f"s{i}"
        p.write_bytes(i.to_bytes(4, "little") * 100)
        paths.append(str(p))
    sizes: list[int | None] = [400] * n
    sizes[1] = 3
    paths[2] = str(tmp_path / "absent")
    (tmp_path / "dir").mkdir()
    paths[5] = str(tmp_path / "dir")
    os.symlink(paths[0], tmp_path / "link")
    paths[9] = str(tmp_path / "link")
    forked = dg.hash_files(paths, sizes, threads=2, follow_symlinks=False)
    monkeypatch.setenv("EVSTORE_NO_FORK", "1")
    serial = dg.hash_files(paths, sizes, threads=2, follow_symlinks=False)

    def norm(o: object) -> object:
        return o if isinstance(o, dg.Hashed) else (type(o), str(o))

    assert [norm(o) for o in forked] == [norm(o) for o in serial]
    assert isinstance(forked[1], IntegrityError) and "expected 3" in str(forked[1])
    assert isinstance(forked[2], FileNotFoundError)
    assert isinstance(forked[5], dg.NotRegularFileError)
    assert isinstance(forked[9], OSError) and forked[9].errno == __import__("errno").ELOOP
    assert forked[7] == dg.hash_bytes((7).to_bytes(4, "little") * 100)


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(dg.NotRegularFileError, match="not a regular file"):
        dg.hash_file(fifo)


def test_digest_from_hex_round_trips_with_digest_hex() -> None:
    hashed = dg.hash_bytes(b"evidence")
    hex_digits = dg.digest_hex(hashed.digest)
    assert len(hex_digits) == 64
    assert dg.digest_from_hex(hex_digits) == hashed.digest
    assert dg.is_digest(dg.digest_from_hex(dg.new_hasher().hexdigest()))
