"""LPIPS frames per second, batched vs one frame at a time.

Loads the authenticated scorer (``evidencestore.perceptual.load_scorer``) from a
generated AlexNet-shaped backbone (torchvision's architecture, fixed seed; the real
233 MB file cannot be downloaded here, and the weights' values do not change the cost)
and lpips's shipped linear weights, both through an in-memory blob store, then scores
1280x720 frame pairs at several batch sizes and prints a table.

    python benches/bench_lpips.py [--frames 8] [--batch-sizes 1,2,4,8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import time
from collections.abc import Sequence


def _scorer(device: str) -> object:
    import torch
    import torchvision

    from evidencestore.perceptual import default_linear_path, load_scorer
    from evidencestore.storage import MemoryBlobStore

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        state = torchvision.models.alexnet(weights=None).state_dict()
    buf = io.BytesIO()
    torch.save(state, buf)
    store = MemoryBlobStore()
    backbone = store.put(buf.getvalue())
    linear = store.put_file(default_linear_path())
    return load_scorer(store, backbone, linear, device=device)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table; return 0."""
    import dataclasses

    import numpy as np
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--frames", type=int, default=8, help="frame pairs per measurement")
    parser.add_argument("--batch-sizes", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.batch_sizes.split(",")]

    t0 = time.perf_counter()
    base = _scorer(args.device)
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    shape = (args.frames, args.height, args.width, 3)
    reference = rng.integers(0, 256, shape, dtype=np.uint8)
    noise = rng.integers(-8, 9, shape, dtype=np.int16)
    candidate = np.clip(reference.astype(np.int16) + noise, 0, 255).astype(np.uint8)

    print(
        f"LPIPS (alex, v0.1) at {args.width}x{args.height}, {args.frames} frame pairs, "
        f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"
    )
    print(f"scorer loaded from the store in {load_s:.2f} s (default batch_size {base.batch_size})")  # type: ignore[attr-defined]
    print(f"{'batch':>5} {'seconds':>9} {'frames/s':>9} {'ms/frame':>9} {'vs batch 1':>10}")
    scorers = {size: dataclasses.replace(base, batch_size=size) for size in sizes}  # type: ignore[type-var]
    for size, scorer in scorers.items():
        scorer.score(reference[:size], candidate[:size])  # warm-up
    # Rounds interleave the batch sizes, so load from other processes hits them alike.
    best = dict.fromkeys(sizes, float("inf"))
    results: dict[int, list[float]] = {}
    for _ in range(args.repeats):
        for size, scorer in scorers.items():
            start = time.perf_counter()
            results[size] = scorer.score(reference, candidate)
            best[size] = min(best[size], time.perf_counter() - start)
    first_rate = args.frames / best[sizes[0]]
    for size in sizes:
        rate = args.frames / best[size]
        print(
            f"{size:>5} {best[size]:>9.3f} {rate:>9.2f} {1000 * best[size] / args.frames:>9.1f} "
            f"{rate / first_rate:>9.2f}x"
        )
    spread = max(
        max(abs(a - b) for a, b in zip(results[sizes[0]], results[s], strict=True)) for s in sizes
    )
    print(f"largest score difference between batch sizes: {spread:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
