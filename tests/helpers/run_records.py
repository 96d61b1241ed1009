"""Run records as ``run.json`` holds them, written by hand (field names of
``RunRecord``), and registered as a bundle in the local store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evidencestore.bundle import create_bundle
from evidencestore.digest import hash_bytes
from evidencestore.remotes import local_store


def digest_of(text: str) -> str:
    return hash_bytes(text.encode()).digest


def run_record(outcome: str = "partial", n: int = 8) -> dict[str, Any]:
    """A run record as ``run.json`` holds it (field names of ``RunRecord``)."""
    requests = []
    t = 10**12
    for i in range(n):
        sent = t
        first = sent + (300 + 10 * i) * 10**6
        last = first + (4000 + 100 * (i % 3)) * 10**6
        t = last + 10**6
        failed = i == 5
        requests.append(
            {
                "index": i,
                "phase": "warmup" if i < 2 else "measured",
                "request": 0,
                "repetition": i,
                "method": "POST",
                "path": "/v1/videos/sync",
                "payload": {"digest": digest_of(f"payload {i}"), "size": 100},
                "start_utc": "2026-12-01T00:00:00Z",
                "sent_ns": sent,
                "first_byte_ns": None if failed else first,
                "last_byte_ns": None if failed else last,
                "end_ns": last,
                "status": 500 if failed else 200,
                "body": None if failed else {"digest": digest_of(f"body {i}"), "size": 1000 + i},
                "failure": "http-status" if failed else None,
                "message": "HTTP 500 on request 5" if failed else None,
                "e2e_s": None if failed else (last - sent) / 1e9,
                "ttfb_s": None if failed else (first - sent) / 1e9,
            }
        )
    return {
        "kind": "evidencestore/run",
        "name": "baseline-5s-1",
        "arm": "baseline",
        "outcome": outcome,
        "reason": "health check refused: both unified and legacy offload settings given"
        if outcome == "failed-before-inference"
        else None,
        "workload_digest": digest_of("workload"),
        "workload": {"digest": digest_of("workload"), "size": 10},
        "server": {"url": "http://127.0.0.1:1", "ok": outcome != "failed-before-inference",
                   "health": {"path": "/health", "status": 200}},
        "client": {"evidencestore": "0.1.0", "python": "3.11", "pyav": "18", "aiohttp": "3",
                   "host": "h", "platform": "linux"},
        "configs": {"server.yaml": {"digest": digest_of("server.yaml"), "size": 11}},
        "logs": {"server.log": {"digest": digest_of("server.log"), "size": 10}},
        "started": "2026-12-01T00:00:00Z",
        "ended": "2026-12-01T00:01:00Z",
        "requests": requests,
    }  # fmt: skip


def bundle_run(root: Path, name: str, record: dict[str, Any]) -> bytes:
    src = root / ".staging" / name
    src.mkdir(parents=True)
    data = json.dumps(record, sort_keys=True).encode()
    (src / "run.json").write_bytes(data)
    create_bundle(root, name, [src / "run.json"], store=local_store(root))
    return data
