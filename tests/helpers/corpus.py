"""The legacy corpus (written by 0c7be23) and a repository of every record kind built
by the code under test, with the same script (``tests/data/legacy_corpus/make_corpus.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from helpers.paths import DATA

LEGACY = DATA / "legacy_corpus"
_built: dict[str, Path] = {}


def make_corpus() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpus", LEGACY / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_corpus(factory: pytest.TempPathFactory) -> Path:
    """A corpus built now (repo/ with its blob store, proofs/, attestations/), once per
    session."""
    pytest.importorskip("av")
    pytest.importorskip("aiohttp")
    pytest.importorskip("cryptography")
    if "now" not in _built:
        out = factory.mktemp("corpus") / "out"
        make_corpus().build(out, with_store=True)
        _built["now"] = out
    return _built["now"]


def registrations(corpus: Path) -> list[Path]:
    return sorted((corpus / "repo" / "evidence").glob("*/bundle.json"))
