"""The campaign report: a campaign status (conditions x arms) as one HTML page.

Written to be read in two minutes: the verdict and the conclusion of each arm first
(qualified, rejected, withdrawn, open, with the reasons), inputs that cannot be had
(``evstore pull``), what remains; the speedup intervals with the ``min_speedup`` line and
each arm's per-run latencies; then a card per condition and arm (runs done / required /
failed, repeatability, lossless verdict, speedup, conclusion). Each record behind the
status gets a section in words, its raw fields folded away; runs are named by their
bundle name everywhere, with the digest shortened beside it (full value on hover, in the
copy button and in the folded provenance). ``render_campaign_record_html`` renders one
claim, repeatability, adjudication, void or withdrawal record on its own.

Like the run page it reads the status as plain data (``msgspec.to_builtins``) by its
documented field names: ``verdict``, ``remaining``, ``cells`` (``condition``, ``arm``,
``runs_done``, ``runs_failed``, ``lossless``, ``speedup`` with ``ratio``, ``low``, ``high``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._page import digests_in, fmt, render_page, unique

__all__ = ["render_campaign_record_html", "render_campaign_status_html"]

_VERDICT_STYLE = {"ACCEPTED": "PASS", "NOT_ACCEPTED": "INCONCLUSIVE", "UNAVAILABLE": "UNAVAILABLE"}
_MEANING = {
    "ACCEPTED": "Every condition is qualified as the protocol requires.",
    "NOT_ACCEPTED": "Not accepted: see the conclusions per arm and what remains.",
    "UNAVAILABLE": "Inputs of this verdict cannot be had here: fetch them with `evstore pull`.",
}
_ACCEPT = {
    "every-arm": "the baseline and every candidate arm not withdrawn are qualified",
    "any-arm": "the baseline and at least one candidate arm are qualified",
}


def _pct(value: Any) -> str:
    return f"{float(value):.2%}" if isinstance(value, int | float) else "\u2014"


def _claim_summary(r: Mapping[str, Any]) -> str:
    """A claim in one sentence."""
    s = r.get("speedup")
    verdict = r.get("verdict", "")
    floor = r.get("min_speedup")
    if not isinstance(s, Mapping):
        return f"{verdict}: no speedup interval could be computed, for the reasons below."
    conf = r.get("confidence")
    text = (
        f"Speedup {s['ratio']:.3f}\u00d7 [{s['low']:.3f}, {s['high']:.3f}]"
        + (f" at {float(conf):.0%}" if conf else "")
        + f" ({r.get('estimator')} over runs: {r.get('runs_baseline')} baseline, "
        f"{r.get('runs_candidate')} candidate"
        + (f", df {float(r['df']):.1f}" if isinstance(r.get("df"), int | float) else "")
        + f"): {verdict}"
    )
    if floor is not None:
        side = "above" if r.get("clears") else "not above"
        text += f"; the low end {s['low']:.3f} is {side} min_speedup {float(floor):g}"
    return text + "."


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


def _counted(reasons: Iterable[str]) -> list[str]:
    """Each distinct reason once, with how many times it was given."""
    listed = list(reasons)
    return [
        r + (f" (\u00d7{listed.count(r)})" if listed.count(r) > 1 else "")
        for r in dict.fromkeys(listed)
    ]


def _run_names(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Run bundle digest -> run name, from every record that names both."""
    names: dict[str, str] = {}
    for r in records:
        for d, n in zip(r.get("runs", ()), r.get("run_names", ()), strict=False):
            if isinstance(d, str):
                names[d] = str(n)
        for v in r.get("runs", ()):
            if isinstance(v, Mapping) and isinstance(v.get("digest"), str):
                names[v["digest"]] = str(v.get("run"))
        for side in ("baseline", "candidate"):
            pairs = zip(r.get(f"{side}_runs", ()), r.get(f"{side}_run_names", ()), strict=False)
            names.update({str(d): str(n) for d, n in pairs})
    return names


