"""Media validators: probe, full decode with content digests, expectations, comparison.

PyAV and numpy are imported only when a function needs them, so importing this package
(and ``evidencestore``) works without the ``media`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .comparison import EXIT_CODES, compare, compare_reports
    from .decode import analyse
    from .expectations import check, load_expectations, verify_report, with_overrides
    from .probing import probe
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
    "compare",
    "compare_reports",
    "load_expectations",
    "load_thresholds",
    "probe",
    "resolve",
    "store_record",
    "verify_report",
    "with_overrides",
]

# Submodules load on first use: `evstore media check` must not pay for comparison code.
# No function shares its name with a submodule (``compare`` lives in ``comparison``,
# ``probe`` in ``probing``), so importing a submodule never rebinds a re-exported name.
_LAZY = {
    "AudioExpectation": "records",
    "Check": "records",
    "CheckReport": "records",
    "ComparisonRecord": "records",
    "EXIT_CODES": "comparison",
    "Expectations": "records",
    "FrameScorer": "scoring",
    "MEDIA_SCHEMA_TYPES": "records",
    "MediaReport": "records",
    "MediaSource": "source",
    "ProbeReport": "records",
    "Thresholds": "records",
    "Verdict": "records",
    "VideoExpectation": "records",
    "analyse": "decode",
    "check": "expectations",
    "verify_report": "expectations",
    "compare": "comparison",
    "compare_reports": "comparison",
    "load_expectations": "expectations",
    "load_thresholds": "thresholds",
    "probe": "probing",
    "resolve": "source",
    "store_record": "store",
    "with_overrides": "expectations",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
