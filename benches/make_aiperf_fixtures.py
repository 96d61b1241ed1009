"""Regenerate tests/fixtures/aiperf/: real AIPerf artifact directories.

AIPerf runs in a virtual environment of its own (never the project's), against the
reference LLM server (``python -m evidencestore.testing.llm_server``), with an offline
word-level tokenizer built with the ``tokenizers`` package (the server's tokens are the
words ``w<id>``). Four directories: ``baseline-1``/``-2`` (``--itl 0.012``) and
``candidate-1``/``-2`` (``--itl 0.004``), the same prompts and seed (token-exact equal
outputs), each with the raw export (payloads and events)::

    python benches/make_aiperf_fixtures.py [--venv /tmp/aiperf-venv]

The exact AIPerf command of each directory is in its ``profile_export_aiperf.json``
(``run_info.cli_command``) and in ``tests/fixtures/aiperf/COMMAND.txt``; each server's
log of when it wrote every token is ``reference-server-<arm>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "aiperf"

TOKENIZER = """
import json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
vocab = {"[UNK]": 0}
for i in range(32000):
    vocab[f"w{i}"] = len(vocab)
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
               "model_max_length": 100000}, fh)
"""


def _venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "aiperf", "tokenizers"], check=True
        )
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default="/tmp/aiperf-venv", type=Path)
    args = parser.parse_args(argv)
    python = _venv(args.venv)
    aiperf = args.venv / "bin" / "aiperf"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([str(python), "-c", TOKENIZER, str(work / "tok")], check=True)
        env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
        commands = []
        shutil.rmtree(FIXTURES, ignore_errors=True)
        for arm, itl in (("baseline", "0.012"), ("candidate", "0.004")):
            server = subprocess.Popen(
                [sys.executable, "-m", "evidencestore.testing.llm_server", "--ttft", "0.02",
                 "--itl", itl],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            try:
                assert server.stdout is not None
                url = server.stdout.readline().strip()
                for k in (1, 2):
                    out = work / f"{arm}-{k}"
                    cmd = [
                        str(aiperf), "profile", "--model", "reference-llm", "--url", url,
                        "--endpoint-type", "chat", "--streaming", "--tokenizer", str(work / "tok"),
                        "--request-count", "6", "--concurrency", "2", "--warmup-request-count", "2",
                        "--synthetic-input-tokens-mean", "16", "--synthetic-input-tokens-stddev", "0",
                        "--output-tokens-mean", "8", "--output-tokens-stddev", "0",
                        "--extra-inputs", "max_tokens:8", "--extra-inputs", "seed:7",
                        "--random-seed", "7", "--artifact-dir", str(out), "--export-level", "raw",
                        "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
                    ]  # fmt: skip
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                    commands.append(f"# {arm}-{k}: reference server --ttft 0.02 --itl {itl}")
                    commands.append(" ".join(cmd))
                    shutil.copytree(
                        out,
                        FIXTURES / f"{arm}-{k}",
                        ignore=shutil.ignore_patterns(".aiperf_results_ready.json"),
                    )
                # The server's own record of when it wrote each token (its monotonic
                # clock): the truth the imported TTFT / ITL are checked against.
                import urllib.request

                with urllib.request.urlopen(url + "/_reference/log", timeout=30) as resp:
                    (FIXTURES / f"reference-server-{arm}.json").write_bytes(resp.read())
            finally:
                if server.stdin is not None:
                    server.stdin.close()
                server.wait(timeout=30)
        (FIXTURES / "COMMAND.txt").write_text("\n".join(commands) + "\n")
        print(json.dumps({"fixtures": str(FIXTURES)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
