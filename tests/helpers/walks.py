"""Watching the one rule for a root: where a repository is resolved from a path
(``config.find_root``) and where its ``evstore.toml`` is read (``config.load_config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import evidencestore.config as config_module


def walks_and_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], list[Path]]:
    """Record every walk up from a path and every read of a repository's configuration,
    calling through: an entry point handed a path walks once, and below it nothing walks
    again or reads the configuration twice."""
    walks: list[Path] = []
    reads: list[Path] = []
    find_root, load_config = config_module.find_root, config_module.load_config

    def walk(start: object = None) -> Path:
        walks.append(Path(str(start)))
        return find_root(start)  # type: ignore[arg-type]

    def read(root: object, **kw: bool) -> config_module.Config:
        reads.append(Path(str(root)))
        return load_config(root, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(config_module, "find_root", walk)
    monkeypatch.setattr(config_module, "load_config", read)
    return walks, reads
