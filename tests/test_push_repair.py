"""`evstore push --repair` against a real S3 protocol server (moto): a corrupted and a
truncated object on the remote are replaced, verified, and the finding names the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.remotes import blobs, digest_of, make_repo, run, set_remotes

from evidencestore.cli import main
from evidencestore.errors import TransferError
from evidencestore.inventory import load_inventory
from evidencestore.remotes import push, verify_remote
from evidencestore.storage import blob_key
from evidencestore.testing.s3 import s3_options

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")


def _client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def pushed(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "repo"
    files = blobs(6, size=3000)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/ev", "options": s3_options(s3_endpoint)})
    code, _, err = run("push", "--root", str(root))
    assert code == 0, err
    return root, files


def _damage(endpoint: str, bucket: str, files: dict[str, bytes]) -> tuple[str, str, str, str]:
    """Flip a byte of one object (same size) and truncate another; return their paths
    and digests."""
    (p_flip, flip), (p_cut, cut) = list(files.items())[:2]
    client = _client(endpoint)
    flipped = bytes([flip[0] ^ 1]) + flip[1:]
    client.put_object(Bucket=bucket, Key=f"ev/{blob_key(digest_of(flip))}", Body=flipped)
    client.put_object(Bucket=bucket, Key=f"ev/{blob_key(digest_of(cut))}", Body=cut[:1000])
    return p_flip, digest_of(flip), p_cut, digest_of(cut)


def _object(endpoint: str, bucket: str, digest: str) -> bytes:
    body = _client(endpoint).get_object(Bucket=bucket, Key=f"ev/{blob_key(digest)}")["Body"]
    return body.read()  # type: ignore[no-any-return]


def test_push_repair_replaces_corrupt_and_truncated_objects(
    pushed: tuple[Path, dict[str, bytes]],
    s3_endpoint: str,
    s3_bucket: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, files = pushed
    p_flip, d_flip, p_cut, d_cut = _damage(s3_endpoint, s3_bucket, files)

    # verify --deep finds both, and each finding says what to run
    capsys.readouterr()
    code = main(["verify", "--remote", "s3", "--deep", "--json", "--root", str(root)])
    out = capsys.readouterr().out
    assert code == 1
    found = {f["path"]: f for b in json.loads(out)["bundles"] for f in b["findings"]}
    assert found[p_flip]["code"] == "remote-corrupt"
    assert found[p_cut]["code"] == "remote-size-mismatch"
    for path in (p_flip, p_cut):
        assert "`evstore push --repair --remote s3`" in found[path]["message"], found[path]

    # a plain push replaces the copy of the wrong size; the same-size corrupt one needs
    # --repair (only a repair reads every copy back)
    summary = push(root)
    assert (summary.transferred, summary.present, summary.repaired) == (1, 5, 1)
    assert _object(s3_endpoint, s3_bucket, d_cut) == files[p_cut]
    assert _object(s3_endpoint, s3_bucket, d_flip) != files[p_flip]
    regs = load_inventory(root).registrations
    assert [(f.code, f.path) for f in verify_remote(root, regs, "s3", deep=True)["run1"]] == [
        ("remote-corrupt", p_flip)
    ]

    _damage(s3_endpoint, s3_bucket, files)  # both again
    code, out, err = run("push", "--repair", "--root", str(root))
    assert code == 0, err
    assert "2 of 6 blobs transferred (2 replacing a corrupt copy)" in out
    assert "4 already present" in out
    assert _object(s3_endpoint, s3_bucket, d_flip) == files[p_flip]
    assert _object(s3_endpoint, s3_bucket, d_cut) == files[p_cut]
    assert verify_remote(root, regs, "s3", deep=True) == {"run1": []}
    assert run("verify", "--remote", "s3", "--deep", "--root", str(root))[0] == 0

    # nothing left to repair: a second repair reads every copy and uploads nothing
    code, out, _ = run("push", "--repair", "--json", "--root", str(root))
    assert code == 0
    assert {k: json.loads(out)[k] for k in ("transferred", "present", "repaired", "failures")} == {
        "transferred": 0,
        "present": 6,
        "repaired": 0,
        "failures": [],
    }


def test_push_repair_never_uploads_a_corrupt_local_copy(
    pushed: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str
) -> None:
    from helpers.remotes import blob_path, overwrite

    from evidencestore.config import local_store

    root, files = pushed
    p_flip, d_flip, _, _ = _damage(s3_endpoint, s3_bucket, files)
    local = blob_path(local_store(root).root, d_flip)
    overwrite(local, b"\x00" * len(files[p_flip]))  # the local copy is corrupt too
    with pytest.raises(TransferError) as info:
        push(root, repair=True)
    text = str(info.value)
    assert "refusing to push a corrupt blob" in text and d_flip in text
    summary = info.value.summary
    assert summary is not None and summary.repaired == 1  # the truncated one, from intact bytes
    assert _object(s3_endpoint, s3_bucket, d_flip) != b"\x00" * len(files[p_flip])


def test_push_repair_on_a_directory_remote(tmp_path: Path) -> None:
    from helpers.remotes import blob_path, overwrite

    root = tmp_path / "repo"
    files = blobs(3, size=500)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, mirror={"url": str(remote)})
    assert push(root).transferred == 3
    d1, d2 = list(files.values())[:2]
    overwrite(blob_path(remote, d1), bytes(500))  # same size, other bytes
    overwrite(blob_path(remote, d2), d2[:10])  # truncated
    summary = push(root, repair=True)
    assert (summary.transferred, summary.repaired, summary.present) == (2, 2, 1)
    assert blob_path(remote, d1).read_bytes() == d1
    assert blob_path(remote, d2).read_bytes() == d2
    regs = load_inventory(root).registrations
    assert verify_remote(root, regs, "mirror", deep=True) == {"run1": []}
