"""Endpoints: one module per API kind, each building a request's exact bytes and
reading a delivered output back (``base.Endpoint``), in one registry by kind.

The registry :data:`ENDPOINTS` maps a workload's ``endpoint.kind`` to its endpoint:
``videos-sync`` (a multipart POST whose response body is the video), ``videos-job``
(the same request as a job the transport polls), ``json`` (a JSON POST whose response
body is the output), and OpenAI's ``chat`` and ``completions`` (streamed as server-sent
events or not; the stream is kept whole and read back afterwards by ``streams.py``).
A new kind is one module here defining ``ENDPOINT``: the registry finds it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from .base import Endpoint

if TYPE_CHECKING:
    from ...storage import BlobStore
    from ..transport import Payload
    from ..workload import LoadedWorkload

__all__ = ["ENDPOINTS", "Endpoint", "build_payload", "endpoint_for"]


def _registry() -> dict[str, Endpoint]:
    found: dict[str, Endpoint] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        endpoint = getattr(module, "ENDPOINT", None)
        if isinstance(endpoint, Endpoint):
            if endpoint.kind in found:  # pragma: no cover - a programming error
                raise RuntimeError(f"endpoint kind {endpoint.kind!r} is defined twice")
            found[endpoint.kind] = endpoint
    return found


#: Endpoint kind -> endpoint.
ENDPOINTS: dict[str, Endpoint] = _registry()


def endpoint_for(kind: str) -> Endpoint:
    """The endpoint of ``kind`` (one of :data:`ENDPOINTS`)."""
    return ENDPOINTS[kind]


def build_payload(workload: LoadedWorkload, index: int, store: BlobStore | None = None) -> Payload:
    """Return the exact request body of request ``index`` (multipart, or JSON for ``json``)."""
    return endpoint_for(workload.workload.endpoint.kind).payload(workload, index, store)
