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
say what the verdict rests on (``verify.protection``) and every counted run's audit
findings (``runs/audits.py``), for video and LLM runs alike.

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
from typing import TYPE_CHECKING, Literal

import msgspec

from ..config import Repository, as_repository
from ..errors import EvidenceStoreError
from ..progress import Observer, Tick
from ..storage import BlobStore
from .members import Member, Members, campaign_runs, protection
from .memo import Memo, memo_key, open_memo
from .models import (
    Adjudication,
    ArmConclusion,
    ArmSpec,
    CellStatus,
    Claim,
    Conclusion,
    Evaluation,
    Exclusion,
    MissingInput,
    OutputComparison,
    RecordCheck,
    Repeatability,
    Speedup,
    StatusRecord,
    Verdict,
)
from .protocol import Campaign

if TYPE_CHECKING:  # imported where an evaluation is computed: a memo hit needs neither
    from .adjudication import Judge
    from .tasks import Executor

__all__ = ["CampaignEvaluation", "evaluate", "evaluation_inputs"]


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
    computed: int = 0  # tasks computed for it here (``tasks.py``), in any process
    reused: bool = False
    key: str = ""
    core: StatusRecord | None = None  # the status before registered records were checked
    complete: bool = True  # every input was had: a registered record can be checked


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
        "after_results": [msgspec.to_builtins(e) for e in members.after_results],
        "withdrawn_runs": [m.name for m in members.withdrawn_runs],
        "signed": members.signed,
    }  # fmt: skip


def _memo(root: Repository) -> tuple[BlobStore, Memo]:
    local = root.local_store()
    return local, open_memo(local)


def _seed_from_git(root: Repository, campaign: Campaign, local: BlobStore) -> None:
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
    root: str | os.PathLike[str],
    campaign: Campaign,
    *,
    base_rev: str | None = None,
    memo: bool = True,
    executor: Executor | None = None,
    recheck: int | None = None,
    observer: Observer | None = None,
) -> CampaignEvaluation:
    """Compute repeatability, verdicts, claims and the status of ``campaign`` (its
    history anchored at the protected branch ``base_rev`` when given), reusing the
    computations kept for the same inputs unless ``memo`` is False (see module doc).
    Results found on the configured remotes count under ``results.py``'s rules
    (``recheck``: how many unsigned ones to compute again, default
    ``results.DEFAULT_RECHECK``); pending tasks run with ``executor`` when given
    (``evidencestore.scale``: processes, Ray), else here as they are judged.
    ``observer`` (``evidencestore.progress``) hears of each item computed: a condition's
    repeatability, a cell's adjudication, the claims."""
    repo = as_repository(root)  # resolved once: everything below is handed this object
    members = campaign_runs(repo, campaign, base=base_rev)
    local, kept_memo = _memo(repo)
    memo_ = kept_memo if memo else None
    key = memo_key("campaign-evaluation", evaluation_inputs(campaign, members))
    kept = memo_.get(key, Evaluation) if memo_ is not None else None
    if kept is not None and not _consistent(campaign, kept):
        kept = None  # a record contradicting itself: computed again
    if kept is not None:  # a memo hit writes nothing and decodes nothing
        computed = _Computed(_judged_from(campaign, members, kept), _claims_from(kept), {})
        ev = _conclude_all(campaign, members, computed)
        ev.reused = True
        extra = kept_memo.get(memo_key("remote-results", {"evaluation": key}), list[str]) or []
    else:
        from ..remotes import repository_store  # only now: a memo hit needs no remote

        _seed_from_git(repo, campaign, local)
        store = repository_store(repo)
        from .adjudication import Judge

        protection, done = _remote_results(repo, campaign, members, memo_, store, executor, recheck)
        judge = Judge(repo, store, memo_)
        computed = _compute(repo, campaign, members, store, judge, observer)
        ev = _conclude_all(campaign, members, computed)
        ev.decoded, ev.complete = judge.decoded, computed.storable
        ev.computed = judge.computed + done
        if memo_ is not None and computed.storable:
            memo_.put(
                key,
                Evaluation(repeatability=ev.repeatability, adjudications=ev.adjudications,
                           claims=ev.claims),
            )  # fmt: skip
            if protection:
                memo_.put(memo_key("remote-results", {"evaluation": key}), protection)
        extra = protection
    ev.key = key
    ev.core = ev.status  # what a registered status is held against: the same on any clone
    ev.status = _with_notes(ev.status, extra)  # where this one's remote results came from
    if not members.records:
        return ev
    against = {key: ev}
    if base_rev is not None and any(
        r.manifest.metadata.annotations.get("evaluation") not in (key, None)
        for r in members.records.values()
    ):  # records registered without --base are held against the evaluation without it
        plain = evaluate(repo, campaign, memo=memo, executor=executor, recheck=recheck)
        against.setdefault(plain.key, plain)
    ev.status = _with_records(ev.status, record_checks(repo, members, against))
    return ev


