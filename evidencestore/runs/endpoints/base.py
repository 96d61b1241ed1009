"""What every endpoint is: one API kind that builds a request's exact bytes and reads a
delivered output back. It performs no exchange (``transport.py`` does) and judges
nothing (``judge.py`` does); AIPerf's ``endpoints/base_endpoint.py`` is the model."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from ...digest import hash_bytes
from ...models import Descriptor
from ..transport import Payload

if TYPE_CHECKING:
    from ...storage import BlobStore
    from ..models import RequestSpec
    from ..streams import StreamOutcome
    from ..transport import Observation
    from ..workload import LoadedWorkload

__all__ = ["Endpoint", "json_payload"]


class Endpoint(ABC):
    """One API kind (``kind``, the workload's ``endpoint.kind``)."""

    kind: ClassVar[str]
    #: The media type of an output whose server names none (or an invalid one).
    default_media_type: ClassVar[str] = "video/mp4"
    #: Whether the output is read back as a stream (:meth:`read_back`): the transport
    #: then keeps each chunk's arrival (``Observation.chunk_ns``).
    marks: ClassVar[bool] = False
    #: Whether the output comes from a job (POST, poll, GET the content).
    job: ClassVar[bool] = False

    @abstractmethod
    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        """The exact bytes of request ``index`` (a pure function of the workload)."""

    def read_back(
        self, data: bytes | bytearray, observation: Observation, request: RequestSpec, stream: bool
    ) -> StreamOutcome | None:
        """What a delivered output says once read back (LLM endpoints: the events timed,
        the completion, a stream failure); None for an output that is not a stream."""
        return None


def json_payload(body: dict[str, object]) -> Payload:
    """``body`` as the canonical JSON bytes of a request (sorted keys, no spaces)."""
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return Payload(
        data,
        "application/json",
        Descriptor(**hash_bytes(data)._asdict(), media_type="application/json"),
    )
