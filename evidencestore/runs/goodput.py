"""Goodput: the measured requests per second that met every service-level objective.

A request meets the SLO (``[timing] slo`` of the workload) when it succeeded and each
objective given holds: ``ttft_s <= ttft``, ``itl_s <= tpot`` (per output token: vLLM's
TPOT, AIPerf's ITL) and ``e2e_s <= e2e``. A request without the value an objective needs
(no TTFT for an output that was not streamed, no per-token time without a token count)
does not meet it. The rate is the good requests over the measured span, from the first
intended send to the last byte, as vLLM's ``benchmark_serving`` divides by the run's
duration.
"""

from __future__ import annotations

from collections.abc import Sequence

from .models import Goodput, RequestRecord, Slo

__all__ = ["goodput"]

_FIELDS = (("ttft", "ttft_s"), ("tpot", "itl_s"), ("e2e", "e2e_s"))


def goodput(slo: Slo, requests: Sequence[RequestRecord]) -> Goodput | None:
    """The goodput of the measured requests (None without any)."""
    measured = [r for r in requests if r.phase == "measured"]
    if not measured:
        return None
    missed = {name: 0 for name, _ in _FIELDS if getattr(slo, name) is not None}
    good = 0
    for r in measured:
        ok = r.failure is None
        for name, field in _FIELDS:
            limit = getattr(slo, name)
            if limit is None:
                continue
            value = getattr(r, field)
            if value is None or value > limit:
                missed[name] += 1
                ok = False
        good += ok
    starts = [r.intended_ns if r.intended_ns is not None else r.sent_ns for r in measured]
    ends = [r.last_byte_ns if r.last_byte_ns is not None else r.end_ns for r in measured]
    span = max(0.0, (max(ends) - min(starts)) / 1e9)
    return Goodput(
        slo=slo,
        good=good,
        measured=len(measured),
        span_s=span,
        rate=good / span if span > 0 else 0.0,
        missed=missed,
    )