def _related(records: Sequence[Any]) -> list[dict[str, Any]]:
    """Claims, adjudications and repeatability records as page sections with anchors."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    plain = [_plain(v) for v in records]
    names = _run_names(plain)

    def once(digest: Any) -> str:
        """The anchor of ``digest`` the first time it is shown, then "" (ids stay unique)."""
        if not isinstance(digest, str) or _anchor(digest) in seen:
            return ""
        seen.add(_anchor(digest))
        return _anchor(digest)

    for r in plain:
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
                "value": f"{float(v['value']):.4f}" if v.get("value") else fmt(v.get("mean")),
                "cv": _pct(v.get("cv")),
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
            "min_speedup", "runs_baseline", "runs_candidate", "order", "run", "run_digest",
            "arm", "reason",
        ) if k in r]  # fmt: skip
        facts = [(k, _pct(r.get(k)) if k.startswith("cv_") else v) for k, v in facts]
        speedup = r.get("speedup")
        if isinstance(speedup, Mapping):
            facts.insert(0, ("speedup", f"{speedup['ratio']:.4f} [{speedup['low']:.4f}, "
                                        f"{speedup['high']:.4f}]"))  # fmt: skip
        verdicts = [str(c.get("verdict")) for c in r.get("comparisons", ())]
        counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
        summary = ""
        if kind == "claim":
            summary = _claim_summary(r)
        elif kind == "repeatability":
            summary = f"{len(r.get('runs', ()))} baseline runs compared with the first: " + (
                f"UNAVAILABLE ({r.get('unavailable')})."
                if r.get("unavailable")
                else "repeatable-exact."
                if r.get("exact")
                else "NOT repeatable-exact."
            )
        elif kind == "adjudication":
            summary = (
                f"{len(r.get('candidate_runs', ()))} candidate run(s) against baseline run "
                f"{names.get(str((r.get('baseline_runs') or [''])[0]), '?')}: "
                f"{r.get('verdict')}."
            )
        elif kind == "void":
            summary = f"Run {r.get('run')} is set aside: {r.get('reason')}"
        elif kind == "withdrawal":
            summary = f"Arm {r.get('arm')} is withdrawn: {r.get('reason')}"
        out.append(
            {
                "id": rid,
                "kind": kind,
                "title": f"{kind} {cond or ''}" + (f" / {arm}" if arm else ""),
                "condition": cond,
                "arm": arm,
                "verdict": r.get("verdict"),
                "facts": facts,
                "reasons": _counted(str(x) for x in r.get("reasons", ())),
                "comparisons": rows,
                "runs": runs,
                "run_digests": [(d, once(d), names.get(d)) for d in dict.fromkeys(run_digests)],
                "summary": summary,
                "comparison_summary": ", ".join(f"{n} {v}" for v, n in counts.items()),
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
    protocol: Mapping[str, Any] | None = None,
) -> str:
    """Render a campaign status (a struct or its plain data) as a self-contained page.

    ``record_digest`` names the stored status (default: the digest of its canonical
    bytes); ``context`` adds labelled digests (e.g. the protocol's). ``records``: the
    claims, adjudications and repeatability records the status was computed from (structs
    or plain data); each gets a section, linked from its cell, with every run and
    comparison record it cites, by digest and anchor. ``protocol``: what the campaign
    claims (``report.targets.protocol_summary``), shown at the top.
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
            "baseline": bool(c.get("baseline")),
            "failed_runs": [str(x) for x in c.get("failed_runs", ())],
            "id": f"cell-{c.get('condition')}-{c.get('arm')}",
            "runs": f"{fmt(c.get('runs_done'))}"
            + (f" of {required}" if required is not None else ""),
            "failed": fmt(c.get("runs_failed")),
            "repeatability": c.get("repeatability"),
            "lossless": c.get("lossless"),
            "conclusion": c.get("conclusion"),
            "reasons": [str(x) for x in c.get("reasons", ())]
            if c.get("conclusion") != "qualified"
            else [],
            "speedup": text,
            "refs": [(label, d, _anchor(d)) for label, d in refs],
        }
        if interval is not None:
            intervals.append((f"{c.get('condition')} {c.get('arm')}", *interval))
    floors = {
        float(x["data"]["min_speedup"])
        for x in related
        if x["kind"] == "claim" and isinstance(x["data"].get("min_speedup"), int | float)
    }
    threshold = floors.pop() if len(floors) == 1 else None
    plots = [interval_plot(intervals, salt="speedup", threshold=threshold)] if intervals else []
    verdict = str(data.get("verdict", "NOT_ACCEPTED"))
    rows = [("campaign status", digest), *(context or {}).items()]
    for x in related:
        rows += [
            (f"{x['id']}{where.removeprefix('r')}", d) for where, d in digests_in(x["data"], "r")
        ]
    firsts: dict[str, str] = {}
    for where, d in unique(iter([*rows, *digests_in(dict(data), "status")])):
        firsts.setdefault(d, where)  # each digest once, under the first place it is cited
    digests = [(where, d) for d, where in firsts.items()]
    arm_rows = [a for a in data.get("arms", ()) if isinstance(a, Mapping)]
    arm_conclusions = [
        {
            "arm": a.get("arm"),
            "role": "baseline" if a.get("baseline") else "candidate",
            "conclusion": a.get("conclusion"),
            "reasons": [str(r) for r in a.get("reasons", ())],
        }
        for a in arm_rows
    ]
    anchored = (
        {row[0] for x in related for row in x["run_digests"]}
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
            "meaning": (
                f"{verdict} {data['qualifier']}: {_MEANING.get(verdict, '')}"
                if data.get("qualifier")
                else _MEANING.get(verdict, "")
            ),
            "remaining": [str(r) for r in data.get("remaining", ())],
            "conditions": conditions,
            "arms": arms,
            "matrix": matrix,
            "plots": plots,
            "cited": [(d, where, _anchor(d)) for d, where in cited.items() if d not in anchored],
            "related": related,
            "excluded": [f"{e.get('run')}: {e.get('message')}" for e in data.get("excluded", ())],
            "set_aside": [
                (str(e.get("code")), f"{e.get('run')}: {e.get('message')}")
                for key in ("voided", "withdrawn", "never_started")
                for e in data.get(key, ())
            ],
            "missing": [(m.get("digest"), m.get("needed_by")) for m in data.get("missing", ())],
            "notes": [str(n) for n in data.get("notes", ())],
            "arm_conclusions": arm_conclusions,
            "protocol": protocol,
            "accept_rule": _ACCEPT.get(str(data.get("accept", "every-arm")), ""),
            "latency_plots": _latency_plots(related),
            "digests": digests,
            "fold_provenance": True,
            "versions": [],
        },
    )


