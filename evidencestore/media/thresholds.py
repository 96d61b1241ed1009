"""Comparison thresholds from a TOML or JSON file (defaults: see :class:`Thresholds`)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import msgspec

from ..errors import MediaError
from .records import Thresholds

__all__ = ["load_thresholds"]


def load_thresholds(path: str | os.PathLike[str] | None) -> Thresholds:
    """Read thresholds; keys not given keep their documented defaults."""
    if path is None:
        return Thresholds()
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise MediaError(f"{p}: cannot read thresholds: {exc.strerror}") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise MediaError(f"{p}: not valid TOML/JSON thresholds: {exc}") from exc
    try:
        return msgspec.convert(data, Thresholds)
    except msgspec.ValidationError as exc:
        raise MediaError(
            f"{p}: {exc}; expected video_psnr_min, audio_snr_min, audio_max_abs_diff "
            "(numbers) and perceptual_max (a table of scorer name to number)"
        ) from exc
