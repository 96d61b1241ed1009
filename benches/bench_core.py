"""Core hashing and verification against b3sum 1.2 (issue 2).

Each case is timed two ways: the ``evstore`` CLI as a process (what a CI job runs,
interpreter start included) and the library's hashing engine in this process. Ratios
are throughputs relative to b3sum measured in the same run (>1 means faster than
b3sum); ``b3sum --check`` is the peer for verification. Run: ``make bench`` or
``python -m benches.bench_core [--quick]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._util import EVSTORE, interleaved, run_quiet, table

B3SUM = shutil.which("b3sum")
Row = list[object]


def _files(base: Path, count: int, size: int) -> list[Path]:
    base.mkdir(parents=True, exist_ok=True)
    out = []
    block = os.urandom(size)
    for i in range(count):
        p = base / f"f{i:06d}.bin"
        p.write_bytes(i.to_bytes(8, "little") + block[8:])
        out.append(p)
    return out


def _read_all(paths: list[Path]) -> None:
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 22):
                pass


def _engine(paths: list[Path], sizes: list[int], repeats: int) -> float:
    """Median seconds of ``hash_files`` in this process (no interpreter start)."""
    from evidencestore.digest import hash_files

    names = [str(p) for p in paths]
    hash_files(names, sizes)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        hash_files(names, sizes)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _row(label: str, unit: str, amount: float, ours: float, peer: float, target: str) -> Row:
    return [
        label,
        unit,
        f"{amount / ours:.2f}",
        f"{amount / peer:.2f}",
        f"{peer / ours:.2f}x",
        target,
    ]


def bench_big_file(work: Path, size: int, repeats: int) -> list[Row]:
    path = work / "big.bin"
    with open(path, "wb") as fh:
        chunk = os.urandom(64 << 20)
        for _ in range(size // len(chunk)):
            fh.write(chunk)
    _read_all([path])  # into page cache
    assert B3SUM
    t = interleaved(
        {
            "evstore": lambda: run_quiet([*EVSTORE, "hash", str(path)]),
            "b3sum": lambda: run_quiet([B3SUM, str(path)]),
        },
        repeats,
    )
    engine = _engine([path], [size], repeats)
    path.unlink()
    gib = size / (1 << 30)
    what = f"1 file of {gib:.0f} GiB in page cache"
    return [
        _row(f"`evstore hash`, {what}", "GiB/s", gib, t["evstore"], t["b3sum"], "0.95x"),
        _row(f"engine `hash_file`, {what}", "GiB/s", gib, engine, t["b3sum"], "0.95x"),
    ]


def bench_verify(work: Path, name: str, count: int, size: int, repeats: int) -> list[Row]:
    repo = work / f"repo-{name}"
    src = work / f"src-{name}"
    _files(src / "data", count, size)
    repo.mkdir()
    run_quiet([*EVSTORE, "bundle", "create", name, str(src / "data"), "--root", str(repo)])
    shutil.rmtree(src)
    bdir = repo / "evidence" / name / "data"
    sums = work / f"{name}.b3"
    with open(sums, "w") as fh:
        subprocess.run(
            [B3SUM or "b3sum", *sorted(os.listdir(bdir))], cwd=bdir, stdout=fh, check=True
        )
    files = sorted(bdir.iterdir())
    _read_all(files)
    t = interleaved(
        {
            "evstore": lambda: run_quiet(
                [*EVSTORE, "verify", "--root", str(repo), "--bundle", name]
            ),
            "b3sum": lambda: run_quiet([B3SUM or "b3sum", "--check", str(sums)], cwd=bdir),
        },
        repeats,
    )
    engine = _engine(files, [size] * len(files), repeats)
    shutil.rmtree(repo)
    what = f"{count} files of {size // 1024} KiB"
    if size >= 1 << 20:
        unit, amount = "MiB/s", count * size / (1 << 20)
    else:
        unit, amount = "files/s", float(count)
    return [
        _row(
            f"`evstore verify` of a bundle of {what}",
            unit,
            amount,
            t["evstore"],
            t["b3sum"],
            "1.1x",
        ),
        _row(f"engine `hash_files`, {what}", unit, amount, engine, t["b3sum"], "1.1x"),
    ]


def bench_manifest(entries: int, repeats: int) -> Row:
    from evidencestore._canonical import pretty
    from evidencestore.bundle import make_manifest, seal
    from evidencestore.digest import hash_bytes
    from evidencestore.inventory import decode_registration
    from evidencestore.merkle import bundle_digest
    from evidencestore.models import Descriptor, Entry

    es = []
    for i in range(entries):
        h = hash_bytes(i.to_bytes(4, "little"))
        desc = Descriptor(digest=h.digest, size=h.size, media_type="image/png")
        es.append(
            Entry(
                path=f"run{i % 100:03d}/frame{i:06d}.png",
                descriptor=desc,
                location="store" if i % 3 else "repo",
            )
        )
    reg = seal(make_manifest("big", es, producer="bench"))
    data = pretty(reg)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        decoded = decode_registration(data, "bench")
        ok = bundle_digest(decoded.manifest) == reg.digest
        times.append(time.perf_counter() - t0)
        assert ok
    label = f"decode + digest a {entries:,}-entry manifest ({len(data) / 1e6:.0f} MB)"
    return [label, "s", f"{statistics.median(times):.3f}", "-", "-", "<= 0.5 s"]


def main(argv: list[str] | None = None) -> str:
    """Run the core benchmarks and return the table (printed too)."""
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    if not B3SUM:
        raise SystemExit("b3sum not found: apt-get install b3sum")
    reps = 3 if quick else 5
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(
        prefix="evstore-bench-", dir=os.environ.get("BENCH_DIR")
    ) as tmp:
        work = Path(tmp)
        rows += bench_big_file(work, (256 << 20) if quick else (2 << 30), reps)
        rows += bench_verify(work, "mib", 200 if quick else 2000, 1 << 20, reps)
        rows += bench_verify(work, "kib", 2000 if quick else 20000, 4096, reps)
    rows.append(bench_manifest(100_000, 5))
    out = table(
        f"core vs b3sum 1.2 ({os.cpu_count()} CPUs; medians of interleaved runs)",
        ["case", "unit", "evstore", "b3sum", "throughput vs b3sum", "target"],
        rows,
    )
    print(out)
    return out


if __name__ == "__main__":
    main()
