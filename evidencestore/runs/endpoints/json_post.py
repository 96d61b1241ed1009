"""``json``: a JSON POST whose response body is the output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Endpoint, json_payload

if TYPE_CHECKING:
    from ...storage import BlobStore
    from ..transport import Payload
    from ..workload import LoadedWorkload

__all__ = ["ENDPOINT", "JsonEndpoint"]

_JSON_KEYS = (
    "prompt",
    "negative_prompt",
    "size",
    "seconds",
    "num_frames",
    "fps",
    "seed",
    "num_inference_steps",
)


class JsonEndpoint(Endpoint):
    """A JSON POST of the request's fields whose response body is the output."""

    kind = "json"

    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        req = workload.workload.request[index]
        body: dict[str, object] = {
            k: getattr(req, k) for k in _JSON_KEYS if getattr(req, k) is not None
        }
        body.update(req.fields)
        return json_payload(body)


ENDPOINT = JsonEndpoint()
