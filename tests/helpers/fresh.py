"""Tests of the forked path, run in a fresh interpreter when this one may not fork.

Once an earlier test has started a thread that outlives it (fsspec's IO loop is one per
process, a module's moto server), ``_fork.can_fork`` is false for the rest of the
session and the library rightly takes its no-fork path. A test written for the forked
path then calls :func:`rerun_fresh`: the same test, alone, in a new ``pytest`` process
(where nothing has started a thread), whose failure fails this one. It is never skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from . import paths

_FRESH = "EVSTORE_TEST_FRESH"


def rerun_fresh(request: pytest.FixtureRequest) -> None:
    """Run ``request``'s test alone in a new interpreter; fail with its output when it
    fails. In that interpreter itself (it may not fork either) this is a failure."""
    if os.environ.get(_FRESH):
        pytest.fail("a fresh interpreter may not fork: the forked path cannot be tested here")
    env = {**os.environ, _FRESH: "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        cwd=paths.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{request.node.nodeid} in a fresh interpreter:\n" + (
        done.stdout[-6000:] + done.stderr[-2000:]
    )
