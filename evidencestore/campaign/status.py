"""Campaign status: conditions by arms, the overall verdict, and what remains, in words.

A baseline cell is qualified when its required runs are complete and it is
repeatable-exact; a candidate cell when its required runs are complete, it is lossless
(PASS) and its speedup claim stands (``claims.py``: an interval over runs whose low end
exceeds ``timing.min_speedup``, 1.0 unless the protocol says otherwise, within the
measurement resolution), or the protocol makes no timing claim (``timing.claim =
false``; the notes then say the verdict certifies outputs only). The campaign is
``ACCEPTED`` only when every cell of every condition is qualified and the history shows
every counted run recorded after the protocol was committed; otherwise ``remaining``
says what is missing, one sentence each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from ..config import repository_at
from .adjudication import adjudicate, repeatability
from .claims import make_claim
from .members import Member, campaign_runs
from .models import (
    Adjudication,
    ArmSpec,
    CellStatus,
    Claim,
    Repeatability,
    Speedup,
    StatusRecord,
    Verdict,
)
from .protocol import Campaign

__all__ = ["CampaignEvaluation", "evaluate"]


@dataclass
class CampaignEvaluation:
    """The status and every record it was computed from."""

    status: StatusRecord
    repeatability: dict[str, Repeatability] = field(default_factory=dict)
    adjudications: dict[str, Adjudication] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)


def evaluate(root: str | os.PathLike[str], campaign: Campaign) -> CampaignEvaluation:
    """Compute repeatability, verdicts, claims and the status of ``campaign``."""
    root = repository_at(root)  # the root as given: its store is never looked for above it
    store = root.local_store()
    members = campaign_runs(root, campaign)
    protocol = campaign.protocol
    base = campaign.baseline
    cells: list[CellStatus] = []
    remaining: list[str] = []
    notes: list[str] = []
    reps: dict[str, Repeatability] = {}
    adjs: dict[str, Adjudication] = {}
    claims: dict[str, Claim] = {}
    history = members.history
    if history is not None:
        if history.problem:
            remaining.append(history.problem)
        for run in history.uncommitted:
            if any(m.name == run for m in members.runs):
                remaining.append(
                    f"run {run!r} is not committed yet: that the protocol was frozen before "
                    "it cannot be proven"
                )
    for e in members.excluded:
        notes.append(f"excluded: {e.message}")
    for cond in protocol.condition:
        c = cond.name
        b_runs = members.of(c, base.name)
        repeat = repeatability(root, store, campaign, c, b_runs)
        if repeat is not None:
            reps[c] = repeat
        rep_word: Literal["exact", "not-exact"] | None = (
            None if repeat is None else "exact" if repeat.exact else "not-exact"
        )
        b_done, b_failed = _split_runs(c, base, b_runs, remaining)
        if repeat is None:
            remaining.append(f"{c}: baseline repeatability not yet qualified")
        elif unchecked := [x for x in repeat.comparisons if x.unchecked]:
            remaining.append(
                f"{c}: baseline repeatability is UNAVAILABLE: {len(unchecked)} output pair(s) "
                f"not checked against their request; first: {unchecked[0].reasons[0]}"
            )
        elif not repeat.exact:
            remaining.append(
                f"{c}: baseline is not repeatable-exact; the protocol declares "
                f"non_repeatable_baseline = {protocol.quality.non_repeatable_baseline!r}"
            )
        cells.append(_cell(c, base, b_done, b_failed, rep_word, None, None, rep_word == "exact"))
        for arm in campaign.candidates:
            a_runs = members.of(c, arm.name)
            done, failed = _split_runs(c, arm, a_runs, remaining)
            verdict = None
            if repeat is not None:
                adj = adjudicate(root, store, campaign, c, arm.name, repeat, b_runs, a_runs)
                if adj is not None:
                    adjs[f"{c}/{arm.name}"] = adj
                    verdict = adj.verdict
                    if verdict != "PASS":
                        why = adj.reasons[0] if adj.reasons else ""
                        remaining.append(f"{c}: candidate {arm.name} is {verdict}: {why}")
            claim = make_claim(store, campaign, members, c, arm.name)
            claims[f"{c}/{arm.name}"] = claim
            if claim.refused and done and protocol.timing.claim:
                remaining.append(
                    f"{c}: candidate {arm.name} has no speedup claim: {claim.reasons[0]}"
                )
            speedup_ok = claim.stands or not protocol.timing.claim
            floor = protocol.timing.min_speedup
            if claim.verdict == "NOT_CLEARED" and claim.speedup is not None:
                remaining.append(
                    f"{c}: candidate {arm.name} speedup interval starts at "
                    f"{claim.speedup.low:.4g}, not above timing.min_speedup = {floor:g}"
                )
            notes += [
                f"{c}: candidate {arm.name}: {n}"
                for n in claim.notes
                if claim.verdict != "NO_TIMING_CLAIM" or not n.startswith("the protocol makes")
            ]
            if claim.verdict == "UNRESOLVED":
                remaining.append(
                    f"{c}: candidate {arm.name} speedup is unresolved: the measurement "
                    "resolution could change its verdict"
                )
            qualified = verdict == "PASS" and speedup_ok
            cell = _cell(c, arm, done, failed, rep_word, verdict, claim.speedup, qualified)
            cells.append(msgspec.structs.replace(cell, claim=claim.verdict))
    if not protocol.timing.claim:
        notes.append(
            "the protocol makes no timing claim (timing.claim = false): a verdict here "
            "certifies the outputs only, never a speedup"
        )
    remaining = list(dict.fromkeys(remaining))
    accepted = not remaining and all(cell.qualified for cell in cells)
    status = StatusRecord(
        campaign=campaign.name,
        protocol_digest=campaign.digest,
        verdict="ACCEPTED" if accepted else "NOT_ACCEPTED",
        remaining=tuple(remaining),
        cells=tuple(cells),
        excluded=tuple(members.excluded),
        notes=tuple(notes),
    )
    return CampaignEvaluation(status, reps, adjs, claims)


def _split_runs(
    condition: str, arm: ArmSpec, runs: list[Member], remaining: list[str]
) -> tuple[list[Member], list[Member]]:
    """``arm``'s complete and failed runs in ``condition``; what is missing or failed is
    added to ``remaining``."""
    role = "baseline" if arm.baseline else "candidate"
    done = [m for m in runs if m.complete]
    failed = [m for m in runs if not m.complete]
    if len(done) < arm.runs:
        remaining.append(
            f"{condition}: {role} {arm.name} has {len(done)} of {arm.runs} required runs"
        )
    remaining += [
        f"{condition}: {role} {arm.name} run {m.name} failed ({m.record.outcome})" for m in failed
    ]
    return done, failed


def _cell(
    condition: str,
    arm: ArmSpec,
    done: list[Member],
    failed: list[Member],
    repeatability: Literal["exact", "not-exact"] | None,
    lossless: Verdict | None,
    speedup: Speedup | None,
    qualified: bool,
) -> CellStatus:
    """The status of one cell; ``qualified`` is what it needs besides its required runs."""
    return CellStatus(
        condition=condition,
        arm=arm.name,
        baseline=arm.baseline,
        runs_required=arm.runs,
        runs_done=len(done),
        runs_failed=len(failed),
        failed_runs=tuple(m.name for m in failed),
        repeatability=repeatability,
        lossless=lossless,
        speedup=speedup,
        qualified=len(done) >= arm.runs and qualified,
    )
