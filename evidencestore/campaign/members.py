"""The runs of a campaign: found by their registration, checked against the protocol.

A run belongs to campaign ``NAME`` when its registration says ``kind = run`` and
``campaign = NAME``. It contributes only when it was recorded under this protocol's
digest, for a condition and arm the protocol declares, with the condition's workload
and the arm's configuration files, and (in a git repository, ``history.py``) after the
protocol was committed, unchanged since its own first commit, started no earlier than
the protocol's commit time; when the protocol lists signing keys, only when one of them
signed its ``run.json``; and only once (``identity.py``: a copy of a run under another
name counts as nothing; of two copies, the one whose commit comes first by ancestry, the
base branch's first, counts, whatever the committer dates say). Every other run is kept in the list of exclusions, with the
reason, never silently dropped. When the protocol sets ``quality.repeatability_first``,
a candidate run counts only when committed after enough complete baseline runs of its
condition to establish repeatability. Committed void and withdrawal records
(``setaside.py``) set a run or an arm's runs aside: they are listed as voided or
withdrawn, neither counted nor excluded; an uncommitted one, or a void naming another
digest than the run's, takes no effect and is a finding. A run that never started (``never-started``: its server check reached no server, so
nothing was sent: an operator's error such as a mistyped ``--server``,
``runs.recorder.never_started``) is listed as such, neither counted nor excluded: it
says nothing about its arm. Findings about the campaign as a whole (a changed
protocol, a shallow clone, a protocol not on the base, an arm that mixes servers) are
``findings``: they exclude no run, and no verdict is accepted while one stands.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Repository, as_repository
from ..errors import EvidenceStoreError
from ..inventory import load_inventory, read_entry, registration_path
from ..models import Registration
from ..runs.models import RunRecord
from ..runs.recorder import RUN_ENTRY, load_run, never_started
from .fit import utc_epoch
from .history import HistoryCheck, deleted_registrations, is_strict_ancestor, verify_history
from .identity import duplicates, run_keys, server_changes
from .models import Exclusion, RunVoid, Withdrawal
from .protocol import Campaign
from .setaside import VOID_KIND, WITHDRAWAL_KIND, SetAside, read_set_aside

__all__ = ["Member", "Members", "campaign_runs", "protection"]


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
    findings: list[Exclusion] = field(default_factory=list)
    signed: bool = False
    signed_run_json_only: list[str] = field(default_factory=list)  # earlier signatures
    voided: list[Exclusion] = field(default_factory=list)
    never_started: list[Exclusion] = field(default_factory=list)  # reached no server
    withdrawn: list[Exclusion] = field(default_factory=list)
    withdrawn_arms: dict[str, str] = field(default_factory=dict)  # arm -> why
    set_aside: list[SetAside] = field(default_factory=list)  # effective records
    after_results: list[Exclusion] = field(default_factory=list)  # effective, after results
    withdrawn_runs: list[Member] = field(default_factory=list)  # runs of withdrawn arms
    digests: dict[str, str] = field(default_factory=dict)  # every campaign bundle -> digest
    records: dict[str, Registration] = field(default_factory=dict)  # campaign-record bundles

    def of(self, condition: str, arm: str) -> list[Member]:
        """The counted runs of one condition and arm, by name."""
        return [m for m in self.runs if m.record.condition == condition and m.record.arm == arm]

    def including_withdrawn(self) -> Members:
        """These members with the runs of withdrawn arms counted too: what their
        verdicts were, shown beside the withdrawal (they count for nothing)."""
        import dataclasses

        runs = sorted([*self.runs, *self.withdrawn_runs], key=lambda m: m.name)
        return dataclasses.replace(self, runs=runs, withdrawn_runs=[])


def campaign_runs(
    root: str | os.PathLike[str],
    campaign: Campaign,
    *,
    history: bool = True,
    base: str | None = None,
) -> Members:
    """Every run registered for ``campaign``, sorted by name, each counted or excluded;
    ``base`` is the protected branch the protocol must be on (``history.py``)."""
    repo = as_repository(root)  # resolved once: everything below is handed this object
    inventory = load_inventory(repo)
    names = [
        n
        for n, reg in sorted(inventory.registrations.items())
        if reg.manifest.metadata.annotations.get("kind") == "run"
        and reg.manifest.metadata.annotations.get("campaign") == campaign.name
    ]
    kinds = (VOID_KIND, WITHDRAWAL_KIND)
    asides = [
        n
        for n, reg in sorted(inventory.registrations.items())
        if reg.manifest.metadata.annotations.get("kind") in kinds
        and reg.manifest.metadata.annotations.get("campaign") == campaign.name
    ]
    out = Members()
    out.records = {
        n: reg
        for n, reg in sorted(inventory.registrations.items())
        if reg.manifest.metadata.annotations.get("kind") == "campaign-record"
        and reg.manifest.metadata.annotations.get("campaign") == campaign.name
    }
    out.digests = {n: inventory.registrations[n].digest for n in (*names, *asides)}
    out.history = (
        verify_history(repo.root, campaign.name, [*names, *asides], base=base) if history else None
    )
    keys = campaign.signing_keys(repo.root)
    out.signed = bool(keys)
    voids, withdrawals = _set_asides(
        repo, campaign, inventory.registrations, asides, names, keys, out
    )
    if out.history is not None:
        out.findings += [Exclusion(run="", code=c, message=m) for c, m in out.history.problems]
    if (problem := campaign.name_problem()) is not None:
        out.findings.append(Exclusion(run="", code="protocol-name", message=problem))
    conditions = {c.name for c in campaign.protocol.condition}
    identities: dict[str, list[tuple[str, str]]] = {}
    started: dict[str, str] = {}
    candidates: list[tuple[str, RunRecord]] = []
    for name in names:
        try:
            record = load_run(repo, name)
        except EvidenceStoreError as exc:
            out.excluded.append(Exclusion(run=name, code="unreadable-run", message=str(exc)))
            continue
        reg = inventory.registrations[name]
        run_entry = next(e for e in reg.manifest.entries if e.path == RUN_ENTRY)
        identities[name] = run_keys(record, run_entry.descriptor.digest)
        started[name] = record.started
        void = voids.get(name)
        if (
            void is not None
            and isinstance(void.record, RunVoid)
            and void.record.run_digest == reg.digest
        ):
            out.voided.append(
                Exclusion(
                    run=name, code="voided",
                    message=f"voided by {void.bundle!r}: {void.record.reason}",
                    condition=record.condition, arm=record.arm,
                )
            )  # fmt: skip
            continue
        if record.arm in withdrawals:
            reg = inventory.registrations[name]
            out.withdrawn_runs.append(Member(name, reg.digest, reg, record))
            out.withdrawn.append(
                Exclusion(
                    run=name, code="withdrawn", message=withdrawals[record.arm],
                    condition=record.condition, arm=record.arm,
                )
            )  # fmt: skip
            continue
        why = None
        if out.history is not None and name in out.history.changed:
            why = ("changed-since-commit", out.history.changed[name])  # named first: an edit
        if why is None and never_started(record):
            out.never_started.append(
                Exclusion(
                    run=name, code="never-started", message=f"run {name!r}: {record.reason}",
                    condition=record.condition, arm=record.arm,
                )
            )  # fmt: skip
            continue
        if why is None:
            why = _exclusion(campaign, conditions, name, record)
        if why is None and out.history is not None:
            why = _history_exclusion(out.history, name, record, campaign.protocol.retrospective)
        if why is None and keys:
            why = _signature_exclusion(repo.root, reg, name, keys, out.signed_run_json_only)
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
        candidates.append((name, record))
    # The copy that counts is the one reachable first in the history, by ancestry (the
    # base branch first): a committer date is whatever the committer says it is.
    rank = out.history.rank if out.history is not None else {}
    order = sorted(identities, key=lambda n: (n not in rank, rank.get(n, 0), started[n], n))
    repeated = duplicates(order, identities)
    for name, record in candidates:
        if name in repeated:
            first, what = repeated[name]
            out.excluded.append(
                Exclusion(
                    run=name,
                    code="duplicate-run",
                    message=f"run {name!r} is run {first!r} again: they have {what}; a run "
                    f"counts once, as the one first committed ({first!r})",
                    condition=record.condition,
                    arm=record.arm,
                )
            )
            continue
        reg = inventory.registrations[name]
        out.runs.append(Member(name, reg.digest, reg, record))
    if campaign.protocol.quality.repeatability_first and out.history is not None:
        _repeatability_first(repo.root, campaign, out)
    out.findings += server_changes(out.runs)
    if out.history is not None and out.history.git:
        out.findings += _deleted_runs(repo.root, campaign, inventory.registrations)
    return out


def _deleted_runs(
    root: Path, campaign: Campaign, present: dict[str, Registration]
) -> list[Exclusion]:
    """A finding per run of the campaign that a commit deleted: a run, failed or not, is
    evidence and stays (one whose entries another registration holds was renamed)."""
    roots = {reg.root for reg in present.values()}
    found = []
    for gone in deleted_registrations(root, present):
        notes = gone.registration.manifest.metadata.annotations
        if notes.get("kind") != "run" or notes.get("campaign") != campaign.name:
            continue
        if gone.registration.root in roots:
            continue  # the same entries under another name: renamed, not deleted
        found.append(
            Exclusion(
                run=gone.bundle,
                code="deleted-run",
                message=f"run {gone.bundle!r} ({notes.get('outcome', 'outcome unknown')}) was "
                f"registered and deleted in commit {gone.commit[:12]}: a run, failed or not, "
                "is evidence and is never removed from a campaign",
                condition=notes.get("condition"),
                arm=notes.get("arm"),
            )
        )
    return found


def _history_exclusion(
    history: HistoryCheck, name: str, record: RunRecord, retrospective: bool = False
) -> tuple[str, str] | None:
    if name in history.rewritten:
        return "history-rewritten", history.rewritten[name]
    if retrospective:  # declared: results older than the protocol count, and say so
        return None
    if name in history.before:
        return "before-protocol", history.before[name]
    when = history.protocol_time
    if when is not None and name in history.frozen:
        start = utc_epoch(record.started)
        if start is None:
            return (
                "started-unreadable",
                f"run {name!r}: its start time {record.started!r} is not a UTC time",
            )
        if start < when:
            import time

            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
            return (
                "started-before-protocol",
                f"run {name!r} started at {record.started}, before the protocol was committed "
                f"({at}, commit {(history.protocol_commit or '')[:12]}): it was not recorded "
                "under a frozen protocol, whenever it was committed",
            )
    return None


def _signature_exclusion(
    root: Path, reg: Registration, name: str, keys: dict[str, Any], partial: list[str]
) -> tuple[str, str] | None:
    """Why the run's signature does not count, or None; a run whose signature binds its
    run.json only (signed before signatures bound the manifest) counts, and is named in
    ``partial``."""
    from ..dsse import verify_run_signature
    from ..runs.recorder import RUN_SIGNATURE

    where = registration_path(root, name).parent
    entries = {e.path: e for e in reg.manifest.entries}
    try:
        data = read_entry(where, name, entries[RUN_ENTRY], "the run record")
        sig = entries.get(RUN_SIGNATURE)
        envelope = read_entry(where, name, sig, "the run signature") if sig else None
    except EvidenceStoreError as exc:
        return "bad-signature", str(exc)
    others = [e for p, e in entries.items() if p not in (RUN_ENTRY, RUN_SIGNATURE)]
    verdict = verify_run_signature(envelope, data, name, keys, others)
    if verdict.code is None and verdict.scope != "manifest":
        partial.append(name)
    return None if verdict.code is None else (verdict.code, verdict.message)


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


def _set_asides(
    repo: Repository,
    campaign: Campaign,
    registrations: dict[str, Registration],
    names: list[str],
    runs: list[str],
    keys: dict[str, Any],
    out: Members,
) -> tuple[dict[str, SetAside], dict[str, str]]:
    """The effective void records by run and withdrawals by arm; the others become
    exclusions (findings) naming why they take no effect. A record committed after
    results it removes is listed in ``out.after_results`` (or, when the protocol says
    ``set_aside_after_results = "refuse"``, takes no effect)."""
    voids: dict[str, SetAside] = {}
    withdrawals: dict[str, str] = {}
    refuse = campaign.protocol.quality.set_aside_after_results == "refuse"
    for bundle in names:
        try:
            aside = read_set_aside(repo, bundle, registrations[bundle])
        except EvidenceStoreError as exc:
            out.excluded.append(Exclusion(run=bundle, code="unreadable-record", message=str(exc)))
            continue
        rec = aside.record
        problem: tuple[str, str] | None = None
        if rec.protocol_digest != campaign.digest:
            problem = (
                "set-aside-not-effective",
                (f"record {bundle!r} names protocol {rec.protocol_digest}, not {campaign.digest}"),
            )
        elif out.history is not None and bundle in out.history.uncommitted:
            problem = (
                "set-aside-not-effective",
                (f"record {bundle!r} is not committed: it takes effect once committed"),
            )
        elif isinstance(rec, RunVoid):
            reg = registrations.get(rec.run)
            if reg is None:
                problem = (
                    "set-aside-not-effective",
                    (f"void record {bundle!r} names run {rec.run!r}, which is not registered"),
                )
            elif reg.digest != rec.run_digest:
                problem = (
                    "set-aside-not-effective",
                    (
                        f"void record {bundle!r} names run {rec.run!r} at {rec.run_digest}, but "
                        f"it is registered as {reg.digest}"
                    ),
                )
        elif rec.arm not in {a.name for a in campaign.candidates}:
            problem = (
                "set-aside-not-effective",
                (f"withdrawal record {bundle!r}: {rec.arm!r} is not a candidate arm"),
            )
        if problem is None and keys:
            from .setaside import set_aside_signature_problem

            why = set_aside_signature_problem(repo, aside, registrations[bundle], keys)
            if why is not None:
                problem = (
                    "unsigned-set-aside",
                    (
                        f"{why}: in a signed campaign a void or withdrawal takes effect only "
                        "when signed by a key the protocol pins"
                    ),
                )
        after = (
            None
            if problem is not None
            else _after_results(repo.root, aside, registrations, runs, out)
        )
        if after is not None and refuse:
            problem = (
                "set-aside-after-results",
                (
                    f"{after}; the protocol refuses set-asides after results "
                    "(quality.set_aside_after_results = 'refuse')"
                ),
            )
        if problem is not None:
            out.excluded.append(Exclusion(run=bundle, code=problem[0], message=problem[1]))
            continue
        if after is not None:
            arm = rec.arm if isinstance(rec, Withdrawal) else None
            out.after_results.append(
                Exclusion(run=bundle, code="after-results", message=after, arm=arm)
            )
        out.set_aside.append(aside)
        if isinstance(rec, RunVoid):
            voids[rec.run] = aside
        else:
            why = f"arm {rec.arm!r} withdrawn by {bundle!r}: {rec.reason}"
            withdrawals[rec.arm] = why
            out.withdrawn_arms[rec.arm] = why
    return voids, withdrawals


def _after_results(
    root: Path,
    aside: SetAside,
    registrations: dict[str, Registration],
    runs: list[str],
    out: Members,
) -> str | None:
    """What results a committed set-aside record removes that were committed before it
    (in a commit it descends from), or None."""
    history = out.history
    if history is None or aside.bundle not in history.commits:
        return None
    commit = history.commits[aside.bundle][0]
    rec = aside.record
    removed = (
        [rec.run]
        if isinstance(rec, RunVoid)
        else [
            n for n in runs if registrations[n].manifest.metadata.annotations.get("arm") == rec.arm
        ]
    )
    before = [
        n
        for n in removed
        if n in history.commits and is_strict_ancestor(root, history.commits[n][0], commit)
    ]
    if not before:
        return None
    if isinstance(rec, RunVoid):
        return (
            f"run {rec.run!r} voided by {aside.bundle!r} after its results (committed in "
            f"{history.commits[rec.run][0][:12]}, before the void)"
        )
    return (
        f"arm {rec.arm!r} withdrawn by {aside.bundle!r} after its results: {len(before)} "
        f"run(s) committed before the withdrawal ({', '.join(before)})"
    )


def _repeatability_first(root: Path, campaign: Campaign, out: Members) -> None:
    """Exclude candidate runs committed before their condition's baseline had the runs
    that establish its repeatability."""
    history = out.history
    assert history is not None
    need = campaign.baseline.runs
    kept: list[Member] = []
    for m in out.runs:
        commit = history.frozen.get(m.name)
        if m.record.arm == campaign.baseline.name or commit is None:
            kept.append(m)
            continue
        before = [
            b.name
            for b in out.of(m.record.condition or "", campaign.baseline.name)
            if b.complete
            and (bc := history.frozen.get(b.name)) is not None
            and is_strict_ancestor(root, bc, commit)
        ]
        if len(before) >= need:
            kept.append(m)
            continue
        out.excluded.append(
            Exclusion(
                run=m.name,
                code="before-repeatability",
                message=f"run {m.name!r} was committed after {len(before)} complete baseline "
                f"run(s) of condition {m.record.condition!r}; the protocol asks for the "
                f"baseline's repeatability ({need} runs) first (quality.repeatability_first)",
                condition=m.record.condition,
                arm=m.record.arm,
            )
        )
    out.runs = kept


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


def protection(anchor: str | None, signed: bool, run_json_only: Sequence[str] = ()) -> list[str]:
    """What a verdict rests on, one sentence each (see the README's trust model);
    ``run_json_only``: counted runs whose signature binds their run.json only (signed
    before signatures bound every entry)."""
    earlier = (
        [
            f"runs {', '.join(run_json_only)}: signed in the earlier form, which binds "
            "run.json only: an entry run.json does not name (raw arrays) could be swapped "
            "undetected; record them again to bind every entry"
        ]
        if signed and run_json_only
        else []
    )
    return [
        f"ordering: the protocol's commit {anchor} is on the protected branch (the base "
        "revision), and every run comes after it there or on top of it"
        if anchor
        else "ordering rests on this branch's own history (no base revision): a rewritten "
        "history (rebase, amend) is not detected; verify with the protected branch as base "
        "(`evstore campaign verify NAME --base BRANCH`)",
        "runs: signed by a key the protocol pins"
        if signed
        else "runs: not signed (the protocol pins no key): a committer who fabricates a run "
        "record is not detected",
        *earlier,
    ]
