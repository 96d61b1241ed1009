"""Validation as content-addressed tasks: what a status needs and does not have.

A status computes two kinds of record, each kept by the digest of its inputs and the
tool version (``memo.py``): that key is the task's id.

- ``output-check``: one output decoded and checked, every frame and sample hashed
  (``media.decode.analyse``); key ``decoded.analysis_key(output digest)``, record a
  ``MediaReport``. Read by every pair the output is part of.
- ``output-pair``: one pair of outputs judged (``adjudication.Judge.judge``): both
  checked against their request's expectations, decoded content compared exactly,
  metrics for an unequal pair, raw arrays compared; key the Judge's memo key of the
  pair, record an ``OutputComparison``. It reads the analyses of both outputs (computed
  on the way when absent) and decodes frames again only for an unequal pair's metrics.
- ``output-lpips``: with ``[quality] lpips = true``, a pair judged INCONCLUSIVE with
  unequal video scored with the LPIPS weights pinned in ``evstore.toml`` (key: both
  outputs, the expectations and the weights' digests; record an ``LpipsScore``). It is
  listed once its pair's record is known (a second round of ``plan`` after the pairs).

``plan`` walks the campaign in the order a status judges it (repeatability, then every
candidate arm, per condition) with a :class:`~.adjudication.Judge` that plans instead of
judging, so the list is exactly the pairs the status would compute: no pair or analysis
the memo holds (a kept evaluation kept every pair and analysis it was computed from). The order is that walk's
(analyses first, then pairs), the same on every clone of a commit. ``shard`` selects a
stable subset by key (the key's integer value modulo N), so a task stays in its shard
when others complete. ``cost`` estimates the encoded bytes a task decodes: an output's
size for a check, both outputs' sizes for an unequal pair (its metrics decode them again
unless their frames are still held), 0 for byte-identical outputs.

``compute`` computes tasks in order in this process with one Judge (so an output decoded
for one task serves the next), each record written to the local memo under its key. The
same inputs give the same bytes wherever they are computed; where they travel, and what
makes a result computed elsewhere count, is ``results.py``. An :class:`Executor` runs
them elsewhere (``evidencestore.scale``: processes on this machine, a Ray cluster); the
caller hands one in, so this package never imports an executor.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from ..config import Repository, as_repository
from ..errors import ConfigError, EvidenceStoreError
from ..models import Descriptor
from ..storage import BlobStore
from .adjudication import PairInputs
from .decoded import analysis_key
from .memo import Memo, open_memo
from .protocol import Campaign

if TYPE_CHECKING:
    from .members import Members

__all__ = [
    "Executor",
    "Task",
    "TaskPlan",
    "compute",
    "parse_shard",
    "plan",
    "shard",
    "task_types",
]

Kind = Literal["output-check", "output-pair", "output-lpips"]


#: How many times decoding an LPIPS task's cost is estimated at (AlexNet on every frame).
LPIPS_COST = 8


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """One computation a status needs: its key (the memo key of its record), kind, the
    digests it reads, estimated cost (encoded bytes decoded), the keys of the analyses
    it reads (``needs``), and what computing it takes (``output`` or ``pair``)."""

    key: str
    kind: Kind
    inputs: dict[str, str | None]
    cost: int
    needs: tuple[str, ...] = ()
    output: Descriptor | None = None
    pair: PairInputs | None = None


class Executor(Protocol):
    """Runs tasks somewhere (``evidencestore.scale``: processes here, a Ray cluster),
    each record kept in the local memo of ``root`` by the time it returns (``fresh``:
    computed from the outputs alone, reading no kept record: ``compute``); returns key
    -> why for each task that could not be computed."""

    def __call__(
        self, root: Repository, tasks: Sequence[Task], *, fresh: bool = False
    ) -> dict[str, str]: ...


@dataclass
class TaskPlan:
    """The tasks of one campaign evaluation."""

    campaign: str
    tasks: list[Task] = field(default_factory=list)


def task_types(kind: str) -> type:
    """The record type a task of ``kind`` computes."""
    from ..media.records import MediaReport
    from .models import LpipsScore, OutputComparison

    return {"output-check": MediaReport, "output-lpips": LpipsScore}.get(kind, OutputComparison)


def plan(
    root: str | os.PathLike[str] | Repository,
    campaign: Campaign,
    *,
    base_rev: str | None = None,
    memo: Memo | None = None,
    members: Members | None = None,
    every: bool = False,
) -> TaskPlan:
    """Every task a status of ``campaign`` needs and the local memo lacks (``every``:
    whether kept or not), in order."""
    from .adjudication import adjudicate, repeatability
    from .members import campaign_runs

    repo = as_repository(root)
    if members is None:
        members = campaign_runs(repo, campaign, base=base_rev)
    local = repo.local_store()
    memo = memo if memo is not None else open_memo(local)
    out = TaskPlan(campaign.name)
    checks: dict[str, Task] = {}
    pairs: dict[str, Task] = {}
    scores: dict[str, Task] = {}

    def add(key: str, kind: str, p: PairInputs) -> None:
        if key in pairs or key in scores:
            return
        same = p.reference.digest == p.candidate.digest
        needs: list[str] = []
        if not same:
            for desc in (p.reference, p.candidate):
                akey = analysis_key(desc.digest)
                needs.append(akey)
                if akey not in checks and (every or not memo.has(akey)):
                    checks[akey] = Task(
                        key=akey, kind="output-check", inputs={"output": desc.digest},
                        cost=desc.size, output=desc,
                    )  # fmt: skip
        inputs: dict[str, str | None] = {
            "reference": p.reference.digest,
            "candidate": p.candidate.digest,
        }
        for name, (da, db) in sorted(p.arrays.items()):
            inputs[f"arrays/{name}/reference"] = da.digest if da else None
            inputs[f"arrays/{name}/candidate"] = db.digest if db else None
        cost = 0 if same else p.reference.size + p.candidate.size
        if kind == "output-lpips":
            scores[key] = Task(
                key=key, kind="output-lpips", inputs=inputs, cost=LPIPS_COST * cost,
                needs=tuple(needs), pair=p,
            )  # fmt: skip
            return
        pairs[key] = Task(
            key=key, kind="output-pair", inputs=inputs, cost=cost, needs=tuple(needs), pair=p
        )

    from .adjudication import Judge

    judge = Judge(repo, local, memo, plan=add, plan_all=every)
    everyone = members.including_withdrawn()
    base = campaign.baseline
    for cond in campaign.protocol.condition:
        b_runs = everyone.of(cond.name, base.name)
        repeat = repeatability(repo, local, campaign, cond.name, b_runs, judge=judge)
        if repeat is None:
            continue
        for arm in campaign.candidates:
            a_runs = everyone.of(cond.name, arm.name)
            adjudicate(
                repo, local, campaign, cond.name, arm.name, repeat, b_runs, a_runs, judge=judge
            )
    out.tasks = [*checks.values(), *pairs.values(), *scores.values()]
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) as a pair; a :class:`ConfigError` naming the value otherwise."""
    left, sep, right = text.partition("/")
    try:
        i, n = int(left), int(right)
    except ValueError:
        i = n = -1
    if not sep or n < 1 or not 0 <= i < n:
        raise ConfigError(
            f"{{shard}} {text!r}: expected I/N with 0 <= I < N (e.g. 0/4)", parameters=("shard",)
        )
    return i, n


