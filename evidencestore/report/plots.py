"""Plots rendered offline with matplotlib to inline SVG (and thumbnails to PNG data URIs).

No pyplot and no global state: each plot is a fresh :class:`matplotlib.figure.Figure`
saved to a string, so rendering is thread-safe and needs no display. Text stays text
(``svg.fonttype = none``) so the page's own font stack applies and nothing is fetched.
Series are told apart by line style and marker as well as colour, so they survive
greyscale printing. Every plot carries ``data-*`` facts (the frame it marks, the number
of points) on its wrapper so tests and readers need not parse paths.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "Plot",
    "audio_plot",
    "identical_strip",
    "interval_plot",
    "latency_plot",
    "png_data_uri",
    "psnr_plot",
    "score_plot",
]

_RC: Any = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "path.simplify": True,
}
# Distinct in hue, lightness, dash and marker (greyscale-safe).
_STYLES = (
    {"color": "#1b4f9c", "linestyle": "-", "marker": None},
    {"color": "#c2410c", "linestyle": "--", "marker": None},
    {"color": "#15803d", "linestyle": ":", "marker": None},
    {"color": "#6b21a8", "linestyle": "-.", "marker": None},
)
PLANE_NAMES = ("Y", "U", "V", "A")
# Thresholds: dash-dot, unlike any series, so they stay apart in greyscale.
_THRESHOLD = (0, (8, 2, 2, 2))


@dataclass(frozen=True)
class Plot:
    """An SVG document (no XML prolog) and facts about what it shows."""

    svg: str
    title: str
    facts: Mapping[str, str | int | float] = field(default_factory=dict)


# Drawn at about a phone's width (5.1 in = 367 pt at 9 pt labels), so that a 390 px page
# shows the labels at about 9 px; wider pages scale it up to at most 38rem (the CSS).
def _figure(width: float = 5.1, height: float = 2.6) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig: Figure, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    # A salt per plot keeps the ids of clip paths and markers unique within one page.
    rc: Any = {**_RC, "svg.hashsalt": salt}
    with matplotlib.rc_context(rc):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    # Matplotlib's element ids (figure_1, axes_1, ...) repeat in every plot: prefix them
    # with the salt so that several plots on one page keep every id unique.
    import re

    named = set(re.findall(r'id="([A-Za-z][\w.]*_\d+)"', text))
    if named:
        pattern = re.compile(r'(id="|#)(' + "|".join(map(re.escape, named)) + r')(?=["\)])')
        text = pattern.sub(lambda m: f"{m.group(1)}{salt}-{m.group(2)}", text)
    return text


def _axes(fig: Figure) -> Axes:
    import matplotlib

    with matplotlib.rc_context(_RC):
        return fig.add_subplot()


def psnr_plot(
    planes: Sequence[Sequence[float | None]],
    threshold: float,
    worst: int | None,
    identical: Sequence[bool],
    *,
    salt: str = "psnr",
) -> Plot:
    """Per-frame PSNR of each plane (None = identical: drawn in a band above, not capped)."""
    import numpy as np

    fig = _figure()
    ax = _axes(fig)
    n = len(identical)
    x = np.arange(n)
    finite = [v for series in planes for v in series if v is not None]
    top = max([*finite, threshold]) if finite else threshold + 20
    low = min([*finite, threshold]) if finite else threshold - 10
    band = top + max(5.0, (top - low) * 0.12)
    for p, series in enumerate(planes):
        y = np.array([np.nan if v is None else v for v in series], dtype=float)
        style = _STYLES[p % len(_STYLES)]
        marker = "o" if np.count_nonzero(~np.isnan(y)) < 200 else None
        ax.plot(
            x,
            y,
            label=f"plane {PLANE_NAMES[p] if p < 4 else p}",
            linewidth=1.1,
            markersize=3,
            color=style["color"],
            linestyle=style["linestyle"],
            marker=marker,
        )
    ident_x = x[np.asarray(identical, dtype=bool)] if n else x
    if len(ident_x):
        ax.scatter(
            ident_x,
            np.full(len(ident_x), band),
            marker="|",
            s=30,
            color="#555555",
            label="identical frame (infinite PSNR)",
        )
    ax.axhline(threshold, color="#b91c1c", linestyle=_THRESHOLD, linewidth=1.2)
    ax.annotate(
        f"threshold {threshold:g} dB",
        (0, threshold),
        xytext=(2, 3),
        textcoords="offset points",
        color="#b91c1c",
        fontsize=8,
    )
    if worst is not None and 0 <= worst < n:
        ax.axvline(worst, color="#111111", linestyle=":", linewidth=1.0)
        vals = [planes[p][worst] for p in range(len(planes))]
        vmin = min((v for v in vals if v is not None), default=None)
        if vmin is not None:
            (pt,) = ax.plot([worst], [vmin], marker="v", markersize=8, color="#111111")
            pt.set_gid(f"worst-frame-{worst}")
        ax.annotate(
            f"worst frame {worst}",
            (worst, band),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    ax.set_ylim(low - max(2.0, (top - low) * 0.08), band + max(3.0, (top - low) * 0.08))
    ticks = [t for t in ax.get_yticks() if low - 2 <= t < band - 2]
    ax.set_yticks([*ticks, band], [f"{t:g}" for t in ticks] + ["identical"])
    ax.set_xlabel("frame")
    ax.set_ylabel("PSNR (dB)")
    fig.legend(loc="outside upper center", fontsize=7, ncols=5, frameon=False)
    facts: dict[str, str | int | float] = {"frames": n, "identical-frames": int(sum(identical))}
    if worst is not None:
        facts["min-frame"] = worst
    return Plot(_svg(fig, salt), "Per-frame PSNR per plane", facts)


def identical_strip(frames: int, *, salt: str = "identical") -> Plot:
    """Every frame of an exactly equal pair, each marked identical."""
    import numpy as np

    fig = _figure(height=1.3)
    ax = _axes(fig)
    x = np.arange(frames)
    ax.scatter(x, np.zeros(frames), marker="|", s=120, color="#15803d")
    ax.set_yticks([0], ["identical"])
    ax.set_xlim(-0.5, max(frames - 0.5, 0.5))
    ax.set_xlabel("frame")
    ax.grid(False)
    return Plot(
        _svg(fig, salt),
        "Per-frame equality",
        {"frames": frames, "identical-frames": frames},
    )


def score_plot(
    name: str, scores: Sequence[float], limit: float | None, *, salt: str = "score"
) -> Plot:
    """A perceptual score per frame (lower is more similar) with its threshold."""
    import numpy as np

    fig = _figure(height=2.2)
    ax = _axes(fig)
    y = np.asarray(scores, dtype=float)
    x = np.arange(len(y))
    ax.plot(x, y, color=_STYLES[0]["color"], linewidth=1.1, label=name)
    worst = int(np.argmax(y)) if len(y) else None
    if limit is not None:
        ax.axhline(limit, color="#b91c1c", linestyle=_THRESHOLD, label=f"maximum {limit:g}")
    if worst is not None:
        ax.plot([worst], [y[worst]], marker="^", color="#111111", markersize=7)
    ax.set_xlabel("frame")
    ax.set_ylabel(name)
    fig.legend(loc="outside upper center", fontsize=7, ncols=2, frameon=False)
    facts: dict[str, str | int | float] = {"frames": len(y)}
    if worst is not None:
        facts["max-frame"] = worst
    return Plot(_svg(fig, salt), f"Per-frame {name}", facts)


def audio_plot(
    max_abs: np.ndarray,
    rms: np.ndarray,
    block: int,
    rate: int,
    limit: float,
    *,
    salt: str = "audio",
) -> Plot:
    """Audio difference per block over time: max absolute and RMS, with the threshold."""
    import numpy as np

    fig = _figure(height=2.4)
    ax = _axes(fig)
    t = (np.arange(len(max_abs)) * block + block / 2) / rate
    # Log scale: a click is a spike, a drift a slope; identical blocks (0) are gaps.
    peak_y = np.where(max_abs > 0, max_abs, np.nan)
    rms_y = np.where(rms > 0, rms, np.nan)
    ax.plot(t, peak_y, color=_STYLES[1]["color"], linestyle="-", linewidth=1.0, label="max |diff|")
    ax.plot(t, rms_y, color=_STYLES[0]["color"], linestyle="--", linewidth=1.0, label="RMS diff")
    ax.axhline(limit, color="#b91c1c", linestyle=_THRESHOLD, linewidth=1.0, label="max allowed")
    positive = max_abs[max_abs > 0]
    if positive.size or limit > 0:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_yscale("log")
        # Plain labels: mathtext (10^-3) is slow to lay out and adds nothing here.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        floor = float(
            min(
                positive.min() if positive.size else limit,
                rms_y[~np.isnan(rms_y)].min() if np.any(~np.isnan(rms_y)) else limit,
                limit or 1.0,
            )
        )
        ax.set_ylim(floor / 3, max(float(positive.max()) if positive.size else 0.0, limit) * 3)
    ax.set_xlim(0, max(float(t[-1]) + block / (2 * rate), 1e-3) if len(t) else 1.0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("difference (full scale)")
    fig.legend(loc="outside upper center", fontsize=7, ncols=3, frameon=False)
    worst = int(np.argmax(max_abs)) if len(max_abs) else -1
    return Plot(
        _svg(fig, salt),
        f"Audio difference per block of {block} samples",
        {"blocks": len(max_abs), "max-block": worst},
    )


def latency_plot(
    groups: Mapping[str, Sequence[float]],
    unit: str = "s",
    *,
    title: str = "Latency",
    xlabel: str = "latency",
    salt: str = "latency",
    apart: Sequence[str] = (),
) -> Plot:
    """A box plot with every value as a strip, one row per group (e.g. request and phase);
    the groups named in ``apart`` (warmup) are drawn in grey below a rule."""
    import numpy as np

    names = [k for k, v in groups.items() if len(v)]
    fig = _figure(height=max(1.4, 0.55 * len(names) + 0.9))
    ax = _axes(fig)
    if names:
        data = [np.asarray(groups[k], dtype=float) for k in names]
        ax.boxplot(
            data,
            orientation="horizontal",
            widths=0.5,
            showfliers=False,
            medianprops={"color": "#111111", "linewidth": 1.5},
            boxprops={"color": "#1b4f9c"},
        )
        rng = np.random.default_rng(0)
        for i, (name, values) in enumerate(zip(names, data, strict=True), start=1):
            jitter = rng.uniform(-0.15, 0.15, len(values))
            warm = name in apart
            ax.scatter(
                values,
                i + jitter,
                s=12,
                color="#6b7280" if warm else "#c2410c",
                marker="^" if warm else "o",
                alpha=0.8,
                zorder=3,
            )
        kept = [i for i, name in enumerate(names, start=1) if name not in apart]
        if kept and len(kept) < len(names):
            ax.axhline(max(kept) + 0.5, color="#555555", linestyle="--", linewidth=0.8)
        ax.set_yticks(range(1, len(names) + 1), [f"{k} (n = {len(groups[k])})" for k in names])
        ax.invert_yaxis()  # the first group (measured) on top
    ax.set_xlabel(f"{xlabel} ({unit})")
    return Plot(
        _svg(fig, salt),
        title,
        {"groups": len(names), "values": sum(map(len, data)) if names else 0},
    )


def interval_plot(
    rows: Sequence[tuple[str, float | None, float, float | None]],
    *,
    salt: str = "interval",
    threshold: float | None = None,
) -> Plot:
    """Point estimates with their intervals (label, low, estimate, high), 1 marked, and
    the claim's threshold (``min_speedup``) as a labelled line when given."""
    fig = _figure(height=max(1.4, 0.45 * len(rows) + 0.9))
    ax = _axes(fig)
    for i, (_label, lo, est, hi) in enumerate(rows):
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [i, i], color="#1b4f9c", linewidth=2.5, solid_capstyle="butt")
            ax.plot([lo, hi], [i, i], linestyle="none", marker="|", markersize=10, color="#1b4f9c")
        ax.plot([est], [i], marker="D", color="#111111", markersize=5)
    ax.axvline(1.0, color="#555555", linestyle=":", linewidth=1.0)
    facts: dict[str, str | int | float] = {"intervals": len(rows)}
    title = "Speedup intervals"
    if threshold is not None:
        ax.axvline(threshold, color="#b91c1c", linestyle="--", linewidth=1.5)
        ax.annotate(
            f"min_speedup {threshold:g}", xy=(threshold, 1.0), xycoords=("data", "axes fraction"),
            xytext=(3, -10), textcoords="offset points", color="#b91c1c", fontsize=7,
        )  # fmt: skip
        facts["threshold"] = f"{threshold:g}"
        title += f"; dashed red line: min_speedup = {threshold:g} (a claim stands when the low end is right of it)"
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("speedup (baseline time / candidate time)")
    return Plot(_svg(fig, salt), title, facts)


def png_data_uri(image: np.ndarray, *, width: int = 480) -> str:
    """An RGB(A) uint8 array as a PNG ``data:`` URI, downscaled to at most ``width`` pixels
    wide by striding (nearest neighbour: no pixel is interpolated)."""
    from matplotlib.image import imsave

    step = max(1, math.ceil(image.shape[1] / width))
    small: Any = image[::step, ::step]
    buf = io.BytesIO()
    imsave(buf, small, format="png")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
