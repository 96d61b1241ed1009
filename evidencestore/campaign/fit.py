"""Whether a run fits its campaign, checked before anything is sent.

A run that joins a campaign must name a condition and an arm the protocol declares, run
the workload that condition binds (byte for byte: its digest), and carry exactly the
configuration files its arm declares, when the arm declares any. :func:`campaign_rules`
loads a registered protocol as the rules ``run_workload`` applies
(``runs.fit.CampaignRules``), so a library caller gets the refusals
``evstore run --campaign`` gives, before a long run rather than as an exclusion from
``campaign status`` afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import CampaignFitError, ManifestError
from .protocol import PROTOCOL_ENTRY, Campaign, load_campaign

__all__ = ["RunRules", "campaign_rules", "utc_epoch"]


@dataclass(frozen=True)
class RunRules:
    """A registered campaign as the rules its runs must fit (``runs.fit.CampaignRules``)."""

    campaign: Campaign

    @property
    def name(self) -> str:
        """The campaign's name."""
        return self.campaign.name

    @property
    def digest(self) -> str:
        """The protocol digest."""
        return self.campaign.digest

    def check_run(
        self,
        *,
        arm: str,
        condition: str | None,
        workload_digest: str,
        config_digests: Sequence[str] = (),
        workload_source: str = "the workload",
        harness: str | None = None,
    ) -> None:
        """Raise :class:`CampaignFitError` naming the first of condition, arm, workload
        digest and declared configuration files that does not fit the protocol."""
        name, protocol = self.campaign.name, self.campaign.protocol
        if not condition:
            raise CampaignFitError(
                "{campaign} needs {condition} (the protocol condition this run is for)",
                parameters=("campaign", "condition"),
            )
        conditions = {c.name: c for c in protocol.condition}
        if condition not in conditions:
            raise CampaignFitError(
                f"{{condition}} {condition!r}: campaign {name!r} declares the conditions "
                f"{', '.join(sorted(conditions))}",
                parameters=("condition",),
            )
        arms = sorted(a.name for a in protocol.arm)
        if arm not in arms:
            raise CampaignFitError(
                f"{{arm}} {arm!r}: campaign {name!r} declares the arms {', '.join(arms)}",
                parameters=("arm",),
            )
        want = conditions[condition].harness
        if harness != want:
            takes = f"runs imported from {want}" if want else "evstore runs"
            given = f"imported from {harness}" if harness else "an evstore run"
            raise CampaignFitError(
                f"{{condition}} {condition!r}: campaign {name!r} takes {takes} there (its "
                f"condition.harness); this run is {given}: harnesses are not mixed",
                parameters=("condition",),
            )
        bound = self.campaign.workload_digest(condition)
        if workload_digest != bound:
            raise CampaignFitError(
                f"workload {workload_source} hashes to {workload_digest}, but campaign {name!r} "
                f"binds condition {condition!r} to {conditions[condition].workload_path} ({bound})"
            )
        declared = self.campaign.config_digests(arm)
        if declared and frozenset(config_digests) != declared:
            names = ", ".join(self.campaign.arm(arm).configs)
            raise CampaignFitError(
                f"{{configs}}: campaign {name!r} declares the configuration files {names} for "
                f"arm {arm!r}; the files given ({len(config_digests)}) are not those, byte for "
                "byte",
                parameters=("configs",),
            )

    def results_problem(self, root: str | os.PathLike[str], started: str) -> str | None:
        """Why results that started at ``started`` (UTC) cannot count in this campaign:
        its protocol was committed after them (or is not committed yet) and does not
        declare ``retrospective = true``; None when they can (or no git history decides)."""
        import time

        from ..gitrefs import is_git_repository
        from .history import registration_history

        if self.campaign.protocol.retrospective or not is_git_repository(Path(root)):
            return None
        start = utc_epoch(started)
        if start is None:
            return f"the results' start time {started!r} is not a UTC time"
        added = registration_history(Path(root), [self.name]).get(self.name)
        when = added.added_time if added is not None else time.time()
        if start >= when:
            return None
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        committed = f"committed at {at}" if added is not None else "not committed yet"
        return (
            f"campaign {self.name!r}: these results started at {started}, before its "
            f"protocol ({committed}): they were not recorded under a frozen protocol and "
            "cannot count. Register a protocol that declares retrospective = true (every "
            "verdict then says so), or import without {campaign}"
        )


def utc_epoch(utc: str) -> float | None:
    """Unix seconds of a UTC time (``...Z`` or with an offset); None otherwise."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(utc.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


def campaign_rules(root: str | os.PathLike[str], name: str) -> RunRules:
    """The rules of campaign ``name`` registered in ``root``; :class:`CampaignFitError`
    when no campaign protocol is registered under that name."""
    from ..inventory import load_registration, registration_path

    hint = f"run `evstore campaign init {name} --protocol FILE` first"
    try:
        registration = load_registration(registration_path(root, name))
    except ManifestError as exc:
        raise CampaignFitError(
            f"{{campaign}} {name}: no campaign bundle {name!r} ({exc}); {hint}",
            parameters=("campaign",),
        ) from None
    if not any(e.path == PROTOCOL_ENTRY for e in registration.manifest.entries):
        raise CampaignFitError(
            f"{{campaign}} {name}: bundle {name!r} has no {PROTOCOL_ENTRY} entry; {hint}",
            parameters=("campaign",),
        )
    try:
        return RunRules(load_campaign(root, name))
    except ManifestError as exc:
        raise CampaignFitError(f"{{campaign}} {name}: {exc}", parameters=("campaign",)) from None
