"""What a run needs of the campaign it joins: the rules it must fit, as an interface.

``run_workload`` is handed a campaign's rules (``evidencestore.campaign.fit.campaign_rules``
gives them for a registered protocol) and applies them before anything is sent, so a
library caller gets the refusals ``evstore run --campaign`` gives. The rules live in
``campaign/``; this interface keeps ``runs/`` from importing it (campaigns are made of
runs, not the other way round).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

__all__ = ["CampaignRules"]


class CampaignRules(Protocol):
    """A campaign's rules for the runs that join it."""

    @property
    def name(self) -> str:
        """The campaign's (protocol bundle's) name."""

    @property
    def digest(self) -> str:
        """The protocol digest every run of the campaign records."""

    def check_run(
        self,
        *,
        arm: str,
        condition: str | None,
        workload_digest: str,
        config_digests: Sequence[str],
        workload_source: str,
        harness: str | None = None,
    ) -> None:
        """Raise :class:`~evidencestore.errors.ConfigError` naming what does not fit:
        the condition, the arm, the harness (None: ``evstore run``; ``aiperf``,
        ``loadgen``: imported), the workload (by digest) or the arm's declared
        configuration files."""

    def results_problem(self, root: str | os.PathLike[str], started: str) -> str | None:
        """Why imported results that started at ``started`` (UTC) cannot count: the
        protocol is younger than them and not ``retrospective``; None when they can. The
        text may name the importer's ``campaign`` parameter as ``{campaign}``."""
