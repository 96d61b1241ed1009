"""Media validators: probe, full decode with content digests, expectations, comparison.

PyAV and numpy are imported only when a function needs them, so importing this package
(and ``evidencestore``) works without the ``media`` extra.
"""

from __future__ import annotations

from .compare import EXIT_CODES, compare, compare_reports
from .decode import analyse
from .demo import demo_comparison
from .expectations import check, check_report, load_expectations, with_overrides
from .probe import probe
from .records import (
    MEDIA_SCHEMA_TYPES,
    AudioExpectation,
    Check,
    CheckReport,
    ComparisonRecord,
    Expectations,
    MediaReport,
    ProbeReport,
    Thresholds,
    Verdict,
    VideoExpectation,
)
from .scoring import FrameScorer
from .source import MediaSource, resolve
from .store import store_record
from .thresholds import load_thresholds

__all__ = [
    "EXIT_CODES",
    "MEDIA_SCHEMA_TYPES",
    "AudioExpectation",
    "Check",
    "CheckReport",
    "ComparisonRecord",
    "Expectations",
    "FrameScorer",
    "MediaReport",
    "MediaSource",
    "ProbeReport",
    "Thresholds",
    "Verdict",
    "VideoExpectation",
    "analyse",
    "check",
    "check_report",
    "compare",
    "compare_reports",
    "demo_comparison",
    "load_expectations",
    "load_thresholds",
    "probe",
    "resolve",
    "store_record",
    "with_overrides",
]
