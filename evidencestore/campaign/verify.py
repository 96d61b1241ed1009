"""``evstore campaign verify``: every run of the campaign recorded under the frozen protocol.

Lists every finding at once: runs recorded under another protocol digest or for
undeclared conditions and arms, runs committed before the protocol (or in a commit that
does not descend from it) or started before its commit time, runs changed since their
first commit, the same run under two names, unsigned or wrongly signed runs when the
protocol requires signatures, runs not yet committed; and about the campaign: a
protocol changed since its first commit, not committed, not on the base, named
otherwise than its campaign, an arm that mixes servers, a run deleted from the history,
a shallow clone, a root that is not a git repository; void or withdrawal records that
take no effect. A run is listed once: counted (with its commit), voided, withdrawn, or
as a finding. ``protection`` says what the verdict rests on (the trust model in
docs/campaigns.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .members import campaign_runs
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

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings


def protection(anchor: str | None, signed: bool) -> list[str]:
    """What a verdict rests on, one sentence each (see the trust model in docs/campaigns.md)."""
    return [
        f"ordering: the protocol's commit {anchor} is on the protected branch (--base), and "
        "every run comes after it there or on top of it"
        if anchor
        else "ordering rests on this branch's own history (no --base): a rewritten history "
        "(rebase, amend) is not detected; verify with --base and the protected branch",
        "runs: signed by a key the protocol pins"
        if signed
        else "runs: not signed (the protocol pins no key): a committer who fabricates a run "
        "record is not detected",
    ]


def verify_campaign(
    root: str | os.PathLike[str], campaign: Campaign, *, base: str | None = None
) -> CampaignVerification:
    """Check, from git history (anchored at ``base`` when given), that the protocol was
    frozen before every run, and every rule of ``members.py``."""
    members = campaign_runs(root, campaign, base=base)
    history = members.history
    assert history is not None
    out = CampaignVerification(campaign.name, campaign.digest, history.protocol_commit)
    out.protection = protection(history.anchor, members.signed)
    out.findings += members.excluded
    out.voided += members.voided
    out.withdrawn += members.withdrawn
    if history.problem:
        out.findings.append(Exclusion(run="", code="history", message=history.problem))
    out.findings += members.findings
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
    return out
