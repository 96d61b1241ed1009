"""Options declared once (``_keywords.py``): an entry point whose options are a
``TypedDict`` refuses an unknown keyword at run time, as a written-out signature did,
before it reads or writes anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from evidencestore import remotes, verify
from evidencestore.runs import (
    aiperf,
    importing,
    launch,
    loadgen,
    preflight,
    recorder,
    runner,
    vllm_bench,
)

RUN = {"arm": "a", "server": "http://x", "name": "n"}
# name, the callable, its arguments besides the options
ENTRY_POINTS: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    ("import_aiperf", aiperf.import_aiperf, ("r", "d", "n"), {}),
    ("import_loadgen", loadgen.import_loadgen, ("r", "d", "n"), {}),
    ("import_vllm_bench", vllm_bench.import_vllm_bench, ("r", "f", "n"), {}),
    ("open_import", importing.open_import, (None, "n", None), {"workload": None}),
    ("preflight", preflight.preflight, (None, "w"), RUN),
    ("run_workload", runner.run_workload, ("r", "w"), RUN),
    ("launch_and_run", launch.launch_and_run, ("r", "w"), {**RUN, "command": None}),
    ("open_run", recorder.open_run, ("r", "n"), {"arm": "a", "workload": b""}),
    ("RunRecorder.__init__", recorder.RunRecorder, ("r", "n"), {"arm": "a", "workload": None}),
    ("push", remotes.push, ("r",), {}),
    ("pull", remotes.pull, ("r",), {}),
    ("fetch", remotes.fetch, ("r", []), {}),
    ("check_repository", verify.check_repository, ("r",), {"base": None}),
]


@pytest.mark.parametrize(
    ("name", "function", "args", "given"), ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS]
)
def test_unknown_keyword_refused(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], given: dict[str, Any]
) -> None:
    expected = rf"^{name}\(\) got an unexpected keyword argument 'arms'$"
    with pytest.raises(TypeError, match=expected):
        function(*args, **given, arms="a")
