"""The campaign ledger's test bench: one campaign (``CAMPAIGN``) of three baseline and
three candidate runs against the reference video server, in a real git repository whose
commit dates a test may set, and :func:`reseal`, what a committer who edits the ledger
does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidencestore._canonical import decode, pretty
from evidencestore.bundle import make_manifest, seal
from evidencestore.cli import main
from evidencestore.digest import hash_bytes
from evidencestore.models import Descriptor, Registration
from evidencestore.testing.video_server import VideoServer, sample_workload

TINY = {"size": "64x48", "fps": 8, "warmup": 0, "measured": 3}
CAMPAIGN = "ledger"
SLOW, FAST = 0.12, 0.03  # the server's added latency for baseline and candidate runs
RUNS = [("baseline", "b1"), ("baseline", "b2"), ("baseline", "b3"),
        ("fast", "c1"), ("fast", "c2"), ("fast", "c3")]  # fmt: skip
NAMES = [name for _, name in RUNS]


def git(root: Path, *args: str, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if date is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = date
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def commit(root: Path, message: str, *paths: str, date: str | None = None) -> str:
    git(root, "add", "-A", "--", *(paths or ("evidence",)))
    git(root, "commit", "-qm", message, date=date)
    return git(root, "rev-parse", "HEAD").strip()


def protocol(signing: str = "") -> str:
    return (
        f'name = "{CAMPAIGN}"\n[timing]\nmin_runs = 3\n'
        '[[condition]]\nname = "5s"\nworkload = "workloads/5s.toml"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 3\n'
        '[[arm]]\nname = "fast"\nruns = 3\n' + signing
    )


def new_repo(tmp: Path, text: str | None = None, keys: dict[str, Path] | None = None) -> Path:
    root = tmp / "repo"
    (root / "evidence").mkdir(parents=True)
    (root / ".gitignore").write_text(".evstore/\n")
    git(root, "init", "-q", "-b", "main")
    src = tmp / "protocol-src"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/5s.toml").write_text(sample_workload(seconds=(1,), **TINY))  # type: ignore[arg-type]
    for rel, path in (keys or {}).items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, src / rel)
    (src / "protocol.toml").write_text(text or protocol())
    return root


def init(root: Path, tmp: Path) -> int:
    return main(
        ["campaign", "init", CAMPAIGN, "--protocol", str(tmp / "protocol-src/protocol.toml"),
         "--root", str(root)]
    )  # fmt: skip


def run(root: Path, server: VideoServer, arm: str, name: str, *extra: str) -> int:
    server.latency = SLOW if arm == "baseline" else FAST
    try:
        return main(
            ["-q", "run", str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml"), "--arm", arm,
             "--server", server.url, "--name", name, "--campaign", CAMPAIGN, "--condition",
             "5s", "--root", str(root), *extra]
        )  # fmt: skip
    finally:
        server.latency = 0.0


def cli(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def verify(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, Any]:
    code, out, _ = cli(capsys, root, "campaign", "verify", CAMPAIGN, "--json", *extra)
    return code, json.loads(out)


def claim(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, Any]:
    _, out, _ = cli(
        capsys, root, "campaign", "claim", CAMPAIGN, "--condition", "5s", "--arm", "fast", "--json"
    )
    result: dict[str, Any] = json.loads(out)
    return result


def findings(result: Any) -> dict[str, tuple[str, str]]:
    return {f["run"]: (f["code"], f["message"]) for f in result["findings"]}


def reseal(
    root: Path,
    name: str,
    edit: Callable[[dict[str, Any]], None] | None = None,
    *,
    new_name: str | None = None,
    entry: str = "run.json",
) -> None:
    """What a committer who edits the ledger does: change a repo entry, re-hash it, and
    seal the registration again (under the same name, or a new one)."""
    old = root / "evidence" / name
    target = root / "evidence" / (new_name or name)
    if new_name is not None:
        shutil.copytree(old, target)
    reg = json.loads((target / "bundle.json").read_text())
    path = target / entry
    if edit is not None:
        value = json.loads(path.read_bytes())
        edit(value)
        path.write_bytes(json.dumps(value, indent=2).encode())
    parsed = decode((target / "bundle.json").read_bytes(), Registration)
    data = path.read_bytes()
    digest = hash_bytes(data)
    entries = [
        e
        if e.path != entry
        else type(e)(
            path=e.path,
            descriptor=Descriptor(
                digest=digest.digest, size=digest.size, media_type=e.descriptor.media_type
            ),
            location=e.location,
            role=e.role,
        )
        for e in parsed.manifest.entries
    ]
    manifest = make_manifest(
        new_name or name,
        entries,
        created=parsed.manifest.metadata.created,
        annotations=parsed.manifest.metadata.annotations,
    )
    (target / "bundle.json").write_bytes(pretty(seal(manifest)))
    assert reg["manifest"]["name"] == name
