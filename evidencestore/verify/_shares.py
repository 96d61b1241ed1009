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
import mmap
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from .._fork import can_fork, cpu_count, fork_map
from ..inventory import BundleDirs
from ..models import BundleReport, Finding, Registration
from ..progress import Observer, Tick
from ._pipeline import Context, Early, pipeline

__all__ = [
    "BATCH_DIRS",
    "LARGE_BUNDLE",
    "SPLIT_MIN_BUNDLES",
    "Counts",
    "dir_shares",
    "forked",
    "may_split",
    "settle",
    "shares",
    "step_size",
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
    ``verify_repository``): collections then walk one batch's objects, not lists that
    grow with the repository (each full collection visited every report and directory
    entry again: 0.72 us an entry at 100,000 bundles, 0.18 at 1,000). The batch's
    cyclic garbage is collected first (a walk of what is not frozen yet: this batch's
    objects alone), so none of it is frozen to wait for the unfreeze at the end."""
    if gc.get_freeze_count():
        gc.collect()
        gc.freeze()


class Counts:
    """Bundles done and failed in each share, kept in memory shared with the forked
    workers (each writes its own slot after each step), drawn here as one
    :class:`~evidencestore.progress.Tick` of the whole: by this process after each of
    its own steps, and while it waits for the workers (:meth:`tick`). Only this
    process calls the observer; a share redone here starts its slot again."""

    _SLOT = struct.Struct("<qq")

    def __init__(self, observer: Observer, total: int, shares: int) -> None:
        self.observer = observer
        self.total = total
        # anonymous and shared (MAP_SHARED, the default): the workers' writes show here
        self._slots = mmap.mmap(-1, self._SLOT.size * max(1, shares))
        self._pid = os.getpid()

    def step(self, share: int, done: int, failed: int) -> None:
        """Share ``share`` has ``done`` bundle directories done, ``failed`` of them
        failed."""
        self._SLOT.pack_into(self._slots, self._SLOT.size * share, done, failed)
        if os.getpid() == self._pid:
            self.tick()

    def tick(self) -> None:
        """Tell the observer where every share stands together."""
        done = failed = 0
        for d, f in self._SLOT.iter_unpack(self._slots):
            done += d
            failed += f
        self.observer(Tick("verify", done, self.total, "bundles", failed))


def step_size(share: int, counts: Counts | None) -> int:
    """Bundle directories a step (a batch loaded, verified and dropped): ``BATCH_DIRS``,
    or, when progress is drawn, about a twentieth of the share (at least half of
    ``SPLIT_MIN_BUNDLES``), so that the count moves while the share is verified."""
    if counts is None:
        return BATCH_DIRS
    return max(SPLIT_MIN_BUNDLES // 2, min(BATCH_DIRS, share // 20))


def forked(
    run: Callable[[S], bytes],
    parts: Sequence[S],
    decode: Callable[[S, bytes], R | None],
    redo: Callable[[S], R],
    waiting: Callable[[], None] | None = None,
) -> list[R]:
    """``run`` on each share in a forked worker, its bytes decoded by ``decode``; a
    share whose worker failed, or whose answer does not decode (``decode`` raises
    ``msgspec.DecodeError`` or returns None), is done again here by ``redo``.
    ``waiting``: called now and then while the workers work (see ``fork_map``)."""
    import msgspec

    out: list[R] = []
    for share, data in zip(parts, fork_map(run, parts, waiting), strict=True):
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
    ctx: Context,
    regs: Mapping[str, Registration],
    early: Early | None = None,
    observer: Observer | None = None,
) -> list[BundleReport]:
    """Every bundle's report, in order: many bundles are split across forked workers
    (each runs the whole pipeline on its share, a step at a time when ``observer``
    hears of the bundles done); otherwise one pipeline runs here (with ``early``,
    hashing started before the registrations were decoded)."""
    parts = shares(ctx, regs)
    if early is not None and parts:
        early.pending.cancel()  # not split when it was started: dropped
    if not parts:
        return pipeline(ctx, regs, early=early)
    import msgspec

    counts = Counts(observer, len(regs), len(parts)) if observer is not None else None
    numbered = list(enumerate(parts))

    def steps(k: int, share: list[str], threads: int | None) -> list[BundleReport]:
        if counts is None:
            return pipeline(ctx, {n: regs[n] for n in share}, threads=threads)
        out: list[BundleReport] = []
        size = step_size(len(share), counts)
        for at in range(0, len(share), size):
            out.extend(pipeline(ctx, {n: regs[n] for n in share[at : at + size]}, threads=threads))
            counts.step(k, len(out), sum(not r.ok for r in out))
        return out

    def run(part: tuple[int, list[str]]) -> bytes:
        return msgspec.msgpack.encode(steps(*part, threads=1))

    decoder = msgspec.msgpack.Decoder(list[BundleReport])

    def decode(part: tuple[int, list[str]], data: bytes) -> list[BundleReport] | None:
        reports = decoder.decode(data)
        return reports if len(reports) == len(part[1]) else None

    def redo(part: tuple[int, list[str]]) -> list[BundleReport]:
        return steps(*part, threads=None)

    by_name: dict[str, BundleReport] = {}
    got = forked(run, numbered, decode, redo, counts.tick if counts is not None else None)
    for share, reports in zip(parts, got, strict=True):
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
    ctx: Context,
    dirs: BundleDirs,
    parts: list[list[os.DirEntry[str]]],
    observer: Observer | None = None,
) -> tuple[list[Finding], list[BundleReport]]:
    """Each share's registrations loaded and verified in a forked worker: the findings
    about its directories and its bundles' reports, joined in directory order.
    ``observer`` hears of the bundle directories done and failed, a step at a time."""
    import msgspec

    total = sum(len(p) for p in parts)
    counts = Counts(observer, total, len(parts)) if observer is not None else None
    numbered = list(enumerate(parts))

    def run(part: tuple[int, list[os.DirEntry[str]]]) -> bytes:
        return msgspec.msgpack.encode(_batched(ctx, dirs, *part, threads=1, counts=counts))

    decoder = msgspec.msgpack.Decoder(tuple[list[Finding], list[BundleReport]])

    def decode(
        _part: tuple[int, list[os.DirEntry[str]]], data: bytes
    ) -> tuple[list[Finding], list[BundleReport]]:
        return decoder.decode(data)

    def redo(
        part: tuple[int, list[os.DirEntry[str]]],
    ) -> tuple[list[Finding], list[BundleReport]]:
        return _batched(ctx, dirs, *part, threads=None, counts=counts)

    found: list[Finding] = []
    reports: list[BundleReport] = []
    for got in forked(run, numbered, decode, redo, counts.tick if counts is not None else None):
        found.extend(got[0])
        reports.extend(got[1])
    return found, reports


def _batched(
    ctx: Context,
    dirs: BundleDirs,
    k: int,
    share: list[os.DirEntry[str]],
    threads: int | None,
    counts: Counts | None = None,
) -> tuple[list[Finding], list[BundleReport]]:
    """The findings and reports of share ``k``, loaded and verified :data:`BATCH_DIRS`
    directories at a time (each batch's registrations dropped once judged; smaller
    steps when ``counts`` hears of them, see :func:`step_size`); a batch holding a
    large bundle hashes on forked workers of its own (``threads`` None)."""
    found: list[Finding] = []
    reports: list[BundleReport] = []
    size = step_size(len(share), counts)
    failed = 0
    for at in range(0, len(share), size):
        part = dirs.load(share[at : at + size])
        regs = part.registrations
        large = any(len(r.manifest.entries) >= LARGE_BUNDLE for r in regs.values())
        found.extend(part.findings)
        new = pipeline(ctx, regs, threads=None if large else threads)
        reports.extend(new)
        if counts is not None:
            failed += sum(not r.ok for r in new)
            # a directory whose registration could not be read is a failure too
            failed += sum(f.severity == "error" and f.bundle not in regs for f in part.findings)
            counts.step(k, min(len(share), at + size), failed)
        del part, regs, new
        settle()
    return found, reports
