"""Campaign status: conclusions per condition and arm, the verdict, what remains.

Every input is reached from the commit: the protocol, workloads and declared
configuration files are in git (the protocol bundle's repo entries, cached into the
local store so a run's configuration is found by digest), run outputs and other
configuration files are read through the configured remotes, verified and cached
(``remotes.repository_store``). What neither gives makes the status ``UNAVAILABLE``,
listing each missing digest and what needed it, and naming ``evstore pull``; it never
turns into a different verdict.

Each cell (condition, arm) concludes ``qualified``, ``rejected``, ``withdrawn`` or
``open``. A baseline cell is qualified when its required runs are complete and it is
repeatable-exact (rejected when it is not). A candidate cell is qualified when its
required runs are complete, it is lossless (PASS) and its speedup claim stands
(``claims.py``), or the protocol makes no timing claim; rejected on a definite lossless
verdict other than PASS, or a claim that does not clear ``min_speedup`` with its runs
done; withdrawn by a committed withdrawal record; otherwise open, with what remains. An
arm concludes over its cells the same way. The campaign is ``ACCEPTED`` when the
baseline is qualified, the history proves every counted run recorded after the
protocol, no finding about the campaign as a whole stands (``members.py``: a changed
protocol, a deleted run, an arm that mixes servers, ...), and the protocol's rule holds: ``accept = "every-arm"``, every candidate arm
not withdrawn is qualified (at least one); ``"any-arm"``, at least one is. ``remaining``
lists what open cells still need; rejections are in their cells, not there. The notes
say what the verdict rests on (``verify.protection``).

Evaluations are kept by the digests of their inputs (``memo.py``): the protocol, every
campaign bundle (runs, void and withdrawal records), what the history proved, and the
tool version. An unchanged campaign is evaluated once; each output pair is judged once.
Every pair is judged first, in the order the cells are concluded; the speedup claims,
which read no output, are computed meanwhile in a forked child (``_fork.Child``: its
bytes decoded, or the claims computed here when it fails), so SciPy's import and the
claims overlap the decoding.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from ..config import repository_at
from ..errors import EvidenceStoreError
from ..storage import BlobStore
from .members import Member, Members, campaign_runs
from .memo import Memo, memo_key
from .models import (
    Adjudication,
    ArmConclusion,
    ArmSpec,
    CellStatus,
    Claim,
    Conclusion,
    Evaluation,
    MissingInput,
    OutputComparison,
    Repeatability,
    Speedup,
    StatusRecord,
    Verdict,
)
from .protocol import Campaign
from .verify import protection

if TYPE_CHECKING:  # imported where an evaluation is computed: a memo hit needs neither
    from .adjudication import Judge

__all__ = ["CampaignEvaluation", "evaluate", "evaluation_inputs"]

MEMO_DIR = "memo"


@dataclass
class CampaignEvaluation:
    """The status and every record it was computed from; ``decoded`` counts this
    evaluation's decoding passes over outputs (one per distinct output judged, more only
    for frames over the memory budget: ``decoded.py``) and ``reused`` whether it came
    whole from the memo."""

    status: StatusRecord
    repeatability: dict[str, Repeatability] = field(default_factory=dict)
    adjudications: dict[str, Adjudication] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    decoded: int = 0
    reused: bool = False
    key: str = ""


def evaluation_inputs(campaign: Campaign, members: Members) -> dict[str, object]:
    """What an evaluation reads, by digest: the key its result is kept under."""
    h = members.history
    return {
        "protocol": campaign.digest,
        "protocol_bundle": campaign.registration.digest,
        "bundles": members.digests,
        "history": None if h is None else {
            "git": h.git, "protocol_commit": h.protocol_commit, "frozen": h.frozen,
            "before": h.before, "uncommitted": h.uncommitted, "problem": h.problem,
            "anchor": h.anchor,
        },
        # the ledger's rules (members.py): who counts, every exclusion and finding
        "counted": [m.name for m in members.runs],
        "ledger": [msgspec.to_builtins(e) for e in (*members.excluded, *members.findings)],
        "signed": members.signed,
    }  # fmt: skip


def _memo(root: Path) -> tuple[BlobStore, Memo]:
    local = repository_at(root).local_store()
    return local, Memo(local, Path(local.location) / MEMO_DIR)


def _seed_from_git(root: Path, campaign: Campaign, local: BlobStore) -> None:
    """Cache the protocol bundle's files (in git: workloads, declared configurations)
    in the local store, so a run's configuration is found by digest on any clone."""
    from ..inventory import read_entry, registration_path

    bundle_dir = registration_path(root, campaign.name).parent
    for entry in campaign.registration.manifest.entries:
        if entry.location != "repo" or local.has(entry.descriptor.digest):
            continue
        try:
            data = read_entry(bundle_dir, campaign.name, entry, "a campaign file")
            local.put(data, entry.descriptor.media_type)
        except (EvidenceStoreError, OSError):
            continue  # the campaign's own check reports it


