"""The Kubernetes Indexed Job and the Slurm array of docs/scale/ do the campaign's work:
their shard argument, read out of the files, run as separate processes (one per index)
computes every task once, and a status on a fresh clone then computes nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("av")
pytest.importorskip("cryptography")

from helpers.paths import DOCS
from helpers.scale_campaign import NAME, clone, count, records

from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate

SCALE_DOCS = DOCS / "scale"


def _shards(path: Path, variable: str) -> int:
    """N of the file's ``evstore campaign work ... --shard $VARIABLE/N`` (one such line)."""
    text = path.read_text()
    found = re.findall(r"evstore campaign work \S+ --shard \$" + variable + r"/(\d+)", text)
    assert len(found) == 1, f"{path}: no single `evstore campaign work NAME --shard ${variable}/N`"
    return int(found[0])


@pytest.mark.parametrize(
    ("file", "variable", "count_key"),
    [
        ("indexed-job.yaml", "JOB_COMPLETION_INDEX", r"completions: (\d+)"),
        ("slurm-array.sh", "SLURM_ARRAY_TASK_ID", r"--array=0-(\d+)"),
    ],
)
def test_each_index_runs_one_shard_and_together_they_do_all(
    scale_author: Path, tmp_path: Path, file: str, variable: str, count_key: str
) -> None:
    path = SCALE_DOCS / file
    n = _shards(path, variable)
    declared = int(re.findall(count_key, path.read_text())[0])
    indices = range(declared) if "completions" in count_key else range(declared + 1)
    assert list(indices) == list(range(n)), f"{file}: {len(indices)} indices for N = {n}"
    remote = tmp_path / "remote"
    shutil.copytree(
        scale_author.parent / "remote", remote, ignore=shutil.ignore_patterns("results")
    )
    key = str(scale_author.parent / "p" / "keys" / "worker")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for i in indices:  # one process per index, each on a clone of its own
        w = clone(scale_author, tmp_path / f"w{i}", remote)
        shard = f"${variable}/{n}".replace(f"${variable}", str(i))
        done = subprocess.run(
            [sys.executable, "-m", "evidencestore", "campaign", "work", NAME, "--shard", shard,
             "--sign", key, "--root", str(w)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    entries = list((remote / "results").rglob("*.json"))
    assert len(entries) == count(scale_author)  # every task once, by one shard
    fresh = clone(scale_author, tmp_path / "fresh", remote)
    ev = evaluate(fresh, load_campaign(fresh, NAME), recheck=0)
    assert (ev.computed, ev.decoded) == (0, 0)
    alone = tmp_path / "alone-remote"
    shutil.copytree(scale_author.parent / "remote", alone, ignore=shutil.ignore_patterns("results"))
    own = clone(scale_author, tmp_path / "own", alone)
    assert records(ev) == records(evaluate(own, load_campaign(own, NAME)))
