"""A campaign's tasks on the cores of this machine: ``jobs`` worker processes.

Tasks are grouped into chunks that share decoding (``chunks``): a pair and the analyses
of its outputs, every pair with the same reference output together, so one process
decodes each output once and keeps its frames for the metrics of its pairs, as a single
process would. Chunks go to the processes largest first. Each process computes its
chunks with ``tasks.compute`` and keeps every record in the repository's local memo:
blobs are written create-only and atomically, each index entry is replaced whole and
names one key, and two processes computing the same key write the same bytes, so no
interleaving of processes loses or changes a record. A task's record does not depend
on which process computed it or in which order, so the records are byte-identical to
those of ``jobs = 1``. Processes are forked from a single-threaded parent (they start
with its imports), else started with ``spawn`` (a fork with live threads, such as a
remote client's, can deadlock). Each computes on one torch thread; before forking for
LPIPS tasks the parent loads the pinned scorer once (``_share_scorer``), which every
process inherits instead of importing torch and loading the weights itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ..campaign.tasks import Task, compute

if TYPE_CHECKING:
    from ..config import Repository
    from ..storage import BlobStore

__all__ = ["SMALL", "LocalProcesses", "available_cpus", "chunks", "run_tasks"]


def available_cpus() -> int:
    """The cores this process may run on (its affinity mask or cgroup's quota where
    Python can tell; at least 1)."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return int(count() or 1)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def chunks(tasks: Sequence[Task]) -> list[list[Task]]:
    """``tasks`` grouped so that work sharing a decoding stays together (module doc),
    each chunk in the tasks' order, chunks by cost, largest first (ties by first key)."""
    group_of: dict[str, str] = {}  # task key -> group (a pair's reference digest)
    for t in tasks:
        if t.pair is not None:
            group = t.pair.reference.digest
            group_of[t.key] = group
            for k in t.needs:
                group_of.setdefault(k, group)
    groups: dict[str, list[Task]] = {}
    for t in tasks:
        groups.setdefault(group_of.get(t.key, t.key), []).append(t)
    out = list(groups.values())
    out.sort(key=lambda c: (-sum(t.cost for t in c), c[0].key))
    return [sorted(c, key=lambda t: t.kind != "output-check") for c in out]


def _one_thread() -> None:
    """In a worker process: one compute thread (the processes are the parallelism;
    torch, for LPIPS, would otherwise start one thread per core in each, and FFmpeg's
    decoders as many again)."""
    from ..media.decode import set_decode_threads

    os.environ["OMP_NUM_THREADS"] = "1"
    set_decode_threads(False)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _work(root: str, encoded: bytes, fresh: bool) -> dict[str, str]:
    """In a worker process: compute one chunk (tasks as JSON) in the repository the
    parent resolved (``root``, taken as given: never walked up from again)."""
    from ..config import Repository

    _one_thread()
    tasks = msgspec.json.decode(encoded, type=list[Task])
    return compute(Repository(root), tasks, fresh=fresh)


def run_tasks(
    root: str | os.PathLike[str] | Repository,
    tasks: Sequence[Task],
    *,
    jobs: int = 1,
    store: BlobStore | None = None,
    fresh: bool = False,
    min_cost: int = 0,
) -> dict[str, str]:
    """Compute ``tasks`` in ``jobs`` processes (this one when 1, or when they decode
    fewer than ``min_cost`` bytes in all: starting a process costs more), each record
    kept in the local memo; returns key -> why for each task that could not be
    computed (``fresh``: see ``tasks.compute``)."""
    from ..config import as_repository

    repo = as_repository(root)
    if not tasks:
        return {}
    parts = chunks(tasks)
    if jobs <= 1 or len(parts) == 1 or sum(t.cost for t in tasks) < min_cost:
        return compute(repo, [t for c in parts for t in c], store=store, fresh=fresh)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .._fork import can_fork

    failed: dict[str, str] = {}
    forked = can_fork()
    ctx = multiprocessing.get_context("fork" if forked else "spawn")
    threads = _share_scorer(repo) if forked and any(t.kind == "output-lpips" for t in tasks) else 0
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(parts)), mp_context=ctx) as pool:
            futures = [
                pool.submit(_work, str(repo.root), msgspec.json.encode(c), fresh) for c in parts
            ]
            if threads:  # forked at the first submit: this process's torch as it was
                sys.modules["torch"].set_num_threads(threads)
                threads = 0
            for f in futures:
                failed.update(f.result())
    finally:
        if threads:
            sys.modules["torch"].set_num_threads(threads)
    return failed


def _share_scorer(repo: Repository) -> int:
    """Before forking workers for LPIPS tasks: the pinned scorer loaded here once, which
    every worker inherits (torch, torchvision and lpips imported, the weights verified
    and built once, not once per process: seconds of CPU each). Loaded on one torch
    thread, so no thread pool exists to be forked; returns the thread count to restore
    once forked (0: nothing to restore). A scorer that cannot be had is left to the
    tasks, each failing with why."""
    from ..campaign.adjudication import lpips_scorer
    from ..errors import EvidenceStoreError

    try:
        import torch
    except ImportError:
        return 0
    threads = int(torch.get_num_threads())
    torch.set_num_threads(1)
    with contextlib.suppress(EvidenceStoreError):
        lpips_scorer(repo)
    return threads


#: Below this many encoded bytes to decode, the tasks run in this process when the number
#: of processes was not asked for: starting one (importing PyAV) costs about a second.
SMALL = 8 << 20


class LocalProcesses:
    """An executor (``campaign.tasks.Executor``) of ``jobs`` processes on this machine
    (default: the cores available, and only for work of at least ``SMALL`` bytes)."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = available_cpus() if jobs is None else jobs
        self.min_cost = SMALL if jobs is None else 0

    def __call__(
        self, root: Repository, tasks: Sequence[Task], *, fresh: bool = False
    ) -> dict[str, str]:
        return run_tasks(root, tasks, jobs=self.jobs, fresh=fresh, min_cost=self.min_cost)