def evaluate(
    root: str | os.PathLike[str], campaign: Campaign, *, base_rev: str | None = None
) -> CampaignEvaluation:
    """Compute repeatability, verdicts, claims and the status of ``campaign`` (its
    history anchored at the protected branch ``base_rev`` when given), or reuse them when
    the same inputs were evaluated before (see module doc)."""
    root = repository_at(root).root  # the root as given: its store is never looked for above it
    members = campaign_runs(root, campaign, base=base_rev)
    local, memo = _memo(root)
    key = memo_key("campaign-evaluation", evaluation_inputs(campaign, members))
    kept = memo.get(key, Evaluation)
    if kept is None and (kept := _registered(root, members, key)) is not None:
        memo.put(key, kept)  # a registered evaluation, kept for the next invocation
    if kept is not None:  # a memo hit writes nothing
        return CampaignEvaluation(
            kept.status, dict(kept.repeatability), dict(kept.adjudications), dict(kept.claims),
            reused=True, key=key,
        )  # fmt: skip
    from ..remotes import repository_store  # only now: a memo hit needs no remote

    _seed_from_git(root, campaign, local)
    store = repository_store(repository_at(root))
    from .adjudication import Judge

    judge = Judge(root, store, memo)
    ev = _evaluate(root, campaign, members, store, judge)
    ev.decoded, ev.key = judge.decoded, key
    if ev.status.verdict != "UNAVAILABLE":
        memo.put(
            key,
            Evaluation(status=ev.status, repeatability=ev.repeatability,
                       adjudications=ev.adjudications, claims=ev.claims),
        )  # fmt: skip
    return ev