def _remote_results(
    repo: Repository,
    campaign: Campaign,
    members: Members,
    memo: Memo | None,
    store: BlobStore,
    executor: Executor | None,
    recheck: int | None,
) -> tuple[list[str], int]:
    """Results others computed, taken under ``results.py``'s rules, and pending tasks
    run with ``executor``: the lines saying what they rest on, and how many tasks were
    computed for it."""
    if memo is None or (executor is None and not repo.config.remotes):
        return [], 0
    from .results import DEFAULT_RECHECK, prepare

    got = prepare(repo, campaign, members, memo, store, executor=executor,
                  recheck=DEFAULT_RECHECK if recheck is None else recheck)  # fmt: skip
    return got.notes(), got.computed


def _with_notes(status: StatusRecord, notes: list[str]) -> StatusRecord:
    if not notes:
        return status
    return msgspec.structs.replace(status, notes=(*status.notes, *notes))


def claim_key(evaluation_key: str, condition: str, arm: str) -> str:
    """The key a registered claim of one cell carries: its evaluation's inputs and cell."""
    return memo_key("campaign-claim", {"evaluation": evaluation_key, "cell": [condition, arm]})


def _consistent(campaign: Campaign, kept: Evaluation) -> bool:
    """Whether every kept verdict follows from the record's own numbers: an adjudication
    from its comparisons, repeatability from its pairs, a claim from its interval and
    the protocol's threshold."""
    for adj in kept.adjudications.values():
        if adj.verdict == "PASS" and any(c.verdict != "PASS" for c in adj.comparisons):
            return False
    for rep in kept.repeatability.values():
        if rep.exact and any(c.verdict != "PASS" for c in rep.comparisons):
            return False
    for claim in kept.claims.values():
        s = claim.speedup
        if claim.stands != (claim.verdict == "STANDS"):
            return False
        if claim.verdict in ("STANDS", "NOT_CLEARED"):
            if s is None or claim.min_speedup != campaign.protocol.timing.min_speedup:
                return False
            if (claim.verdict == "STANDS") != (s.low > claim.min_speedup):
                return False
    return True


def _judged_from(campaign: Campaign, members: Members, kept: Evaluation) -> _Judged:
    """The comparisons of a kept evaluation, as ``_judge_all`` gives them."""
    out = _Judged()
    for cond in campaign.protocol.condition:
        c = cond.name
        out.repeat[c] = repeat = kept.repeatability.get(c)
        out.repeat_lacks[c] = False
        if repeat is None:
            continue
        for arm in campaign.candidates:
            out.adjs[(c, arm.name)] = kept.adjudications.get(f"{c}/{arm.name}")
            out.adj_lacks[(c, arm.name)] = False
    return out


def _claims_from(kept: Evaluation) -> dict[tuple[str, str], Claim]:
    return {(c.condition, c.arm): c for c in kept.claims.values()}


#: The records a campaign-record bundle holds, by entry (``records.evaluation_records``).
_RECORD_TYPES: dict[str, type[StatusRecord | Claim | Adjudication | Repeatability]] = {
    "status.json": StatusRecord,
    "claims": Claim,
    "adjudications": Adjudication,
    "repeatability": Repeatability,
}


