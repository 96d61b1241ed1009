"""Media validators: probe, full decode with content digests, expectations, comparison.

PyAV and numpy are imported only when a function needs them, so importing this package
(and ``evidencestore``) works without the ``media`` extra.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Submodules load on first use: `evstore media check` must not pay for comparison code.
_LAZY = {
    "AudioExpectation": "records",
    "Check": "records",
    "CheckReport": "records",
    "ComparisonRecord": "records",
    "EXIT_CODES": "compare",
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
    "check_report": "expectations",
    "compare": "compare",
    "compare_reports": "compare",
    "demo_comparison": "demo",
    "load_expectations": "expectations",
    "load_thresholds": "thresholds",
    "probe": "probe",
    "resolve": "source",
    "store_record": "store",
    "with_overrides": "expectations",
}


# Functions named like the submodule that defines them: importing the submodule makes
# Python bind the package attribute to the module, so these are resolved on every access.
_SHADOWED = frozenset(name for name, module in _LAZY.items() if name == module)


def _resolve(name: str) -> Any:
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _resolve(name)


class _Package(types.ModuleType):
    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return _resolve(name)
        return value


sys.modules[__name__].__class__ = _Package
