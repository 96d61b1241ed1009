"""Regenerate the AIPerf layouts beside tests/fixtures/aiperf/'s four runs: real AIPerf
artifact directories for what those four do not show.

- ``warmup-4``: the candidate server (``--itl 0.004``), the same prompts and seed as
  ``baseline-1``, but ``--concurrency 4 --warmup-request-count 4``: another warmup count
  and request order, every output token-exact equal to the baseline's;
- ``multirun``: ``--num-profile-runs 3`` (AIPerf's ``profile_runs/run_000N/`` and
  ``aggregate/`` layout): three profile passes of one AIPerf process against one
  server, one warmup (the first pass's) and seed 42.

AIPerf runs in its own virtual environment (``benches/make_aiperf_fixtures.py`` makes
it)::

    python benches/make_aiperf_layouts.py [--venv /tmp/aiperf-venv]

The exact commands are written to ``tests/fixtures/aiperf/LAYOUTS.txt``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_aiperf_fixtures import FIXTURES, HERE, TOKENIZER, _venv

COMMON = [
    "--model", "reference-llm", "--endpoint-type", "chat", "--streaming",
    "--request-count", "6", "--synthetic-input-tokens-mean", "16",
    "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", "8",
    "--output-tokens-stddev", "0", "--extra-inputs", "max_tokens:8",
    "--extra-inputs", "seed:7", "--export-level", "raw", "--ui-type", "none",
    "--no-server-metrics", "--no-gpu-telemetry",
]  # fmt: skip
LAYOUTS = {
    "warmup-4": ["--concurrency", "4", "--warmup-request-count", "4", "--random-seed", "7"],
    "multirun": ["--concurrency", "2", "--warmup-request-count", "2", "--num-profile-runs", "3"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default="/tmp/aiperf-venv", type=Path)
    args = parser.parse_args(argv)
    python = _venv(args.venv)
    aiperf = args.venv / "bin" / "aiperf"
    commands = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([str(python), "-c", TOKENIZER, str(work / "tok")], check=True)
        env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
        server = subprocess.Popen(
            [sys.executable, "-m", "evidencestore.testing.llm_server", "--ttft", "0.02",
             "--itl", "0.004"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            for name, extra in LAYOUTS.items():
                out = work / name
                cmd = [str(aiperf), "profile", "--url", url, "--tokenizer", str(work / "tok"),
                       *COMMON, *extra, "--artifact-dir", str(out)]  # fmt: skip
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                commands += [f"# {name}: reference server --ttft 0.02 --itl 0.004", " ".join(cmd)]
                shutil.rmtree(FIXTURES / name, ignore_errors=True)
                shutil.copytree(
                    out,
                    FIXTURES / name,
                    ignore=shutil.ignore_patterns(".aiperf_results_ready.json"),
                )
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(timeout=30)
    (FIXTURES / "LAYOUTS.txt").write_text("\n".join(commands) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
