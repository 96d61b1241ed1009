"""Campaign records kept as evidence: named, stored by digest, registrable as a bundle.

Each record (repeatability, adjudication, claim, status) is written as indented JSON
and binds the digests it was computed from (protocol, run bundles, outputs, comparison
records). ``register_records`` registers a bundle holding them as repo entries, with
metadata ``kind = campaign-record`` and the protocol digest, so a claim quoted in a
report can be re-checked with ``evstore verify``; ``claim_records`` and
``evaluation_records`` name each record's entry. A registered status with every record
behind it also carries its evaluation key (``evaluation``: the digest of its inputs and
the tool version, ``status.py``), a claim its cell's key, so any clone holds it against
what the same inputs give there: a registered record is history, never a verdict
(``status.record_checks``; one that differs is the finding ``record-mismatch``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._canonical import pretty
from ..models import Model, Registration

if TYPE_CHECKING:
    from .models import Claim
    from .status import CampaignEvaluation

__all__ = ["RECORD_KIND", "claim_records", "evaluation_records", "register_records"]

RECORD_KIND = "campaign-record"


def _key(text: str) -> str:
    return text.replace("/", "-")


def claim_records(claim: Claim) -> dict[str, Model]:
    """A claim under its entry path: ``claims/<condition>-<arm>.json``."""
    return {f"claims/{claim.condition}-{claim.arm}.json": claim}


def evaluation_records(evaluation: CampaignEvaluation) -> dict[str, Model]:
    """A campaign evaluation's records under their entry paths: ``status.json``,
    ``repeatability/<condition>.json``, ``adjudications/<condition>-<arm>.json`` and
    ``claims/<condition>-<arm>.json``."""
    records: dict[str, Model] = {"status.json": evaluation.core or evaluation.status}
    records.update({f"repeatability/{k}.json": v for k, v in evaluation.repeatability.items()})
    records.update(
        {f"adjudications/{_key(k)}.json": v for k, v in evaluation.adjudications.items()}
    )
    records.update({f"claims/{_key(k)}.json": v for k, v in evaluation.claims.items()})
    return records


def register_records(
    root: str | os.PathLike[str],
    name: str,
    records: Mapping[str, Model],
    *,
    campaign: str,
    protocol_digest: str,
    evaluation: str | None = None,
) -> Registration:
    """Register bundle ``name`` holding each record at its path (``claims/5s-x.json``),
    from memory through the one registration path (``bundle.register_bundle``)."""
    from ..bundle import RepoFile, register_bundle
    from ..config import as_repository

    return register_bundle(
        as_repository(root),
        name,
        files={rel: RepoFile(pretty(record)) for rel, record in records.items()},
        annotations={
            "kind": RECORD_KIND,
            "campaign": campaign,
            "protocol_digest": protocol_digest,
            **({"evaluation": evaluation} if evaluation else {}),
        },
    )
