"""Versions of the tools a media result depends on, recorded with every report."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys

__all__ = ["tool_versions"]

_DIST_INFO = re.compile(r"numpy-([^-]+)\.dist-info")


def _numpy_version() -> str:
    module = sys.modules.get("numpy")
    if module is not None:
        return str(module.__version__)
    # Checking a file must not pay for importing numpy (or importlib.metadata, ~16 ms)
    # just to learn its version: the installed dist-info directory names it.
    import importlib.util

    spec = importlib.util.find_spec("numpy")
    if spec is None or not spec.submodule_search_locations:
        return "not installed"
    site = os.path.dirname(next(iter(spec.submodule_search_locations)))
    with contextlib.suppress(OSError):
        for name in os.listdir(site):
            match = _DIST_INFO.fullmatch(name)
            if match:
                return match.group(1)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numpy")
    except PackageNotFoundError:
        return "not installed"


@functools.cache
def tool_versions() -> dict[str, str]:
    """Return the versions of evidencestore, PyAV, FFmpeg's libraries and numpy."""
    import av

    from .._version import __version__

    versions = {"evidencestore": __version__, "pyav": av.__version__, "numpy": _numpy_version()}
    for lib in ("libavcodec", "libavformat", "libavutil"):
        parts = av.library_versions.get(lib)
        if parts:
            versions[lib] = ".".join(str(p) for p in parts)
    return versions
