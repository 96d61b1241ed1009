"""The smallest protocol as written (``SMALLEST``) and :func:`protocol_tree`, the
directory ``campaign init --protocol`` reads it from."""

from __future__ import annotations

from pathlib import Path

from evidencestore.testing.video_server import sample_workload

SMALLEST = """\
name = "h3-lossless"

[timing]
min_runs = 3          # measured requests of complete runs, per arm
confidence = 0.95

[quality]
non_repeatable_baseline = "inconclusive"   # declared before any result

[[condition]]
name = "5s"
workload = "workloads/5s.toml"

[[condition]]
name = "15s"
workload = "workloads/15s.toml"

[[arm]]
name = "baseline"
baseline = true
runs = 2              # runs required per condition: twice, for repeatability

[[arm]]
name = "rank-local"
runs = 1
"""


def protocol_tree(tmp_path: Path, text: str = SMALLEST) -> Path:
    (tmp_path / "p" / "workloads").mkdir(parents=True)
    for name, seconds in (("5s", 5), ("15s", 15)):
        (tmp_path / "p" / "workloads" / f"{name}.toml").write_text(
            sample_workload(seconds=(seconds,))
        )
    path = tmp_path / "p" / "protocol.toml"
    path.write_text(text)
    (tmp_path / "repo" / "evidence").mkdir(parents=True)
    return path
