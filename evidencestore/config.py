"""``evstore.toml``: the local store path, named remotes and pinned scorer weights.

Credentials never live here; backends take them from their usual sources.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from .errors import ConfigError
from .models import Descriptor, DigestStr, Model

__all__ = ["CONFIG_NAME", "Config", "LpipsConfig", "RemoteConfig", "StoreConfig", "find_root", "load_config", "save_config"]

CONFIG_NAME = "evstore.toml"


class StoreConfig(Model):
    """The local blob store."""

    path: str = ".evstore"


class RemoteConfig(Model):
    """A named remote: an fsspec URL and its storage options (never credentials)."""

    url: str
    options: dict[str, Any] = {}
    read_only: bool = False


class LpipsConfig(Model):
    """Pinned LPIPS weights, by descriptor, and optionally the scorer-state digest."""

    backbone: Descriptor | None = None
    linear: Descriptor | None = None
    state_digest: DigestStr | None = None


class Config(Model):
    """The whole of ``evstore.toml``; remotes are tried in file order."""

    store: StoreConfig = StoreConfig()
    remotes: dict[str, RemoteConfig] = {}
    lpips: LpipsConfig | None = None


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Return the evidence repository root: the nearest directory, from ``start`` up,
    holding ``evstore.toml`` or ``evidence/``; ``start`` itself when none does."""
    here = Path(start or os.getcwd()).absolute()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file() or (candidate / "evidence").is_dir():
            return candidate
    return here


def load_config(root: str | os.PathLike[str]) -> Config:
    """Read ``<root>/evstore.toml`` strictly; a missing file gives the defaults."""
    path = Path(root) / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def save_config(root: str | os.PathLike[str], config: Config) -> Path:
    """Write ``<root>/evstore.toml`` atomically."""
    import tomli_w

    path = Path(root) / CONFIG_NAME
    data = msgspec.to_builtins(config)
    tmp = path.with_name(f".{CONFIG_NAME}.tmp-{os.getpid()}")
    tmp.write_text(tomli_w.dumps(data), encoding="utf-8")
    os.replace(tmp, path)
    return path
