"""Helpers shared by the remote, fetch, gc and S3 tests."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evidencestore.cli import main
from evidencestore.config import Config, RemoteConfig, load_config, save_config
from evidencestore.digest import hash_bytes
from evidencestore.models import Registration
from evidencestore.storage import blob_key

from .repos import add_bundle

# Tiny, bounded retry settings: tests never wait on real backoff.
FAST = {"attempts": 3, "backoff": 0.001, "max_backoff": 0.002, "timeout": 2.0}


def blobs(n: int, size: int = 4096, seed: str = "blob") -> dict[str, bytes]:
    """``n`` distinct files of ``size`` bytes, by relative path."""
    out = {}
    for i in range(n):
        head = f"{seed}-{i}-".encode()
        out[f"ext/{seed}{i:03d}.bin"] = (head * (size // len(head) + 1))[:size]
    return out


def make_repo(
    root: Path,
    files: dict[str, bytes],
    name: str = "run1",
    *,
    extra: dict[str, bytes] | None = None,
) -> Registration:
    """Create an evidence repository at ``root`` with bundle ``name``: ``files`` go
    to the store, ``extra`` (default: one small results file) to git."""
    root.mkdir(parents=True, exist_ok=True)
    in_git = extra if extra is not None else {"results.json": b'{"ok": true}\n'}
    return add_bundle(root, name, {**files, **in_git}, external=tuple(files))


def set_remotes(root: Path, **remotes: dict[str, Any]) -> None:
    """Write the remotes (in keyword order) into ``root``'s evstore.toml."""
    config = load_config(root)
    built = {name: RemoteConfig(**{**FAST, **spec}) for name, spec in remotes.items()}
    save_config(root, Config(store=config.store, remotes=built, lpips=config.lpips))


def run(*argv: str) -> tuple[int, str, str]:
    """Run ``evstore`` in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def digest_of(data: bytes) -> str:
    return hash_bytes(data).digest


def blob_path(store_root: Path, data_or_digest: bytes | str) -> Path:
    digest = data_or_digest if isinstance(data_or_digest, str) else digest_of(data_or_digest)
    return store_root / blob_key(digest)


def overwrite(path: Path, data: bytes) -> None:
    """Replace a (read-only) stored file's bytes in place."""
    os.chmod(path, 0o644)
    path.write_bytes(data)


def store_files(store_root: Path) -> list[Path]:
    """Every file under a store directory (blobs and temporaries)."""
    return sorted(p for p in store_root.rglob("*") if p.is_file())


def blob_files(store_root: Path) -> list[Path]:
    """Every file under a store's ``blobs/`` (blobs and temporaries, not leases)."""
    return store_files(store_root / "blobs")


def lease_files(store_root: Path) -> list[Path]:
    """The push leases under a store directory."""
    return store_files(store_root / "leases")


@contextlib.contextmanager
def cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
