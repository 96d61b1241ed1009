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
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from ..errors import EvidenceStoreError

__all__ = ["CampaignRules", "CampaignSigners", "check_signer"]


class CampaignSigners(Protocol):
    """A campaign's rule for who may sign its runs."""

    def signer_problem(
        self, root: str | os.PathLike[str], key: Ed25519PublicKey | None
    ) -> EvidenceStoreError | None:
        """The error refusing a run signed with ``key`` (None: unsigned) because it
        would not count (it names the ``signing_key`` parameter); None when it would."""


class CampaignRules(Protocol):
    """A campaign's rules for the runs that join it."""

    @property
    def campaign(self) -> CampaignSigners:
        """The campaign itself, whose signing rule :func:`check_signer` applies."""

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


def check_signer(
    rules: CampaignRules, root: str | os.PathLike[str], key: Ed25519PrivateKey | None
) -> None:
    """Raise the campaign's refusal of a run signed with ``key`` (None: unsigned) when
    the protocol pins signing keys and the run would not count: the one signing rule
    of the run pre-flight and of every importer, before anything is sent or registered."""
    problem = rules.campaign.signer_problem(root, key.public_key() if key is not None else None)
    if problem is not None:
        raise problem
