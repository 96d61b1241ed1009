"""Self-contained HTML reports for comparisons, runs and campaigns (extra ``report``).

One page per record: no network fetch when opened (styles, the one small script, SVG
plots and PNG thumbnails are inline), readable when printed, derived only from stored
records and blobs addressed by digest, naming the digest of every record it shows.
Templates are string constants (:mod:`._templates`), rendered with jinja2 (autoescaped);
plots are matplotlib figures saved to SVG (:mod:`.plots`).
"""

from __future__ import annotations

from .campaign import render_campaign_status_html
from .comparison import render_comparison_html
from .run import render_run_html
from .targets import Rendered, ReportError, render_record_bytes, render_report

__all__ = [
    "Rendered",
    "ReportError",
    "render_campaign_status_html",
    "render_comparison_html",
    "render_record_bytes",
    "render_report",
    "render_run_html",
]
