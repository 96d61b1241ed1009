"""The campaign report: a campaign status (conditions x arms) as one HTML page.

The overall verdict first (``ACCEPTED`` only when every condition is qualified), then what
remains, in words; the matrix of conditions x arms with runs done / required / failed,
repeatability, the lossless verdict and the speedup with its interval; the intervals drawn
as intervals around 1; and an anchor for every run and comparison a cell cites (its digest,
to re-check with ``evstore verify`` or render with ``evstore report DIGEST``).

Like the run page it reads the status as plain data (``msgspec.to_builtins``) by its
documented field names: ``verdict``, ``remaining``, ``cells`` (``condition``, ``arm``,
``runs_done``, ``runs_failed``, ``lossless``, ``speedup`` with ``ratio``, ``low``, ``high``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._page import digests_in, fmt, render_page, unique

__all__ = ["render_campaign_status_html"]

_VERDICT_STYLE = {"ACCEPTED": "PASS", "NOT_ACCEPTED": "INCONCLUSIVE"}
_MEANING = {
    "ACCEPTED": "Every condition is qualified as the protocol requires.",
    "NOT_ACCEPTED": "Not every condition is qualified yet: see what remains.",
}


def _anchor(digest: str) -> str:
    return "d-" + digest.removeprefix("blake3:")[:16]


def _cited(cell: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, digest) of every record a cell cites, in order."""
    out: list[tuple[str, str]] = []
    for where, d in digests_in(dict(cell), "cell"):
        label = where.removeprefix("cell.")
        out.append((label, d))
    return list(dict.fromkeys(out))


def _speedup(
    cell: Mapping[str, Any],
) -> tuple[str, tuple[float | None, float, float | None] | None]:
    s = cell.get("speedup")
    if not isinstance(s, Mapping) or not isinstance(s.get("ratio"), int | float):
        reason = cell.get("speedup_refused") or cell.get("claim_refused")
        return (f"no claim: {reason}" if reason else "no claim"), None
    ratio = float(s["ratio"])
    low = s.get("low")
    high = s.get("high")
    lo = float(low) if isinstance(low, int | float) else None
    hi = float(high) if isinstance(high, int | float) else None
    text = f"{ratio:.3f}\u00d7"
    if lo is not None and hi is not None:
        level = s.get("confidence")
        text += f" [{lo:.3f}, {hi:.3f}]" + (f" ({float(level):.0%})" if level else "")
    n = s.get("n")
    if n is not None:
        text += f", n = {n}"
    return text, (lo, ratio, hi)


def _plain(value: Any) -> Mapping[str, Any]:
    import msgspec

    out: Mapping[str, Any] = value if isinstance(value, Mapping) else msgspec.to_builtins(value)
    return out


