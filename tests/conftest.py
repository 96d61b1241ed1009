"""Shared pytest configuration: the S3 fixtures, and ``tests/`` on ``sys.path`` for the
``helpers`` package (whatever pytest's import mode)."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

pytest_plugins = ["evidencestore.testing.s3"]
