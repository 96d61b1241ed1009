"""``evstore campaign verify``: every run of the campaign recorded under the frozen protocol.

Lists every finding at once: runs recorded under another protocol digest or for
undeclared conditions and arms, runs committed before the protocol (or in a commit that
does not descend from it), runs not yet committed, void or withdrawal records that take
no effect, and a protocol that is not committed or a root that is not a git repository.
A run is listed once: counted (with its commit), voided, withdrawn, or as a finding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .members import campaign_runs
from .models import Exclusion
from .protocol import Campaign

__all__ = ["CampaignVerification", "verify_campaign"]


@dataclass
class CampaignVerification:
    """Counted runs with the commit each was added in, and every finding."""

    campaign: str
    protocol_digest: str
    protocol_commit: str | None
    runs: dict[str, str | None] = field(default_factory=dict)
    findings: list[Exclusion] = field(default_factory=list)
    voided: list[Exclusion] = field(default_factory=list)
    withdrawn: list[Exclusion] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings


def verify_campaign(root: str | os.PathLike[str], campaign: Campaign) -> CampaignVerification:
    """Check, from git history, that the protocol was frozen before every run."""
    members = campaign_runs(root, campaign)
    history = members.history
    assert history is not None
    out = CampaignVerification(campaign.name, campaign.digest, history.protocol_commit)
    out.findings += members.excluded
    out.voided += members.voided
    out.withdrawn += members.withdrawn
    if history.problem:
        out.findings.append(Exclusion(run="", code="history", message=history.problem))
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
