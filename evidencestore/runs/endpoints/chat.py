"""``chat``: OpenAI ``/v1/chat/completions``, a JSON POST answered by server-sent
events (or, with ``stream = false``, one JSON completion); the output is kept whole
and read back afterwards (``streams.py``). AIPerf's ``openai_chat.py`` is the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..streams import examine
from .base import Endpoint, json_payload

if TYPE_CHECKING:
    from ...storage import BlobStore
    from ..models import RequestSpec
    from ..streams import StreamOutcome
    from ..transport import Observation, Payload
    from ..workload import LoadedWorkload

__all__ = ["ENDPOINT", "ChatEndpoint"]


class ChatEndpoint(Endpoint):
    """OpenAI chat completions (``messages`` in, ``choices[].delta.content`` out)."""

    kind = "chat"
    default_media_type = "text/event-stream"
    marks = True
    #: ``messages`` (chat) rather than ``prompt`` (completions).
    chat: ClassVar[bool] = True

    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        wl = workload.workload
        req = wl.request[index]
        ep = wl.endpoint
        body: dict[str, object] = {}
        if ep.model is not None:
            body["model"] = ep.model
        if self.chat:
            if req.messages is not None:
                body["messages"] = [{"role": m.role, "content": m.content} for m in req.messages]
            else:
                body["messages"] = [{"role": "user", "content": req.prompt or ""}]
        else:
            body["prompt"] = req.prompt or ""
        for name in ("max_tokens", "seed", "temperature", "ignore_eos"):
            value = getattr(req, name)
            if value is not None:
                body[name] = value
        if req.logprobs:
            if self.chat:
                body["logprobs"] = True
                if req.top_logprobs is not None:
                    body["top_logprobs"] = req.top_logprobs
            else:
                body["logprobs"] = req.top_logprobs or 0
        if ep.token_ids == "return_token_ids":
            body["return_token_ids"] = True
        elif ep.token_ids == "logprobs":
            body["logprobs"] = body.get("logprobs", True if self.chat else 0)
            body["return_tokens_as_token_ids"] = True
        body["stream"] = ep.stream
        if ep.stream and (ep.include_usage or ep.continuous_usage):
            body["stream_options"] = {"include_usage": True}
            if ep.continuous_usage:
                body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        body.update(req.fields)
        return json_payload(body)

    def read_back(
        self, data: bytes | bytearray, observation: Observation, request: RequestSpec, stream: bool
    ) -> StreamOutcome | None:
        return examine(
            data,
            observation.chunk_ns,
            observation.chunk_end,
            request,
            stream=stream,
            chat=self.chat,
        )


ENDPOINT = ChatEndpoint()
