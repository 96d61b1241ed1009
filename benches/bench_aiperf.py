"""Side by side with NVIDIA AIPerf (issue 25): both tools against the same reference LLM
server with the same knobs, their TTFT and ITL errors against the server's own log, and
client CPU per request.

AIPerf is not a dependency: install it in an environment of its own and point
``--aiperf`` at its executable (``python -m venv /tmp/aiperf-venv &&
/tmp/aiperf-venv/bin/pip install aiperf tokenizers``). It needs a tokenizer and cannot
download one here, so a word-level tokenizer over the server's vocabulary (``w0`` ...
``w31999``) is built offline with the ``tokenizers`` package of that environment and
``--tokenizer`` points at its folder.

The server (``python -m evidencestore.testing.llm_server --ttft T --itl I --jitter J``,
one token per event) runs in its own process for each tool and logs, per token, when it
wrote it (monotonic ns), each request's ``X-Request-ID`` and the wall clock's offset.

* evstore: ``evstore run`` of a chat workload (synthetic ``[prompts]``); per request, the
  first content event's arrival and each token's time are matched to the server's log
  by prompt;
* AIPerf: ``aiperf profile --endpoint-type chat --streaming`` with the same count,
  concurrency, input and output lengths; per request (``profile_export.jsonl``, matched
  to the server's log by ``X-Request-ID``), the first token at ``request_start_ns +
  time_to_first_token`` (wall clock, brought to the monotonic clock by the server's
  offset) and ``inter_chunk_latency`` per token.

TTFT error = |client's first token - server's write of token 0|; ITL error = |client's gap
between tokens i-1 and i - the server's|. CPU: user + system time of the whole client
process tree (``RUSAGE_CHILDREN``), start-up included for both, per request.

Run: ``python -m benches.bench_aiperf [--aiperf PATH] [--requests N] [--concurrency C ...]``.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from itertools import pairwise
from pathlib import Path

TOKENIZER = r"""
import json, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(32000)}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
out = sys.argv[1]
tok.save(f"{out}/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
           "model_max_length": 1000000}, open(f"{out}/tokenizer_config.json", "w"))
json.dump({"model_type": "gpt2"}, open(f"{out}/config.json", "w"))
"""

WORKLOAD = """\
[endpoint]
kind = "chat"
path = "/v1/chat/completions"
model = "reference-llm"

[run]
measured = 1
concurrency = {concurrency}
check_media = false
timeout = 600

