"""Fixtures of the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.remotes import run
from helpers.repos import init_repo


@pytest.fixture
def initialized_repo(tmp_path: Path) -> Path:
    """A git repository at ``tmp_path/repo`` on which ``evstore init`` ran."""
    root = init_repo(tmp_path / "repo")
    assert run("init", "--root", str(root))[0] == 0
    return root