def record_checks(
    repo: Repository, members: Members, against: dict[str, CampaignEvaluation]
) -> list[RecordCheck]:
    """Every registered campaign record held against the evaluations ``against`` (by
    key): one carrying an evaluation's key (or a claim carrying one of its cells'
    ``claim_key``) must equal what that evaluation computed from the same inputs; the
    others are history from other inputs."""
    from .._canonical import decode
    from ..inventory import read_entry, registration_path

    out: list[RecordCheck] = []
    cells = {
        claim_key(k, c.condition, c.arm): (ev, f"{c.condition}/{c.arm}")
        for k, ev in against.items()
        for c in ev.claims.values()
    }
    for name, reg in members.records.items():
        mine = reg.manifest.metadata.annotations.get("evaluation") or ""
        ev_of = against.get(mine)
        bundle_dir = registration_path(repo, name).parent
        for e in reg.manifest.entries:
            folder = e.path.partition("/")[0] if "/" in e.path else e.path
            type_ = _RECORD_TYPES.get(folder)
            if e.location != "repo" or type_ is None:
                continue
            where = f"{name}/{e.path}"
            try:
                record = decode(read_entry(bundle_dir, name, e, "a campaign record"), type_)
            except (EvidenceStoreError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                out.append(RecordCheck(bundle=name, entry=e.path, says="-", agrees=False,
                                       message=f"record {where} cannot be read: {exc}"))  # fmt: skip
                continue
            ev = ev_of
            now: object = None
            if isinstance(record, Claim):
                cell = f"{record.condition}/{record.arm}"
                if ev is None and mine in cells and cells[mine][1] == cell:
                    ev = cells[mine][0]
                now = ev.claims.get(cell) if ev is not None else None
            elif isinstance(record, StatusRecord):
                now = ev.core if ev is not None else None
            elif isinstance(record, Adjudication):
                now = ev.adjudications.get(f"{record.condition}/{record.arm}") if ev else None
            elif isinstance(record, Repeatability):
                now = ev.repeatability.get(record.condition) if ev is not None else None
            else:
                continue
            says = _says(record)
            if ev is None:
                out.append(RecordCheck(
                    bundle=name, entry=e.path, says=says, agrees=None,
                    message=f"record {where} says {says}, registered from other inputs "
                    "(history, never authoritative)",
                ))  # fmt: skip
            elif not ev.complete:
                out.append(RecordCheck(
                    bundle=name, entry=e.path, says=says, agrees=None,
                    message=f"record {where} says {says}; not checked here: an input of its "
                    "recomputation is unavailable (`evstore pull`)",
                ))  # fmt: skip
            elif now == record:
                out.append(RecordCheck(
                    bundle=name, entry=e.path, says=says, agrees=True,
                    message=f"record {where} says {says}, as its inputs give now",
                ))  # fmt: skip
            else:
                out.append(RecordCheck(
                    bundle=name, entry=e.path, says=says, agrees=False,
                    message=f"record-mismatch: record {where} says {says}, but its inputs "
                    f"give {_says(now)}: the verdict is recomputed, never read from a record",
                ))  # fmt: skip
    return out


def _says(record: object) -> str:
    if isinstance(record, StatusRecord | Claim | Adjudication):
        return record.verdict
    if isinstance(record, Repeatability):
        return "exact" if record.exact else "not-exact"
    return "no such record"


def _with_records(status: StatusRecord, checks: list[RecordCheck]) -> StatusRecord:
    """The status with the registered records as history; a mismatch is a finding, and
    the campaign is not ACCEPTED while it stands."""
    if not checks:
        return status
    wrong = [c.message for c in checks if c.agrees is False]
    verdict = status.verdict
    if wrong and verdict == "ACCEPTED":
        verdict = "NOT_ACCEPTED"
    return msgspec.structs.replace(
        status,
        verdict=verdict,
        remaining=tuple(dict.fromkeys((*status.remaining, *wrong))),
        records=tuple(checks),
    )


@dataclass
class _Computed:
    """What a status is concluded from: every comparison, every claim, and the inputs
    that could not be had (digest -> what needed it)."""

    judged: _Judged
    claims: dict[tuple[str, str], Claim]
    missing: dict[str, str]

    @property
    def storable(self) -> bool:
        """Whether these are what the inputs give on any clone: nothing was missing."""
        return (
            not self.missing
            and not any(self.judged.repeat_lacks.values())
            and not any(self.judged.adj_lacks.values())
            and not any(c.verdict == "UNAVAILABLE" for c in self.claims.values())
        )


def _compute(
    root: Repository,
    campaign: Campaign,
    members: Members,
    store: BlobStore,
    judge: Judge,
    observer: Observer | None = None,
) -> _Computed:
    """Judge every pair and compute every candidate cell's claim (see module doc)."""
    from .claims import make_claim

    members = members.including_withdrawn()  # a withdrawn arm's verdicts stay visible
    collect = _claims_meanwhile(store, campaign, members)
    n = len(campaign.protocol.condition)
    total = n * (1 + len(campaign.candidates)) + 1  # each judged item, then the claims
    items = [0]

    def tell(what: str) -> None:
        items[0] += 1
        if observer is not None:
            observer(Tick(f"campaign {campaign.name}", items[0], total, "items", what=what))

    try:
        judged = _judge_all(root, campaign, members, store, judge, tell)
    finally:
        claims = collect()
    for cond in campaign.protocol.condition:
        for arm in campaign.candidates:
            cell = (cond.name, arm.name)
            if cell not in claims:  # no child, or it failed: computed here, the same record
                claims[cell] = make_claim(store, campaign, members, *cell)
    tell("claims")
    return _Computed(judged, claims, dict(judge.missing))


def _conclude_all(campaign: Campaign, members: Members, computed: _Computed) -> CampaignEvaluation:
    """The status concluded from the cells: always computed, never kept (a pure
    function of the ledger and the computations)."""
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
    notes += [f"set aside after results: {e.message}" for e in members.after_results]
    notes += [
        f"protection: {line}"
        for line in protection(
            history.anchor if history else None, members.signed, members.signed_run_json_only
        )
    ]
    if protocol.retrospective:  # declared in the protocol: said first, everywhere
        from .adjudication import RETROSPECTIVE

        notes.insert(0, RETROSPECTIVE)
    notes += _audit_notes(members)
    judged = computed.judged
    shown = members.including_withdrawn()
    for cond in protocol.condition:
        c = cond.name
        b_runs = members.of(c, base.name)
        repeat = judged.repeat[c]
        if repeat is not None:
            reps[c] = repeat
        rep_word: Literal["exact", "not-exact", "unavailable"] | None = (
            None
            if repeat is None
            else "unavailable"
            if repeat.unavailable
            else "exact"
            if repeat.exact
            else "not-exact"
        )
        b_done, b_failed = _split_runs(c, base, b_runs)
        b_open = _runs_open(c, base, b_done, b_failed)
        notes += _void_notes(campaign.name, c, base, b_failed)
        b_rejected: list[str] = []
        if repeat is None:
            b_open.append(f"{c}: baseline repeatability not yet qualified")
        elif repeat.unavailable is not None:  # nothing compared is never exact
            b_open.append(f"{c}: baseline repeatability is UNAVAILABLE: {repeat.unavailable}")
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
            withdrawn = members.withdrawn_arms.get(arm.name)
            a_runs = shown.of(c, arm.name)  # a withdrawn arm's verdicts stay visible
            done, failed = _split_runs(c, arm, a_runs)
            opened = _runs_open(c, arm, done, failed)
            if withdrawn is None:
                notes += _void_notes(campaign.name, c, arm, failed)
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
                    elif verdict == "UNAVAILABLE" and (
                        repeat.unavailable is not None
                        or not adj.comparisons
                        or any(x.unchecked for x in (*repeat.comparisons, *adj.comparisons))
                    ):  # nothing compared, or unchecked outputs: runs with checked
                        # outputs would decide
                        why = adj.reasons[0] if adj.reasons else ""
                        opened.append(f"{c}: candidate {arm.name} is {verdict}: {why}")
                    elif verdict != "PASS":
                        why = adj.reasons[0] if adj.reasons else ""
                        rejected.append(f"{c}: candidate {arm.name} is {verdict}: {why}")
            elif b_open and not opened:
                opened.append(f"{c}: candidate {arm.name} waits for the baseline's repeatability")
            claim = computed.claims[(c, arm.name)]
            if protocol.retrospective:
                from .adjudication import RETROSPECTIVE

                if RETROSPECTIVE not in claim.notes:
                    claim = msgspec.structs.replace(claim, notes=(RETROSPECTIVE, *claim.notes))
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
                if withdrawn is None
                and (claim.verdict != "NO_TIMING_CLAIM" or not n.startswith("the protocol makes"))
            ]
            if claim.verdict == "UNRESOLVED":
                opened.append(
                    f"{c}: candidate {arm.name} speedup is unresolved: the measurement "
                    "resolution could change its verdict"
                )
            passed = adjs.get(f"{c}/{arm.name}") if verdict == "PASS" else None
            if passed is not None:  # PASS on lengths bounded, not verified: say which
                notes += [
                    f"{c}: candidate {arm.name}: {r}"
                    for r in passed.reasons
                    if "length bounded, not verified" in r
                ]
            qualified = verdict == "PASS" and speedup_ok
            cell = _cell(c, arm, done, failed, rep_word, verdict, claim.speedup, qualified)
            cell = msgspec.structs.replace(cell, claim=claim.verdict)
            cells.append(_conclude(cell, rejected, opened, withdrawn=withdrawn))
    if not protocol.timing.claim:
        notes.append(
            "the protocol makes no timing claim (timing.claim = false): a verdict here "
            "certifies the outputs only, never a speedup"
        )
    unavailable = [
        MissingInput(digest=d, needed_by=what) for d, what in sorted(computed.missing.items())
    ]
    arms = tuple(_arm_conclusion(a, [x for x in cells if x.arm == a.name]) for a in protocol.arm)
    for cell in cells:
        if cell.conclusion == "open":
            remaining += cell.reasons
    remaining = list(dict.fromkeys(remaining))
    if unavailable or any(c.claim == "UNAVAILABLE" for c in cells if c.conclusion != "withdrawn"):
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
        set_aside_after_results=tuple(members.after_results),
        qualifier=after_results_qualifier(members.after_results),
        never_started=tuple(members.never_started),
    )
    return CampaignEvaluation(status, reps, adjs, claims)


