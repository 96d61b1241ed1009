"""Results computed elsewhere: published to a remote by key, collected by a status.

A task's result (``tasks.py``) travels as blobs: the record in its stored form
(``memo.kept_bytes``: ``{key, record}``, so it names the key it answers), and, from a
worker with a key, a DSSE envelope of an in-toto statement whose subject is that blob and
whose predicate names the key (``PREDICATE_RESULT``). A small entry names both
(``{key, result, signature}``) at ``<remote>/results/<key hex>/<entry hex>.json``, where
``<entry hex>`` is the BLAKE3 digest of the entry's own bytes: the key-addressed place a
clone looks a result up by.

Why no interleaving loses data: every object written is named by a function of its
bytes (blobs by their digest, entries by theirs), and each is written whole (a temporary
renamed into place, or one PUT) after the blobs it names. Two workers computing the same
task write the same record and, with the same key, the same envelope (ed25519 signatures
are deterministic), hence the same entry under the same name: registered once, whatever
the order of their writes. Workers with different keys, or a worker that computed a
different answer, write different names beside it; nothing is overwritten with different
bytes, so nothing is lost. A reader that lists while a worker is between its blobs and its
entry sees no entry for the key, a miss: it computes the task itself. An entry whose name
is not its digest, whose blobs are absent or do not verify, or whose record does not
decode under its key, is no result.

What counts (``collect``): a result is a claim about the evidence. One signed by a key
the protocol pins (``[signing] workers``) counts. Unsigned ones (or signed by another
key) count only when the status re-computes a random sample of them (``recheck``) from
the outputs and every one agrees byte for byte; a mismatch, or two different results
under one key, refuses every remote result of the campaign, and the status says so as a
finding. With ``recheck = 0``, or when a sampled task cannot be computed here (an
output missing), unsigned results are not used. ``recheck`` samples per planning round
(LPIPS tasks are a second round). Whatever counted is copied
into the local memo; the status then reads it as it reads its own records, and says
which protection the remote results rest on.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from .. import _steps
from .._canonical import canonical, decode
from ..digest import digest_hex, hash_bytes
from ..errors import ConfigError, EvidenceStoreError, RemoteConfigError
from ..models import Descriptor, Model
from ..storage import BlobStore, MemoryBlobStore, SupportsResults
from .memo import Memo, kept_record
from .tasks import Executor, Task, compute, task_types

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from ..config import Repository
    from ..remotes import Remote
    from .members import Members
    from .protocol import Campaign

__all__ = [
    "PREDICATE_RESULT",
    "Collected",
    "Found",
    "ResultEntry",
    "WorkSummary",
    "collect",
    "find",
    "prepare",
    "publish",
    "work",
]

PREDICATE_RESULT = "https://evidencestore.dev/attestation/result/v1"
RESULT_TYPE = "application/vnd.evidencestore.campaign-memo+json"
ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
DEFAULT_RECHECK = 3


class ResultEntry(Model, frozen=True, kw_only=True):
    """A result's entry on a remote: the key, the record blob, its signature blob."""

    key: str
    result: Descriptor
    signature: Descriptor | None = None


@dataclass(frozen=True)
class Found:
    """A result found on a remote, bound to its key; ``signer`` the pinned worker key
    id whose signature verified (None: unsigned, or not signed by a pinned key)."""

    key: str
    data: bytes
    digest: str
    signer: str | None
    remote: str


def _statement(key: str, data: bytes) -> object:
    from ..dsse import Statement, Subject

    hexd = hash_bytes(data).digest.removeprefix("blake3:")
    return Statement(
        subject=(Subject(name=f"result/{key}", digest={"blake3": hexd}),),
        predicate_type=PREDICATE_RESULT,
        predicate={"key": key},
    )


def publish(
    store: BlobStore, key: str, data: bytes, signer: Ed25519PrivateKey | None = None
) -> str:
    """Write result ``data`` (``memo.kept_bytes`` form) for ``key`` to ``store``: its
    blobs, then its entry (see module doc); return the entry's name. Idempotent."""
    from ..dsse import Statement, sign_statement

    upkeep = store.upkeep
    if not isinstance(upkeep, SupportsResults):
        raise RemoteConfigError(f"{store.location}: cannot hold results (no results/ place)")
    result = store.put(data, RESULT_TYPE)
    signature = None
    if signer is not None:
        statement = _statement(key, data)
        assert isinstance(statement, Statement)
        envelope = canonical(sign_statement(statement, signer))
        signature = store.put(envelope, ENVELOPE_TYPE)
    entry = canonical(ResultEntry(key=key, result=result, signature=signature))
    name = f"{digest_hex(key)}/{digest_hex(hash_bytes(entry).digest)}.json"
    _steps.reached("results:blobs-written")
    if name not in set(upkeep.iter_results(name)):
        upkeep.write_result(name, entry)
    _steps.reached("results:entry-written")
    return name


