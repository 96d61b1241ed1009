"""Shared pytest configuration: the S3 fixtures, fixtures several test files use, and
``tests/`` on ``sys.path`` for the ``helpers`` package (whatever pytest's import mode)."""

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

pytest_plugins = ["evidencestore.testing.s3"]


@pytest.fixture
def memory_base() -> Iterator[str]:
    """A fresh path in fsspec's process-wide memory filesystem, removed afterwards."""
    base = f"/evstore-test-{uuid.uuid4().hex}"
    yield base
    fs = fsspec.filesystem("memory")
    if fs.exists(base):
        fs.rm(base, recursive=True)


@pytest.fixture
def memory_url(memory_base: str) -> str:
    """``memory://`` URL of :func:`memory_base`, for a remote's ``url``."""
    return f"memory://{memory_base}"