def _audit_notes(members: Members) -> list[str]:
    """Every counted run's audit findings (``runs/audits.py``: seed ignored, output
    caching), one note per run and audit, so a status never hides what a run found."""
    out = []
    for m in members.runs:
        for audit in m.record.audits:
            if audit.findings:
                where = f"{m.record.condition or '-'}/{m.record.arm}"
                out.append(
                    f"audit {audit.name}: run {m.name!r} ({where}): {len(audit.findings)} "
                    f"finding(s) of {audit.examined} examined; first: {audit.findings[0].message}"
                )
    return out


def after_results_qualifier(after: list[Exclusion]) -> str | None:
    """What the verdict line adds for set-asides committed after the results they remove:
    ``with 4 arms withdrawn after their results``; None when there are none."""
    arms = sum(1 for e in after if e.arm is not None)
    runs = len(after) - arms
    parts = [
        f"{n} {word}{'s' if n != 1 else ''} {verb}"
        for n, word, verb in ((arms, "arm", "withdrawn"), (runs, "run", "voided"))
        if n
    ]
    if not parts:
        return None
    return f"with {' and '.join(parts)} after {'its' if arms + runs == 1 else 'their'} results"


@dataclass
class _Judged:
    """Every comparison of an evaluation, and whether each met an input that could not
    be had by then (``_lacks`` at the point the cell is concluded)."""

    repeat: dict[str, Repeatability | None] = field(default_factory=dict)
    repeat_lacks: dict[str, bool] = field(default_factory=dict)
    adjs: dict[tuple[str, str], Adjudication | None] = field(default_factory=dict)
    adj_lacks: dict[tuple[str, str], bool] = field(default_factory=dict)


