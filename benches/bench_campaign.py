"""Campaign status against decoding each distinct output once (issue 28, item 2).

Two conditions x three arms (baseline, ``exact``: byte-identical outputs, ``lsb``: one
audio sample one LSB higher, so every pair with the baseline is decoded and measured),
``--runs`` runs per arm, three measured requests, recorded over HTTP from the reference
server into a git repository. Timed, in fresh processes, medians of interleaved rounds:
``decode-once`` (every distinct output of the campaign decoded once, the natural limit),
``status (first)`` (the memo removed first: everything judged) and ``status (second)``
(unchanged campaign: reused from the store, nothing decoded). The table ends with the two
target figures of issue 28 (first / decode-once at most 1.5x; the second status under
0.3 s at 6 runs per arm) and the decoding passes each status made (``evaluate``'s
``decoded``: at most the distinct outputs on the first, none on the second).

``python -m benches.bench_campaign [--runs N] [--repeats R] [--size WxH] [--seconds A,B]``

``--scale`` (issue 39): the campaign as tasks, every request distinct (``--requests``):
the single-process decode-and-metrics time (``tasks.compute`` of every task in one
process on one core's work: torch on one thread, no decoder or hashing threads, as in a
worker; timed inside it; the same with those threads is shown beside it), the first
status with ``--jobs 1`` and ``--jobs 2`` and the second status as CLI processes, and the first status through a local Ray cluster of 2
CPUs (timed once the cluster is up; its start is shown apart).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from benches._util import EVSTORE, interleaved, table

CONDITIONS = {"c1": 1.0, "c2": 2.0}


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.org",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True)


def _backbone(where: Path) -> Path:
    """A generated AlexNet backbone (random weights: the time is what is measured)."""
    import hashlib

    import torch
    import torchvision

    torch.manual_seed(20240517)
    tmp = where / "generated.pth"
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), tmp)
    sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
    return tmp.rename(where / f"alexnet-owt-{sha[:8]}.pth")


def _lsb_render(server: Any, video: bool = False) -> Any:
    import numpy as np

    from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip

    cache: dict[tuple[str, ...], bytes] = {}

    def render(fields: dict[str, str], number: int) -> bytes:
        key = tuple(sorted(fields.items()))  # type: ignore[arg-type]
        if key in cache:
            return cache[key]
        w, h = (int(v) for v in fields["size"].split("x"))
        fps, seconds = int(fields["fps"]), float(fields["seconds"])
        path = Path(tempfile.mkdtemp()) / "lsb.mp4"

        def bump(first: int, data: Any) -> Any:
            data = data.copy()
            if first == 0:
                data[0, 100] += 2.0**-15
            return data

        shift = int(fields["seed"]) % 97

        def tint(index: int, planes: Any) -> Any:  # the server's content, one block brighter
            out = ((planes.astype(np.uint16) + shift) % 256).astype(np.uint8)
            if index == 0:
                out[8:16, 8:16] = np.clip(out[8:16, 8:16].astype(int) + 6, 0, 255)
            return out

        write_clip(
            path,
            video=VideoSpec(width=w, height=h, rate=fps, frames=round(seconds * fps),
                            options={"preset": "ultrafast", "threads": "1"}),
            video_hook=tint if video else None,
            audio=AudioSpec(rate=48000, layout="stereo", samples=round(seconds * 48000),
                            frequency=220.0 + 10 * (int(fields["seed"]) % 50)),
            format="mp4",
            audio_hook=None if video else bump,  # lpips: the video differs, not the audio
        )  # fmt: skip
        cache[key] = path.read_bytes()
        shutil.rmtree(path.parent)
        _ = np
        return cache[key]

    return render


def build(
    work: Path,
    runs: int,
    size: str = "160x120",
    seconds: tuple[float, float] = (1.0, 2.0),
    requests: int = 0,
    lpips: bool = False,
) -> Path:
    """The campaign repository, every run recorded and committed; ``requests``: that many
    distinct requests (seeds) measured once each, instead of one request measured 3 times;
    ``lpips``: the protocol asks for LPIPS, the ``lsb`` arm's video differs slightly too
    (INCONCLUSIVE pairs of unequal video), and generated weights are pinned."""
    from evidencestore.cli import main
    from evidencestore.testing.video_server import sample_workload, serve_video

    root = work / "repo"
    (root / "evidence").mkdir(parents=True)
    (root / ".gitignore").write_text(".evstore/\n")
    _git(root, "init", "-q", "-b", "main")
    proto = work / "proto"
    (proto / "workloads").mkdir(parents=True)
    lines = ['name = "bench"', "[timing]", "min_runs = 3"]
    lines += ["[quality]", "lpips = true"] if lpips else []
    for cond, length in zip(CONDITIONS, seconds, strict=True):
        text = sample_workload(seconds=(length,), size=size, fps=24, warmup=0, measured=3)
        if requests:
            text = sample_workload(seconds=(length,), size=size, fps=24, warmup=0, measured=1)
            one = text[text.index("[[request]]") :]
            text += "".join(
                "\n" + one.replace("seed = 42", f"seed = {42 + i}") for i in range(1, requests)
            )
        (proto / "workloads" / f"{cond}.toml").write_text(text)
        lines += ["[[condition]]", f'name = "{cond}"', f'workload = "workloads/{cond}.toml"']
    for arm in ("baseline", "exact", "lsb"):
        lines += ["[[arm]]", f'name = "{arm}"', f"runs = {runs}"]
        lines += ["baseline = true"] if arm == "baseline" else []
    (proto / "protocol.toml").write_text("\n".join(lines) + "\n")
    assert main(["-q", "campaign", "init", "bench", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "protocol")
    with serve_video() as server:
        lsb = _lsb_render(server, video=lpips)
        for cond in CONDITIONS:
            for i in range(runs):
                for arm in ("baseline", "exact", "lsb"):
                    if arm == "lsb":
                        server.render = lsb  # type: ignore[method-assign]
                    try:
                        code = main(["-q", "-q", "run", str(root / "evidence/bench/workloads" /
                                     f"{cond}.toml"), "--arm", arm, "--server", server.url,
                                     "--name", f"{arm}-{cond}-{i}", "--campaign", "bench",
                                     "--condition", cond, "--root", str(root)])  # fmt: skip
                    finally:
                        server.__dict__.pop("render", None)
                    assert code == 0
    if lpips:
        assert main(["-q", "lpips", "import", "--backbone", str(_backbone(work)),
                     "--root", str(root)]) == 0  # fmt: skip
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "runs")
    return root


_DECODE_ONCE = """
import sys
from evidencestore.campaign.members import campaign_runs
from evidencestore.campaign.protocol import load_campaign
from evidencestore.config import local_store
from evidencestore.media.decode import analyse
from evidencestore.media.source import MediaSource
root = sys.argv[1]
store = local_store(root)
members = campaign_runs(root, load_campaign(root, "bench"), history=False)
seen = {}
for m in members.runs:
    for r in m.record.requests:
        if r.body is not None:
            seen[r.body.digest] = r.body