[prompts]
count = {count}
input_tokens = {isl}
max_tokens = {osl}
seed = {seed}
ignore_eos = true
"""

KNOBS = ("--ttft", "0.02", "--itl", "0.005", "--jitter", "0.002")


class _Server:
    def __enter__(self) -> _Server:
        cmd = [sys.executable, "-m", "evidencestore.testing.llm_server", *KNOBS]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        return self

    def log(self) -> dict[str, object]:
        with urllib.request.urlopen(self.url + "/_reference/log", timeout=60) as resp:
            return dict(json.loads(resp.read()))

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _written(log: dict[str, object]) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for n, pos, t in log["log"]:  # type: ignore[attr-defined]
        out.setdefault(int(n), {})[int(pos)] = int(t)
    return out


def _errors(first: float, gaps: list[float], server: dict[int, int]) -> tuple[float, list[float]]:
    ttft = abs(first - server[0] / 1e9)
    itl = [
        abs(g - (server[i + 1] - server[i]) / 1e9) for i, g in enumerate(gaps) if i + 1 in server
    ]
    return ttft, itl


def evstore(root: Path, concurrency: int, count: int, isl: int, osl: int) -> dict[str, object]:
    from evidencestore.runs import load_run
    from evidencestore.runs.streams import token_times
    from evidencestore.runs.workload import load_workload

    wl = root / f"ev-{concurrency}.toml"
    wl.write_text(
        WORKLOAD.format(concurrency=concurrency, count=count, isl=isl, osl=osl, seed=concurrency)
    )
    prompts = [r.prompt for r in load_workload(wl).workload.request]
    name = f"ev-{concurrency}"
    with _Server() as server:
        cpu0 = _child_cpu()
        subprocess.run(
            [sys.executable, "-m", "evidencestore", "-q", "run", str(wl), "--arm", "bench",
             "--server", server.url, "--name", name, "--root", str(root)],
            check=True,
        )  # fmt: skip
        cpu = _child_cpu() - cpu0
        log = server.log()
    rec = load_run(root, name)
    written = _written(log)
    number_of = {p: int(n) for n, p in log["prompts"].items()}  # type: ignore[attr-defined]
    ttft, itl = [], []
    for r in rec.requests:
        assert r.failure is None and r.events is not None, r.message
        times = [r.sent_ns / 1e9 + t for t in token_times(r.events)]
        t, i = _errors(times[0], [b - a for a, b in pairwise(times)],
                       written[number_of[prompts[r.request]]])  # fmt: skip
        ttft.append(t)
        itl += i
    if os.environ.get("BENCH_DEBUG"):
        print(
            "worst ttft at",
            sorted(range(len(ttft)), key=lambda k: -ttft[k])[:3],
            [round(x * 1e3, 2) for x in sorted(ttft)[-3:]],
        )
    return {"ttft": ttft, "itl": itl, "cpu": cpu, "n": len(rec.requests)}


def aiperf(
    exe: str, tok: Path, out: Path, concurrency: int, count: int, isl: int, osl: int
) -> dict[str, object]:
    with _Server() as server:
        cpu0 = _child_cpu()
        subprocess.run(
            [exe, "profile", "--model", "reference-llm", "--url", server.url, "--endpoint-type",
             "chat", "--streaming", "--tokenizer", str(tok), "--request-count", str(count),
             "--concurrency", str(concurrency), "--isl", str(isl), "--osl", str(osl),
             "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(out), "--ui-type", "none"],
            check=True, capture_output=True,
        )  # fmt: skip
        cpu = _child_cpu() - cpu0
        log = server.log()
    written = _written(log)
    offset = int(log["clock_offset_ns"])  # type: ignore[call-overload]
    number_of = {rid: int(n) for n, rid in log["request_ids"].items()}  # type: ignore[attr-defined]
    ttft, itl = [], []
    n = 0
    for line in (out / "profile_export.jsonl").read_text().splitlines():
        rec = json.loads(line)
        meta, metrics = rec["metadata"], rec["metrics"]
        if meta.get("benchmark_phase") != "profiling" or "time_to_first_token" not in metrics:
            continue
        n += 1
        first = (
            meta["request_start_ns"] + metrics["time_to_first_token"]["value"] * 1e6 - offset
        ) / 1e9
        gaps = [v / 1e3 for v in metrics["inter_chunk_latency"]["value"]]
        t, i = _errors(first, gaps, written[number_of[meta["x_request_id"]]])
        ttft.append(t)
        itl += i
    return {"ttft": ttft, "itl": itl, "cpu": cpu, "n": n}


def _p(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiperf", default="/tmp/aiperf-venv/bin/aiperf")
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 64])
    parser.add_argument("--isl", type=int, default=8)
    parser.add_argument("--osl", type=int, default=32)
    args = parser.parse_args(argv)
    if not os.path.exists(args.aiperf):
        raise SystemExit(
            f"no AIPerf at {args.aiperf}: install it in its own environment (see the module doc)"
        )
    python = str(Path(args.aiperf).parent / "python")
    with tempfile.TemporaryDirectory(prefix="evstore-bench-aiperf-") as tmp:
        root = Path(tmp)
        (root / "evidence").mkdir()
        tok = root / "tokenizer"
        tok.mkdir()
        subprocess.run([python, "-c", TOKENIZER, str(tok)], check=True)
        print(f"TTFT / ITL error against the server's log, ms (knobs {' '.join(KNOBS)}); "
              f"{args.requests} requests, isl {args.isl}, osl {args.osl}")  # fmt: skip
        print(f"{'conc':>5} {'tool':>8} {'n':>5} {'ttft med':>9} {'ttft p99':>9} {'itl med':>8} "
              f"{'itl p99':>8} {'cpu ms/req':>10}")  # fmt: skip
        for c in args.concurrency:
            rows = {
                "evstore": evstore(root, c, args.requests, args.isl, args.osl),
                "aiperf": aiperf(
                    args.aiperf, tok, root / f"aiperf-{c}", c, args.requests, args.isl, args.osl
                ),
            }
            for tool, r in rows.items():
                tt, it = r["ttft"], r["itl"]
                assert isinstance(tt, list) and isinstance(it, list)
                print(
                    f"{c:>5} {tool:>8} {r['n']:>5} {statistics.median(tt) * 1e3:>9.3f} "
                    f"{_p(tt, 0.99) * 1e3:>9.3f} {statistics.median(it) * 1e3:>8.3f} "
                    f"{_p(it, 0.99) * 1e3:>8.3f} {float(r['cpu']) / int(r['n']) * 1e3:>10.2f}"  # type: ignore[arg-type]
                )


if __name__ == "__main__":
    main(sys.argv[1:])
