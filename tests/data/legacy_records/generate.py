"""Write the legacy record fixtures with the code of main at 3d0e3f5 (before record tags).

Run from an extracted copy of that commit, never from the current code:

    mkdir /tmp/main3d && git archive 3d0e3f5 | tar -x -C /tmp/main3d
    cd /tmp/main3d && PYTHONPATH=$PWD python /path/to/tests/data/legacy_records/generate.py OUT

It writes the exact bytes today's main stores: a comparison record and a media check
report written by ``evstore media compare/check --record`` (kind omitted: the default),
the ``run.json`` of a real run against the reference server, and the campaign records
(repeatability, adjudication, claim, status) as ``register_records`` writes them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import evidencestore
from evidencestore._canonical import pretty
from evidencestore.campaign.models import (
    Adjudication,
    CellStatus,
    Claim,
    OutputComparison,
    Repeatability,
    RunValue,
    Speedup,
    StatusRecord,
)
from evidencestore.cli import main
from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip
from evidencestore.testing.video_server import sample_workload, serve_video

D = "blake3:" + "ab" * 32


def run(argv: list[str]) -> None:
    code = main(argv)
    assert code in (0, 1, 3), (argv, code)


def generate(out: Path) -> None:
    assert "main3d" in evidencestore.__file__ or os.environ.get("LEGACY_OK"), evidencestore.__file__
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir()
    a = write_clip(work / "a.mp4", video=VideoSpec(frames=8), audio=AudioSpec())
    b = write_clip(work / "b.mp4", video=VideoSpec(frames=8), audio=AudioSpec(frequency=445.0))
    expect = ["--frames", "8", "--samples", "24000"]
    run(["media", "compare", a, b, *expect, "--record", str(out / "comparison.json")])
    run(["media", "check", a, *expect, "--record", str(out / "check.json")])
    repo = out / "repo"
    run(["init", "--root", str(repo)])
    wl = work / "workload.toml"
    wl.write_text(sample_workload(seconds=(1,), size="64x48", fps=8))
    with serve_video() as server:
        run(["run", str(wl), "--arm", "a", "--server", server.url, "--name", "r1",
             "--root", str(repo)])  # fmt: skip
    (out / "run.json").write_bytes((repo / "evidence/r1/run.json").read_bytes())
    cmp = OutputComparison(key="0", verdict="PASS", reference=D, candidate=D, reasons=())
    records = {
        "repeatability.json": Repeatability(
            protocol_digest=D, condition="5s", runs=(D, D), run_names=("b1", "b2"), exact=True,
            comparisons=(cmp,),
        ),
        "adjudication.json": Adjudication(
            protocol_digest=D, condition="5s", arm="fast", verdict="PASS", reasons=(),
            baseline_runs=(D,), candidate_runs=(D,), baseline_repeatable=True, comparisons=(cmp,),
        ),
        "claim.json": Claim(
            protocol_digest=D, condition="5s", arm="fast", baseline_arm="base", refused=False,
            reasons=(), confidence=0.95, speedup=Speedup(ratio=1.5, low=1.2, high=1.8),
            n_baseline=3, n_candidate=3, runs=(RunValue(run="b1", digest=D, arm="base",
            values=(1.0,), mean=1.0, cv=None),),
        ),
        "status.json": StatusRecord(
            campaign="c", protocol_digest=D, verdict="NOT_ACCEPTED", remaining=("more runs",),
            cells=(CellStatus(condition="5s", arm="base", baseline=True, runs_required=3,
            runs_done=1, runs_failed=0, failed_runs=(), repeatability=None, lossless=None,
            speedup=None, qualified=False),),
        ),
    }  # fmt: skip
    for name, record in records.items():
        (out / name).write_bytes(pretty(record))
    import shutil

    shutil.rmtree(work)
    shutil.rmtree(repo)


if __name__ == "__main__":
    generate(Path(sys.argv[1]))
