"""The judge: one delivered response becomes one request record, the same way whoever
recorded it (the runner, ``RunRecorder.record_request``, ``--launch``, an importer).

:func:`judge` takes the endpoint (or None: an output not read back as a stream), the
:class:`~.transport.Observation`, the stored body and what was expected of it, and
applies, in this order and only to a delivered output (no failure yet):

1. an output read back as a stream (``chat``, ``completions``) is read back whole only up
   to :data:`READ_BACK_MAX` (past it: ``too-large``), its events timed by the chunk
   that completed them, its completion stored (``streams.py``: token accounting, the
   ``stream-error`` / ``incomplete`` classes);
2. any other output that says it is JSON must be well-formed (``invalid-response``),
   up to the same bound;
3. a media check against the expectations, with the audio rule: audio an output carries
   must last as long as the request asked even when the workload prescribes none;
4. the metrics (:func:`request_record`): end-to-end latency, time to first byte, and
   for a stream TTFT, ITL, TPOT and output tokens.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import msgspec

from ..digest import hash_bytes
from ..errors import BadAnswer, EvidenceStoreError, IntegrityError
from ..models import Descriptor
from .body import BodySink
from .models import Failure, MediaOutcome, Phase, RequestRecord, RequestSpec
from .streams import (
    COMPLETION_MEDIA_TYPE,
    Completion,
    StreamOutcome,
    Text,
    event_times,
    stream_metrics,
)
from .tokenizer import TokenCounter
from .transport import Observation, utc_precise
from .untrusted import is_json, parse_json

if TYPE_CHECKING:
    from ..media.records import Expectations
    from ..storage import LocalBlobStore
    from .endpoints import Endpoint

__all__ = [
    "COMPLETION_PIECE",
    "READ_BACK_MAX",
    "Expected",
    "Slot",
    "json_problem",
    "judge",
    "media_outcome",
    "request_record",
    "store_completion",
]

#: The largest output read back whole: a stream examined, a JSON output checked.
READ_BACK_MAX = 256 << 20


@dataclass(frozen=True)
class Slot:
    """Where a request stands in its run: schedule index, phase, the workload request it
    sent and which repetition of it."""

    index: int
    phase: Phase
    request: int = 0
    repetition: int = 0


@dataclass(frozen=True)
class Expected:
    """What a request's output is held to: the request as the workload gave it (its
    ``max_tokens`` bounds a stream), whether an LLM output is an SSE stream, and the
    media expectations (None: no media check)."""

    request: RequestSpec = field(default_factory=RequestSpec)
    stream: bool = True
    media: Expectations | None = None
    tokenizer: TokenCounter | None = None  # counts tokens the server did not


def judge(
    endpoint: Endpoint | None,
    observation: Observation,
    body: Descriptor | None,
    expected: Expected,
    *,
    store: LocalBlobStore,
    slot: Slot,
    payload: Descriptor,
    data: bytes | None = None,
) -> RequestRecord:
    """The record of one request (see the module): ``body`` is the output as stored in
    ``store`` (None when none was kept), ``data`` its bytes when the caller holds them
    already (a small stream: not read back from the store)."""
    obs = observation
    media = stream = completion = None
    if body is not None and obs.failure is None:
        if endpoint is not None and endpoint.marks:
            if body.size > READ_BACK_MAX:
                obs = replace(
                    obs,
                    failure="too-large",
                    message=f"a streamed output of {body.size} bytes is larger than "
                    f"{READ_BACK_MAX}",
                )
            else:
                stream = endpoint.read_back(
                    _read_back(store, body) if data is None else data,
                    obs,
                    expected.request,
                    expected.stream,
                )
                data = None  # the raw output is not held while its completion is stored
                if stream is not None and stream.output_tokens_from is None and expected.tokenizer:
                    stream = _counted(stream, expected.tokenizer)
                if stream is not None:
                    completion = store_completion(store, stream)
        else:
            bad = json_problem(store, body)
            if bad is not None:
                obs = replace(obs, failure=bad[0], message=bad[1])
            elif expected.media is not None:
                exp = expected.media
                if exp.audio is None:
                    exp = _audio_if_present(store, body, exp)
                media, _ = media_outcome(store, body, exp, f"request {slot.index}")
    return request_record(
        obs, slot, payload=payload, body=body, media=media, stream=stream, completion=completion
    )


#: A completion whose texts are longer than this is encoded into the store piece by
#: piece (the bytes of one encoding of it), never whole in memory beside its texts.
COMPLETION_PIECE = 1 << 20


def store_completion(store: LocalBlobStore, completion: Completion | StreamOutcome) -> Descriptor:
    """Store a completion's JSON encoding (a stream's: its texts as they were read,
    ``StreamOutcome.texts``, not decoded). Long texts are encoded
    :data:`COMPLETION_PIECE` characters at a time (:meth:`Text.encoded`) into a body
    sink, between the pieces of the encoding of the rest: the bytes are those of
    ``msgspec.json.encode(completion)``."""
    # Its texts in field order (the content, then each channel's), all replaced below.
    head = completion.head if isinstance(completion, StreamOutcome) else completion
    if isinstance(completion, StreamOutcome):
        texts = completion.texts
        order = [texts.get("content", Text()), *(texts.get(c.name, Text()) for c in head.channels)]
    else:
        order = [Text([completion.text]), *(Text([c.text]) for c in completion.channels)]
    if sum(len(p) for t in order for p in t.parts) <= COMPLETION_PIECE:
        whole = msgspec.structs.replace(
            head,
            text=str(order[0]),
            channels=tuple(
                msgspec.structs.replace(c, text=str(t))
                for c, t in zip(head.channels, order[1:], strict=True)
            ),
        )
        return store.put(msgspec.json.encode(whole), COMPLETION_MEDIA_TYPE)
    # Each text's place in the encoding, marked by a string no server can have sent.
    marks = [f"\x00{secrets.token_hex(16)}:{i}\x00" for i in range(len(order))]
    marked = msgspec.json.encode(
        msgspec.structs.replace(
            head,
            text=marks[0],
            channels=tuple(
                msgspec.structs.replace(c, text=m)
                for c, m in zip(head.channels, marks[1:], strict=True)
            ),
        )
    )
    sink = BodySink(store)
    try:
        rest = marked
        for mark, text in zip(marks, order, strict=True):
            before, found, rest = rest.partition(msgspec.json.encode(mark))
            if not found:  # pragma: no cover - the encoder's own field order
                raise AssertionError(f"a completion encodes as {marked[:80]!r}")
            sink.write(before + b'"')
            for piece in text.encoded(COMPLETION_PIECE):
                sink.write(piece)
            sink.write(b'"')
        sink.write(rest)
        sink.finish()
    except BaseException:
        sink.discard()
        raise
    return sink.publish(COMPLETION_MEDIA_TYPE)


def _read_back(store: LocalBlobStore, body: Descriptor) -> bytearray:
    """A stored output's bytes, verified, read into one buffer of its size (no chunks
    joined: a huge stream is held once)."""
    path = store.path_of(body.digest)
    data = bytearray(body.size)
    with open(path, "rb", buffering=0) as fh:
        got = fh.readinto(data)
        while got < body.size and (n := fh.readinto(memoryview(data)[got:])):
            got += n
        more = fh.read(1)
    if got != body.size or more or hash_bytes(data).digest != body.digest:
        raise IntegrityError(f"{path}: the stored output is not {body.digest} ({body.size} bytes)")
    return data


def _counted(stream: StreamOutcome, tokenizer: TokenCounter) -> StreamOutcome:
    """A stream whose server gave no token count, counted by the pinned tokenizer
    (every channel's text)."""
    texts = stream.texts
    n = tokenizer.count(str(texts.get("content", ""))) + sum(
        tokenizer.count(str(texts.get(c.name, ""))) for c in stream.head.channels
    )
    return replace(
        stream,
        output_tokens=n,
        output_tokens_from="tokenizer",
        head=msgspec.structs.replace(stream.head, output_tokens=n),
    )


def json_problem(store: LocalBlobStore, body: Descriptor) -> tuple[Failure, str] | None:
    """A failure of a complete output the media check does not see, or None: an output
    that says it is JSON must be well-formed JSON (not cut off mid-document)."""
    if not is_json(body.media_type):
        return None
    if body.size > READ_BACK_MAX:
        return "too-large", f"a JSON output of {body.size} bytes is larger than {READ_BACK_MAX}"
    try:
        parse_json(store.path_of(body.digest).read_bytes(), Any, f"the {body.media_type} output")
    except BadAnswer as exc:
        return "invalid-response", exc.message
    return None


def _audio_if_present(store: LocalBlobStore, body: Descriptor, exp: Expectations) -> Expectations:
    """A workload without ``[audio]`` does not require audio, but audio an output carries
    must still last as long as the request asked (its format is not prescribed)."""
    from .. import media
    from ..errors import MediaError
    from ..media.records import AudioExpectation

    video = exp.video
    if video is None or video.frames is None or video.frame_rate is None:
        duration = video.duration if video is not None else None
    else:
        duration = video.frames / float(Fraction(str(video.frame_rate)))
    if duration is None:
        return exp
    try:
        report = media.probe(str(store.path_of(body.digest)))
    except MediaError:
        return exp  # not media at all: the full check says so
    if not any(s.type == "audio" for s in report.streams):
        return exp
    return msgspec.structs.replace(exp, audio=AudioExpectation(duration=duration))


def media_outcome(
    store: LocalBlobStore, body: Descriptor, expectations: Expectations | None, name: str
) -> tuple[MediaOutcome, Descriptor]:
    """Decode a stored output fully and check it against the request's expectations;
    store the check report and return the outcome and the report's descriptor."""
    from ..media.expectations import check
    from ..media.source import MediaSource
    from ..media.store import store_record

    path = store.path_of(body.digest)
    st = os.stat(path)
    source = MediaSource(
        name=name, descriptor=body, path=str(path), stat=(st.st_size, st.st_mtime_ns)
    )
    try:
        report = check(source, expectations)
    except EvidenceStoreError as exc:
        message = f"{name}: cannot be checked: {exc}"
        desc = store.put(message.encode(), "text/plain")
        return MediaOutcome(
            verdict="UNAVAILABLE", failed_checks=("check",), report=desc, message=message
        ), desc
    desc = store_record(report, store)
    failed = tuple(c.name for c in report.checks if not c.ok)
    first = next((c.message for c in report.checks if not c.ok), None)
    if first is None and report.bounds:
        first = "; ".join(b.text() for b in report.bounds)
    return MediaOutcome(
        verdict=report.verdict, failed_checks=failed, report=desc, message=first
    ), desc


def request_record(
    observation: Observation,
    slot: Slot,
    *,
    payload: Descriptor,
    body: Descriptor | None,
    media: MediaOutcome | None = None,
    stream: StreamOutcome | None = None,
    completion: Descriptor | None = None,
) -> RequestRecord:
    """The record of request ``slot`` from what it saw; the one place that computes its
    end-to-end latency (``last_byte_ns`` minus ``intended_ns``, or ``sent_ns`` when no
    intended time was recorded, only for a request that delivered a valid output), time
    to first byte (``first_byte_ns - sent_ns``) and, for a streamed LLM output
    (``stream``), TTFT, ITL, TPOT and output tokens (``RequestRecord``). A media check
    that did not pass makes the request an ``invalid-media`` failure; a stream that
    failed (``stream-error``, ``incomplete``) makes it that failure."""
    o = observation
    failure, message = o.failure, o.message
    # INCONCLUSIVE: valid, its audio length bounded, not verified; the campaign decides.
    if failure is None and media is not None and media.verdict not in ("PASS", "INCONCLUSIVE"):
        failure, message = "invalid-media", media.message
    if failure is None and stream is not None and stream.failure is not None:
        failure, message = stream.failure, stream.message
    start = o.intended_ns if o.intended_ns is not None else o.sent_ns
    metrics = None
    if stream is not None and failure is None:
        metrics = stream_metrics(
            stream.event_ns,
            stream.event_tokens,
            start,
            stream.output_tokens,
            end_ns=o.last_byte_ns,
            visible_ns=stream.visible_ns,
            streamed=stream.streamed,
        )
    return RequestRecord(
        index=slot.index,
        phase=slot.phase,
        request=slot.request,
        repetition=slot.repetition,
        method=o.method,
        path=o.path,
        payload=payload,
        start_utc=o.start_utc or utc_precise(),
        sent_ns=o.sent_ns,
        headers_ns=o.headers_ns,
        first_byte_ns=o.first_byte_ns,
        last_byte_ns=o.last_byte_ns,
        end_ns=o.end_ns,
        status=o.status,
        headers=dict(o.headers),
        body=body,
        received=o.received if o.received or body is None else body.size,
        declared_length=o.declared_length,
        job_id=o.job_id,
        polls=o.polls,
        resolution_s=o.resolution_s,
        media=media,
        failure=failure,
        message=message,
        e2e_s=(o.last_byte_ns - start) / 1e9
        if failure is None and o.last_byte_ns is not None
        else None,
        ttfb_s=(o.first_byte_ns - o.sent_ns) / 1e9 if o.first_byte_ns is not None else None,
        intended_ns=o.intended_ns,
        send_lag_s=(o.sent_ns - o.intended_ns) / 1e9 if o.intended_ns is not None else None,
        events=event_times(stream, o.sent_ns) if stream is not None else None,
        completion=completion,
        finish_reason=stream.head.finish_reason if stream is not None else None,
        ttft_s=metrics.ttft_s if metrics else None,
        ttft_visible_s=metrics.ttft_visible_s if metrics else None,
        itl_s=metrics.itl_s if metrics else None,
        tpot_s=metrics.tpot_s if metrics else None,
        output_tokens=stream.output_tokens if stream is not None else None,
        output_tokens_from=stream.output_tokens_from if stream is not None else None,
    )