def find(
    store: BlobStore,
    wanted: dict[str, type],
    workers: dict[str, Ed25519PublicKey],
    remote: str = "",
) -> tuple[dict[str, list[Found]], list[str]]:
    """The results ``store`` holds for the keys of ``wanted`` (key -> record type), each
    bound to its key and verified; and why each entry that is no result was skipped."""
    upkeep = store.upkeep
    out: dict[str, list[Found]] = {}
    skipped: list[str] = []
    if not (isinstance(upkeep, SupportsResults) and upkeep.supports_results):
        return out, skipped
    by_hex = {digest_hex(k): k for k in wanted}
    for name in upkeep.iter_results():
        khex, _, ename = name.partition("/")
        key = by_hex.get(khex)
        if key is None:
            continue
        try:
            raw = upkeep.read_result(name)
            if f"{digest_hex(hash_bytes(raw).digest)}.json" != ename:
                skipped.append(f"{remote}: results/{name}: its bytes are not its name")
                continue
            entry = decode(raw, ResultEntry)
            if entry.key != key:
                skipped.append(f"{remote}: results/{name}: names key {entry.key}")
                continue
            data = store.get(entry.result.digest, entry.result.size)
        except (OSError, EvidenceStoreError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            skipped.append(f"{remote}: results/{name}: {exc}")
            continue
        if kept_record(data, key, wanted[key]) is None:
            skipped.append(f"{remote}: results/{name}: its record is not bound to key {key}")
            continue
        signer = _signer(store, entry, key, data, workers)
        out.setdefault(key, []).append(Found(key, data, entry.result.digest, signer, remote))
    return out, skipped


def _signer(
    store: BlobStore,
    entry: ResultEntry,
    key: str,
    data: bytes,
    workers: dict[str, Ed25519PublicKey],
) -> str | None:
    """The pinned worker key id whose signature over this very result verifies."""
    from ..dsse import Statement, decode_envelope, first_signer

    if entry.signature is None or not workers:
        return None
    try:
        env = decode_envelope(store.get(entry.signature.digest, entry.signature.size), key)
    except EvidenceStoreError:
        return None
    if (signed := first_signer(env, workers)) is None:
        return None
    kid, payload = signed
    try:
        same = canonical(decode(payload, Statement)) == canonical(_statement(key, data))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return kid if same else None


@dataclass
class Collected:
    """What a status took from remotes, what it computed, and what it rests on."""

    signed: int = 0
    rechecked: int = 0
    accepted_unsigned: int = 0
    unused: int = 0
    refused: int = 0
    computed: int = 0
    uncheckable: int = 0
    findings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def add(self, other: Collected) -> None:
        """Count ``other`` (another round) in too."""
        for name in ("signed", "rechecked", "accepted_unsigned", "unused", "refused",
                     "computed", "uncheckable"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.findings += other.findings
        self.skipped += other.skipped

    def notes(self) -> list[str]:
        """The protection lines a status shows for its remote results."""
        out = []
        if self.signed:
            out.append(
                f"protection: {self.signed} remote result(s) signed by a worker key the "
                "protocol pins ([signing] workers)"
            )
        if self.accepted_unsigned:
            out.append(
                f"protection: {self.accepted_unsigned} unsigned remote result(s), counted "
                f"after {self.rechecked} chosen at random were computed again here and agreed"
            )
        if self.unused:
            why = (
                f"{self.uncheckable} of those chosen to be rechecked could not be computed "
                "here (an input missing)"
                if self.uncheckable
                else "no recheck and no pinned worker signature"
            )
            out.append(f"{self.unused} unsigned remote result(s) not used ({why}): computed here")
        out += [f"finding: {f}" for f in self.findings]
        return out


def collect(
    repo: Repository,
    campaign: Campaign,
    tasks: Sequence[Task],
    memo: Memo,
    store: BlobStore,
    *,
    recheck: int = DEFAULT_RECHECK,
    rng: random.Random | None = None,
) -> tuple[Collected, list[Task]]:
    """Take what the configured remotes hold for ``tasks`` into the local ``memo`` under
    the rules of the module doc; return what was done and the tasks still to compute."""
    from ..remotes import configured_remotes

    got = Collected()
    if not tasks:
        return got, []
    wanted = {t.key: task_types(t.kind) for t in tasks}
    workers = campaign.worker_keys(repo.root)
    found: dict[str, list[Found]] = {}
    for remote in configured_remotes(repo):
        try:
            here, skipped = find(remote.store, wanted, workers, remote.name)
        except EvidenceStoreError as exc:
            got.skipped.append(f"{remote.name}: {exc}")
            continue
        got.skipped += skipped
        for key, items in here.items():
            found.setdefault(key, []).extend(items)
    if not found:
        return got, list(tasks)
    conflicts = [k for k, items in found.items() if len({f.digest for f in items}) > 1]
    for key in conflicts:
        where = ", ".join(sorted({f"{f.remote}: {f.digest}" for f in found[key]}))
        got.findings.append(
            f"remote-result-conflict: task {key} has different results on the remotes "
            f"({where}): every remote result of campaign {campaign.name!r} refused, "
            "computed here"
        )
    signed = {k: items[0] for k, items in found.items() if any(f.signer for f in items)}
    unsigned = {k: items[0] for k, items in found.items() if k not in signed}
    rechecked: dict[str, bytes] = {}
    unchecked = 0  # sampled, but an input could not be had: no recheck happened
    if unsigned and recheck > 0 and not conflicts:
        pick = (rng or random.SystemRandom()).sample(sorted(unsigned), min(recheck, len(unsigned)))
        by_key = {t.key: t for t in tasks}
        for key in pick:
            mine = _recompute(repo, by_key[key], by_key, store)
            got.computed += 1
            if mine is None:
                unchecked += 1  # an input missing here: nothing was rechecked
                continue
            rechecked[key] = mine
            if mine != unsigned[key].data:
                got.findings.append(
                    f"remote-result-mismatch: task {key} ({by_key[key].kind}) on remote "
                    f"{unsigned[key].remote!r} is {unsigned[key].digest}, but computing it "
                    f"here gives {hash_bytes(mine).digest}: every remote result of campaign "
                    f"{campaign.name!r} refused, computed here"
                )
    if got.findings:
        got.refused = len(found)
        for key, data in rechecked.items():
            memo.put_bytes(key, data)  # computed here: kept as any local record
        return got, [t for t in tasks if t.key not in rechecked]
    adopted: set[str] = set()
    for key, f in signed.items():
        memo.put_bytes(key, f.data)
        adopted.add(key)
    got.signed = len(signed)
    if recheck > 0 and unchecked == 0:
        for key, f in unsigned.items():
            memo.put_bytes(key, rechecked.get(key, f.data))
            adopted.add(key)
        got.rechecked = len(rechecked)
        got.accepted_unsigned = len(unsigned)
    else:  # no recheck asked for, or one that could not run: unsigned ones not used
        for key, data in rechecked.items():
            memo.put_bytes(key, data)
            adopted.add(key)
        got.unused = len(unsigned) - len(rechecked)
        got.uncheckable = unchecked
    return got, [t for t in tasks if t.key not in adopted]


def _recompute(
    repo: Repository, task: Task, by_key: dict[str, Task], store: BlobStore
) -> bytes | None:
    """``task`` computed here from the outputs alone (a scratch memo: no result from
    elsewhere is read), its stored bytes; None when an input cannot be had."""
    needs = [by_key[k] for k in task.needs if k in by_key]
    if task.kind in ("output-pair", "output-lpips"):  # analyses computed here too
        needs = [
            Task(key=k, kind="output-check", inputs={}, cost=0, output=d)
            for k, d in _outputs_of(task)
        ]
    with tempfile.TemporaryDirectory(prefix="evstore-recheck-") as tmp:
        scratch = Memo(MemoryBlobStore(), tmp)
        failed = compute(repo, [*needs, task], store=store, memo=scratch)
        if task.key in failed:
            return None
        return scratch.stored(task.key)


def _outputs_of(task: Task) -> list[tuple[str, Descriptor]]:
    from .decoded import analysis_key

    p = task.pair
    if p is None or p.reference.digest == p.candidate.digest:
        return []
    return [(analysis_key(d.digest), d) for d in (p.reference, p.candidate)]


# -- workers ----------------------------------------------------------------------------
@dataclass
class WorkSummary:
    """What ``work`` did: tasks computed, results published, found already there, failed."""

    tasks: int = 0
    computed: int = 0
    published: int = 0
    present: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    remote: str | None = None


def _push_store(repo: Repository, name: str | None) -> Remote | None:
    from ..remotes import configured_remotes, open_remote

    if name is not None:
        remote = open_remote(repo, name)
        if remote.config.read_only:
            raise RemoteConfigError(f"remote {name!r} is read-only: results cannot be pushed")
        return remote
    for remote in configured_remotes(repo):
        if not remote.config.read_only and not remote.config.url.startswith(("http:", "https:")):
            return remote
    return None


def work(
    root: str | os.PathLike[str] | Repository,
    campaign: Campaign,
    *,
    keys: Iterable[str] = (),
    shard: tuple[int, int] | None = None,
    push: str | None = None,
    signer: Ed25519PrivateKey | None = None,
    executor: Executor | None = None,
    members: Members | None = None,
) -> WorkSummary:
    """Compute the campaign's tasks (those named by ``keys``, else every one, within
    ``shard``), reading outputs through the configured remotes, verified; keep each
    result in the local memo and publish it (signed with ``signer``) to remote ``push``
    (default: the first writable one). Every result is computed here from the outputs
    (a pair's analyses with it), never read from the local memo, which may hold results
    taken from a remote. Idempotent: a result the push remote holds already, from this
    signer, is neither computed nor written again."""
    from ..config import as_repository
    from .memo import open_memo
    from .tasks import plan
    from .tasks import shard as select

    repo = as_repository(root)
    target = _push_store(repo, push)
    summary = WorkSummary(remote=target.name if target else None)
    memo = open_memo(repo.local_store())
    wanted = list(dict.fromkeys(keys))
    listed: dict[str, Task] = {}
    kid = pins = None
    if signer is not None:
        from ..dsse import key_id

        kid = key_id(signer.public_key())
        pins = {kid: signer.public_key()}
    with tempfile.TemporaryDirectory(prefix="evstore-work-") as tmp:
        # What planning knows of pairs (to list their LPIPS tasks): those computed here
        # and those on the push remote. It decides only what to compute, never a result.
        known = Memo(MemoryBlobStore(), tmp)
        for _ in range(2):  # LPIPS tasks are listed once their pairs are known
            every = [
                t
                for t in plan(repo, campaign, members=members, memo=known, every=True).tasks
                if t.key not in listed
            ]
            listed |= {t.key: t for t in every}
            chosen = [t for t in every if not wanted or t.key in wanted]
            if shard is not None:
                chosen = select(chosen, *shard)
            pairs = {t.key: task_types(t.kind) for t in every if t.kind == "output-pair"}
            _work_round(repo, chosen, target, memo, signer, kid, pins, executor, summary)
            ours = {t.key for t in chosen}
            for key in pairs:
                data = memo.stored(key) if key in ours else None
                if data is not None:
                    known.put_bytes(key, data)
            if target is not None:
                found, _ = find(target.store, pairs, {})
                for key, items in found.items():
                    if not known.has(key):
                        known.put_bytes(key, items[0].data)
    unknown = [k for k in wanted if k not in listed]
    if unknown:
        raise ConfigError(
            f"campaign {campaign.name!r}: no task {unknown[0]} (list them with "
            f"`evstore campaign tasks {campaign.name}`)"
        )
    return summary


def _work_round(
    repo: Repository,
    chosen: list[Task],
    target: Remote | None,
    memo: Memo,
    signer: Ed25519PrivateKey | None,
    kid: str | None,
    pins: dict[str, Ed25519PublicKey] | None,
    executor: Executor | None,
    summary: WorkSummary,
) -> None:
    from ..remotes import repository_store

    summary.tasks += len(chosen)
    mine: set[str] = set()
    if target is not None:
        have, _ = find(target.store, {t.key: task_types(t.kind) for t in chosen}, pins or {})
        mine = {k for k, items in have.items() if any(f.signer == kid for f in items)}
        summary.present += len(mine)
    # Computed here from the outputs, whatever the local memo holds (it may hold a
    # result taken from a remote): what this worker publishes, and signs, it computed.
    todo = [t for t in chosen if t.key not in mine]
    if executor is not None:
        failed = executor(repo, todo, fresh=True)
    else:
        failed = compute(repo, todo, store=repository_store(repo), fresh=True)
    summary.failed.update(failed)
    summary.computed += len(todo) - len(failed)
    if target is None:
        return
    for task in todo:
        if task.key in failed:
            continue
        data = memo.stored(task.key)
        if data is None or kept_record(data, task.key, task_types(task.kind)) is None:
            summary.failed.setdefault(task.key, "its result is not in the local memo")
            continue
        publish(target.store, task.key, data, signer)
        summary.published += 1


def prepare(
    repo: Repository,
    campaign: Campaign,
    members: Members,
    memo: Memo,
    store: BlobStore,
    *,
    executor: Executor | None = None,
    recheck: int = DEFAULT_RECHECK,
) -> Collected:
    """Before a status judges: list its tasks, take what the remotes hold under the
    rules of the module doc, and run the rest with ``executor`` (without one, the
    status computes them as it judges)."""
    from .tasks import plan

    got = Collected()
    seen: set[str] = set()
    for _ in range(2):  # LPIPS tasks are listed once their pairs are known
        tasks = [
            t for t in plan(repo, campaign, members=members, memo=memo).tasks if t.key not in seen
        ]
        if not tasks:
            break
        seen |= {t.key for t in tasks}
        if got.findings:  # refused in the first round: refused in the second too
            pending = tasks
        else:
            round_, pending = collect(repo, campaign, tasks, memo, store, recheck=recheck)
            got.add(round_)
        if executor is not None and pending:
            failed = executor(repo, pending)
            got.computed += len(pending) - len(failed)
    return got