def _registered(root: Path, members: Members, key: str) -> Evaluation | None:
    """The evaluation registered (``--register``) under ``key`` by any clone, read from
    its bundle's files checked against the registration; None when there is none."""
    from .._canonical import decode
    from ..inventory import read_entry, registration_path

    for name, reg in members.records.items():
        if reg.manifest.metadata.annotations.get("evaluation") != key:
            continue
        bundle_dir = registration_path(root, name).parent
        reps: dict[str, Repeatability] = {}
        adjs: dict[str, Adjudication] = {}
        claims: dict[str, Claim] = {}
        status = None
        try:
            for e in reg.manifest.entries:
                data = read_entry(bundle_dir, name, e, "a campaign record")
                folder = e.path.partition("/")[0]
                if e.path == "status.json":
                    status = decode(data, StatusRecord)
                elif folder == "repeatability":
                    rep = decode(data, Repeatability)
                    reps[rep.condition] = rep
                elif folder == "adjudications":
                    adj = decode(data, Adjudication)
                    adjs[f"{adj.condition}/{adj.arm}"] = adj
                elif folder == "claims":
                    claim = decode(data, Claim)
                    claims[f"{claim.condition}/{claim.arm}"] = claim
        except (EvidenceStoreError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        if status is not None:
            return Evaluation(status=status, repeatability=reps, adjudications=adjs, claims=claims)
    return None


def _evaluate(
    root: Path, campaign: Campaign, members: Members, store: BlobStore, judge: Judge
) -> CampaignEvaluation:
    from .claims import make_claim

    protocol = campaign.protocol
    base = campaign.baseline
    cells: list[CellStatus] = []
    remaining: list[str] = []
    notes: list[str] = []
    reps: dict[str, Repeatability] = {}
    adjs: dict[str, Adjudication] = {}
    claims: dict[str, Claim] = {}
    history = members.history
    history_ok = history is not None and not history.problem
    if history is not None:
        if history.problem:
            remaining.append(history.problem)
        pending = [r for r in history.uncommitted if any(m.name == r for m in members.runs)]
        if pending:  # one line for all of them, however many
            history_ok = False
            remaining.append(
                f"{len(pending)} run(s) not committed yet ({', '.join(sorted(pending))}): "
                "that the protocol was frozen before them cannot be proven until they are"
            )
    remaining += [f.message for f in members.findings]
    if members.findings:
        history_ok = False  # a finding about the campaign as a whole: never ACCEPTED
    for e in members.excluded:
        notes.append(f"excluded: {e.message}")
    notes += [
        f"protection: {line}"
        for line in protection(history.anchor if history else None, members.signed)
    ]
    unavailable: list[MissingInput] = []
    collect = _claims_meanwhile(store, campaign, members)
    try:
        judged = _judge_all(root, campaign, members, store, judge)
    finally:
        computed = collect()
    for cond in protocol.condition:
        c = cond.name
        b_runs = members.of(c, base.name)
        repeat = judged.repeat[c]
        if repeat is not None:
            reps[c] = repeat
        rep_word: Literal["exact", "not-exact"] | None = (
            None if repeat is None else "exact" if repeat.exact else "not-exact"
        )
        b_done, b_failed = _split_runs(c, base, b_runs)
        b_open = _runs_open(c, base, b_done, b_failed)
        b_rejected: list[str] = []
        if repeat is None:
            b_open.append(f"{c}: baseline repeatability not yet qualified")
        elif judged.repeat_lacks[c]:
            b_open.append(f"{c}: baseline outputs are unavailable here (`evstore pull`)")
        elif unchecked := [x for x in repeat.comparisons if x.unchecked]:
            b_open.append(
                f"{c}: baseline repeatability is UNAVAILABLE: {len(unchecked)} output pair(s) "
                f"not checked against their request; first: {unchecked[0].reasons[0]}"
            )
        elif not repeat.exact:
            b_rejected.append(
                f"{c}: baseline is not repeatable-exact; the protocol declares "
                f"non_repeatable_baseline = {protocol.quality.non_repeatable_baseline!r}"
            )
        b_cell = _cell(c, base, b_done, b_failed, rep_word, None, None, rep_word == "exact")
        cells.append(_conclude(b_cell, b_rejected, b_open, withdrawn=None))
        for arm in campaign.candidates:
            a_runs = members.of(c, arm.name)
            withdrawn = members.withdrawn_arms.get(arm.name)
            if withdrawn is not None:
                cell = _cell(c, arm, [], [], rep_word, None, None, False)
                cells.append(_conclude(cell, [], [], withdrawn=withdrawn))
                continue
            done, failed = _split_runs(c, arm, a_runs)
            opened = _runs_open(c, arm, done, failed)
            rejected: list[str] = []
            verdict: Verdict | None = None
            if repeat is not None:
                adj = judged.adjs[(c, arm.name)]
                if adj is not None:
                    adjs[f"{c}/{arm.name}"] = adj
                    verdict = adj.verdict
                    if judged.adj_lacks[(c, arm.name)]:
                        opened.append(
                            f"{c}: candidate {arm.name}: outputs are unavailable here "
                            "(`evstore pull`)"
                        )
                    elif verdict == "UNAVAILABLE" and any(
                        x.unchecked for x in (*repeat.comparisons, *adj.comparisons)
                    ):  # unchecked outputs: runs recorded with their checks would decide
                        why = adj.reasons[0] if adj.reasons else ""
                        opened.append(f"{c}: candidate {arm.name} is {verdict}: {why}")
                    elif verdict != "PASS":
                        why = adj.reasons[0] if adj.reasons else ""
                        rejected.append(f"{c}: candidate {arm.name} is {verdict}: {why}")
            elif b_open and not opened:
                opened.append(f"{c}: candidate {arm.name} waits for the baseline's repeatability")
            claim = computed.get((c, arm.name))
            if claim is None:  # no child, or it failed: computed here, the same record
                claim = make_claim(store, campaign, members, c, arm.name)
            claims[f"{c}/{arm.name}"] = claim
            for what in claim.unavailable:
                opened.append(f"{c}: candidate {arm.name}: {what}")
            if claim.verdict == "REFUSED" and done and protocol.timing.claim:
                opened.append(f"{c}: candidate {arm.name} has no speedup claim: {claim.reasons[0]}")
            speedup_ok = claim.stands or not protocol.timing.claim
            floor = protocol.timing.min_speedup
            if claim.verdict == "NOT_CLEARED" and claim.speedup is not None:
                below = (
                    f"{c}: candidate {arm.name} speedup interval starts at "
                    f"{claim.speedup.low:.4g}, not above timing.min_speedup = {floor:g}"
                )
                (rejected if len(done) >= arm.runs else opened).append(below)
            notes += [
                f"{c}: candidate {arm.name}: {n}"
                for n in claim.notes
                if claim.verdict != "NO_TIMING_CLAIM" or not n.startswith("the protocol makes")
            ]
            if claim.verdict == "UNRESOLVED":
                opened.append(
                    f"{c}: candidate {arm.name} speedup is unresolved: the measurement "
                    "resolution could change its verdict"
                )
            qualified = verdict == "PASS" and speedup_ok
            cell = _cell(c, arm, done, failed, rep_word, verdict, claim.speedup, qualified)
            cell = msgspec.structs.replace(cell, claim=claim.verdict)
            cells.append(_conclude(cell, rejected, opened, withdrawn=None))
    if not protocol.timing.claim:
        notes.append(
            "the protocol makes no timing claim (timing.claim = false): a verdict here "
            "certifies the outputs only, never a speedup"
        )
    unavailable = [
        MissingInput(digest=d, needed_by=what) for d, what in sorted(judge.missing.items())
    ]
    arms = tuple(_arm_conclusion(a, [x for x in cells if x.arm == a.name]) for a in protocol.arm)
    for cell in cells:
        if cell.conclusion == "open":
            remaining += cell.reasons
    remaining = list(dict.fromkeys(remaining))
    if unavailable or any(c.claim == "UNAVAILABLE" for c in cells):
        verdict_word: Literal["ACCEPTED", "NOT_ACCEPTED", "UNAVAILABLE"] = "UNAVAILABLE"
        remaining.insert(
            0,
            f"{len(unavailable) or 'some'} input(s) of this verdict are neither in the local "
            "store nor on a configured remote: fetch them with `evstore pull` (or configure "
            "the remote that holds them)",
        )
    else:
        verdict_word = (
            "ACCEPTED" if _accepted(protocol.accept, arms, history_ok) else "NOT_ACCEPTED"
        )
    status = StatusRecord(
        campaign=campaign.name,
        protocol_digest=campaign.digest,
        verdict=verdict_word,
        remaining=tuple(remaining),
        cells=tuple(cells),
        excluded=tuple(members.excluded),
        notes=tuple(notes),
        accept=protocol.accept,
        arms=arms,
        missing=tuple(unavailable),
        voided=tuple(members.voided),
        withdrawn=tuple(members.withdrawn),
    )
    return CampaignEvaluation(status, reps, adjs, claims)


@dataclass
class _Judged:
    """Every comparison of an evaluation, and whether each met an input that could not
    be had by then (``_lacks`` at the point the cell is concluded)."""

    repeat: dict[str, Repeatability | None] = field(default_factory=dict)
    repeat_lacks: dict[str, bool] = field(default_factory=dict)
    adjs: dict[tuple[str, str], Adjudication | None] = field(default_factory=dict)
    adj_lacks: dict[tuple[str, str], bool] = field(default_factory=dict)


def _judge_all(
    root: Path, campaign: Campaign, members: Members, store: BlobStore, judge: Judge
) -> _Judged:
    """Repeatability and adjudications of every cell, in the order ``_evaluate``
    concludes them (what is missing is found in that order too)."""
    from .adjudication import adjudicate, repeatability

    out = _Judged()
    base = campaign.baseline
    for cond in campaign.protocol.condition:
        c = cond.name
        b_runs = members.of(c, base.name)
        repeat = repeatability(root, store, campaign, c, b_runs, judge=judge)
        out.repeat[c] = repeat
        out.repeat_lacks[c] = repeat is not None and _lacks(repeat.comparisons, judge)
        if repeat is None:
            continue
        for arm in campaign.candidates:
            if members.withdrawn_arms.get(arm.name) is not None:
                continue
            a_runs = members.of(c, arm.name)
            adj = adjudicate(
                root, store, campaign, c, arm.name, repeat, b_runs, a_runs, judge=judge
            )
            out.adjs[(c, arm.name)] = adj
            out.adj_lacks[(c, arm.name)] = adj is not None and _lacks(adj.comparisons, judge)
    return out


def _claims_meanwhile(
    store: BlobStore, campaign: Campaign, members: Members
) -> Callable[[], dict[tuple[str, str], Claim]]:
    """Start computing every candidate cell's claim in a forked child; the returned
    function collects them (empty when there was no child or it failed: the caller
    computes them itself, to the same records)."""
    from .._fork import Child, can_fork, cpu_count
    from .claims import make_claim

    cells = [
        (cond.name, arm.name)
        for cond in campaign.protocol.condition
        for arm in campaign.candidates
        if members.withdrawn_arms.get(arm.name) is None
    ]
    if not cells or cpu_count() < 2 or not can_fork():
        return dict

    def work() -> bytes:
        return msgspec.json.encode([make_claim(store, campaign, members, c, a) for c, a in cells])

    child = Child(work)

    def collect() -> dict[tuple[str, str], Claim]:
        data = child.result()
        if data is None:
            return {}
        try:
            got = msgspec.json.decode(data, type=list[Claim])
        except msgspec.DecodeError:  # a value JSON cannot carry (NaN): computed here
            return {}
        return dict(zip(cells, got, strict=True)) if len(got) == len(cells) else {}

    return collect


def _lacks(comparisons: tuple[OutputComparison, ...], judge: Judge) -> bool:
    """Whether any of ``comparisons`` met an input that could not be had (an output or
    one of its raw arrays)."""
    return any(
        c.reference in judge.missing
        or c.candidate in judge.missing
        or (c.reference, c.candidate) in judge.lacking
        for c in comparisons
    )


def _accepted(rule: str, arms: tuple[ArmConclusion, ...], history_ok: bool) -> bool:
    if not history_ok or any(a.baseline and a.conclusion != "qualified" for a in arms):
        return False
    considered = [a for a in arms if not a.baseline and a.conclusion != "withdrawn"]
    qualified = [a for a in considered if a.conclusion == "qualified"]
    if rule == "any-arm":
        return bool(qualified)
    return bool(considered) and len(qualified) == len(considered)


def _arm_conclusion(arm: ArmSpec, cells: list[CellStatus]) -> ArmConclusion:
    conclusions = [c.conclusion for c in cells]
    word: Conclusion
    if "withdrawn" in conclusions:
        word = "withdrawn"
    elif "rejected" in conclusions:
        word = "rejected"
    elif all(c == "qualified" for c in conclusions):
        word = "qualified"
    else:
        word = "open"
    reasons = tuple(dict.fromkeys(r for c in cells if c.conclusion == word for r in c.reasons))
    return ArmConclusion(arm=arm.name, baseline=arm.baseline, conclusion=word, reasons=reasons)


def _conclude(
    cell: CellStatus, rejected: list[str], opened: list[str], *, withdrawn: str | None
) -> CellStatus:
    """The cell with its conclusion and the reasons for it."""
    word: Conclusion
    if withdrawn is not None:
        word, reasons = "withdrawn", [withdrawn]
    elif rejected:
        word, reasons = "rejected", rejected
    elif cell.qualified and not opened:
        word, reasons = "qualified", []
    else:
        word, reasons = "open", opened or [f"{cell.condition}: {cell.arm} is not yet qualified"]
    return msgspec.structs.replace(
        cell,
        qualified=word == "qualified",
        conclusion=word,
        reasons=tuple(dict.fromkeys(reasons)),
    )


def _split_runs(
    condition: str, arm: ArmSpec, runs: list[Member]
) -> tuple[list[Member], list[Member]]:
    """``arm``'s complete and failed runs in ``condition``."""
    return [m for m in runs if m.complete], [m for m in runs if not m.complete]


def _runs_open(condition: str, arm: ArmSpec, done: list[Member], failed: list[Member]) -> list[str]:
    """What the cell still needs in runs: the required count, and its failed runs."""
    role = "baseline" if arm.baseline else "candidate"
    out: list[str] = []
    if len(done) < arm.runs:
        out.append(f"{condition}: {role} {arm.name} has {len(done)} of {arm.runs} required runs")
    out += [
        f"{condition}: {role} {arm.name} run {m.name} failed ({m.record.outcome})" for m in failed
    ]
    return out


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
