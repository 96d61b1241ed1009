"""The runs of a campaign: found by their registration, checked against the protocol.

A run belongs to campaign ``NAME`` when its registration says ``kind = run`` and
``campaign = NAME``. It contributes only when it was recorded under this protocol's
digest, for a condition and arm the protocol declares, with the condition's workload
and the arm's configuration files, and (in a git repository) after the protocol was
committed (``history.py``). Every other run is kept in the list of exclusions, with the
reason, never silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..config import repository_at
from ..errors import EvidenceStoreError
from ..inventory import load_inventory
from ..models import Registration
from ..runs import RunRecord, load_run
from .history import HistoryCheck, check_history
from .models import Exclusion
from .protocol import Campaign

__all__ = ["Member", "Members", "campaign_runs"]


@dataclass(frozen=True)
class Member:
    """One run of the campaign: its bundle name and digest, registration and record."""

    name: str
    digest: str
    registration: Registration
    record: RunRecord

    @property
    def complete(self) -> bool:
        """Whether every request delivered a valid output."""
        return self.record.outcome == "complete"


@dataclass
class Members:
    """The runs that count, those that do not (with why), and the history check."""

    runs: list[Member] = field(default_factory=list)
    excluded: list[Exclusion] = field(default_factory=list)
    history: HistoryCheck | None = None

    def of(self, condition: str, arm: str) -> list[Member]:
        """The counted runs of one condition and arm, by name."""
        return [m for m in self.runs if m.record.condition == condition and m.record.arm == arm]


def campaign_runs(
    root: str | os.PathLike[str], campaign: Campaign, *, history: bool = True
) -> Members:
    """Every run registered for ``campaign``, sorted by name, each counted or excluded."""
    root = repository_at(root)
    inventory = load_inventory(root)
    names = [
        n
        for n, reg in sorted(inventory.registrations.items())
        if reg.manifest.metadata.annotations.get("kind") == "run"
        and reg.manifest.metadata.annotations.get("campaign") == campaign.name
    ]
    out = Members()
    out.history = check_history(root.root, campaign.name, names) if history else None
    conditions = {c.name for c in campaign.protocol.condition}
    for name in names:
        try:
            record = load_run(root, name)
        except EvidenceStoreError as exc:
            out.excluded.append(Exclusion(run=name, code="unreadable-run", message=str(exc)))
            continue
        why = _exclusion(campaign, conditions, name, record)
        if why is None and out.history is not None and name in out.history.before:
            why = ("before-protocol", out.history.before[name])
        if why is not None:
            out.excluded.append(
                Exclusion(
                    run=name,
                    code=why[0],
                    message=why[1],
                    condition=record.condition,
                    arm=record.arm,
                )
            )
            continue
        reg = inventory.registrations[name]
        out.runs.append(Member(name, reg.digest, reg, record))
    return out


def missing_provenance(record: RunRecord, required: Sequence[str]) -> list[str]:
    """The items of ``required`` (``Protocol.require``) the run does not carry."""
    s = record.launched
    have = {
        "server.argv": s is not None and bool(s.argv),
        "server.env": s is not None,
        "server.log": s is not None and s.log is not None,
        "metrics": s is not None
        and all(x is not None and x.body is not None for x in (s.metrics_before, s.metrics_after)),
        "version": s is not None
        and all(x is not None and x.body is not None for x in (s.version_before, s.version_after)),
    }
    return [item for item in required if not have.get(item, False)]


def _exclusion(
    campaign: Campaign, conditions: set[str], name: str, record: RunRecord
) -> tuple[str, str] | None:
    if record.protocol_digest != campaign.digest:
        return (
            "other-protocol",
            f"run {name!r} was recorded under protocol {record.protocol_digest}, not "
            f"{campaign.digest} (campaign {campaign.name!r})",
        )
    if record.condition not in conditions:
        return "unknown-condition", f"run {name!r}: condition {record.condition!r} is not declared"
    if record.arm not in {a.name for a in campaign.protocol.arm}:
        return "unknown-arm", f"run {name!r}: arm {record.arm!r} is not declared"
    missing = missing_provenance(record, campaign.protocol.require)
    if missing:
        return (
            "missing-provenance",
            f"run {name!r} lacks the provenance the protocol requires: {', '.join(missing)} "
            "(evstore run --launch records the server's argv, environment, log, /metrics "
            "and /version)",
        )
    want_harness = campaign.harness(record.condition)
    got_harness = record.harness.name if record.harness is not None else None
    if got_harness != want_harness:
        return (
            "harness-mismatch",
            f"run {name!r} was {f'imported from {got_harness}' if got_harness else 'run by evstore'}"
            f", but condition {record.condition!r} takes "
            f"{f'runs imported from {want_harness}' if want_harness else 'evstore runs'}: "
            "harnesses are not mixed within a condition (the protocol's condition.harness)",
        )
    want = campaign.workload_digest(record.condition)
    if record.workload_digest != want:
        return (
            "workload-mismatch",
            f"run {name!r} ran workload {record.workload_digest}, but condition "
            f"{record.condition!r} requires {want}: the workloads differ",
        )
    declared = campaign.config_digests(record.arm)
    if declared:
        got = frozenset(d.digest for d in record.configs.values())
        if got != declared:
            return (
                "config-mismatch",
                f"run {name!r}: its configuration files ({', '.join(sorted(record.configs))}) "
                f"are not the ones arm {record.arm!r} declares",
            )
    return None
