"""Run records: HTTP end-to-end benchmark runs kept as evidence.

``run_workload`` drives a server over HTTP and registers the run as a bundle;
``open_run`` gives a :class:`RunRecorder` to harnesses that drive the server
themselves (record requests with their timings and bodies, attach configs and logs,
``seal``). ``load_run(root, bundle_name)`` reads a run record back, checked against
its registration; ``diff_configs`` / ``diff_runs`` list what differs between two runs.
aiohttp, PyAV and numpy are imported only by the functions that need them, and each
submodule on first use (reading a run record does not load the HTTP runner).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import guarded_imports, lazy_exports

if TYPE_CHECKING:
    from .diff import Difference as Difference
    from .diff import diff_configs as diff_configs
    from .diff import diff_runs as diff_runs
    from .endpoints import ENDPOINTS as ENDPOINTS
    from .endpoints import build_payload as build_payload
    from .models import RequestRecord as RequestRecord
    from .models import RunRecord as RunRecord
    from .models import Workload as Workload
    from .recorder import RUN_ENTRY as RUN_ENTRY
    from .recorder import RunRecorder as RunRecorder
    from .recorder import load_run as load_run
    from .recorder import open_run as open_run
    from .runner import run_workload as run_workload
    from .summary import latency_stats as latency_stats
    from .summary import summarize as summarize
    from .transport import Observation as Observation
    from .workload import expectations_for as expectations_for
    from .workload import load_workload as load_workload

_LAZY = guarded_imports(__file__)
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
