"""Media validators: probe, full decode with content digests, expectations, comparison.

PyAV and numpy are imported only when a function needs them, so importing this package
(and ``evidencestore``) works without the ``media`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import guarded_imports, lazy_exports

if TYPE_CHECKING:
    from .comparison import EXIT_CODES as EXIT_CODES
    from .comparison import compare as compare
    from .comparison import compare_reports as compare_reports
    from .decode import analyse as analyse
    from .expectations import check as check
    from .expectations import load_expectations as load_expectations
    from .expectations import verify_report as verify_report
    from .expectations import with_overrides as with_overrides
    from .probing import probe as probe
    from .records import MEDIA_SCHEMA_TYPES as MEDIA_SCHEMA_TYPES
    from .records import AudioExpectation as AudioExpectation
    from .records import Check as Check
    from .records import CheckReport as CheckReport
    from .records import ComparisonRecord as ComparisonRecord
    from .records import Expectations as Expectations
    from .records import MediaReport as MediaReport
    from .records import ProbeReport as ProbeReport
    from .records import Thresholds as Thresholds
    from .records import Verdict as Verdict
    from .records import VideoExpectation as VideoExpectation
    from .scoring import FrameScorer as FrameScorer
    from .source import MediaSource as MediaSource
    from .source import resolve as resolve
    from .store import store_record as store_record
    from .thresholds import load_thresholds as load_thresholds

# Submodules load on first use: `evstore media check` must not pay for comparison code.
# No function shares its name with a submodule (``compare`` lives in ``comparison``,
# ``probe`` in ``probing``), so importing a submodule never rebinds a re-exported name.
_LAZY = guarded_imports(__file__)
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
