"""One importer registry (``runs/importers.py``): ``evstore import`` has one subcommand
per importer, each resolving to its module's function; an unknown harness is refused."""

from __future__ import annotations

import argparse

import pytest

from evidencestore.errors import ConfigError
from evidencestore.runs import aiperf, loadgen, vllm_bench
from evidencestore.runs.importers import IMPORTERS, importer_for


def test_every_importer_resolves_to_its_function() -> None:
    assert {h: i.load() for h, i in IMPORTERS.items()} == {
        "aiperf": aiperf.import_aiperf,
        "loadgen": loadgen.import_loadgen,
        "vllm-bench": vllm_bench.import_vllm_bench,
    }
    assert importer_for("vllm-bench").source == "file"
    with pytest.raises(ConfigError, match=r"^harness 'nope': no importer .*known: aiperf, "):
        importer_for("nope")


def test_evstore_import_has_a_subcommand_per_importer() -> None:
    from evidencestore import cli

    parser = cli.build_parser(["import"])
    [top] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    [sub] = [a for a in top.choices["import"]._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(IMPORTERS)
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert helps == {h: i.describes for h, i in IMPORTERS.items()}


def test_the_record_schemas_name_the_registered_harnesses() -> None:
    """The harness names a run record and a campaign condition may carry are the
    registry's (the schemas list them; adding an importer adds its name there)."""
    from typing import get_args, get_type_hints

    from evidencestore.campaign.models import ConditionSpec
    from evidencestore.runs.models import Harness

    def names(hint: object) -> set[str]:  # a Literal's values, through an Optional
        return {n for a in get_args(hint) for n in (get_args(a) or [a]) if isinstance(n, str)}

    assert names(get_type_hints(Harness)["name"]) == set(IMPORTERS)
    assert names(get_type_hints(ConditionSpec)["harness"]) == set(IMPORTERS)
