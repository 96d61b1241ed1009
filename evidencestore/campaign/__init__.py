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

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .adjudication import adjudicate, compare_runs, repeatability
    from .arrays import compare_array_files, compare_arrays
    from .claims import make_claim
    from .estimator import paired_log_interval, t_quantile, welch_log_interval
    from .fit import campaign_rules
    from .members import campaign_runs
    from .plan import plan_campaign
    from .protocol import Campaign, init_campaign, load_campaign, parse_protocol
    from .records import register_records
    from .status import evaluate
    from .verify import verify_campaign

__all__ = [
    "Campaign",
    "adjudicate",
    "campaign_rules",
    "campaign_runs",
    "compare_array_files",
    "compare_arrays",
    "compare_runs",
    "evaluate",
    "init_campaign",
    "load_campaign",
    "make_claim",
    "paired_log_interval",
    "parse_protocol",
    "plan_campaign",
    "register_records",
    "repeatability",
    "t_quantile",
    "verify_campaign",
    "welch_log_interval",
]

_LAZY = {
    "Campaign": "protocol",
    "adjudicate": "adjudication",
    "campaign_rules": "fit",
    "campaign_runs": "members",
    "compare_array_files": "arrays",
    "compare_arrays": "arrays",
    "compare_runs": "adjudication",
    "evaluate": "status",
    "init_campaign": "protocol",
    "load_campaign": "protocol",
    "make_claim": "claims",
    "paired_log_interval": "estimator",
    "parse_protocol": "protocol",
    "plan_campaign": "plan",
    "register_records": "records",
    "repeatability": "adjudication",
    "t_quantile": "estimator",
    "verify_campaign": "verify",
    "welch_log_interval": "estimator",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