def shard(tasks: Iterable[Task], index: int, count: int) -> list[Task]:
    """The tasks of shard ``index`` of ``count``: by key, so stable as others complete."""
    return [t for t in tasks if int(t.key.removeprefix("blake3:"), 16) % count == index]


def compute(
    root: str | os.PathLike[str] | Repository,
    tasks: Sequence[Task],
    *,
    store: BlobStore | None = None,
    memo: Memo | None = None,
    fresh: bool = False,
) -> dict[str, str]:
    """Compute ``tasks`` in order in this process, each record kept in the local memo
    under its key; outputs are read through ``store`` (default: the local store, then
    the configured remotes, verified). ``fresh``: read no kept record, not even an
    output's analysis (a worker signs only what it computed; a record taken from a
    remote may sit in the memo). Returns key -> why, for every task that could not be
    computed (an input neither here nor on a remote): the others are kept."""
    from .adjudication import Judge

    repo = as_repository(root)
    if store is None:
        from ..remotes import repository_store

        store = repository_store(repo)
    memo = memo if memo is not None else open_memo(repo.local_store())
    judge = Judge(repo, store, None if fresh else memo)
    failed: dict[str, str] = {}
    for task in tasks:
        try:
            if task.output is not None:
                _, report = judge.outputs.report(task.output)  # the memo's when not fresh
                if fresh:
                    memo.put(task.key, report)
            elif task.kind == "output-lpips" and task.pair is not None:
                memo.put(task.key, judge.score_lpips(task.pair))
            elif task.pair is not None:
                record, lasting = judge.judge(task.pair)
                if not lasting:
                    failed[task.key] = "; ".join(record.reasons)
                    continue
                memo.put(task.key, record)
                judge.outputs.release(task.pair.candidate)
        except EvidenceStoreError as exc:
            failed[task.key] = str(exc)
    return failed
