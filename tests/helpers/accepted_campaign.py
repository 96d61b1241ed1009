"""A small accepted campaign built for real: a protocol committed in a git repository,
then two baseline and two candidate runs over HTTP against the reference video server
(the candidate about 4x faster, every output exactly equal)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from evidencestore.cli import main
from evidencestore.testing.video_server import VideoServer, sample_workload

CAMPAIGN = "ops"
PROTOCOL = (
    f'name = "{CAMPAIGN}"\n[timing]\nmin_runs = 2\n'
    '[[condition]]\nname = "5s"\nworkload = "workloads/5s.toml"\n'
    '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
    '[[arm]]\nname = "fast"\nruns = 2\n'
)
#: The same campaign asking for a speedup above 50: the candidate (about 4x) is rejected.
REJECTING = PROTOCOL.replace("min_runs = 2\n", "min_runs = 2\nmin_speedup = 50\n")
SLOW, FAST = 0.12, 0.03  # the server's added latency for baseline and candidate runs


def git(root: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A", "--", "evidence", ".gitignore")
    git(root, "commit", "-qm", message)


def accepted_campaign(tmp: Path, server: VideoServer, protocol: str = PROTOCOL) -> Path:
    """The repository of an ACCEPTED campaign ``CAMPAIGN`` under ``tmp`` (the same runs
    under another ``protocol`` may give another verdict: :data:`REJECTING`)."""
    root = tmp / "repo"
    (root / "evidence").mkdir(parents=True)
    (root / ".gitignore").write_text(".evstore/\n")
    git(root, "init", "-q", "-b", "main")
    src = tmp / "src"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/5s.toml").write_text(
        sample_workload(seconds=(1,), size="64x48", fps=8, warmup=0, measured=2)
    )
    (src / "protocol.toml").write_text(protocol)
    assert main(["campaign", "init", CAMPAIGN, "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    commit(root, "protocol")
    workload = str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml")
    for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("fast", "c1"), ("fast", "c2")):
        server.latency = SLOW if arm == "baseline" else FAST
        assert main(["-q", "run", workload, "--arm", arm, "--server", server.url, "--name",
                     name, "--campaign", CAMPAIGN, "--condition", "5s", "--root",
                     str(root)]) == 0  # fmt: skip
    server.latency = 0.0
    commit(root, "runs")
    return root
