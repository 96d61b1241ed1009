"""`evstore import` subcommands: ``import aiperf DIR``, ``import loadgen DIR``.

Exit codes: 0 imported (or already imported from the same files), 2 for a directory
that is not what it claims or a name already taken.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ._common import EXIT_OK, ROOT, Commands, arg, repo_root

NAME = arg("--name", required=True, metavar="BUNDLE", help="the run bundle's name")
ARM = arg("--arm", default="imported", metavar="A", help="the arm (default: imported)")
CAMPAIGN = arg("--campaign", metavar="C", help="the campaign whose protocol this run follows")
CONDITION = arg("--condition", metavar="X", help="the campaign condition")


def register(commands: Commands) -> None:
    """Register this group's subcommands."""
    isub = commands.group(
        "import",
        description="Seal a harness's output directory byte for byte as a run bundle, "
        "with a run record mapped from the harness's own records.",
    )
    isub.add(
        "aiperf",
        _aiperf,
        [arg("directory", metavar="DIR"), NAME, ARM, CAMPAIGN, CONDITION, ROOT],
        help="an AIPerf artifact directory (profile_export.jsonl, ...)",
    )
    isub.add(
        "loadgen",
        _loadgen,
        [arg("directory", metavar="DIR"), NAME, ARM, CAMPAIGN, CONDITION, ROOT],
        help="an MLPerf LoadGen log directory (mlperf_log_detail.txt, ...)",
    )


def _campaign(root: Any, args: argparse.Namespace) -> Any:
    """The rules of ``--campaign`` (the run is checked against them once its files are
    read: condition, arm, harness, workload digest)."""
    if not args.campaign:
        if args.condition:
            raise ConfigError("--condition needs --campaign")
        return None
    from ..campaign.fit import campaign_rules

    return campaign_rules(root, args.campaign)


def _report(harness: str, result: Any) -> int:
    if result.already:
        print(
            f"import {harness}: {result.name} is already registered from the same files "
            f"({result.digest}); nothing to do"
        )
    else:
        print(f"import {harness}: run {result.name}: {result.outcome}")
        print(f"registered evidence/{result.name}/ ({result.digest})")
    return EXIT_OK


def _aiperf(args: argparse.Namespace) -> int:
    from ..runs.aiperf import import_aiperf

    return _import("aiperf", import_aiperf, args)


def _loadgen(args: argparse.Namespace) -> int:
    from ..runs.loadgen import import_loadgen

    return _import("loadgen", import_loadgen, args)


def _import(harness: str, importer: Any, args: argparse.Namespace) -> int:
    """Import ``args.directory`` with ``importer`` (one run, or several: AIPerf's
    artifact directory can hold a sweep) and report each run registered."""
    root = repo_root(args)
    out = importer(
        root,
        args.directory,
        args.name,
        arm=args.arm,
        campaign=_campaign(root, args),
        condition=args.condition,
    )
    for result in out if isinstance(out, list) else [out]:
        _report(harness, result)
    return EXIT_OK
