"""Helpers for building evidence repositories in tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from evidencestore.bundle import create_bundle
from evidencestore.models import Registration
from evidencestore.remotes import local_store


def make_files(base: Path, files: dict[str, bytes]) -> list[Path]:
    out = []
    for rel, data in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        out.append(p)
    return out


def add_bundle(
    root: Path,
    name: str,
    files: dict[str, bytes],
    *,
    external: tuple[str, ...] = (),
    refs: tuple[str, ...] = (),
) -> Registration:
    """Create bundle ``name`` from ``files`` (relative path -> bytes) staged outside evidence/."""
    staging = root / ".staging" / name
    make_files(staging, files)
    tops = sorted({rel.split("/")[0] for rel in files})
    reg = create_bundle(
        root,
        name,
        [staging / t for t in tops],
        store=local_store(root),
        external=external,
        references=refs,
        created="2026-11-30T00:00:00Z",
    )
    return reg


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def init_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".evstore/\n.staging/\n")
    return root
