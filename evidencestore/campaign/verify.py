"""``evstore campaign verify``: every run of the campaign recorded under the frozen protocol.

Lists every finding at once: runs recorded under another protocol digest or for
undeclared conditions and arms, runs committed before the protocol (or in a commit that
does not descend from it) or started before its commit time, runs changed since their
first commit, the same run under two names, unsigned or wrongly signed runs when the
protocol requires signatures, runs not yet committed; and about the campaign: a
protocol changed since its first commit, not committed, not on the base, named
otherwise than its campaign, an arm that mixes servers, a run deleted from the history,
a shallow clone, a root that is not a git repository; void or withdrawal records that
take no effect; a registered status or claim record that is not what its inputs give
(``record-mismatch``: the campaign is evaluated, reusing what is kept, to hold it
against them). A run is listed once: counted (with its commit), voided, withdrawn, or
as a finding. ``protection`` says what the verdict rests on (the trust model in
docs/campaigns.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .members import campaign_runs, protection
from .models import Exclusion
from .protocol import Campaign

__all__ = ["CampaignVerification", "protection", "verify_campaign"]


@dataclass
class CampaignVerification:
    """Counted runs with the commit each was added in, and every finding."""

    campaign: str
    protocol_digest: str
    protocol_commit: str | None
    runs: dict[str, str | None] = field(default_factory=dict)
    findings: list[Exclusion] = field(default_factory=list)
    protection: list[str] = field(default_factory=list)
    voided: list[Exclusion] = field(default_factory=list)
    withdrawn: list[Exclusion] = field(default_factory=list)
    never_started: list[Exclusion] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings


def verify_campaign(
    root: str | os.PathLike[str],
    campaign: Campaign,
    *,
    base: str | None = None,
    records: bool = True,
) -> CampaignVerification:
    """Check, from git history (anchored at ``base`` when given), that the protocol was
    frozen before every run, every rule of ``members.py``, that every imported run's
    record is what its sealed harness files give (``import-mismatch``); with
    ``records``, that every registered campaign record is what its inputs give
    (``record-mismatch``)."""
    from ..config import as_repository

    repo = as_repository(root)  # resolved once: everything below is handed this object
    members = campaign_runs(repo, campaign, base=base)
    history = members.history
    assert history is not None
    out = CampaignVerification(campaign.name, campaign.digest, history.protocol_commit)
    out.protection = protection(history.anchor, members.signed, members.signed_run_json_only)
    out.findings += members.excluded
    out.voided += members.voided
    out.withdrawn += members.withdrawn
    out.never_started += members.never_started
    if history.problem:
        out.findings.append(Exclusion(run="", code="history", message=history.problem))
    out.findings += members.findings
    from ..runs.rederive import import_mismatch

    store = repo.local_store()
    for m in members.runs:
        if m.record.harness is not None:  # re-derived from its sealed harness files
            found = import_mismatch(m.registration, m.record, store)
            if found is not None:
                out.findings.append(
                    Exclusion(
                        run=m.name,
                        code=found.code,
                        message=found.message,
                        condition=m.record.condition,
                        arm=m.record.arm,
                    )
                )
    for m in members.runs:
        if m.name not in history.uncommitted:
            out.runs[m.name] = history.frozen.get(m.name)
        else:
            out.findings.append(
                Exclusion(
                    run=m.name,
                    code="uncommitted",
                    message=f"run {m.name!r} is not committed: commit it so its order after "
                    "the protocol is provable",
                    condition=m.record.condition,
                    arm=m.record.arm,
                )
            )
    if records and members.records:
        from .status import evaluate

        checks = evaluate(repo, campaign, base_rev=base).status.records
        out.findings += [
            Exclusion(run=c.bundle, code="record-mismatch", message=c.message)
            for c in checks
            if c.agrees is False
        ]
        if any(c.agrees is None and "not checked here" in c.message for c in checks):
            out.protection.append(
                "registered records: not checked here, an input of their recomputation is "
                "unavailable (`evstore pull`)"
            )
    return out
