"""Differences between two runs: resolved configuration, workload, server, client.

Configuration files are read, verified, from the store by digest. JSON, TOML and YAML
files are compared by key path (``a.b[2].c``), every leaf value; other files, and files
that do not parse as their extension says, by digest. Files are paired by entry name
(``configs/<file name>``); when each run has exactly one configuration file left over,
those two are paired whatever their names, so ``baseline.yaml`` is compared with
``candidate.yaml``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, EvidenceStoreError
from ..models import Descriptor
from ..storage import BlobStore
from .models import RunRecord

__all__ = ["Difference", "diff_configs", "diff_runs", "flatten"]

_MISSING = "<absent>"


@dataclass(frozen=True)
class Difference:
    """One difference: where (``section`` and key path) and the two values."""

    section: str
    key: str
    a: Any
    b: Any

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"section": self.section, "key": self.key, "a": self.a, "b": self.b}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values of nested mappings and lists by key path."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        if not value and prefix:
            out[prefix] = []
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _parse(name: str, data: bytes) -> Any | None:
    lower = name.lower()
    try:
        if lower.endswith(".json"):
            return json.loads(data)
        if lower.endswith(".toml"):
            return tomllib.loads(data.decode("utf-8"))
        if lower.endswith((".yaml", ".yml")):
            import importlib

            # PyYAML ships no type information; it is used through this one call.
            yaml: Any = importlib.import_module("yaml")
            return yaml.safe_load(data)
    except (ValueError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None  # compared by digest
    except Exception as exc:  # yaml.YAMLError has no common base with the others
        if type(exc).__module__.startswith("yaml"):
            return None
        raise
    return None


def _plain(value: Any) -> Any:
    # TOML and YAML give dates and times; keep the differences JSON-ready.
    if isinstance(value, (str, int, float, bool)) or value is None or value in ({}, []):
        return value
    return str(value)


def _read(store: BlobStore, desc: Descriptor, run: str, path: str) -> bytes:
    try:
        return store.get(desc.digest, desc.size)
    except EvidenceStoreError as exc:
        raise ConfigError(
            f"run {run!r}: configuration {path} ({desc.digest}) is unavailable: {exc}"
        ) from exc


def _pairs(
    a: dict[str, Descriptor], b: dict[str, Descriptor]
) -> list[tuple[str | None, str | None]]:
    common = [k for k in a if k in b]
    only_a = [k for k in a if k not in b]
    only_b = [k for k in b if k not in a]
    pairs: list[tuple[str | None, str | None]] = [(k, k) for k in common]
    if len(only_a) == 1 and len(only_b) == 1:
        pairs.append((only_a[0], only_b[0]))
    else:
        pairs += [(k, None) for k in only_a] + [(None, k) for k in only_b]
    return sorted(pairs, key=lambda p: p[0] or p[1] or "")


def diff_configs(a: RunRecord, b: RunRecord, store: BlobStore) -> list[Difference]:
    """Every difference between the configuration files of runs ``a`` and ``b``.

    Keys are ``<entry>:<key path>`` for parsed files (``configs/engine.yaml:offload.layers``)
    and ``<entry>`` for files compared by digest or present in one run only; when a
    file is paired with a differently named one the key is ``<a entry>|<b entry>:...``.
    """
    out: list[Difference] = []
    for pa, pb in _pairs(a.configs, b.configs):
        if pa is None or pb is None:
            present = pa or pb
            assert present is not None
            desc = (a.configs if pa else b.configs)[present]
            out.append(
                Difference(
                    "config",
                    present,
                    desc.digest if pa else _MISSING,
                    desc.digest if pb else _MISSING,
                )
            )
            continue
        da, db = a.configs[pa], b.configs[pb]
        label = pa if pa == pb else f"{pa}|{pb}"
        if da.digest == db.digest:
            continue
        va = _parse(pa, _read(store, da, a.name, pa))
        vb = _parse(pb, _read(store, db, b.name, pb))
        if va is None or vb is None:
            out.append(Difference("config", label, da.digest, db.digest))
            continue
        fa, fb = flatten(va), flatten(vb)
        for key in sorted(set(fa) | set(fb)):
            x, y = fa.get(key, _MISSING), fb.get(key, _MISSING)
            if x != y or type(x) is not type(y):
                out.append(Difference("config", f"{label}:{key}", _plain(x), _plain(y)))
    return out


def diff_runs(a: RunRecord, b: RunRecord, store: BlobStore) -> list[Difference]:
    """Configuration differences, then the workload, server identity, the harness of an
    imported run, the launched server's argv, cwd and allow-listed environment, client
    environment and campaign fields that differ."""
    out = diff_configs(a, b, store)
    if a.workload_digest != b.workload_digest:
        out.append(Difference("workload", "workload_digest", a.workload_digest, b.workload_digest))
    for key in ("arm", "campaign", "condition", "protocol_digest"):
        x, y = getattr(a, key), getattr(b, key)
        if x != y:
            out.append(Difference("run", key, x, y))
    sa, sb = a.server, b.server
    for key, x, y in (
        ("url", sa.url, sb.url),
        ("model_ids", list(sa.model_ids), list(sb.model_ids)),
        ("server_header", sa.server_header, sb.server_header),
    ):
        if x != y:
            out.append(Difference("server", key, x, y))
    ha, hb = a.harness, b.harness
    for key, x, y in (
        ("name", ha.name if ha else None, hb.name if hb else None),
        ("version", ha.version if ha else None, hb.version if hb else None),
        ("command", ha.command if ha else None, hb.command if hb else None),
    ):
        if x != y:
            out.append(Difference("harness", key, x, y))
    la, lb = a.launched, b.launched
    for key, x, y in (
        ("argv", list(la.argv) if la else None, list(lb.argv) if lb else None),
        ("cwd", la.cwd if la else None, lb.cwd if lb else None),
        ("env_values", dict(la.env_values) if la else None, dict(lb.env_values) if lb else None),
    ):
        if x != y:
            out.append(Difference("launched", key, x, y))
    ca, cb = a.client, b.client
    for key in ("evidencestore", "python", "pyav", "aiohttp", "host", "platform"):
        x, y = getattr(ca, key), getattr(cb, key)
        if x != y:
            out.append(Difference("client", key, x, y))
    return out
