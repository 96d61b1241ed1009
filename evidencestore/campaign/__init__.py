"""Campaigns: protocols frozen before results, verdicts, speedup claims, status.

``init_campaign`` registers a protocol; ``load_campaign`` reads it back (its digest names
the campaign); ``campaign_rules`` gives the rules a run must fit, which ``run_workload``
applies; ``campaign_runs`` finds the runs that count and those excluded, with why;
``verify_campaign`` checks from git history that the protocol predates every run;
``repeatability`` / ``adjudicate`` judge outputs; ``make_claim`` gives a speedup with its
interval over runs (``welch_log_interval``, ``paired_log_interval``) and whether it stands;
``plan_campaign`` sizes a campaign from its baseline runs; ``evaluate`` gives the status
and every record behind it; ``register_records`` keeps records as a bundle. Submodules
load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import guarded_imports, lazy_exports

if TYPE_CHECKING:
    from .adjudication import adjudicate as adjudicate
    from .adjudication import compare_runs as compare_runs
    from .adjudication import repeatability as repeatability
    from .arrays import compare_array_files as compare_array_files
    from .arrays import compare_arrays as compare_arrays
    from .claims import make_claim as make_claim
    from .estimator import paired_log_interval as paired_log_interval
    from .estimator import t_quantile as t_quantile
    from .estimator import welch_log_interval as welch_log_interval
    from .fit import campaign_rules as campaign_rules
    from .members import campaign_runs as campaign_runs
    from .plan import plan_campaign as plan_campaign
    from .protocol import Campaign as Campaign
    from .protocol import init_campaign as init_campaign
    from .protocol import load_campaign as load_campaign
    from .protocol import parse_protocol as parse_protocol
    from .records import register_records as register_records
    from .status import evaluate as evaluate
    from .verify import verify_campaign as verify_campaign

_LAZY = guarded_imports(__file__)
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
