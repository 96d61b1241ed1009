"""Many bundles split across forked workers, each running the whole pipeline on its
share (:mod:`evidencestore._fork`).

Given the registrations, bundles are dealt largest first onto the least loaded worker
(:func:`verify_bundles`); given only the listing of bundle directories, each worker
reads and decodes its own contiguous run of registrations too
(:func:`verify_dir_shares`), so none is decoded here first. Either way a worker that
dies, is cut short or sends what does not decode has its share verified again here
(:func:`forked`, the one redo rule), so the report never depends on forking.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from .._fork import can_fork, cpu_count, fork_map
from ..inventory import BundleDirs
from ..models import BundleReport, Finding, Registration
from ._pipeline import Context, Early, pipeline

__all__ = [
    "BATCH_DIRS",
    "LARGE_BUNDLE",
    "SPLIT_MIN_BUNDLES",
    "dir_shares",
    "forked",
    "may_split",
    "settle",
    "shares",
    "verify_bundles",
    "verify_dir_shares",
]

S = TypeVar("S")
R = TypeVar("R")

# Forking whole-pipeline workers pays once a repository has this many bundles (each
# bundle's cost is mostly its own syscalls and interpreter work, which one process
# cannot overlap), and only when no bundle is most of the work (one large bundle is
# split file by file instead).
SPLIT_MIN_BUNDLES = 64

# A worker's share with a bundle of this many entries hashes on forked workers of its
# own (one large bundle among many small ones would otherwise be hashed on one core).
LARGE_BUNDLE = 2000

# A worker loads, verifies and drops its registrations this many bundle directories at
# a time: its memory stays that of one batch (plus the small reports) however many
# bundles the repository holds, and the time per entry stays flat (no heap of every
# registration for the cyclic collector to walk again and again).
BATCH_DIRS = 1000


def settle() -> None:
    """Move what lives on (the listing, the reports so far) out of the cyclic
    collector's way, when verification froze what existed before it (see
    ``verify_repository``): a full collection then walks one batch's objects, not lists
    that grow with the repository (each full collection visited every report and
    directory entry again: 0.72 us an entry at 100,000 bundles, 0.18 at 1,000).
    Frozen objects are still freed when nothing refers to them; only a cycle among
    them waits for the unfreeze at the end."""
    if gc.get_freeze_count():
        gc.freeze()


def forked(
    run: Callable[[S], bytes],
    parts: Sequence[S],
    decode: Callable[[S, bytes], R | None],
    redo: Callable[[S], R],
) -> list[R]:
    """``run`` on each share in a forked worker, its bytes decoded by ``decode``; a
    share whose worker failed, or whose answer does not decode (``decode`` raises
    ``msgspec.DecodeError`` or returns None), is done again here by ``redo``."""
    import msgspec

    out: list[R] = []
    for share, data in zip(parts, fork_map(run, parts), strict=True):
        got: R | None = None
        if data is not None:
            with contextlib.suppress(msgspec.DecodeError):
                got = decode(share, data)
        out.append(redo(share) if got is None else got)
    return out


def may_split(ctx: Context, bundles: int, workers: int) -> bool:
    """Whether ``bundles`` bundles go to ``workers`` forked workers: enough of both, and
    only over local files (a worker must not use a network client it inherited)."""
    return (
        workers >= 2
        and bundles >= SPLIT_MIN_BUNDLES
        and (ctx.store is None or ctx.local is not None)
        and can_fork()
    )


def shares(ctx: Context, regs: Mapping[str, Registration]) -> list[list[str]]:
    """The bundles each worker verifies (largest first onto the least loaded worker),
    or none when the work stays in this process (see :func:`may_split`)."""
    workers = cpu_count()
    if not may_split(ctx, len(regs), workers):
        return []
    weight = {n: 1 + len(r.manifest.entries) for n, r in regs.items()}
    total = sum(weight.values())
    if max(weight.values()) * workers > total:
        return []
    out: list[list[str]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for name in sorted(regs, key=lambda n: -weight[n]):
        k = loads.index(min(loads))
        out[k].append(name)
        loads[k] += weight[name]
    return [share for share in out if share]


def verify_bundles(
    ctx: Context, regs: Mapping[str, Registration], early: Early | None = None
) -> list[BundleReport]:
    """Every bundle's report, in order: many bundles are split across forked workers
    (each runs the whole pipeline on its share); otherwise one pipeline runs here
    (with ``early``, hashing started before the registrations were decoded)."""
    parts = shares(ctx, regs)
    if early is not None and parts:
        early.pending.cancel()  # not split when it was started: dropped
    if not parts:
        return pipeline(ctx, regs, early=early)
    import msgspec

    def run(share: list[str]) -> bytes:
        return msgspec.msgpack.encode(pipeline(ctx, {n: regs[n] for n in share}, threads=1))

    decoder = msgspec.msgpack.Decoder(list[BundleReport])

    def decode(share: list[str], data: bytes) -> list[BundleReport] | None:
        reports = decoder.decode(data)
        return reports if len(reports) == len(share) else None

    def redo(share: list[str]) -> list[BundleReport]:
        return pipeline(ctx, {n: regs[n] for n in share})

    by_name: dict[str, BundleReport] = {}
    for share, reports in zip(parts, forked(run, parts, decode, redo), strict=True):
        by_name.update(zip(share, reports, strict=True))
    return [by_name[n] for n in regs]


def dir_shares(ctx: Context, dirs: BundleDirs) -> list[list[os.DirEntry[str]]]:
    """Contiguous runs of bundle directories of equal length (one a worker, at least
    half of ``SPLIT_MIN_BUNDLES`` each), or none when the work stays in this process
    (see :func:`may_split`). Each worker then reads and decodes its own registrations,
    so no bundle is decoded here first, and nothing here is read to weigh the bundles
    (a worker that finds a large one among its own hashes it on forked workers of its
    own)."""
    found = dirs.dirs
    workers = min(cpu_count(), len(found) // (SPLIT_MIN_BUNDLES // 2))
    if not may_split(ctx, len(found), workers):
        return []
    size, extra = divmod(len(found), workers)
    cuts = [k * size + min(k, extra) for k in range(workers + 1)]
    return [found[a:b] for a, b in itertools.pairwise(cuts)]


def verify_dir_shares(
    ctx: Context, dirs: BundleDirs, parts: list[list[os.DirEntry[str]]]
) -> tuple[list[Finding], list[BundleReport]]:
    """Each share's registrations loaded and verified in a forked worker: the findings
    about its directories and its bundles' reports, joined in directory order."""
    import msgspec

    def run(share: list[os.DirEntry[str]]) -> bytes:
        return msgspec.msgpack.encode(_batched(ctx, dirs, share, threads=1))

    decoder = msgspec.msgpack.Decoder(tuple[list[Finding], list[BundleReport]])

    def decode(
        _share: list[os.DirEntry[str]], data: bytes
    ) -> tuple[list[Finding], list[BundleReport]]:
        return decoder.decode(data)

    def redo(share: list[os.DirEntry[str]]) -> tuple[list[Finding], list[BundleReport]]:
        return _batched(ctx, dirs, share, threads=None)

    found: list[Finding] = []
    reports: list[BundleReport] = []
    for got in forked(run, parts, decode, redo):
        found.extend(got[0])
        reports.extend(got[1])
    return found, reports


def _batched(
    ctx: Context, dirs: BundleDirs, share: list[os.DirEntry[str]], threads: int | None
) -> tuple[list[Finding], list[BundleReport]]:
    """The findings and reports of ``share``, loaded and verified :data:`BATCH_DIRS`
    directories at a time (each batch's registrations dropped once judged); a batch
    holding a large bundle hashes on forked workers of its own (``threads`` None)."""
    found: list[Finding] = []
    reports: list[BundleReport] = []
    for at in range(0, len(share), BATCH_DIRS):
        part = dirs.load(share[at : at + BATCH_DIRS])
        regs = part.registrations
        large = any(len(r.manifest.entries) >= LARGE_BUNDLE for r in regs.values())
        found.extend(part.findings)
        reports.extend(pipeline(ctx, regs, threads=None if large else threads))
        del part, regs
        settle()
    return found, reports
