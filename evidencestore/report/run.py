"""The run report: one run record (an HTTP end-to-end benchmark run) as an HTML page.

The outcome comes first (``complete``, ``partial``, ``failed-before-inference``,
``invalid``) in words,
glyph and colour, with the run's reason and what a refusing server said; then the latency
of measured requests (end to end and time to first byte) as box plots with every value
drawn, one box per distinct request and phase, warmup drawn apart (below a rule, in grey)
and never mixed into the measured figures; every failure with its class and request; every request; the
configuration files and logs by digest; and every digest the record holds.

The page reads the record as plain data (``msgspec.to_builtins``), so it depends only on
the record's documented field names, not on the struct classes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ._page import digests_in, fmt, render_page, unique

__all__ = ["render_run_html"]

OUTCOME_STYLE = {
    "complete": "PASS",
    "partial": "INCONCLUSIVE",
    "failed-before-inference": "FAIL",
    "invalid": "FAIL",
    "never-started": "UNAVAILABLE",
}
OUTCOME_MEANING = {
    "complete": "Every request was sent and every output is valid against its request.",
    "partial": "The run finished, but some requests failed or returned invalid media; "
    "failed requests never contribute a number.",
    "failed-before-inference": "The run failed before any inference; it is kept as "
    "evidence and contributes no number.",
    "invalid": "The harness found the run INVALID (a rule it checks was not met); it is "
    "kept as evidence and supports no claim and no lossless verdict.",
    "never-started": "No server was reached (the connection was refused or the host name "
    "did not resolve): nothing was sent, and the run counts against no arm.",
}
_NS_SENT = ("sent_ns", "send_start_ns", "start_ns", "sent")
_NS_HEADERS = ("headers_ns", "response_headers_ns", "headers")
_NS_FIRST = ("first_byte_ns", "first_body_byte_ns", "first_byte")
_NS_LAST = ("last_byte_ns", "last_body_byte_ns", "last_byte")


def _first(d: Mapping[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        if d.get(name) is not None:
            return d[name]
    return None


def _timing(r: Mapping[str, Any], names: Sequence[str]) -> int | None:
    for holder in (r, r.get("timings") or {}, r.get("timing") or {}):
        if isinstance(holder, Mapping):
            got = _first(holder, names)
            if isinstance(got, int):
                return got
    return None


def request_times(r: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """End-to-end and time-to-first-byte seconds of one request (None when not reached)."""
    e2e = r.get("e2e_s")
    ttfb = r.get("ttfb_s")
    sent = _timing(r, _NS_SENT)
    last = _timing(r, _NS_LAST)
    first = _timing(r, _NS_FIRST)
    if e2e is None and sent is not None and last is not None:
        e2e = (last - sent) / 1e9
    if ttfb is None and sent is not None and first is not None:
        ttfb = (first - sent) / 1e9
    return (
        float(e2e) if isinstance(e2e, int | float) else None,
        float(ttfb) if isinstance(ttfb, int | float) else None,
    )


def _failure(r: Mapping[str, Any]) -> str | None:
    f = r.get("failure")
    if isinstance(f, Mapping):
        return str(_first(f, ("class", "kind", "type")) or "failed")
    return None if f in (None, "", "none") else str(f)


def _failure_message(r: Mapping[str, Any]) -> str:
    f = r.get("failure")
    if isinstance(f, Mapping) and f.get("message"):
        return str(f["message"])
    for key in ("message", "error", "failure_message"):
        if r.get(key):
            return str(r[key])
    media = r.get("media")
    if isinstance(media, Mapping) and media.get("verdict") == "FAIL":
        failed = ", ".join(str(c) for c in media.get("failed_checks", ()))
        return str(media.get("message") or f"media check failed: {failed}")
    check = r.get("media_check") or r.get("check")
    if isinstance(check, Mapping):
        bad = [c for c in check.get("checks", ()) if isinstance(c, Mapping) and not c.get("ok")]
        if bad:
            return "; ".join(f"{c.get('name')}: {c.get('message')}" for c in bad)
    return ""


def _summary(values: list[float]) -> str:
    if not values:
        return "\u2014"
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]  # nearest rank
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return (
        f"min {ordered[0]:.3f}, median {statistics.median(values):.3f}, p90 {p90:.3f}, "
        f"max {ordered[-1]:.3f}, mean {statistics.fmean(values):.3f} \u00b1 {sd:.3f} s"
    )


def _shown(seconds: float | None, failed: bool) -> str:
    if seconds is None:
        return "\u2014"
    return f"({seconds:.3f})" if failed else f"{seconds:.3f}"


def run_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """The page's view of a run record (plain data): requests, latencies, failures."""
    requests = [r for r in run.get("requests", ()) if isinstance(r, Mapping)]
    rows: list[dict[str, Any]] = []
    e2e: dict[str, list[float]] = {"measured": [], "warmup": []}
    ttfb: dict[str, list[float]] = {"measured": [], "warmup": []}
    # Per distinct workload request and phase: one box each in the latency plots.
    by_request: dict[str, dict[tuple[str, str], list[float]]] = {
        "e2e": {},
        "ttfb": {},
        "ttft": {},
        "tpot": {},
    }
    failures: list[dict[str, Any]] = []
    for i, r in enumerate(requests):
        phase = str(r.get("phase", "measured"))
        which = str(r.get("request", "?"))
        total, first = request_times(r)
        failure = _failure(r)
        body = r.get("body") if isinstance(r.get("body"), Mapping) else {}
        assert isinstance(body, Mapping)
        digest = r.get("body_digest") or body.get("digest")
        index = r.get("index", i)
        rows.append(
            {
                "index": index,
                "phase": phase,
                "status": fmt(r.get("status")),
                # A failed request's times are shown in parentheses: never counted.
                "e2e": _shown(total, failure is not None),
                "ttfb": _shown(first, failure is not None),
                "size": fmt(r.get("body_size") or body.get("size")),
                "digest": digest if isinstance(digest, str) else None,
                "failure": failure,
            }
        )
        if failure is None:
            if total is not None:
                e2e.setdefault(phase, []).append(total)
                by_request["e2e"].setdefault((which, phase), []).append(total)
            if first is not None:
                ttfb.setdefault(phase, []).append(first)
                by_request["ttfb"].setdefault((which, phase), []).append(first)
            for key in ("ttft", "tpot"):  # LLM metrics (native streams and imports)
                value = r.get(f"{key}_s")
                if isinstance(value, int | float):
                    by_request[key].setdefault((which, phase), []).append(float(value))
        else:
            failures.append(
                {"index": index, "phase": phase, "cls": failure, "message": _failure_message(r)}
            )
    return {
        "rows": rows,
        "e2e": e2e,
        "ttfb": ttfb,
        "failures": failures,
        "by_request": by_request,
    }


