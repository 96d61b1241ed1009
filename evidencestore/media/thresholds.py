"""Comparison thresholds from a TOML or JSON file (defaults: see :class:`Thresholds`)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import msgspec

from ..errors import MediaError
from .records import DEFAULT_PERCEPTUAL_MAX, Thresholds

__all__ = ["load_thresholds"]


def load_thresholds(path: str | os.PathLike[str] | None) -> Thresholds:
    """Read thresholds; keys not given keep their documented defaults, also inside
    ``perceptual_max`` (the defaults are merged with the scorers the file names)."""
    if path is None:
        return Thresholds()
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise MediaError(f"{p}: cannot read thresholds: {exc.strerror}") from exc
    except RecursionError:
        raise MediaError(f"{p}: not valid TOML/JSON thresholds: nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise MediaError(f"{p}: not valid TOML/JSON thresholds: {exc}") from exc
    if not isinstance(data, dict):
        raise MediaError(f"{p}: expected a table/object of thresholds")
    given = data.get("perceptual_max")
    if isinstance(given, dict):
        # Scorers not named keep their default limit (a file tightening one scorer must
        # not silently drop the LPIPS default).
        data = {**data, "perceptual_max": {**DEFAULT_PERCEPTUAL_MAX, **given}}
    try:
        return msgspec.convert(data, Thresholds)
    except msgspec.ValidationError as exc:
        raise MediaError(
            f"{p}: {exc}; expected video_psnr_min, audio_snr_min, audio_max_abs_diff "
            "(finite numbers, the last >= 0) and perceptual_max (a table of scorer name to "
            "a finite number >= 0)"
        ) from exc
