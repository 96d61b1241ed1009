"""JSON Schemas generated from the models; ``schemas/`` holds the committed copies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from .config import Config
from .models import InclusionProof, Registration, VerifyReport

__all__ = ["SCHEMA_DIR", "generate", "schema_types", "stale", "write"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


def schema_types() -> dict[str, Any]:
    """Return schema file stems mapped to the struct types they describe."""
    types: dict[str, Any] = {
        "registration": Registration,
        "inclusion-proof": InclusionProof,
        "verify-report": VerifyReport,
        "config": Config,
    }
    import importlib

    # Each feature package publishes its record types as ``SCHEMA_TYPES`` in one module.
    for module_name in _SCHEMA_MODULES:
        module = importlib.import_module(module_name, __package__)
        types.update(module.SCHEMA_TYPES)
    return types


_SCHEMA_MODULES = (".media.records", ".runs.models", ".campaign.models")


def generate() -> dict[str, bytes]:
    """Return ``<stem>.schema.json`` file names mapped to their contents."""
    from .records import legacy_tag_schema

    out: dict[str, bytes] = {}
    for stem, type_ in schema_types().items():
        schema = legacy_tag_schema(msgspec.json.schema(type_))
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://evidencestore.invalid/schemas/{stem}.schema.json",
            **schema,
        }
        out[f"{stem}.schema.json"] = (json.dumps(schema, indent=2, sort_keys=True) + "\n").encode()
    return out


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    """Return the schema files in ``directory`` that differ from the models (or are missing)."""
    return sorted(
        name
        for name, data in generate().items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != data
    )


def write(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into ``directory``; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in generate().items():
        path = directory / name
        path.write_bytes(data)
        written.append(path)
    return written
