"""Campaign records kept as evidence: stored by digest, registrable as a bundle.

Each record (repeatability, adjudication, claim, status) is written as indented JSON
and binds the digests it was computed from (protocol, run bundles, outputs, comparison
records). ``register_records`` registers a bundle holding them as repo entries, with
metadata ``kind = campaign-record`` and the protocol digest, so a claim quoted in a
report can be re-checked with ``evstore verify``. A registered status with every record
behind it also carries its evaluation key (``evaluation``: the digest of its inputs and
the tool version, ``status.py``), so any clone holding the bundle reuses it instead of
evaluating again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .._canonical import pretty
from ..models import Model, Registration

__all__ = ["RECORD_KIND", "register_records"]

RECORD_KIND = "campaign-record"


def register_records(
    root: str | os.PathLike[str],
    name: str,
    records: Mapping[str, Model],
    *,
    campaign: str,
    protocol_digest: str,
    evaluation: str | None = None,
) -> Registration:
    """Register bundle ``name`` holding each record at its path (``claims/5s-x.json``)."""
    from ..bundle import create_bundle
    from ..config import local_store

    staging = Path(tempfile.mkdtemp(prefix="evstore-campaign-records-"))
    try:
        for rel, record in records.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(pretty(record))
        return create_bundle(
            root,
            name,
            sorted(str(p) for p in staging.iterdir()),
            store=local_store(root),
            annotations={
                "kind": RECORD_KIND,
                "campaign": campaign,
                "protocol_digest": protocol_digest,
                **({"evaluation": evaluation} if evaluation else {}),
            },
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
