"""Whole-repository verification against b3sum --check (issue 14), trees T1 to T5.

Each tree is an evidence repository verified with content re-read (`evstore verify`,
with `--require-available` where there are store entries), and the same files listed in
a checkfile for `b3sum --check`. Both run as processes, interleaved, page cache warm;
ratio = b3sum time / evstore time (> 1: evstore is faster). T4 is also measured at
500, 1,000, 2,000 and 4,000 bundles, and the per-bundle overhead is the slope of a
least-squares fit.

Issue 39's decision: 500 tiny bundles (T4's shape) are verified as a library call
(``verify_repository`` in this process, against b3sum --check as a process: at least
0.5x), and the CLI's fixed cost (``evstore verify`` of an empty repository, interpreter
start included) stays under 100 ms. Scaling (``scale``): repositories of 1,000 and
``--bundles N`` bundles of 10 files each (default 100,000: 1,000,000 entries; generated
by ``make_bundles``), each verified as a library call in a fresh child process: the time
per entry at N within 1.2x of the 1,000-bundle figure, and peak memory (the child's
``VmHWM``, its forked workers' ``ru_maxrss`` and the sampled sum of the process tree's PSS) under
1 GiB; the CPU time per entry (user and system, the child's and its workers') is shown
beside it, being less disturbed by other work on a shared machine than the wall time.
``b3sum --check`` of the same files at both sizes is the control: the time per
file that the file system and page cache alone give.

Run: ``python -m benches.bench_verify [--quick] [--only T3,T4,empty,lib,scale,T4scale]
[--bundles N] [--against DIR]``; ``--against`` also times the ``evidencestore`` package
found in DIR (e.g. ``git archive OLD evidencestore | tar -x -C DIR``) in the same run,
interleaved, for before/after figures under the same load. Bytecode caching is switched
on for the timed commands (``PYTHONDONTWRITEBYTECODE`` would compile every module on
every run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ._util import EVSTORE, interleaved, run_quiet, table

B3SUM = shutil.which("b3sum")


def _write(path: Path, size: int, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    block = os.urandom(min(size, 1 << 20)) if size else b""
    with open(path, "wb") as fh:
        left = size
        fh.write(seed.to_bytes(8, "little")[: min(8, size)])
        left -= min(8, size)
        while left > 0:
            chunk = block[: min(left, len(block))]
            fh.write(chunk)
            left -= len(chunk)


def _repo(base: Path) -> Path:
    run_quiet([*EVSTORE, "init", "--root", str(base)])
    return base


def _bundle(root: Path, name: str, src: Path, external: bool) -> None:
    cmd = [*EVSTORE, "bundle", "create", name, str(src), "--root", str(root)]
    if external:
        cmd += ["--external", "*"]
    run_quiet(cmd)


def _checkfile(root: Path, files: list[Path], out: Path) -> None:
    done = subprocess.run(
        [B3SUM or "b3sum", *map(str, files)], check=True, capture_output=True, text=True
    )
    out.write_text(done.stdout)


def _tree(
    work: Path, label: str, bundles: int, files: int, size: int, external: bool
) -> tuple[Path, Path]:
    root = _repo(work / label)
    src = work / f"{label}-src"
    hashed: list[Path] = []
    if bundles == 1:
        for i in range(files):
            _write(src / f"f{i:06d}.bin", size, i)
        _bundle(root, "b0", src, external)
    else:
        # Many bundles: write the registrations through the library in one process.
        from evidencestore.bundle import create_bundle
        from evidencestore.remotes import local_store

        store = local_store(root)
        for b in range(bundles):
            one = src / f"b{b:05d}"
            for i in range(files):
                _write(one / f"f{i}.bin", size, b * files + i)
            create_bundle(root, f"b{b:05d}", [one], store=store, external=["*"] if external else [])
    if external:
        store_dir = root / ".evstore" / "blobs" / "blake3"
        hashed = sorted(p for p in store_dir.rglob("*") if p.is_file())
    else:
        hashed = sorted(
            p for p in (root / "evidence").rglob("*") if p.name != "bundle.json" and p.is_file()
        )
    check = work / f"{label}.b3"
    _checkfile(root, hashed, check)
    return root, check


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _cases(
    flags: list[str], root: Path, check: Path, against: str | None
) -> dict[str, Callable[[], None]]:
    cases: dict[str, Callable[[], None]] = {
        "evstore": lambda: run_quiet([*EVSTORE, "verify", *flags, "--root", str(root)]),
        "b3sum": lambda: run_quiet([B3SUM or "b3sum", "--check", str(check)]),
    }
    if against:
        env = {**os.environ, "PYTHONPATH": against}
        cases["before"] = lambda: _run_env([*EVSTORE, "verify", *flags, "--root", str(root)], env)
    return cases


def _run_env(cmd: list[str], env: dict[str, str]) -> None:
    # run from the other tree: ``-m`` puts the working directory first on sys.path
    subprocess.run(
        cmd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=env["PYTHONPATH"],
    )


def _library(work: Path, repeats: int, bundles: int) -> list[list[str]]:
    """Rows: ``bundles`` tiny bundles verified as a library call against b3sum --check,
    and the CLI's fixed cost (``evstore verify`` of an empty repository)."""
    from evidencestore.verify import verify_repository

    root, check = _tree(work, "L", bundles, 5, 2048, False)
    empty = _repo(work / "L-empty")

    def library() -> None:
        assert verify_repository(root).ok

    t = interleaved(
        {
            "library": library,
            "cli": lambda: run_quiet([*EVSTORE, "verify", "--root", str(root)]),
            "b3sum": lambda: run_quiet([B3SUM or "b3sum", "--check", str(check)]),
            "empty": lambda: run_quiet([*EVSTORE, "verify", "--root", str(empty)]),
        },
        repeats,
    )
    shutil.rmtree(root)
    ratio = t["b3sum"] / t["library"]
    return [
        [
            f"{bundles} bundles x 5 x 2 KiB, `verify_repository` in process",
            f"{t['library']:.3f}",
            f"{t['b3sum']:.3f}",
            f"{ratio:.2f}x",
            ">= 0.5x " + ("ok" if ratio >= 0.5 else "MISSED"),
        ],
        [
            "the same as `evstore verify` (a process)",
            f"{t['cli']:.3f}",
            f"{t['b3sum']:.3f}",
            f"{t['b3sum'] / t['cli']:.2f}x",
            "(informative)",
        ],
        [
            "CLI fixed cost: `evstore verify` of an empty repository",
            f"{t['empty']:.3f}",
            "-",
            "-",
            "< 0.100 s " + ("ok" if t["empty"] < 0.1 else "MISSED"),
        ],
    ]