def _latency_groups(
    values: Mapping[tuple[str, str], list[float]],
) -> tuple[dict[str, list[float]], list[str]]:
    """One group per distinct request and phase, every measured one before any warmup;
    and the names of the warmup groups (drawn apart)."""

    def order(key: tuple[str, str]) -> tuple[int, int, str]:
        which, phase = key
        return (phase != "measured", int(which) if which.isdigit() else 1 << 30, which)

    groups: dict[str, list[float]] = {}
    apart: list[str] = []
    for which, phase in sorted(values, key=order):
        name = f"request {which} \u00b7 {phase}"
        groups[name] = values[(which, phase)]
        if phase != "measured":
            apart.append(name)
    return groups, apart


def _banner(run: Mapping[str, Any], outcome: str) -> str:
    """The outcome's meaning, the run's reason and, when the server refused the run,
    what the server said."""
    meaning = OUTCOME_MEANING.get(outcome, "")
    if run.get("reason"):
        meaning = f"{meaning} Reason: {run['reason']}"
    server = run.get("server")
    refused = outcome in ("failed-before-inference", "never-started")
    if isinstance(server, Mapping) and server.get("message"):
        refused = refused or not server.get("ok", True)
        if refused:
            meaning = f"{meaning} The server said: {server['message']}"
    return meaning


def _no_failure_note(run: Mapping[str, Any], outcome: str, requests: int) -> str:
    """What the failures section says when no request failed."""
    if outcome in ("failed-before-inference", "never-started") or requests == 0:
        server = run.get("server")
        said = server.get("message") if isinstance(server, Mapping) else None
        why = said or run.get("reason") or "the run ended before any request"
        return f"No request was sent: {why}"
    return "every request succeeded."


