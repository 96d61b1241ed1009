"""Versions of the tools a media result depends on, recorded with every report."""

from __future__ import annotations

import functools
import sys

__all__ = ["tool_versions"]


def _numpy_version() -> str:
    module = sys.modules.get("numpy")
    if module is not None:
        return str(module.__version__)
    # Checking a file must not pay for importing numpy just to learn its version.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numpy")
    except PackageNotFoundError:
        return "not installed"


@functools.cache
def tool_versions() -> dict[str, str]:
    """Return the versions of evidencestore, PyAV, FFmpeg's libraries and numpy."""
    import av

    from .. import __version__

    versions = {"evidencestore": __version__, "pyav": av.__version__, "numpy": _numpy_version()}
    for lib in ("libavcodec", "libavformat", "libavutil"):
        parts = av.library_versions.get(lib)
        if parts:
            versions[lib] = ".".join(str(p) for p in parts)
    return versions
