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

from collections.abc import Mapping
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


def render_campaign_status_html(
    status: Any,
    *,
    record_digest: str | None = None,
    context: Mapping[str, str] | None = None,
    name: str | None = None,
) -> str:
    """Render a campaign status (a struct or its plain data) as a self-contained page.

    ``record_digest`` names the stored status (default: the digest of its canonical
    bytes); ``context`` adds labelled digests (e.g. the protocol's).
    """
    import msgspec

    from .._canonical import canonical
    from ..digest import hash_bytes
    from .plots import interval_plot

    data: Mapping[str, Any] = status if isinstance(status, Mapping) else msgspec.to_builtins(status)
    digest = record_digest or hash_bytes(canonical(data)).digest
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
        required = c.get("runs_required")
        matrix[(str(c.get("condition")), str(c.get("arm")))] = {
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
    digests = unique(iter([*rows, *digests_in(dict(data), "status")]))
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
            "cited": [(d, where, _anchor(d)) for d, where in cited.items()],
            "digests": digests,
            "versions": [],
        },
    )