for d in seen.values():
    analyse(MediaSource(name=d.digest, descriptor=d, data=store.get(d.digest, d.size)))
print(len(seen))
"""


_DECODES = """
import shutil, sys
from pathlib import Path
from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
root = Path(sys.argv[1])
shutil.rmtree(root / ".evstore" / "memo", ignore_errors=True)
campaign = load_campaign(root, "bench")
first = evaluate(root, campaign)
second = evaluate(root, campaign)
print(first.decoded, second.decoded)
"""


def decodes(root: Path) -> tuple[int, int]:
    """The decoding passes of a first and a second status (``evaluate``'s ``decoded``)."""
    out = subprocess.run([sys.executable, "-c", _DECODES, str(root)], check=True,
                         capture_output=True, text=True)  # fmt: skip
    first, second = out.stdout.split()
    return int(first), int(second)


def measure(root: Path, repeats: int) -> tuple[str, dict[str, float]]:
    """(distinct outputs, median seconds of each case) for the campaign at ``root``."""
    status = [*EVSTORE, "-q", "campaign", "status", "bench", "--json", "--root", str(root)]
    memo = root / ".evstore" / "memo"
    once_cmd = [sys.executable, "-c", _DECODE_ONCE, str(root)]

    def first() -> None:
        shutil.rmtree(memo, ignore_errors=True)
        subprocess.run(status, check=False, capture_output=True)

    def again() -> None:  # "warm" puts the memo back before each "second"
        subprocess.run(status, check=False, capture_output=True)

    def once() -> None:
        subprocess.run(once_cmd, check=True, capture_output=True)

    cases = {"decode-once": once, "first": first, "warm": again, "second": again}
    t = interleaved(cases, repeats)
    distinct = subprocess.run(once_cmd, check=True, capture_output=True, text=True)
    return distinct.stdout.strip(), t


_SINGLE = """
import sys, time
from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.tasks import compute, plan
from evidencestore.media.decode import set_decode_threads
root = sys.argv[1]
set_decode_threads(sys.argv[2] == "threads")
campaign = load_campaign(root, "bench")
tasks = plan(root, campaign, every=True).tasks
t0 = time.perf_counter()
failed = compute(root, tasks)
more = [t for t in plan(root, campaign, every=True).tasks if t.kind == "output-lpips"]
failed.update(compute(root, more))  # LPIPS tasks: listed once their pairs are known
took = time.perf_counter() - t0
assert not failed, failed
tasks += more
print(len(tasks), sum(t.kind == "output-check" for t in tasks), len(more), took)
"""

_RAY = """
import shutil, sys, time
from pathlib import Path
import ray
from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
from evidencestore.scale.ray import RayExecutor
root = Path(sys.argv[1])
t0 = time.perf_counter()
ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
         log_to_driver=False, configure_logging=False)
started = time.perf_counter() - t0
times = []
for _ in range(int(sys.argv[2])):
    shutil.rmtree(root / ".evstore" / "memo", ignore_errors=True)
    t0 = time.perf_counter()
    ev = evaluate(root, load_campaign(root, "bench"), executor=RayExecutor())
    times.append(time.perf_counter() - t0)
    assert ev.decoded == 0 and ev.computed > 0
ray.shutdown()
print(started, sorted(times)[len(times) // 2])
"""


def scale(args: argparse.Namespace) -> int:
    """Issue 39's campaign: 2 conditions x 3 arms x ``--runs`` runs x ``--requests``
    distinct requests; first status with ``--jobs 2`` against half the single-process
    decode-and-metrics time, the second status, and Ray with 2 local workers."""
    import statistics
    import time

    lengths = tuple(float(x) for x in args.seconds.split(","))
    runs = (args.runs or [5])[0]
    with tempfile.TemporaryDirectory(prefix="evstore-bench-scale-") as tmp:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            root = build(
                Path(tmp), runs, args.size, (lengths[0], lengths[1]), args.requests, args.lpips
            )
        built = time.perf_counter() - t0
        memo = root / ".evstore" / "memo"
        status = [*EVSTORE, "-q", "campaign", "status", "bench", "--json", "--root", str(root)]

        left = [*EVSTORE, "campaign", "tasks", "bench", "--json", "--root", str(root)]
        loads: list[float] = []
        cpu: dict[str, list[float]] = {"single": [], "jobs2": []}

        def children_cpu() -> float:
            use = resource.getrusage(resource.RUSAGE_CHILDREN)
            return use.ru_utime + use.ru_stime

        def single_process(threads: str) -> list[str]:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            cmd = [sys.executable, "-c", _SINGLE, str(root), threads]
            return subprocess.run(
                cmd, check=True, capture_output=True, text=True, env=env
            ).stdout.split()

        def timed(cmd: list[str], fresh: bool, name: str = "") -> float:
            if fresh:
                shutil.rmtree(memo, ignore_errors=True)
            loads.append(os.getloadavg()[0])
            c, t = children_cpu(), time.perf_counter()
            subprocess.run(cmd, check=False, capture_output=True)
            took = time.perf_counter() - t
            if name:
                cpu[name].append(children_cpu() - c)
            return took

        single, threaded, jobs2, jobs1, second = [], [], [], [], []
        counts = ""
        for _ in range(args.repeats):
            shutil.rmtree(memo, ignore_errors=True)
            # one core's work: torch (LPIPS) on one thread too
            loads.append(os.getloadavg()[0])
            c = children_cpu()
            out = single_process("one")
            cpu["single"].append(children_cpu() - c)
            # the same process with the decoder's threads (more than one core's work)
            shutil.rmtree(memo, ignore_errors=True)
            threaded.append(float(single_process("threads")[3]))
            counts = f"{out[0]} ({out[1]} output checks, {out[2]} LPIPS)"
            single.append(float(out[3]))
            jobs2.append(timed([*status, "--jobs", "2"], fresh=True, name="jobs2"))
            # the first status computed every task, LPIPS included: none is left
            pending = subprocess.run(left, check=True, capture_output=True).stdout
            assert msgspec.json.decode(pending) == [], pending[:200]
            second.append(timed([*status, "--jobs", "2"], fresh=False))
            if args.jobs1:
                jobs1.append(timed([*status, "--jobs", "1"], fresh=True))
        ray_start = ray_t = float("nan")
        if args.ray:
            out = subprocess.run([sys.executable, "-c", _RAY, str(root), str(args.repeats)],
                                 check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
            ray_start, ray_t = float(out[0]), float(out[1])
    med = statistics.median
    s, j2, sec = med(single), med(jobs2), med(second)
    j1 = med(jobs1) if jobs1 else float("nan")
    rows = [
        ["tasks", counts],
        ["build (runs recorded)", f"{built:.1f} s"],
        ["single-process decode-and-metrics, one core's work (in process)", f"{s:.2f} s"],
        [
            "the same with FFmpeg's decoder threads and the hashing thread",
            f"{med(threaded):.2f} s",
        ],
        ["first status --jobs 1 (CLI process)", f"{j1:.2f} s"],
        ["first status --jobs 2 (CLI process)", f"{j2:.2f} s"],
        ["first --jobs 2 / (single / 2) (target <= 1.3x)", f"{j2 / (s / 2):.2f}x"],
        [
            "CPU s: single process / first status --jobs 2 (all its processes)",
            f"{med(cpu['single']):.1f} / {med(cpu['jobs2']):.1f}",
        ],
        ["tasks left after each first --jobs 2 status", "0 (checked)"],
        ["second status (target < 0.5 s)", f"{sec:.3f} s"],
        ["Ray, 2 local workers: first status (cluster up)", f"{ray_t:.2f} s"],
        ["Ray / --jobs 2 (target <= 1.5x)", f"{ray_t / j2:.2f}x"],
        ["Ray cluster start (not in the figure above)", f"{ray_start:.1f} s"],
    ]
    title = (
        f"campaign tasks at scale: 2 conditions of {args.seconds} s at {args.size} x 3 arms x "
        f"{runs} runs x {args.requests} requests, LPIPS {'on' if args.lpips else 'off'}, "
        f"medians of {args.repeats}, "
        f"{os.cpu_count()} CPUs seen, load average (1 min) {min(loads):.2f}-{max(loads):.2f} "
        "before the timed commands"
    )
    print(table(title, ["case", "figure"], rows))
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_campaign")
    parser.add_argument("--runs", type=int, action="append")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", default="160x120", help="output size (160x120)")
    parser.add_argument("--seconds", default="1,2", help="the two conditions' lengths (1,2)")
    parser.add_argument(
        "--scale", action="store_true",
        help="issue 39's figures: --jobs 2, second status, Ray (use --size 640x360 "
        "--seconds 5,15 --runs 5 --requests 10)",
    )  # fmt: skip
    parser.add_argument("--requests", type=int, default=10, help="with --scale (10)")
    parser.add_argument("--no-ray", dest="ray", action="store_false", help="with --scale")
    parser.add_argument(
        "--no-jobs1", dest="jobs1", action="store_false", help="with --scale: no --jobs 1 row"
    )
    parser.add_argument(
        "--lpips", action="store_true",
        help="with --scale: the protocol asks for LPIPS and the lsb arm's video differs "
        "slightly (generated AlexNet weights)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.scale:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        return scale(args)
    # Bytecode caching on, as an installed package has it: PYTHONDONTWRITEBYTECODE would
    # compile every module on every timed run, the status's many more than decode-once's.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    lengths = tuple(float(x) for x in args.seconds.split(","))
    assert len(lengths) == 2, "--seconds: two lengths, e.g. 5,15"
    rows = []
    for runs in args.runs or [3, 6]:
        with tempfile.TemporaryDirectory(prefix="evstore-bench-campaign-") as tmp:
            with contextlib.redirect_stdout(io.StringIO()):  # campaign init's lines
                root = build(Path(tmp), runs, args.size, (lengths[0], lengths[1]))
            distinct, t = measure(root, args.repeats)
            first, second = decodes(root)
            rows.append(
                [runs, distinct, f"{first} / {second}", f"{t['decode-once']:.2f}",
                 f"{t['first']:.2f}", f"{t['first'] / t['decode-once']:.2f}x",
                 f"{t['second']:.3f}"]
            )  # fmt: skip
    header = ["runs/arm", "distinct outputs", "decodes first / second", "decode-once s",
              "status first s", "first / decode-once (target <= 1.5x)",
              "status second s (target < 0.3 s)"]  # fmt: skip
    title = (
        f"campaign status (2 conditions of {args.seconds} s at {args.size} x 3 arms, "
        "3 measured requests)"
    )
    print(table(title, header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
