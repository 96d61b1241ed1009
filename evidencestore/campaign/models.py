"""Campaign record structs (schema source)."""

from __future__ import annotations

SCHEMA_TYPES: dict[str, type] = {}
