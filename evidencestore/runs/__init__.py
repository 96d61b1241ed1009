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

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .diff import Difference, diff_configs, diff_runs
    from .endpoints import ENDPOINTS, build_payload
    from .models import RequestRecord, RunRecord, Workload
    from .recorder import RUN_ENTRY, RunRecorder, load_run, open_run
    from .runner import run_workload
    from .summary import latency_stats, summarize
    from .transport import Observation
    from .workload import expectations_for, load_workload

__all__ = [
    "ENDPOINTS",
    "RUN_ENTRY",
    "Difference",
    "Observation",
    "RequestRecord",
    "RunRecord",
    "RunRecorder",
    "Workload",
    "build_payload",
    "diff_configs",
    "diff_runs",
    "expectations_for",
    "latency_stats",
    "load_run",
    "load_workload",
    "open_run",
    "run_workload",
    "summarize",
]

_LAZY = {
    "ENDPOINTS": "endpoints",
    "Observation": "transport",
    "RUN_ENTRY": "recorder",
    "Difference": "diff",
    "RequestRecord": "models",
    "RunRecord": "models",
    "RunRecorder": "recorder",
    "Workload": "models",
    "build_payload": "endpoints",
    "diff_configs": "diff",
    "diff_runs": "diff",
    "expectations_for": "workload",
    "latency_stats": "summary",
    "load_run": "recorder",
    "load_workload": "workload",
    "open_run": "recorder",
    "run_workload": "runner",
    "summarize": "summary",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
