"""A small accepted campaign built for real: a protocol committed in a git repository,
then three baseline and three candidate runs over HTTP against the reference video server
(the candidate 4x faster on the server, every output exactly equal).

The speedup is the server's ``latency`` alone, set large against what the client and the
scheduler add to a request: a few ms idle; on this 2-core machine with four busy loops,
0.05 to 0.2 s. The one encode is done before the runs and every request's encode then
costs nothing (``encode_time = 0``): otherwise each request repeats what that encode took,
up to 1.2 s under such load, which diluted a 0.12 / 0.03 s design to a ratio of 1.05.
The claim needs the Welch interval's low end above 1: with three runs an arm (df 2 at
least, t 4.3 at most), one candidate run would have to be over twice as slow as the
others (0.29 s more on each of its requests) before ACCEPTED could turn."""

from __future__ import annotations

import subprocess
from pathlib import Path

from evidencestore.cli import main
from evidencestore.testing.video_server import VideoServer, sample_workload

CAMPAIGN = "ops"
PROTOCOL = (
    f'name = "{CAMPAIGN}"\n[timing]\nmin_runs = 2\n'
    '[[condition]]\nname = "5s"\nworkload = "workloads/5s.toml"\n'
    '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 3\n'
    '[[arm]]\nname = "fast"\nruns = 3\n'
)
#: The same campaign asking for a speedup above 50: the candidate (about 4x) is rejected.
REJECTING = PROTOCOL.replace("min_runs = 2\n", "min_runs = 2\nmin_speedup = 50\n")
SLOW, FAST = 1.0, 0.25  # the server's added latency for baseline and candidate runs
RUNS = (("baseline", "b1"), ("fast", "c1"), ("baseline", "b2"), ("fast", "c2"),
        ("baseline", "b3"), ("fast", "c3"))  # fmt: skip
REQUEST = {"size": "64x48", "fps": "8", "seconds": "1", "seed": "42"}  # the workload's one


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
        sample_workload(
            seconds=(int(REQUEST["seconds"]),),
            size=REQUEST["size"],
            fps=int(REQUEST["fps"]),
            seed=int(REQUEST["seed"]),
            warmup=0,
            measured=2,
        )
    )
    (src / "protocol.toml").write_text(protocol)
    assert main(["campaign", "init", CAMPAIGN, "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    commit(root, "protocol")
    workload = str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml")
    server.encode_time = 0.0
    try:
        server.render(REQUEST, 0)  # the one encode, before any run (0: no request's number)
        encoded = set(server._cache)
        for arm, name in RUNS:
            server.latency = SLOW if arm == "baseline" else FAST
            assert main(["-q", "run", workload, "--arm", arm, "--server", server.url, "--name",
                         name, "--campaign", CAMPAIGN, "--condition", "5s", "--root",
                         str(root)]) == 0  # fmt: skip
    finally:
        server.latency, server.encode_time = 0.0, None
    assert set(server._cache) == encoded  # no run's request was encoded again
    commit(root, "runs")
    return root