def _judge_all(
    root: Repository,
    campaign: Campaign,
    members: Members,
    store: BlobStore,
    judge: Judge,
    tell: Callable[[str], None],
) -> _Judged:
    """Repeatability and adjudications of every cell, in the order ``_evaluate``
    concludes them (what is missing is found in that order too); ``tell`` hears of each
    one done (a condition without repeatability counts its cells as done with it)."""
    from .adjudication import adjudicate, repeatability

    out = _Judged()
    base = campaign.baseline
    for cond in campaign.protocol.condition:
        c = cond.name
        b_runs = members.of(c, base.name)
        repeat = repeatability(root, store, campaign, c, b_runs, judge=judge)
        out.repeat[c] = repeat
        out.repeat_lacks[c] = repeat is not None and _lacks(repeat.comparisons, judge)
        tell(f"{c}: repeatability")
        if repeat is None:
            for arm in campaign.candidates:
                tell(f"{c}: {arm.name}: no repeatability to adjudicate against")
            continue
        for arm in campaign.candidates:
            a_runs = members.of(c, arm.name)
            adj = adjudicate(
                root, store, campaign, c, arm.name, repeat, b_runs, a_runs, judge=judge
            )
            out.adjs[(c, arm.name)] = adj
            out.adj_lacks[(c, arm.name)] = adj is not None and _lacks(adj.comparisons, judge)
            tell(f"{c}: {arm.name}")
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
        (cond.name, arm.name) for cond in campaign.protocol.condition for arm in campaign.candidates
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


def _void_notes(campaign: str, condition: str, arm: ArmSpec, failed: list[Member]) -> list[str]:
    """For each failed run the status counts, the way to set it aside when it failed for
    another reason than its arm (a void record: ``setaside.py``)."""
    return [
        f"{condition}: failed run {m.name} ({m.record.outcome}) counts against arm "
        f"{arm.name}; if it failed for a reason that is not the arm's, set it aside with "
        f"`evstore campaign void {campaign} --run {m.name} --reason TEXT --record BUNDLE` "
        "(effective once committed)"
        for m in failed
    ]


def _cell(
    condition: str,
    arm: ArmSpec,
    done: list[Member],
    failed: list[Member],
    repeatability: Literal["exact", "not-exact", "unavailable"] | None,
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
