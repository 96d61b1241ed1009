"""Core hashing and verification against b3sum (issue 2).

Ratios are throughputs relative to b3sum measured in the same run (>1 means faster
than b3sum). Run: ``python -m benches.bench_core`` (or ``make bench``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ._util import EVSTORE, interleaved, run_quiet, table

B3SUM = shutil.which("b3sum")


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


def bench_big_file(work: Path, size: int, repeats: int) -> list[object]:
    path = work / "big.bin"
    with open(path, "wb") as fh:
        chunk = os.urandom(64 << 20)
        for _ in range(size // len(chunk)):
            fh.write(chunk)
    _read_all([path])  # into page cache
    assert B3SUM
    t = interleaved(
        {
            "evstore hash": lambda: run_quiet([*EVSTORE, "hash", str(path)]),
            "b3sum": lambda: run_quiet([B3SUM, str(path)]),
        },
        repeats,
    )
    path.unlink()
    gib = size / (1 << 30)
    return [
        f"1 file of {gib:.0f} GiB (page cache)",
        "GiB/s",
        f"{gib / t['evstore hash']:.2f}",
        f"{gib / t['b3sum']:.2f}",
        f"{t['b3sum'] / t['evstore hash']:.2f}x",
        "0.95x",
    ]


def bench_verify(
    work: Path, name: str, count: int, size: int, repeats: int, target: str
) -> list[object]:
    repo = work / f"repo-{name}"
    src = work / f"src-{name}"
    files = _files(src / "data", count, size)
    repo.mkdir()
    run_quiet([*EVSTORE, "bundle", "create", name, str(src / "data"), "--root", str(repo)])
    shutil.rmtree(src)
    bdir = repo / "evidence" / name / "data"
    sums = work / f"{name}.b3"
    import subprocess

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
    shutil.rmtree(repo)
    label = f"verify {count} files of {size // 1024} KiB"
    if size >= 1 << 20:
        mib = count * size / (1 << 20)
        return [
            label,
            "MiB/s",
            f"{mib / t['evstore']:.0f}",
            f"{mib / t['b3sum']:.0f}",
            f"{t['b3sum'] / t['evstore']:.2f}x",
            target,
        ]
    return [
        label,
        "files/s",
        f"{count / t['evstore']:.0f}",
        f"{count / t['b3sum']:.0f}",
        f"{t['b3sum'] / t['evstore']:.2f}x",
        target,
    ]


def bench_manifest(entries: int, repeats: int) -> list[object]:
    from evidencestore._canonical import pretty
    from evidencestore.bundle import make_manifest, seal
    from evidencestore.digest import hash_bytes
    from evidencestore.inventory import decode_registration
    from evidencestore.merkle import bundle_digest
    from evidencestore.models import Descriptor, Entry

    es = []
    for i in range(entries):
        h = hash_bytes(i.to_bytes(4, "little"))
        es.append(
            Entry(
                path=f"run{i % 100:03d}/frame{i:06d}.png",
                descriptor=Descriptor(digest=h.digest, size=h.size, media_type="image/png"),
                location="store" if i % 3 else "repo",
            )
        )
    reg = seal(make_manifest("big", es, producer="bench"))
    data = pretty(reg)
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        decoded = decode_registration(data, "bench")
        ok = bundle_digest(decoded.manifest) == reg.digest
        best.append(time.perf_counter() - t0)
        assert ok
    import statistics

    med = statistics.median(best)
    return [
        f"decode + digest a {entries:,}-entry manifest ({len(data) / 1e6:.0f} MB)",
        "s",
        f"{med:.3f}",
        "-",
        "-",
        "<= 0.5 s",
    ]


def main(argv: list[str] | None = None) -> str:
    """Run the core benchmarks and return the table (printed too)."""
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    if not B3SUM:
        raise SystemExit("b3sum not found: apt-get install b3sum")
    rows = []
    with tempfile.TemporaryDirectory(
        prefix="evstore-bench-", dir=os.environ.get("BENCH_DIR")
    ) as tmp:
        work = Path(tmp)
        rows.append(bench_big_file(work, (256 << 20) if quick else (2 << 30), 3 if quick else 5))
        rows.append(
            bench_verify(work, "mib", 200 if quick else 2000, 1 << 20, 3 if quick else 5, "1.1x")
        )
        rows.append(
            bench_verify(work, "kib", 2000 if quick else 20000, 4096, 3 if quick else 5, "1.1x")
        )
    rows.append(bench_manifest(100_000, 5))
    out = table(
        f"core vs b3sum ({os.cpu_count()} CPUs; medians of interleaved runs; evstore timed as a CLI process)",
        ["case", "unit", "evstore", "b3sum", "ratio (throughput vs b3sum)", "target"],
        rows,
    )
    print(out)
    return out


if __name__ == "__main__":
    main()
