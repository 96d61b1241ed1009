"""Where things are, for every test wherever its file sits in ``tests/``.

Tests never compute these from their own ``__file__``: a test moved to another
directory keeps finding its data.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The ``tests/`` directory (on ``sys.path``, so ``helpers`` imports from it)."""
ROOT = TESTS.parent
"""The source tree: ``evidencestore/``, ``docs/``, ``schemas/``, ``pyproject.toml``."""
PACKAGE = ROOT / "evidencestore"
DOCS = ROOT / "docs"
SCHEMAS = ROOT / "schemas"
DATA = TESTS / "data"
"""Recorded inputs: legacy records and corpus, vLLM traffic, vllm bench results."""
FIXTURES = TESTS / "fixtures"
"""Real harness output directories (AIPerf)."""
HELPERS = TESTS / "helpers"
