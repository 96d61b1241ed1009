"""`evstore import` subcommands: ``import aiperf DIR``, ``import loadgen DIR``,
``import vllm-bench FILE``.

Exit codes: 0 imported (or already imported from the same files); 1 the results cannot
count in the campaign named (they predate its protocol, which is not retrospective:
nothing is registered); 2 for a directory or file that is not what it claims, a name
already taken, or a run that does not fit its campaign.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from ..errors import ConfigError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    ROOT,
    Commands,
    arg,
    flag_of,
    progress_line,
    repo_root,
)

NAME = arg("--name", required=True, metavar="BUNDLE", help="the run bundle's name")
ARM = arg("--arm", default="imported", metavar="A", help="the arm (default: imported)")
CAMPAIGN = arg("--campaign", metavar="C", help="the campaign whose protocol this run follows")
CONDITION = arg("--condition", metavar="X", help="the campaign condition")
CONFIG = arg(
    "--config",
    action="append",
    default=[],
    metavar="FILE",
    help="a configuration file of the arm (repeatable; stored as configs/<name>, checked "
    "against the files the campaign's arm declares)",
)
SIGN = arg(
    "--sign",
    metavar="KEY",
    help="sign the run record with this ed25519 private key (run.dsse.json), as run --sign",
)
COMMON = [NAME, ARM, CAMPAIGN, CONDITION, CONFIG, SIGN, ROOT]


def register(commands: Commands) -> None:
    """Register this group's subcommands: one per importer (``runs/importers.py``)."""
    from ..runs.importers import IMPORTERS

    isub = commands.group(
        "import",
        description="Seal a harness's output directory byte for byte as a run bundle, "
        "with a run record mapped from the harness's own records.",
    )
    for harness, importer in IMPORTERS.items():
        metavar = "DIR" if importer.source == "directory" else "FILE"
        isub.add(
            harness,
            functools.partial(_run, harness),
            [arg("directory", metavar=metavar), *COMMON],
            help=importer.describes,
        )


def _prepare(root: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    """The rules of ``--campaign`` (the importer checks the run against them: the
    signing key, then, once its files are read, condition, arm, harness, workload
    digest, configs) and the signing key."""
    key = None
    if args.sign:
        from ..dsse import load_private_key

        key = load_private_key(args.sign)
    if not args.campaign:
        if args.condition:
            raise ConfigError("--condition needs --campaign")
        return None, key
    from ..campaign.fit import campaign_rules

    return campaign_rules(root, args.campaign), key


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


def _run(harness: str, args: argparse.Namespace) -> int:
    from ..errors import ResultsPredateProtocol
    from ..runs.importers import importer_for

    root = repo_root(args)
    rules, key = _prepare(root, args)
    try:
        with progress_line(args) as line:
            results = importer_for(harness).run(
                root,
                args.directory,
                args.name,
                arm=args.arm,
                campaign=rules,
                condition=args.condition,
                configs=args.config,
                signing_key=key,
                observer=line,
            )
    except ResultsPredateProtocol as exc:
        print(f"evstore: import {harness}: {exc.worded(flag_of)}", file=sys.stderr)
        return EXIT_FAILED
    for result in results:
        _report(harness, result)
    return EXIT_OK