# The child that verifies one repository as a library call: imports and one warm-up on
# an empty repository first, so the time is the verification's alone.
_CHILD = """
import resource, sys, time
from evidencestore.verify import verify_repository
verify_repository(sys.argv[2])
def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
c0 = cpu()
t0 = time.perf_counter()
report = verify_repository(sys.argv[1])
elapsed = time.perf_counter() - t0
used = cpu() - c0
assert report.ok, "the generated repository does not verify"
# VmHWM, not ru_maxrss: after exec, the latter starts from the forking parent's peak
with open("/proc/self/status") as fh:
    hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
print(elapsed, report.totals.entries, hwm,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, used)
"""


def _tree_pss_kib(pid: int) -> int:
    """The proportional set size of ``pid`` and its descendants (KiB; Linux)."""
    total = 0
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            kids = [int(k) for k in fh.read().split()]
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            total = next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        return total
    return total + sum(_tree_pss_kib(k) for k in kids)


def _verify_child(root: Path, empty: Path) -> tuple[float, int, int, int, int, float]:
    """Verify ``root`` as a library call in a fresh process: seconds, entries, the
    child's and its workers' peak RSS (KiB), the peak sum of the tree's PSS (KiB),
    sampled every 20 ms, and the CPU seconds (user and system) of the child and its
    workers."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root), str(empty)],
        stdout=subprocess.PIPE,
        text=True,
    )
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _tree_pss_kib(proc.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"verifying {root} failed (exit {proc.returncode})")
    elapsed, entries, self_kib, children_kib, used = out.split()
    return float(elapsed), int(entries), int(self_kib), int(children_kib), peak[0], float(used)


def _scale_checkfile(root: Path, out: Path) -> Path:
    """A b3sum checkfile of every file the bundles of ``root`` keep (b3sum run on
    batches of paths: a million do not fit one command line)."""
    paths = sorted(
        str(p) for p in (root / "evidence").rglob("*") if p.is_file() and p.name != "bundle.json"
    )
    with open(out, "w") as fh:
        for at in range(0, len(paths), 10_000):
            done = subprocess.run(
                [B3SUM or "b3sum", *paths[at : at + 10_000]],
                check=True,
                capture_output=True,
                text=True,
            )
            fh.write(done.stdout)
    return out


def _scale(work: Path, big: int, repeats: int) -> None:
    """Time per entry and peak memory at 1,000 and ``big`` bundles (10 files each)."""
    from .make_bundles import make_repository

    empty = _repo(work / "X-empty")
    roots = {}
    for n in (1000, big):
        t0 = time.perf_counter()
        make_repository(work / f"X{n}", n)
        print(f"generated {n:,} bundles in {time.perf_counter() - t0:.1f} s", flush=True)
        roots[n] = work / f"X{n}"
    checks = {n: _scale_checkfile(roots[n], work / f"X{n}.b3") for n in roots}
    runs: dict[int, list[tuple[float, int, int, int, int, float]]] = {1000: [], big: []}
    b3: dict[int, list[float]] = {1000: [], big: []}
    _verify_child(roots[1000], empty)  # page cache and bytecode warm
    for _ in range(repeats):
        for n in (1000, big):
            for _ in range(3 if n == 1000 else 1):  # the short runs vary more
                runs[n].append(_verify_child(roots[n], empty))
                t0 = time.perf_counter()
                run_quiet([B3SUM or "b3sum", "--check", str(checks[n])])
                b3[n].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    run_quiet([*EVSTORE, "verify", "--root", str(roots[big])])
    cli_big = time.perf_counter() - t0

    def per_entry(n: int) -> float:
        return sorted(r[0] / r[1] for r in runs[n])[len(runs[n]) // 2]

    def cpu_per_entry(n: int) -> float:
        return sorted(r[5] / r[1] for r in runs[n])[len(runs[n]) // 2]

    def b3_per_file(n: int) -> float:
        return sorted(b3[n])[len(b3[n]) // 2] / (n * 10)

    base = per_entry(1000)
    rows = []
    for n in (1000, big):
        rss = max(r[2] for r in runs[n]) / 1024
        workers = max(r[3] for r in runs[n]) / 1024
        pss = max(r[4] for r in runs[n]) / 1024
        ratio = per_entry(n) / base
        cpu_ratio = cpu_per_entry(n) / cpu_per_entry(1000)
        rows.append(
            [
                f"{n:,}",
                f"{runs[n][0][1]:,}",
                f"{per_entry(n) * 1e6:.1f}",
                f"{ratio:.2f}x",
                f"{cpu_per_entry(n) * 1e6:.1f} ({cpu_ratio:.2f}x)",
                f"{rss:.0f} / {workers:.0f}",
                f"{pss:.0f}",
                f"{b3_per_file(n) * 1e6:.1f} ({b3_per_file(n) / b3_per_file(1000):.2f}x)",
                "" if n == 1000 else ("ok" if ratio <= 1.2 and pss < 1024 else "MISSED"),
            ]
        )
    print(
        table(
            f"verify scaling, `verify_repository` in a fresh process ({os.cpu_count()} CPUs; "
            f"median of {repeats} interleaved runs; 10 files of 64 B a bundle)",
            [
                "bundles",
                "entries",
                "us / entry",
                "vs 1,000",
                "CPU us / entry (vs 1,000)",
                "peak RSS MiB (process / worker)",
                "peak tree PSS MiB",
                "b3sum --check us / file (vs 1,000)",
                "target <= 1.2x, < 1 GiB",
            ],
            rows,
        )
    )
    print(
        f"`evstore verify` of the {big:,}-bundle repository (a process, text report): "
        f"{cli_big:.1f} s, {cli_big / runs[big][0][1] * 1e6:.1f} us / entry\n"
    )


def main(argv: list[str] | None = None) -> None:
    argv = argv or []
    quick = "--quick" in argv
    only = _option(argv, "--only")
    against = _option(argv, "--against")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if B3SUM is None:
        sys.exit("bench_verify needs b3sum (apt-get install b3sum)")
    repeats = 3 if quick else 7
    trees = {
        "T1 one 2 GiB file": (1, 1, (256 if quick else 2048) << 20, False),
        "T2 2,000 x 1 MiB": (1, 2000 // (4 if quick else 1), 1 << 20, False),
        "T3 20,000 x 4 KiB": (1, 20000 // (4 if quick else 1), 4096, False),
        "T4 2,000 bundles x 5 x 2 KiB": (2000 // (4 if quick else 1), 5, 2048, False),
        "T5 200 x 10 MiB store entries": (1, 200 // (4 if quick else 1), 10 << 20, True),
    }
    wanted = set(only.split(",")) if only else None
    before = ["before", "before ratio"] if against else []
    rows = []
    scale: list[tuple[int, float, float, float | None]] = []
    with tempfile.TemporaryDirectory(prefix="evstore-bench-verify-") as tmp:
        work = Path(tmp)
        for label, (bundles, files, size, external) in trees.items():
            key = label.split()[0]
            if wanted is not None and key not in wanted:
                continue
            root, check = _tree(work, key, bundles, files, size, external)
            flags = ["--require-available"] if external else []
            t = interleaved(_cases(flags, root, check, against), repeats)
            row = [
                # --quick: the counts actually run (a quarter of the label's)
                label if not quick else f"{key} (quick) {bundles} x {files} x {size:,} B",
                f"{t['evstore']:.3f}",
                f"{t['b3sum']:.3f}",
                f"{t['b3sum'] / t['evstore']:.2f}x",
            ]
            if against:
                row += [f"{t['before']:.3f}", f"{t['b3sum'] / t['before']:.2f}x"]
            rows.append(row)
            shutil.rmtree(root)
        if wanted is None or "empty" in wanted:
            empty = _repo(work / "empty")
            cases: dict[str, Callable[[], None]] = {
                "empty": lambda: run_quiet([*EVSTORE, "verify", "--root", str(empty)]),
                "python": lambda: run_quiet([sys.executable, "-c", "pass"]),
            }
            if against:
                env = {**os.environ, "PYTHONPATH": against}
                cases["before"] = lambda: _run_env([*EVSTORE, "verify", "--root", str(empty)], env)
            t = interleaved(cases, repeats)
            row = ["empty repository", f"{t['empty']:.3f}", "-", f"python alone {t['python']:.3f}"]
            if against:
                row += [f"{t['before']:.3f}", "-"]
            rows.append(row)
        if wanted is None or "lib" in wanted:
            print(
                table(
                    "issue 39: tiny bundles as a library call, and the CLI's fixed cost "
                    f"(medians of {repeats} interleaved runs, s)",
                    ["case", "evstore", "b3sum", "ratio", "target"],
                    _library(work, repeats, 500),
                ),
                flush=True,
            )
        if wanted is None or "scale" in wanted:
            big = int(_option(argv, "--bundles") or (10_000 if quick else 100_000))
            _scale(work, big, 1 if quick else 3)
        counts = (125, 250, 500) if quick else (500, 1000, 2000, 4000)
        for n in counts if wanted is None or "T4scale" in wanted else ():
            root, check = _tree(work, f"S{n}", n, 5, 2048, False)
            t = interleaved(_cases([], root, check, against), repeats)
            scale.append((n, t["evstore"], t["b3sum"], t.get("before")))
            shutil.rmtree(root)
    print(
        table(
            "evstore verify vs b3sum --check (medians, s)",
            ["tree", "evstore", "b3sum", "ratio", *before],
            rows,
        )
    )
    if not scale:
        return

    def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
        """Least-squares slope and intercept."""
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
        return b, my - b * mx

    def slope(points: list[tuple[int, float]]) -> float:
        return fit(points)[0]

    ours = slope([(n, e) for n, e, _, _ in scale])
    theirs = slope([(n, b) for n, _, b, _ in scale])
    print(
        table(
            "T4 scaling (5 files of 2 KiB per bundle)",
            ["bundles", "evstore", "b3sum", *before[:1]],
            [
                [n, f"{e:.3f}", f"{b:.3f}", *([f"{o:.3f}"] if o is not None else [])]
                for n, e, b, o in scale
            ],
        )
    )
    line = f"per-bundle cost: evstore {ours * 1e6:.0f} us, b3sum {theirs * 1e6:.0f} us"
    if against:
        old = slope([(n, o or 0.0) for n, _, _, o in scale])
        line += f", before {old * 1e6:.0f} us"
    print(line)
    line = (
        f"intercept: evstore {fit([(n, e) for n, e, _, _ in scale])[1] * 1e3:.0f} ms, "
        f"b3sum {fit([(n, b) for n, _, b, _ in scale])[1] * 1e3:.0f} ms"
    )
    if against:
        line += f", before {fit([(n, o or 0.0) for n, _, _, o in scale])[1] * 1e3:.0f} ms"
    print(line + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