def _latency_plots(related: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Per condition: every arm's measured latencies, one row per arm (from the claims)."""
    from .plots import latency_plot

    by_condition: dict[str, dict[str, dict[str, list[float]]]] = {}
    for x in related:
        if x["kind"] != "claim":
            continue
        cond = str(x["condition"])
        for v in x["data"].get("runs", ()):
            if isinstance(v, Mapping):
                arms = by_condition.setdefault(cond, {})
                runs = arms.setdefault(str(v.get("arm")), {})
                runs[str(v.get("run"))] = [float(t) for t in v.get("values", ())]
    plots = []
    for cond, arms in by_condition.items():
        groups = {
            arm: [t for values in runs.values() for t in values] for arm, runs in arms.items()
        }
        plots.append(
            latency_plot(
                groups,
                title=f"{cond}: measured end-to-end latency per arm (every request of every "
                "complete run)",
                xlabel="end-to-end latency",
                salt=f"latency-{cond}",
            )
        )
    return plots


def render_campaign_record_html(
    record: Any, *, record_digest: str | None = None, context: Mapping[str, str] | None = None
) -> str:
    """One campaign record (claim, repeatability, adjudication, void, withdrawal) as a
    self-contained page, from the record alone."""
    from .._canonical import canonical
    from ..digest import hash_bytes
    from .plots import interval_plot

    data = _plain(record)
    digest = record_digest or hash_bytes(canonical(data)).digest
    (x,) = _related([data])
    verdict = data.get("verdict")
    if verdict is None and "exact" in data:
        verdict = "PASS" if data.get("exact") else "INCONCLUSIVE"
    style = {"STANDS": "PASS", "NOT_CLEARED": "FAIL", "UNRESOLVED": "INCONCLUSIVE",
             "REFUSED": "UNAVAILABLE", "NO_TIMING_CLAIM": "UNAVAILABLE"}.get(
        str(verdict), str(verdict) if verdict in _ORDER else "UNAVAILABLE")  # fmt: skip
    plots = []
    s = data.get("speedup")
    if isinstance(s, Mapping):
        label = f"{data.get('condition')} {data.get('arm')}"
        floor = data.get("min_speedup")
        plots.append(
            interval_plot(
                [(label, float(s["low"]), float(s["ratio"]), float(s["high"]))],
                salt="claim",
                threshold=float(floor) if isinstance(floor, int | float) else None,
            )
        )
    rows = [(f"{x['kind']} record", digest), *(context or {}).items(), *digests_in(data, "record")]
    return render_page(
        "campaign_record.html",
        {
            "title": f"Campaign {data.get('campaign') or ''} {x['title']}".replace("  ", " "),
            "report_kind": "campaign-record",
            "kind_label": f"campaign {x['kind']} record",
            "verdict": str(verdict) if verdict is not None else None,
            "verdict_style": style,
            "meaning": x["summary"],
            "related": [x],
            "plots": plots,
            "digests": unique(iter(rows)),
            "versions": [],
        },
    )


_ORDER = ("PASS", "FAIL", "INCONCLUSIVE", "UNAVAILABLE")