def _configs(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key in ("configs", "config", "server_logs", "logs"):
        value = run.get(key)
        items = value.items() if isinstance(value, Mapping) else enumerate(value or ())
        for name, item in items:
            if isinstance(item, Mapping):
                label = item.get("path") or item.get("name") or name
                d = item.get("digest") or (item.get("descriptor") or {}).get("digest")
            else:
                label, d = name, item
            if isinstance(d, str):
                out.append((f"{key}: {label}", d))
    return out


def render_run_html(
    run: Mapping[str, Any],
    *,
    record_digest: str,
    context: Mapping[str, str] | None = None,
    title: str | None = None,
) -> str:
    """Render a run record (as plain data, e.g. ``msgspec.to_builtins(record)``)."""
    from .plots import latency_plot

    view = run_view(run)
    outcome = str(run.get("outcome", "unknown"))
    style = OUTCOME_STYLE.get(outcome, "UNAVAILABLE")
    plots = []
    for key, caption, label in (
        ("e2e", "End-to-end latency per request: measured, and warmup apart", "end to end"),
        (
            "ttfb",
            "Time to first byte per request: measured, and warmup apart",
            "time to first byte",
        ),
        ("ttft", "Time to first token per request: measured, and warmup apart", "TTFT"),
        ("tpot", "Time per output token per request: measured, and warmup apart", "TPOT"),
    ):
        groups, apart = _latency_groups(view["by_request"][key])
        if any(groups.values()):
            plots.append(latency_plot(groups, title=caption, xlabel=label, salt=key, apart=apart))
    counts: dict[str, int] = {}
    for row in view["rows"]:
        counts[row["phase"]] = counts.get(row["phase"], 0) + 1
    by_class: dict[str, int] = {}
    for f in view["failures"]:
        by_class[f["cls"]] = by_class.get(f["cls"], 0) + 1
    facts = [
        ("outcome", outcome),
        ("arm", fmt(run.get("arm"))),
        *((f"{phase} requests", str(n)) for phase, n in counts.items()),
        ("failed requests", str(len(view["failures"]))),
    ]
    measured = view["e2e"].get("measured", [])
    if measured:
        facts.append(("median measured E2E", f"{statistics.median(measured):.3f} s"))
    rows = [("run record", record_digest), *(context or {}).items()]
    digests = unique(iter([*rows, *_configs(run), *digests_in(dict(run))]))
    meta = run.get("metadata") if isinstance(run.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = title or str(run.get("name") or meta.get("name") or run.get("arm") or "run")
    settings = [
        (k, fmt(v))
        for k, v in run.items()
        if not isinstance(v, list | tuple | Mapping) and k not in ("outcome",)
    ]
    server = run.get("server")
    if isinstance(server, Mapping):
        for key in ("url", "ok", "message", "server_header"):
            if server.get(key) is not None:
                settings.append((f"server.{key}", fmt(server[key])))
        if server.get("model_ids"):
            settings.append(("server.model_ids", ", ".join(map(str, server["model_ids"]))))
    meaning = _banner(run, outcome)
    return render_page(
        "run.html",
        {
            "title": f"Run {name}",
            "report_kind": "run",
            "kind_label": "benchmark run",
            "verdict": outcome,
            "verdict_style": style,
            "meaning": meaning,
            "facts": facts,
            "plots": plots,
            "summaries": [
                ("measured end to end", _summary(view["e2e"].get("measured", []))),
                ("measured time to first byte", _summary(view["ttfb"].get("measured", []))),
                ("warmup end to end (not measured)", _summary(view["e2e"].get("warmup", []))),
            ],
            "failures": view["failures"],
            "no_failure_note": _no_failure_note(run, outcome, len(view["rows"])),
            "by_class": sorted(by_class.items()),
            "requests": view["rows"],
            "settings": settings,
            "digests": digests,
            "versions": sorted(
                (str(k), str(v))
                for k, v in (run.get("environment") or run.get("client") or {}).items()
                if not isinstance(v, list | Mapping)
            ),
        },
    )
