"""Run identity: one run counts once, and one arm is one server and one configuration.

A run is identified by its content, never by its bundle name:

- its record (the digest of ``run.json``): the same bytes under a second name;
- for an imported run, the harness execution it was imported from
  (``Harness.execution``: LoadGen's detail log and trace, AIPerf's per-request records),
  however the side files imported with it differ;
- its measurements (every request's monotonic send, first-byte, last-byte and end
  nanoseconds and its UTC start to the microsecond, with the body digest): two
  executions never share them, so a run copied with its name, arm or start time edited
  is still the same run;
- the bodies it received for a request that cannot produce the same output twice, as
  the run itself shows: its repetitions of that request (two or more, the same payload
  bytes sent each time) never gave the same body. A body digest of such a request shared by two runs means one was copied
  from the other. (A deterministic server gives every repetition, and every run, the
  same bytes for a seeded request, or for an unseeded one it seeds itself; that is the
  repeatability a baseline is qualified by, not a copy.)

Runs sharing any of these are one run. The one committed first by ancestry
(``members.py``: the base branch first, never by committer date; then the one started
first, then by name) is the one that counts; every other copy is excluded, naming it.
Keeping one rather than none: the first registration is the ledger's own record of the
execution, the copies add nothing, and excluding all would let anyone remove an honest
run from a campaign by registering a copy of it.

Server identity: every run of one arm must have answered with the same model ids and
server header (which carries the server's name and version); otherwise the arm mixes
servers and no claim rests on it. Configuration files are compared over every run of
an arm, not its first only (``config_changes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from .._canonical import canonical
from ..digest import hash_bytes
from ..errors import EvidenceStoreError
from ..runs import RunRecord, diff_configs
from ..storage import BlobStore
from .models import Exclusion


class Member(Protocol):
    """What these rules read of a campaign's run (``members.Member``)."""

    @property
    def name(self) -> str: ...

    @property
    def record(self) -> RunRecord: ...


__all__ = ["config_changes", "duplicates", "run_keys", "server_changes"]


def run_keys(record: RunRecord, record_digest: str) -> list[tuple[str, str]]:
    """The content keys that identify a run (see the module doc)."""
    keys = [("record", record_digest)]
    if record.harness is not None and record.harness.execution is not None:
        keys.append(("execution", record.harness.execution))
    timings = [
        (r.index, r.sent_ns, r.first_byte_ns, r.last_byte_ns, r.end_ns, r.start_utc,
         r.body.digest if r.body else None)
        for r in record.requests
    ]  # fmt: skip
    if any(t[1] or t[3] or t[4] for t in timings):
        keys.append(("measurements", hash_bytes(canonical(timings)).digest))
    bodies: dict[tuple[int, str], list[str]] = {}
    for r in record.requests:
        if r.body is not None:  # repetitions of one request: the same bytes sent
            bodies.setdefault((r.request, r.payload.digest), []).append(r.body.digest)
    for digests in bodies.values():
        if len(digests) >= 2 and len(set(digests)) == len(digests):
            keys += [("body", d) for d in digests]
    return keys


_WHAT = {
    "record": "the same run record (run.json {key})",
    "execution": "the same harness execution (its detail log or per-request records, {key})",
    "measurements": "the same measurements (every request's timings and body)",
    "body": "the same response body {key} for a request whose repetitions never gave the "
    "same body twice",
}


def duplicates(
    order: Sequence[str], keys: dict[str, list[tuple[str, str]]]
) -> dict[str, tuple[str, str]]:
    """For each run that repeats an earlier one (in ``order``, the first committed first):
    the run it repeats and what they share."""
    seen: dict[tuple[str, str], str] = {}
    out: dict[str, tuple[str, str]] = {}
    for name in order:
        mine = keys.get(name, [])
        hit = next((k for k in mine if k in seen), None)
        if hit is not None:
            out[name] = (seen[hit], _WHAT[hit[0]].format(key=hit[1]))
            continue
        for k in mine:
            seen.setdefault(k, name)
    return out


def _server(record: RunRecord) -> tuple[tuple[str, ...], str | None]:
    return record.server.model_ids, record.server.server_header


def _describe(ident: tuple[tuple[str, ...], str | None]) -> str:
    models = ", ".join(ident[0]) or "none"
    return f"model ids [{models}], server {ident[1]!r}"


def server_changes(members: Iterable[Member]) -> list[Exclusion]:
    """A finding per arm whose runs answered from servers with different identities
    (runs whose server check failed are left out: they answered nothing)."""
    by_arm: dict[str, list[Member]] = {}
    for m in members:
        if m.record.server.ok:
            by_arm.setdefault(m.record.arm, []).append(m)
    found = []
    for arm, runs in sorted(by_arm.items()):
        groups: dict[tuple[tuple[str, ...], str | None], list[str]] = {}
        for m in runs:
            groups.setdefault(_server(m.record), []).append(m.name)
        if len(groups) < 2:
            continue
        parts = "; ".join(f"{', '.join(names)}: {_describe(k)}" for k, names in groups.items())
        found.append(
            Exclusion(
                run=", ".join(sorted(n for names in list(groups.values())[1:] for n in names)),
                code="server-changed",
                message=f"arm {arm!r}: its runs answered from different servers ({parts}): "
                "one arm is one server, so no claim rests on these runs",
                arm=arm,
            )
        )
    return found


def config_changes(store: BlobStore, runs: Sequence[Member]) -> list[str]:
    """A sentence per run whose configuration files differ from the first run's."""
    out = []
    for m in runs[1:]:
        try:
            diff = diff_configs(runs[0].record, m.record, store)
        except EvidenceStoreError as exc:
            out.append(f"the configuration of run {m.name!r} cannot be compared: {exc}")
            continue
        if diff:
            keys = ", ".join(d.key for d in diff[:5]) + (", ..." if len(diff) > 5 else "")
            out.append(
                f"arm {m.record.arm!r}: run {m.name!r} has another configuration than "
                f"{runs[0].name!r} ({keys}): one arm is one configuration"
            )
    return out
