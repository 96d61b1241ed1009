"""What ``evstore run show`` prints: per phase, requests, failures and latency statistics
(TTFT, ITL, TPOT and output tokens too for a streamed LLM run), the client's load
(client-bound or not), and the audits of the outputs (``audits.py``) with every finding.

Only requests that delivered a valid output contribute latencies; a failed request is
listed with its class and message and never contributes a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from .models import RunRecord

__all__ = ["latency_stats", "quantile", "summarize"]


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by linear interpolation between order statistics
    (NumPy's default, R type 7)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_stats(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, min, median, p90, max, mean and sample standard deviation (None when n < 2)."""
    n = len(values)
    if n == 0:
        return {
            "n": 0,
            "min": None,
            "median": None,
            "p90": None,
            "max": None,
            "mean": None,
            "sd": None,
        }
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {
        "n": n,
        "min": min(values),
        "median": quantile(values, 0.5),
        "p90": quantile(values, 0.9),
        "max": max(values),
        "mean": mean,
        "sd": sd,
    }


def summarize(record: RunRecord) -> dict[str, Any]:
    """The run's outcome, per-phase counts and latencies, failures and requests."""
    phases: dict[str, Any] = {}
    for phase in ("warmup", "measured"):
        mine = [r for r in record.requests if r.phase == phase]
        ok = [r for r in mine if r.failure is None]
        failures: dict[str, int] = {}
        for r in mine:
            if r.failure is not None:
                failures[r.failure] = failures.get(r.failure, 0) + 1
        phases[phase] = {
            "requests": len(mine),
            "ok": len(ok),
            "failures": dict(sorted(failures.items())),
            "e2e_s": latency_stats([r.e2e_s for r in ok if r.e2e_s is not None]),
            "ttfb_s": latency_stats([r.ttfb_s for r in ok if r.ttfb_s is not None]),
        }
        # A streamed LLM run, or an imported one whose harness gave TTFT without events.
        if any(r.events is not None or r.ttft_s is not None for r in mine):
            for key in ("ttft_s", "itl_s", "tpot_s"):
                values = [getattr(r, key) for r in ok]
                phases[phase][key] = latency_stats([v for v in values if v is not None])
            phases[phase]["output_tokens"] = sum(r.output_tokens or 0 for r in ok)
    return {
        "name": record.name,
        "arm": record.arm,
        "campaign": record.campaign,
        "condition": record.condition,
        "protocol_digest": record.protocol_digest,
        "workload_digest": record.workload_digest,
        "server": record.server.url,
        "server_ok": record.server.ok,
        "server_message": record.server.message,
        "started": record.started,
        "ended": record.ended,
        "outcome": record.outcome,
        "reason": record.reason,
        "configs": {k: v.digest for k, v in record.configs.items()},
        "logs": {k: v.digest for k, v in record.logs.items()},
        "phases": phases,
        "harness": msgspec.to_builtins(record.harness) if record.harness is not None else None,
        "unchecked": sum(
            1
            for r in record.requests
            if r.body is not None
            and r.failure is None
            and r.completion is None  # an LLM output is checked as it is read back
            and (r.media is None or r.media.verdict == "UNAVAILABLE")
        ),
        # Outputs whose audio length is bounded, not verified (media check INCONCLUSIVE):
        # valid as far as their container can tell; a campaign accepts them only when
        # its protocol says [quality] audio_length = "bounded".
        "bounded": [
            {"label": r.label, "message": r.media.message}
            for r in record.requests
            if r.failure is None and r.media is not None and r.media.verdict == "INCONCLUSIVE"
        ],
        "load": msgspec.to_builtins(record.load) if record.load is not None else None,
        "goodput": msgspec.to_builtins(record.goodput) if record.goodput is not None else None,
        "audits": [
            {
                "name": a.name,
                "examined": a.examined,
                "description": a.description,
                "findings": [
                    {"message": f.message, "requests": list(f.requests)} for f in a.findings
                ],
            }
            for a in record.audits
        ],
        "failures": [
            {
                "label": r.label,
                "index": r.index,
                "phase": r.phase,
                "request": r.request,
                "repetition": r.repetition,
                "failure": r.failure,
                "status": r.status,
                "message": r.message,
                # an imported harness's own error type (AIPerf's), when it gave one
                **({"error_type": r.error_type} if r.error_type else {}),
            }
            for r in record.requests
            if r.failure is not None
        ],
        "requests": [
            {
                "label": r.label,
                "index": r.index,
                "phase": r.phase,
                "request": r.request,
                "repetition": r.repetition,
                "status": r.status,
                "failure": r.failure,
                "e2e_s": r.e2e_s,
                "ttfb_s": r.ttfb_s,
                "payload": r.payload.digest,
                "body": r.body.digest if r.body is not None else None,
                "received": r.received,
                "declared_length": r.declared_length,
                "media": r.media.verdict if r.media is not None else None,
            }
            for r in record.requests
        ],
    }
