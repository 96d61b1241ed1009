"""Byte-level progress of streamed fetches on a terminal; nothing on a non-terminal (issue 12)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from helpers.repos import add_bundle

import evidencestore.storage.transfer as transfer
from evidencestore import _steps
from evidencestore.cli import main
from evidencestore.remotes import pull

BLOB = bytes(range(256)) * 4096  # 1 MiB


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    add_bundle(root, "p", {"ext/big.bin": BLOB, "r.txt": b"r"}, external=("ext/*",))
    assert main(["remote", "add", "m", str(tmp_path / "remote"), "--root", str(root)]) == 0
    assert main(["push", "--root", str(root)]) == 0
    shutil.rmtree(root / ".evstore")
    return root


def test_a_single_streamed_blob_moves_the_line_before_it_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path)
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)  # stream the 1 MiB blob
    seen: list[str] = []

    def at(point: str) -> None:
        # Deterministic pause point: every byte is in the temporary, none published yet.
        if point == "fetch-written":
            for bar in list(transfer._active_bars):
                bar.render()
            seen.append(term.getvalue())

    monkeypatch.setattr(_steps, "_observer", at)
    term = Terminal()
    summary = pull(root, progress=term)
    assert summary.transferred == 1 and summary.bytes == len(BLOB)
    [mid] = seen
    assert mid.rsplit("\r", 1)[-1] == "pull: 0/1 blobs, 1.0/1.0 MiB"  # bytes before the blob
    assert term.getvalue().endswith("\r\x1b[K")  # the line is cleared at the end
    assert not transfer._active_bars and not transfer._inflight


def test_nothing_on_a_non_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(tmp_path)
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)
    stream = io.StringIO()
    assert pull(root, progress=stream).transferred == 1
    assert stream.getvalue() == "" and not transfer._active_bars


def test_a_single_large_push_moves_the_line_part_by_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    import fsspec

    from evidencestore.remotes import push

    big = bytes(range(256)) * (48 << 10)  # 12 MiB: three of fsspec's 4 MiB blocks
    root = tmp_path / "repo"
    add_bundle(root, "p", {"ext/big.bin": big, "r.txt": b"r"}, external=("ext/*",))
    base = f"/progress-{uuid.uuid4().hex}"
    assert main(["remote", "add", "m", f"memory://{base}", "--root", str(root)]) == 0
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)  # the upload_file path
    lines: list[str] = []
    real_sent = transfer.Progress.sent

    def sent(self: transfer.Progress, key: str, nbytes: int) -> None:
        real_sent(self, key, nbytes)
        self.render()  # deterministic: redraw at each part instead of on the ticker
        lines.append(term.getvalue().rsplit("\r", 1)[-1])

    monkeypatch.setattr(transfer.Progress, "sent", sent)
    term = Terminal()
    try:
        summary = push(root, remote="m", progress=term)
    finally:
        fsspec.filesystem("memory").rm(base, recursive=True)
    assert summary.transferred == 1
    assert lines[:3] == [
        "push m: 0/1 blobs, 4.0/12.0 MiB",
        "push m: 0/1 blobs, 8.0/12.0 MiB",
        "push m: 0/1 blobs, 12.0/12.0 MiB",
    ]
    assert term.getvalue().endswith("\r\x1b[K")


def test_bundle_create_reports_bytes_hashed_then_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from evidencestore.digest import hash_bytes

    big = bytes(range(256)) * (40 << 10)  # 10 MiB
    src = tmp_path / "src"
    src.mkdir()
    (src / "clip.bin").write_bytes(big)
    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    lines: list[str] = []
    real_sent = transfer.Progress.sent

    def sent(self: transfer.Progress, key: str, nbytes: int) -> None:
        real_sent(self, key, nbytes)
        self.render()  # deterministic: redraw at each chunk instead of on the ticker
        lines.append(term.getvalue().rsplit("\r", 1)[-1])

    monkeypatch.setattr(transfer.Progress, "sent", sent)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    code = main(["bundle", "create", "b", str(src), "--external", "*.bin", "--root", str(root)])
    assert code == 0
    assert len(lines) >= 3  # several chunks while hashing, then the store
    assert lines[0].startswith("bundle create b (hash, store): 0/1 blobs, ")
    assert lines[-1] == "bundle create b (hash, store): 0/1 blobs, 20.0/20.0 MiB"
    assert term.getvalue().endswith("\r\x1b[K")
    from evidencestore.remotes import local_store

    assert local_store(root).get(hash_bytes(big).digest) == big
    # Not a terminal: nothing is drawn.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    lines.clear()
    assert main(["bundle", "create", "c", str(src), "--external", "*", "--root", str(root)]) == 0
    assert lines == []


def test_quiet_silences_the_transfer_line_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evstore -q pull` on a terminal draws no progress line; without -q it does (the
    control), with items done of total."""
    import sys

    root = _repo(tmp_path)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["-q", "pull", "--root", str(root)]) == 0
    assert "blobs" not in term.getvalue()
    shutil.rmtree(root / ".evstore")
    assert main(["pull", "--root", str(root)]) == 0
    assert "1/1 blobs" in term.getvalue()