def _related(records: Sequence[Any]) -> list[dict[str, Any]]:
    """Claims, adjudications and repeatability records as page sections with anchors."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def once(digest: Any) -> str:
        """The anchor of ``digest`` the first time it is shown, then "" (ids stay unique)."""
        if not isinstance(digest, str) or _anchor(digest) in seen:
            return ""
        seen.add(_anchor(digest))
        return _anchor(digest)

    for value in records:
        r = _plain(value)
        kind = str(r.get("kind", "")).rsplit("-", 1)[-1]
        cond, arm = r.get("condition"), r.get("arm")
        rid = f"{kind}-{cond}" + (f"-{arm}" if arm else "")
        rows: list[dict[str, Any]] = []
        for c in r.get("comparisons", ()):
            rows.append(
                {
                    "key": c.get("key"),
                    "verdict": c.get("verdict"),
                    "reference": c.get("reference"),
                    "candidate": c.get("candidate"),
                    "record": c.get("record"),
                    "anchor": once(c.get("record")),
                    "reasons": "; ".join(map(str, c.get("reasons", ()))),
                }
            )
        runs = [
            {
                "run": v.get("run"),
                "digest": v.get("digest"),
                "anchor": once(v.get("digest")),
                "arm": v.get("arm"),
                "latencies": ", ".join(f"{x:.3f}" for x in v.get("values", ())),
                "mean": fmt(v.get("mean")),
                "cv": fmt(v.get("cv")),
            }
            for v in r.get("runs", ())
            if isinstance(v, Mapping)
        ]
        run_digests = [
            d for key in ("runs", "baseline_runs", "candidate_runs") for d in r.get(key, ())
            if isinstance(d, str)
        ]  # fmt: skip
        facts = [(k, fmt(r.get(k))) for k in (
            "verdict", "exact", "refused", "estimator", "confidence", "n_baseline",
            "n_candidate", "df", "cv_baseline", "cv_candidate", "baseline_repeatable",
        ) if k in r]  # fmt: skip
        speedup = r.get("speedup")
        if isinstance(speedup, Mapping):
            facts.insert(0, ("speedup", f"{speedup['ratio']:.4f} [{speedup['low']:.4f}, "
                                        f"{speedup['high']:.4f}]"))  # fmt: skip
        out.append(
            {
                "id": rid,
                "kind": kind,
                "title": f"{kind} {cond}" + (f" / {arm}" if arm else ""),
                "condition": cond,
                "arm": arm,
                "verdict": r.get("verdict"),
                "facts": facts,
                "reasons": [str(x) for x in r.get("reasons", ())],
                "comparisons": rows,
                "runs": runs,
                "run_digests": [(d, once(d)) for d in dict.fromkeys(run_digests)],
                "config_diff": [
                    ", ".join(f"{k} = {fmt(v)}" for k, v in row.items())
                    for row in r.get("config_diff", ())
                    if isinstance(row, Mapping)
                ],
                "excluded": [f"{e.get('run')}: {e.get('message')}" for e in r.get("excluded", ())],
                "data": r,
            }
        )
    return out


def render_campaign_status_html(
    status: Any,
    *,
    record_digest: str | None = None,
    context: Mapping[str, str] | None = None,
    name: str | None = None,
    records: Sequence[Any] = (),
) -> str:
    """Render a campaign status (a struct or its plain data) as a self-contained page.

    ``record_digest`` names the stored status (default: the digest of its canonical
    bytes); ``context`` adds labelled digests (e.g. the protocol's). ``records``: the
    claims, adjudications and repeatability records the status was computed from (structs
    or plain data); each gets a section, linked from its cell, with every run and
    comparison record it cites, by digest and anchor.
    """
    from .._canonical import canonical
    from ..digest import hash_bytes
    from .plots import interval_plot

    data = _plain(status)
    digest = record_digest or hash_bytes(canonical(data)).digest
    related = _related(records)
    cells = [c for c in data.get("cells", ()) if isinstance(c, Mapping)]
    conditions = list(dict.fromkeys(str(c.get("condition")) for c in cells))
    arms = list(dict.fromkeys(str(c.get("arm")) for c in cells))
    matrix: dict[tuple[str, str], dict[str, Any]] = {}
    intervals: list[tuple[str, float | None, float, float | None]] = []
    cited: dict[str, str] = {}
    for c in cells:
        text, interval = _speedup(c)
        refs = _cited(c)
        for label, d in refs:
            cited.setdefault(d, f"{c.get('condition')} / {c.get('arm')}: {label}")
        claim = next(
            (x["data"] for x in related
             if x["kind"] == "claim" and (x["condition"], x["arm"]) == (c.get("condition"), c.get("arm"))),
            None,
        )  # fmt: skip
        if claim is not None and interval is not None:
            text += f" ({float(claim.get('confidence', 0)):.0%})" if claim.get("confidence") else ""
            text += (
                f", n = {claim.get('n_baseline')} baseline / {claim.get('n_candidate')} candidate"
            )
            if claim.get("runs_baseline"):  # a claim over runs, with its verdict
                floor = claim.get("min_speedup")
                text += (
                    f" requests, {claim.get('runs_baseline')} / {claim.get('runs_candidate')} "
                    f"runs: {claim.get('verdict')}"
                    + (f" (min_speedup {float(floor):g})" if floor is not None else "")
                )
        elif claim is not None and claim.get("refused"):
            text = "refused: " + "; ".join(map(str, claim.get("reasons", ())))
        required = c.get("runs_required")
        links = [
            (x["kind"], x["id"])
            for x in related
            if x["condition"] == c.get("condition") and x["arm"] in (None, c.get("arm"))
            and (x["arm"] is not None or c.get("baseline"))
        ]  # fmt: skip
        matrix[(str(c.get("condition")), str(c.get("arm")))] = {
            "links": links,
            "qualified": c.get("qualified"),
            "failed_runs": [str(x) for x in c.get("failed_runs", ())],
            "id": f"cell-{c.get('condition')}-{c.get('arm')}",
            "runs": f"{fmt(c.get('runs_done'))}"
            + (f" of {required}" if required is not None else ""),
            "failed": fmt(c.get("runs_failed")),
            "repeatability": c.get("repeatability"),
            "lossless": c.get("lossless"),
            "speedup": text,
            "refs": [(label, d, _anchor(d)) for label, d in refs],
        }
        if interval is not None:
            intervals.append((f"{c.get('condition')} {c.get('arm')}", *interval))
    plots = [interval_plot(intervals, salt="speedup")] if intervals else []
    verdict = str(data.get("verdict", "NOT_ACCEPTED"))
    rows = [("campaign status", digest), *(context or {}).items()]
    for x in related:
        rows += [
            (f"{x['id']}{where.removeprefix('r')}", d) for where, d in digests_in(x["data"], "r")
        ]
    digests = unique(iter([*rows, *digests_in(dict(data), "status")]))
    anchored = (
        {d for x in related for d, _ in x["run_digests"]}
        | {v["digest"] for x in related for v in x["runs"]}
        | {c["record"] for x in related for c in x["comparisons"]}
    )
    title = name or str(data.get("campaign") or data.get("name") or "campaign")
    return render_page(
        "campaign.html",
        {
            "title": f"Campaign {title}",
            "report_kind": "campaign",
            "kind_label": "campaign status",
            "verdict": verdict,
            "verdict_style": _VERDICT_STYLE.get(verdict, "UNAVAILABLE"),
            "meaning": _MEANING.get(verdict, ""),
            "remaining": [str(r) for r in data.get("remaining", ())],
            "conditions": conditions,
            "arms": arms,
            "matrix": matrix,
            "plots": plots,
            "cited": [(d, where, _anchor(d)) for d, where in cited.items() if d not in anchored],
            "related": related,
            "excluded": [f"{e.get('run')}: {e.get('message')}" for e in data.get("excluded", ())],
            "notes": [str(n) for n in data.get("notes", ())],
            "digests": digests,
            "versions": [],
        },
    )
