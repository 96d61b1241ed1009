"""Remotes on a local directory and ``memory://``: configuration, push / pull / fetch /
cat, the read-through store, corrupt copies, and remote verification."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from helpers import paths
from helpers.cli import cli
from helpers.remotes import (
    blob_files,
    blob_path,
    blobs,
    digest_of,
    lease_files,
    make_repo,
    overwrite,
    run,
    set_remotes,
    store_files,
)

from evidencestore.cli import main
from evidencestore.config import load_config
from evidencestore.errors import BlobNotFoundError, IntegrityError
from evidencestore.inventory import load_inventory
from evidencestore.remotes import (
    ReadThroughStore,
    configured_remotes,
    local_store,
    repository_store,
    verify_remote,
)
from evidencestore.storage import LocalBlobStore, blob_key
from evidencestore.storage._fsspec import FsspecBlobStore
from evidencestore.testing.s3 import s3_options

ABSENT = "blake3:" + "7" * 64


@pytest.fixture
def five_blob_repo(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "repo"
    files = blobs(5)
    make_repo(root, files)
    return root, files


def _local(root: Path) -> Path:
    return local_store(root).root


# -- configuration -------------------------------------------------------------------
def test_remote_add_list_remove(tmp_path: Path) -> None:
    root = str(tmp_path)
    code, out, err = run(
        "remote", "add", "origin", "s3://bkt/prefix",
        "--option", "endpoint_url=http://127.0.0.1:1",
        "--option", "client_kwargs.region_name=us-east-1",
        "--option", "anon=false",
        "--root", root,
    )  # fmt: skip
    assert code == 0, err
    assert "remote 'origin' -> s3://bkt/prefix" in out
    code, _, err = run("remote", "add", "mirror", "../mirror", "--read-only", "--root", root)
    assert code == 0, err
    config = load_config(tmp_path)
    assert list(config.remotes) == ["origin", "mirror"]
    assert config.remotes["origin"].options == {
        "endpoint_url": "http://127.0.0.1:1",
        "client_kwargs": {"region_name": "us-east-1"},
        "anon": False,
    }
    assert config.remotes["mirror"].read_only
    code, out, _ = run("remote", "list", "--root", root)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("origin\ts3://bkt/prefix\t")
    assert "client_kwargs.region_name=us-east-1" in lines[0]
    assert lines[1] == "mirror\t../mirror (read-only)"

    code, _, err = run("remote", "add", "origin", "s3://other", "--root", root)
    assert code == 2 and "remote 'origin' already exists (s3://bkt/prefix)" in err
    code, _, err = run("remote", "add", "origin", "s3://other", "--force", "--root", root)
    assert code == 0 and load_config(tmp_path).remotes["origin"].url == "s3://other"
    assert list(load_config(tmp_path).remotes) == ["origin", "mirror"]

    code, _, _ = run("remote", "remove", "origin", "--root", root)
    assert code == 0 and list(load_config(tmp_path).remotes) == ["mirror"]
    code, _, err = run("remote", "remove", "origin", "--root", root)
    assert code == 2 and "unknown remote 'origin' (remotes: 'mirror')" in err


@pytest.mark.parametrize(
    "option", ["key=AKIAXXXX", "secret=s", "client_kwargs.aws_secret_access_key=s", "token=t"]
)
def test_remote_add_refuses_credentials(tmp_path: Path, option: str) -> None:
    code, _, err = run(
        "remote", "add", "origin", "s3://bkt", "--option", option, "--root", str(tmp_path)
    )
    assert code == 2
    assert "would store a credential in evstore.toml" in err
    assert not (tmp_path / "evstore.toml").exists()


@pytest.mark.parametrize("name", ["-x", "a b", "", "x" * 65, "a/b"])
def test_remote_add_refuses_bad_names(tmp_path: Path, name: str) -> None:
    # "--" so that argparse takes "-x" as the name, not as an option.
    code, _, err = run("remote", "add", "--root", str(tmp_path), "--", name, "s3://bkt")
    assert code == 2
    assert f"remote {name!r}: a remote name is 1 to 64 letters, digits" in err
    assert not (tmp_path / "evstore.toml").exists()


def test_bad_option_syntax(tmp_path: Path) -> None:
    code, _, err = run(
        "remote", "add", "o", "s3://bkt", "--option", "novalue", "--root", str(tmp_path)
    )
    assert code == 2 and "expected KEY=VALUE" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[remotes\n", "not valid TOML"),
        ('[remotes.o]\nurl = "s3://b"\noptions = { secret = "x" }\n', "would store a credential"),
        ('[remotes.o]\nurl = "s3://b"\nbogus = 1\n', "bogus"),
        ('[remotes.o]\nurl = "s3://b"\nattempts = 0\n', "attempts"),
        ('[remotes."bad name"]\nurl = "s3://b"\n', "remote name"),
    ],
)
def test_unreadable_configuration(
    five_blob_repo: tuple[Path, dict[str, bytes]], text: str, message: str
) -> None:
    root, _ = five_blob_repo
    (root / "evstore.toml").write_text(text)
    for argv in (["push"], ["pull"], ["fetch", ABSENT], ["remote", "list"], ["gc"]):
        code, _, err = run(*argv, "--root", str(root))
        assert code == 2, argv
        assert err.startswith("evstore: error: ") and message in err, err
        assert "Traceback" not in err


def test_unknown_remote_name(five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, _ = five_blob_repo
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    for argv in (
        ["push", "--remote", "nope"],
        ["pull", "--remote", "nope"],
        ["fetch", ABSENT, "--remote", "nope"],
        ["cat", ABSENT, "--remote", "nope"],
        ["gc", "--remote", "nope"],
    ):
        code, _, err = run(*argv, "--root", str(root))
        assert code == 2, argv
        assert "unknown remote 'nope' (remotes: 'origin')" in err


@pytest.mark.parametrize("bad", ["blake3:XYZ", "sha256:" + "0" * 64, "blake3:" + "A" * 64, "nope"])
def test_malformed_digest(five_blob_repo: tuple[Path, dict[str, bytes]], bad: str) -> None:
    root, _ = five_blob_repo
    for argv in (["fetch", bad], ["cat", bad], ["fetch", ABSENT, bad]):
        code, _, err = run(*argv, "--root", str(root))
        assert code == 2
        assert "invalid digest" in err and "expected 'blake3:' followed by 64" in err
    assert not (_local(root) / "blobs" / "blake3" / "77").exists()


def test_unknown_digest_names_every_place(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, _ = five_blob_repo
    set_remotes(root, a={"url": str(tmp_path / "a")}, b={"url": str(tmp_path / "b")})
    code, _, err = run("fetch", ABSENT, "--root", str(root))
    assert code == 2
    assert f"{ABSENT} could not be fetched" in err
    assert f"local store ({_local(root)}): absent" in err
    assert f"remote 'a' ({tmp_path / 'a'}): absent" in err
    assert f"remote 'b' ({tmp_path / 'b'}): absent" in err
    assert err.index("remote 'a'") < err.index("remote 'b'")


def test_no_remote_configured(five_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, _ = five_blob_repo
    code, _, err = run("push", "--root", str(root))
    assert code == 2 and "no writable remote configured" in err
    local_store(root).delete(digest_of(next(iter(five_blob_repo[1].values()))))
    code, _, err = run("pull", "--root", str(root))
    assert code == 2 and "no remote is configured" in err


# -- push / pull on a local directory remote -----------------------------------------
def test_push_then_pull_local_directory(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = five_blob_repo
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "push remote 'origin': 5 of 5 blobs transferred" in out
    assert "0 already present" in out
    # Exactly the store entries, byte for byte, read-only, nothing else left behind
    # but the push's one lease (what gc keeps while the push's bundle is not visible).
    expected = sorted(blob_path(remote, data) for data in files.values())
    assert blob_files(remote) == expected
    [lease] = lease_files(remote)
    assert sorted(json.loads(lease.read_text())["digests"]) == sorted(
        digest_of(d) for d in files.values()
    )
    for data in files.values():
        assert blob_path(remote, data).read_bytes() == data

    code, out, _ = run("push", "--root", str(root))
    assert code == 0 and "0 of 5 blobs transferred" in out and "5 already present" in out

    for path in store_files(_local(root)):
        os.unlink(path)
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "pull remotes: 5 of 5 blobs transferred" in out
    cache = local_store(root)
    for data in files.values():
        assert cache.get(digest_of(data), len(data)) == data
    code, out, _ = run("pull", "--root", str(root))
    assert code == 0 and "0 of 5 blobs transferred" in out


def test_push_and_pull_selected_bundles(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first, second = blobs(2, seed="one"), blobs(3, seed="two")
    make_repo(root, first, "one")
    make_repo(root, second, "two")
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    code, out, err = run("push", "two", "--root", str(root))
    assert code == 0, err
    assert "3 of 3 blobs transferred" in out
    assert blob_files(remote) == sorted(blob_path(remote, d) for d in second.values())
    code, _, err = run("push", "three", "--root", str(root))
    assert code == 2 and "no registered bundle named 'three'" in err


def test_push_refuses_corrupt_local_blob(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = five_blob_repo
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    victim = next(iter(files.values()))
    overwrite(blob_path(_local(root), victim), b"X" * len(victim))
    code, _out, err = run("push", "--root", str(root))
    assert code == 2
    assert "4 of 5 blobs transferred" in err and "1 FAILED" in err
    assert (
        f"refusing to push a corrupt blob: local store ({_local(root)}): {digest_of(victim)}" in err
    )
    assert "content hashes to blake3:" in err
    assert not blob_path(remote, victim).exists()
    assert len(blob_files(remote)) == 4


def test_push_to_read_only_remote(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, _ = five_blob_repo
    set_remotes(root, mirror={"url": str(tmp_path / "m"), "read_only": True})
    code, _, err = run("push", "--remote", "mirror", "--root", str(root))
    assert code == 2 and "remote 'mirror'" in err and "is read-only" in err
    code, _, err = run("push", "--root", str(root))
    assert code == 2 and "no writable remote" in err


def test_memory_remote(five_blob_repo: tuple[Path, dict[str, bytes]], memory_url: str) -> None:
    root, files = five_blob_repo
    set_remotes(root, mem={"url": memory_url})
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    fs = fsspec.filesystem("memory")
    base = memory_url.removeprefix("memory://")
    for data in files.values():
        assert fs.cat_file(f"{base}/{blob_key(digest_of(data))}") == data
    for path in store_files(_local(root)):
        os.unlink(path)
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "5 of 5 blobs transferred" in out


# -- fetch / cat ---------------------------------------------------------------------
def test_fetch_and_cat(
    five_blob_repo: tuple[Path, dict[str, bytes]],
    tmp_path: Path,
    capfdbinary: pytest.CaptureFixture[bytes],
) -> None:
    root, files = five_blob_repo
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    assert run("push", "--root", str(root))[0] == 0
    for path in store_files(_local(root)):
        os.unlink(path)
    datas = list(files.values())
    one = digest_of(datas[0])
    out_file = tmp_path / "out" / "blob.bin"
    code, _out, err = run("fetch", one, "-o", str(out_file), "--root", str(root))
    assert code == 0, err
    assert out_file.read_bytes() == datas[0]
    assert blob_path(_local(root), one).read_bytes() == datas[0]  # cached
    out_dir = tmp_path / "many"
    out_dir.mkdir()
    digests = [digest_of(d) for d in datas[1:3]]
    code, _out, err = run("fetch", *digests, "-o", str(out_dir), "--root", str(root))
    assert code == 0, err
    for digest, data in zip(digests, datas[1:3], strict=True):
        assert (out_dir / digest.removeprefix("blake3:")).read_bytes() == data
    capfdbinary.readouterr()
    assert main(["cat", digest_of(datas[3]), "--root", str(root)]) == 0
    assert capfdbinary.readouterr().out == datas[3]
    assert blob_path(_local(root), datas[3]).read_bytes() == datas[3]


def test_fetch_without_remote_reverifies_local_copy(
    five_blob_repo: tuple[Path, dict[str, bytes]],
) -> None:
    root, files = five_blob_repo
    data = next(iter(files.values()))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 0 and "1 already present" in err
    overwrite(blob_path(_local(root), data), b"Y" * len(data))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 2 and "no remote is configured" in err


# -- corrupt copies on a remote ------------------------------------------------------
CORRUPTIONS = {
    "changed": lambda data: data[:-1] + bytes([data[-1] ^ 1]),
    "truncated": lambda data: data[: len(data) // 2],
    "extended": lambda data: data + b"extra",
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corrupt_remote_copy_refused_next_remote_tried(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path, how: str
) -> None:
    root, files = five_blob_repo
    bad, good = tmp_path / "bad", tmp_path / "good"
    set_remotes(root, good={"url": str(good)})
    assert run("push", "--root", str(root))[0] == 0
    set_remotes(root, bad={"url": str(bad)})
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    digest = digest_of(data)
    corrupted = CORRUPTIONS[how](data)
    overwrite(blob_path(bad, digest), corrupted)
    for path in store_files(_local(root)):
        os.unlink(path)

    # Only the corrupt remote: refused, named, nothing cached.
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert f"remote 'bad' ({bad}): {digest}:" in err
    if how == "changed":
        observed = digest_of(corrupted)
        assert f"content hashes to {observed} ({len(data)} bytes), expected {digest}" in err
    elif how == "extended":  # never read past one byte more than expected
        assert f"holds more than the expected {len(data)} bytes; refused" in err
    else:
        assert f"{len(corrupted)} bytes, expected {len(data)}" in err
    assert store_files(_local(root)) == []

    # The read-through store says the same, and caches nothing either.
    with pytest.raises(IntegrityError, match=f"remote 'bad'.*{digest}"):
        repository_store(root).get(digest, len(data))
    assert store_files(_local(root)) == []

    # With a good remote after it: the next one is tried and its copy cached.
    set_remotes(root, bad={"url": str(bad)}, good={"url": str(good)})
    store = repository_store(root)
    assert store.get(digest, len(data)) == data
    assert blob_path(_local(root), digest).read_bytes() == data
    assert blob_path(bad, digest).read_bytes() == corrupted  # remotes are never repaired silently


def test_read_through_store(five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = five_blob_repo
    first, second = tmp_path / "first", tmp_path / "second"
    datas = list(files.values())
    LocalBlobStore(first).put(datas[0])
    LocalBlobStore(second).put(datas[1])
    for path in store_files(_local(root)):
        os.unlink(path)
    set_remotes(root, first={"url": str(first)}, second={"url": str(second)})
    store = repository_store(root)
    assert isinstance(store, ReadThroughStore)
    assert [r.name for r in store.remotes] == ["first", "second"]
    assert store.fetch(digest_of(datas[0]), len(datas[0])) == "first"
    assert store.fetch(digest_of(datas[1])) == "second"
    assert store.fetch(digest_of(datas[1])) == "local store"
    assert store.get(digest_of(datas[1]), len(datas[1])) == datas[1]
    with store.open(digest_of(datas[0]), len(datas[0])) as reader:
        assert reader.read() == datas[0]
    with pytest.raises(BlobNotFoundError) as info:
        store.get(digest_of(datas[2]))
    message = str(info.value)
    assert f"local store ({_local(root)}): absent" in message
    assert f"remote 'first' ({first}): absent" in message
    assert f"remote 'second' ({second}): absent" in message
    # Writes stay local.
    desc = store.put(b"local only")
    assert local_store(root).has(desc.digest) and not LocalBlobStore(first).has(desc.digest)


def test_read_through_repairs_corrupt_cached_copy(
    five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = five_blob_repo
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    overwrite(blob_path(_local(root), data), b"Z" * len(data))
    assert repository_store(root).get(digest_of(data), len(data)) == data
    assert blob_path(_local(root), data).read_bytes() == data


def test_read_through_without_remotes_only_local(
    five_blob_repo: tuple[Path, dict[str, bytes]],
) -> None:
    root, files = five_blob_repo
    store = repository_store(root)
    assert store.remotes == ()
    data = next(iter(files.values()))
    assert store.get(digest_of(data)) == data
    with pytest.raises(BlobNotFoundError, match="local store"):
        store.get(ABSENT)


# -- verification against a remote ---------------------------------------------------
def test_check_remote(five_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    root, files = five_blob_repo
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    regs = load_inventory(root).registrations
    assert run("push", "--root", str(root))[0] == 0
    for path in store_files(_local(root)):  # so that anything cached would show
        os.unlink(path)
    assert verify_remote(root, regs, "origin") == {"run1": []}
    assert verify_remote(root, regs, "origin", deep=True) == {"run1": []}

    (p_missing, d_missing), (p_short, d_short), (p_flip, d_flip) = list(files.items())[:3]
    os.unlink(blob_path(remote, d_missing))
    overwrite(blob_path(remote, d_short), d_short[:10])
    overwrite(blob_path(remote, d_flip), d_flip[::-1])

    shallow = verify_remote(root, regs, "origin")["run1"]
    assert sorted((f.code, f.path) for f in shallow) == sorted(
        [("remote-missing", p_missing), ("remote-size-mismatch", p_short)]
    )
    missing = next(f for f in shallow if f.code == "remote-missing")
    assert missing.severity == "error" and missing.bundle == "run1"
    assert missing.digest == digest_of(d_missing)
    # The bundle and path are fields of their own; the message does not repeat them.
    assert missing.message.startswith(f"{digest_of(d_missing)} ({len(d_missing)} bytes)")
    assert "run1:" not in missing.message and missing.path == p_missing
    assert str(blob_path(remote, d_missing)) in missing.message  # the place looked
    short = next(f for f in shallow if f.code == "remote-size-mismatch")
    assert f"is 10 bytes, expected {len(d_short)}" in short.message

    deep = verify_remote(root, regs, "origin", deep=True)["run1"]
    codes = sorted((f.code, f.path) for f in deep)
    assert codes == sorted(
        [
            ("remote-missing", p_missing),
            ("remote-size-mismatch", p_short),
            ("remote-corrupt", p_flip),
        ]
    )
    corrupt = next(f for f in deep if f.code == "remote-corrupt")
    assert "hashes to blake3:" in corrupt.message and corrupt.digest == digest_of(d_flip)
    # Nothing was cached by verification: not the intact blobs, not the corrupt one.
    assert store_files(_local(root)) == []


def test_check_remote_unknown_name(five_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    from evidencestore.errors import ConfigError

    root, _ = five_blob_repo
    with pytest.raises(ConfigError, match="unknown remote 'origin'"):
        verify_remote(root, load_inventory(root).registrations, "origin")


def test_configured_remotes_order(tmp_path: Path) -> None:
    set_remotes(tmp_path, z={"url": "z"}, a={"url": "memory://a"}, m={"url": "file:///tmp/m"})
    names = [r.name for r in configured_remotes(tmp_path)]
    assert names == ["z", "a", "m"]
    stores = {r.name: r.store for r in configured_remotes(tmp_path)}
    assert isinstance(stores["z"], LocalBlobStore) and stores["z"].root == tmp_path / "z"
    assert isinstance(stores["m"], LocalBlobStore) and str(stores["m"].root) == "/tmp/m"


# errors, never tracebacks
def _evstore_limited(root: Path, *argv: str, max_file_bytes: int) -> tuple[int, str]:
    """Run ``python -m evidencestore`` where no file may grow past ``max_file_bytes``
    (RLIMIT_FSIZE): every larger write fails with EFBIG, as on a full or read-only
    disk. Returns (exit code, stderr)."""
    resource = pytest.importorskip("resource")
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    done = subprocess.run(
        [sys.executable, "-m", "evidencestore", *argv, "--root", str(root)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    return done.returncode, done.stderr


def test_unwritable_local_store_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1, size=8192)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    digest = digest_of(next(iter(files.values())))
    os.chmod(local_store(root).path_of(digest), 0o644)
    local_store(root).delete(digest)
    message = f"local store ({local_store(root).root}): {digest}: cannot write: File too large"
    for argv in (["fetch", digest], ["cat", digest]):
        code, err = _evstore_limited(root, *argv, max_file_bytes=1024)
        assert code == 2, err
        assert message in err and "Traceback" not in err and "internal error" not in err
        assert "could not be fetched" not in err  # not blamed on the remote
    assert blob_files(local_store(root).root) == []  # no temporary left behind


# failures name the remote and the digest
def test_push_failure_names_remote_and_digest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(2, size=8192)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    code, err = _evstore_limited(root, "push", max_file_bytes=4096)  # the lease fits
    assert code == 2, err
    assert "0 of 2 blobs transferred" in err and "2 FAILED" in err
    for data in files.values():
        assert f"remote 'origin' ({remote}): {digest_of(data)}: cannot upload: " in err
    assert "File too large" in err and "Traceback" not in err


# an unknown remote name is an error even when the blob is local
def test_fetch_unknown_remote_with_local_blob(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1)
    make_repo(root, files)
    digest = digest_of(next(iter(files.values())))
    code, _, err = run("fetch", digest, "--remote", "nope", "--root", str(root))
    assert code == 2 and "unknown remote 'nope'" in err


# pull re-hashes local copies
def test_pull_repairs_same_size_corrupt_local_copy(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(3)
    make_repo(root, files)
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    overwrite(blob_path(local_store(root).root, data), b"Q" * len(data))
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "1 of 3 blobs transferred" in out and "2 already present" in out
    assert local_store(root).get(digest_of(data), len(data)) == data


# one unusable remote does not break the others
@pytest.mark.parametrize("url", ["foo://x", "gs://bucket/x"])
def test_unusable_remote_is_only_its_own_error(
    tmp_path: Path, url: str, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    if url.startswith("gs://"):
        try:
            import gcsfs  # noqa: F401
        except ImportError:
            pass
        else:
            pytest.skip("gcsfs is installed")
    root = tmp_path / "repo"
    files = blobs(2)
    make_repo(root, files)
    good = tmp_path / "good"
    set_remotes(root, good={"url": str(good)})
    assert run("push", "--root", str(root))[0] == 0
    cached, fetched = (digest_of(d) for d in files.values())
    os.chmod(local_store(root).path_of(fetched), 0o644)
    local_store(root).delete(fetched)
    set_remotes(root, bad={"url": url}, good={"url": str(good)})

    capfdbinary.readouterr()
    assert main(["cat", cached, "--root", str(root)]) == 0  # cached: no remote touched
    assert capfdbinary.readouterr().out == next(iter(files.values()))
    code, _, err = run("fetch", fetched, "--root", str(root))
    assert code == 0, err  # the bad one failed, the next was tried
    os.chmod(local_store(root).path_of(fetched), 0o644)
    local_store(root).delete(fetched)
    set_remotes(root, bad={"url": url})
    code, _, err = run("fetch", fetched, "--root", str(root))
    assert code == 2 and f"remote 'bad' ({url}): cannot open this location" in err
    assert "Traceback" not in err


# never more than one byte past the expected size is read
def test_oversized_remote_object_is_not_read_whole(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    files = blobs(1, size=2000)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/ev", "options": s3_options(s3_endpoint)})
    data = next(iter(files.values()))
    digest = digest_of(data)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=s3_bucket, Key=f"ev/{blob_key(digest)}", Body=data + b"x" * 50_000)
    os.chmod(local_store(root).path_of(digest), 0o644)
    local_store(root).delete(digest)
    remote = configured_remotes(root)[0].store
    assert isinstance(remote, FsspecBlobStore)
    assert len(remote._read_raw(digest, limit=2001)) == 2001
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert f"{digest}: holds more than the expected 2000 bytes; refused" in err
    assert store_files(local_store(root).root / "blobs") == []


def test_cli_verify_remote_exit_codes(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(3)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    for deep in ([], ["--deep"]):
        code, _, err = run("verify", "--remote", "origin", *deep, "--root", str(root))
        assert code == 0, err
    (_, flipped), (_, gone) = list(files.items())[:2]
    overwrite(blob_path(remote, flipped), flipped[::-1])
    code, out, err = run("verify", "--remote", "origin", "--root", str(root))
    assert code == 0, out + err  # same size: only --deep can tell
    code, out, err = run("verify", "--remote", "origin", "--deep", "--root", str(root))
    assert code == 1 and "remote-corrupt" in out + err
    os.unlink(blob_path(remote, gone))
    code, out, err = run("verify", "--remote", "origin", "--root", str(root))
    assert code == 1 and "remote-missing" in out + err and digest_of(gone) in out + err
    code, _, err = run("verify", "--remote", "nope", "--root", str(root))
    assert code == 2 and "unknown remote 'nope'" in err
    assert len(blob_files(remote)) == 2 and len(lease_files(remote)) == 1


@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("gs://bucket/p", "gcsfs", "gcs"), ("az://container/p", "adlfs", "azure")],
)
def test_a_cloud_remote_without_its_package_names_its_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, package: str, extra: str
) -> None:
    """fsspec's own ImportError, unpatched: the error names the extra (pyproject has it)."""
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    root = str(tmp_path)
    assert cli(capsys, "init", "--root", root)[0] == 0
    assert cli(capsys, "remote", "add", "cloud", url, "--root", root)[0] == 0
    (tmp_path / "f.bin").write_bytes(b"x" * 10)
    assert cli(capsys, "bundle", "create", "b", str(tmp_path / "f.bin"), "--external",
                "*", "--root", root)[0] == 0  # fmt: skip
    code, _, err = cli(capsys, "push", "--remote", "cloud", "--root", root)
    assert code == 2
    assert f"pip install 'evidencestore[{extra}]'" in err and package in err, err
    import tomllib

    pyproject = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert any(dep.startswith(package) for dep in extras[extra])
