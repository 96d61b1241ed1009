"""Endpoints: one object per API kind that builds a request's payload and performs the
exchange, returning one :class:`Observation` per request.

The registry :data:`ENDPOINTS` maps a workload's ``endpoint.kind`` to its endpoint:
``videos-sync`` (a multipart POST whose response body is the video), ``videos-job``
(POST, poll ``{path}/{id}``, then GET ``{path}/{id}/content``), ``json`` (a JSON POST
whose response body is the output), and OpenAI's ``chat`` and ``completions`` (streamed
as server-sent events or not; the stream is kept whole and read back afterwards by
``streams.py``). An output that says it is JSON must be well-formed.
A new kind is added here and nowhere else.

Everything a server sends is untrusted data:

- every body has a size limit and is read in chunks: an output streams to a temporary
  file under the store (``body.py``) up to ``[run] max_output_size``; an error answer
  (not 2xx) in its place, and a control answer (job creation, poll, ``/health``,
  ``/v1/models``), up to :data:`CONTROL_MAX`.
  Past a limit the request fails ``too-large`` and no byte past it is kept;
- JSON is decoded into small typed structs with bounded nesting (a nesting bomb is an
  ``invalid-response``, never a ``RecursionError``);
- a header value that becomes a field of a registration (the ``Content-Type`` that
  becomes a descriptor's ``media_type``) is validated first and replaced by a safe
  default when it is not a media type; the header itself is kept verbatim in the
  request record, whose schema allows any string;
- a job id is used in a URL only when it is a plain token.

Timing: ``time.monotonic_ns()`` when the request was due (``intended_ns``, given by the
runner), when it is handed to the HTTP client, when the output's headers are parsed, and
at its first and last body chunk; nothing but writing the chunk to its sink happens
between chunks. A streamed LLM output also keeps every chunk's arrival with the bytes
received so far (``chunk_ns``, ``chunk_end``: compact integer arrays), taken as it is
read, before any parsing.
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import msgspec

from ..digest import hash_bytes
from ..models import Descriptor
from ..paths import shown
from .body import BodySink, BodyTooLarge
from .models import Exchange, Failure, RequestSpec
from .polling import PollSchedule, clock_resolution
from .streams import StreamOutcome, examine
from .workload import LoadedWorkload, input_files

if TYPE_CHECKING:
    import asyncio

    import aiohttp

    from ..storage import BlobStore

__all__ = [
    "CONTROL_MAX",
    "ENDPOINTS",
    "JSON_OUTPUT_MAX",
    "READ_BUFFER",
    "BadAnswer",
    "ChatEndpoint",
    "CompletionsEndpoint",
    "Connection",
    "Deadlines",
    "Endpoint",
    "Observation",
    "Payload",
    "build_payload",
    "endpoint_for",
    "get_control",
    "media_type_of",
    "model_ids",
    "parse_json",
    "text_of",
    "valid_media_type",
]

#: The largest control answer read (job creation, poll, health, model listing).
CONTROL_MAX = 16 << 20
#: The largest JSON output whose well-formedness is checked (a larger one is too large).
JSON_OUTPUT_MAX = 256 << 20
_CHUNK = 1 << 20
#: The runner's session read buffer (``read_bufsize``): what an output's reader may
#: buffer before it stops reading the socket.
READ_BUFFER = _CHUNK
_KEPT_HEADERS = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "server",
    "date",
    "x-request-id",
    "openai-processing-ms",
)
# RFC 6838 restricted names, and what the registration's MediaType pattern accepts.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,126}/[A-Za-z0-9_.+-]{1,127}")
_JOB_ID = re.compile(r"[A-Za-z0-9_~:-][A-Za-z0-9._~:-]{0,255}")

T = TypeVar("T")


# -- what a request saw ---------------------------------------------------------------
@dataclass(frozen=True)
class Observation:
    """Everything one request saw, in monotonic nanoseconds of this client.

    ``sent_ns`` when the request was handed to the HTTP client, ``headers_ns`` when the
    output's response headers were parsed, ``first_byte_ns`` / ``last_byte_ns`` for the
    output body, ``end_ns`` when the exchange ended however it ended. ``failure`` and
    ``message`` say how it failed, if it did. The request record computes end-to-end
    latency and time to first byte from these, in one place
    (``recorder.request_record``).
    """

    sent_ns: int
    end_ns: int
    start_utc: str | None = None
    method: str = "POST"
    path: str = "/"
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    headers_ns: int | None = None
    first_byte_ns: int | None = None
    last_byte_ns: int | None = None
    received: int = 0
    declared_length: int | None = None
    job_id: str | None = None
    polls: int = 0
    resolution_s: float | None = None
    media_type: str = "video/mp4"
    failure: Failure | None = None
    message: str | None = None
    intended_ns: int | None = None
    chunk_ns: Sequence[int] = ()
    chunk_end: Sequence[int] = ()


@dataclass(frozen=True)
class Payload:
    """The exact bytes of one request and their content type."""

    data: bytes
    content_type: str
    descriptor: Descriptor


class BadAnswer(Exception):
    """The server answered, but not as the endpoint requires: a failure class and message
    (``status``: the HTTP status, when one was received)."""

    def __init__(self, failure: Failure, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.failure: Failure = failure
        self.message = message
        self.status = status


# -- untrusted data -------------------------------------------------------------------
def valid_media_type(value: str) -> bool:
    """Whether ``value`` is a media type a descriptor may hold (``type/subtype``)."""
    return _MEDIA_TYPE.fullmatch(value) is not None


def media_type_of(headers: Mapping[str, str], default: str) -> str:
    """The media type a ``Content-Type`` header names, if it is a valid one (parameters
    dropped); ``default`` otherwise. Never lets a header make a registration invalid."""
    value = headers.get("content-type")
    if value is None:
        return default
    kind = value.split(";")[0].strip()
    return kind if valid_media_type(kind) else default


def selected(headers: Mapping[str, str]) -> dict[str, str]:
    """The response headers kept in a record (verbatim: the schema allows any string;
    bytes that are not UTF-8 are shown escaped, so the record can always be encoded)."""
    return {k: text_of(headers[k]) for k in _KEPT_HEADERS if k in headers}


def text_of(value: str, limit: int = 8192) -> str:
    """A string from the network as a record may hold it: encodable (bytes that are not
    UTF-8 and lone surrogates escaped) and at most ``limit`` characters."""
    if len(value) <= limit and value.isascii():  # the usual header: nothing to escape
        return value
    value = shown(value)
    return value if len(value) <= limit else value[:limit] + "…"


def parse_json(data: bytes, type_: type[T], what: str) -> T:
    """Decode server JSON into ``type_``; :class:`BadAnswer` (``invalid-response``) for
    malformed, mis-shaped or too deeply nested JSON."""
    try:
        return msgspec.json.decode(data, type=type_)
    except RecursionError:
        problem = "nested too deeply"
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        problem = str(exc)
    raise BadAnswer("invalid-response", f"{what} is not the JSON expected: {problem}")


def _is_json(media_type: str) -> bool:
    kind = media_type.lower()
    return kind == "application/json" or kind.endswith("+json")


def _quote_body(data: bytes) -> str:
    text = data[:300].decode("utf-8", "replace").strip()
    return f": {text}" if text else ""


async def read_capped(resp: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """A control answer's body, read in chunks up to ``limit`` bytes; ``too-large``
    past it (nothing more is read)."""
    declared = resp.content_length
    if declared is not None and declared > limit:
        raise BadAnswer(
            "too-large", f"{what} declares {declared} bytes, more than {limit}", resp.status
        )
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise BadAnswer("too-large", f"{what} is larger than {limit} bytes", resp.status)
        parts.append(chunk)
    return b"".join(parts)


# -- the server check -----------------------------------------------------------------
class _Struct(msgspec.Struct, forbid_unknown_fields=False):
    pass


class _Listing(_Struct):
    data: list[Any] = msgspec.field(default_factory=list)


def model_ids(data: bytes) -> tuple[str, ...]:
    """The model ids of a ``/v1/models`` answer (none when it is not such a listing)."""
    try:
        listing = parse_json(data, _Listing, "the model listing")
    except BadAnswer:
        return ()
    return tuple(
        text_of(str(m["id"]), 256)
        for m in listing.data[:1000]
        if isinstance(m, dict) and isinstance(m.get("id"), str | int)
    )


async def get_control(
    session: aiohttp.ClientSession,
    base: str,
    path: str,
    timeout: float,
    keep: Callable[[str, bytes, str], Descriptor],
) -> Exchange:
    """GET ``base + path`` (server check), body bounded by :data:`CONTROL_MAX`; ``keep``
    stores the body as an entry (entry name, bytes, media type) and returns its
    descriptor."""
    import asyncio  # here, not at the top: reading a run record must not load asyncio

    import aiohttp

    try:
        async with (
            asyncio.timeout(timeout),
            session.get(base + path, allow_redirects=False) as resp,
        ):
            headers = selected(resp.headers)
            try:
                data = await read_capped(resp, CONTROL_MAX, f"the answer to {path}")
            except BadAnswer as exc:
                return Exchange(path=path, status=resp.status, headers=headers, error=exc.message)
            kind = media_type_of(resp.headers, "application/octet-stream")
            desc = keep("server/" + (path.strip("/") or "index"), data, kind)
            return Exchange(path=path, status=resp.status, headers=headers, body=desc)
    except TimeoutError:
        return Exchange(path=path, status=None, error=f"no answer within {timeout} s")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return Exchange(path=path, status=None, error=text_of(f"{type(exc).__name__}: {exc}", 2000))


# -- time limits ----------------------------------------------------------------------
class Deadlines:
    """Every exchange's time limit with one timer for the whole run, not one per request
    (``asyncio.timeout`` arms and cancels a timer handle for each request, a cost that
    shows at thousands of requests a second).

    :meth:`start` notes the current task's deadline (now + ``limit``); a timer ticking
    every ``limit / 20`` (at most 0.25 s, at least 1 ms) cancels each task past its
    deadline, and :meth:`expired` tells the exchange that its cancellation was this
    time limit (it then raises ``TimeoutError``, as ``asyncio.timeout`` would), never a
    cancellation from outside, which propagates. A request therefore fails ``timeout``
    between ``limit`` and ``limit`` plus one tick after it was sent. Create it in the
    running loop."""

    def __init__(self, limit: float) -> None:
        import asyncio

        self.limit = limit
        self.tick = min(0.25, max(0.001, limit / 20))
        self._loop = asyncio.get_running_loop()
        self._current_task = asyncio.current_task
        self._due: dict[asyncio.Task[Any], tuple[float, int]] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> asyncio.Task[Any]:
        """Start the current task's time limit; return the task (for :meth:`stop`)."""
        task = self._current_task()
        if task is None:  # pragma: no cover - always called from a task
            raise RuntimeError("Deadlines.start() outside a task")
        self._due[task] = (self._loop.time() + self.limit, task.cancelling())
        if self._timer is None:
            self._timer = self._loop.call_at(self._loop.time() + self.tick, self._check)
        return task

    def stop(self, task: asyncio.Task[Any]) -> None:
        """End ``task``'s time limit (however its exchange ended)."""
        self._due.pop(task, None)
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether the cancellation ``task`` is handling is its time limit's (and only
        that): its cancel request is withdrawn, so it may raise ``TimeoutError``."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        _, cancelling = self._due.get(task, (0.0, 0))
        return task.uncancel() <= cancelling

    def _check(self) -> None:
        self._timer = None
        now = self._loop.time()
        for task, (due, _) in list(self._due.items()):
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        if self._due:
            self._timer = self._loop.call_at(now + self.tick, self._check)

    def close(self) -> None:
        """Stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# -- endpoints ------------------------------------------------------------------------
@dataclass
class Connection:
    """What an endpoint needs for one exchange: the session, base URL, per-request
    timeout, where output bodies go (``new_sink(limit)``) and the output size limit;
    ``deadlines`` (for ``timeout``) keeps every exchange's time limit with one timer
    (without it each exchange runs under its own ``asyncio.timeout``)."""

    session: aiohttp.ClientSession
    base: str
    timeout: float
    new_sink: Callable[[int], BodySink]
    max_output: int
    poll: PollSchedule = field(default_factory=PollSchedule)
    deadlines: Deadlines | None = None


@dataclass
class _Progress:
    """An observation being filled in while the exchange runs."""

    method: str
    path: str
    sent_ns: int = field(default_factory=time.monotonic_ns)
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    headers_ns: int | None = None
    first_ns: int | None = None
    last_ns: int | None = None
    received: int = 0
    declared: int | None = None
    job: str | None = None
    polls: int = 0
    resolution: float = field(default_factory=clock_resolution)
    media_type: str = "video/mp4"
    sink: BodySink | None = None
    intended_ns: int | None = None
    chunk_ns: array[int] | None = None
    chunk_end: array[int] | None = None

    def observation(
        self, start_utc: str, failure: Failure | None, message: str | None
    ) -> Observation:
        return Observation(
            sent_ns=self.sent_ns,
            end_ns=time.monotonic_ns(),
            start_utc=start_utc,
            method=self.method,
            path=self.path,
            status=self.status,
            headers=self.headers,
            headers_ns=self.headers_ns,
            first_byte_ns=self.first_ns,
            last_byte_ns=self.last_ns,
            received=self.received,
            declared_length=self.declared,
            job_id=self.job,
            polls=self.polls,
            resolution_s=self.resolution,
            media_type=self.media_type,
            failure=failure,
            message=None if message is None else text_of(message, 2000),
            intended_ns=self.intended_ns,
            chunk_ns=self.chunk_ns if self.chunk_ns is not None else (),
            chunk_end=self.chunk_end if self.chunk_end is not None else (),
        )


class Endpoint(ABC):
    """One API kind: how a request's bytes are built and how the exchange goes."""

    kind: ClassVar[str]
    default_media_type: ClassVar[str] = "video/mp4"
    #: Whether chunk arrivals are kept (``Observation.chunk_ns``) for reading back events.
    marks: ClassVar[bool] = False

    @abstractmethod
    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        """The exact bytes of request ``index`` (a pure function of the workload)."""

    async def _exchange(self, conn: Connection, payload: Payload, p: _Progress) -> None:
        """Send ``payload`` and stream the output into ``p.sink``; raise on failure. By
        default one POST whose response body is the output (the job flow overrides it)."""
        async with conn.session.post(
            conn.base + p.path,
            data=payload.data,
            headers={"Content-Type": payload.content_type},
            allow_redirects=False,
        ) as resp:
            await self._stream(conn, resp, p)

    def check_output(self, path: Path, size: int, media_type: str) -> tuple[Failure, str] | None:
        """A failure of a complete output the media check does not see, or None: an
        output that says it is JSON must be well-formed JSON (not cut off mid-document)."""
        if not _is_json(media_type):
            return None
        if size > JSON_OUTPUT_MAX:
            return "too-large", f"a JSON output of {size} bytes is larger than {JSON_OUTPUT_MAX}"
        try:
            parse_json(path.read_bytes(), Any, f"the {media_type} output")
        except BadAnswer as exc:
            return "invalid-response", exc.message
        return None

    def examine(
        self, data: bytes, observation: Observation, request: RequestSpec, stream: bool
    ) -> StreamOutcome | None:
        """What a delivered output says once read back (LLM endpoints: the events, the
        completion, a stream failure); None for endpoints whose output is not a stream."""
        return None

    async def exchange(
        self,
        conn: Connection,
        payload: Payload,
        path: str,
        start_utc: str,
        intended_ns: int | None = None,
    ) -> tuple[Observation, BodySink | None]:
        """Perform one request; return what it saw and the output's sink (finished,
        unpublished) when a body is to be kept. Never raises for what a server does."""
        import asyncio

        import aiohttp

        p = _Progress("POST", path)
        p.intended_ns = intended_ns
        if self.marks:
            p.chunk_ns, p.chunk_end = array("q"), array("q")
        p.media_type = self.default_media_type
        failure: Failure | None = None
        message: str | None = None
        try:
            deadlines = conn.deadlines
            if deadlines is None:
                async with asyncio.timeout(conn.timeout):
                    await self._exchange(conn, payload, p)
            else:
                task = deadlines.start()
                try:
                    await self._exchange(conn, payload, p)
                except asyncio.CancelledError as exc:
                    if deadlines.expired(task):
                        raise TimeoutError from exc
                    raise
                finally:
                    deadlines.stop(task)
            code = p.status
            if code is not None and not 200 <= code < 300:
                head = p.sink.head(300) if p.sink is not None else b""
                failure, message = "http-status", f"HTTP {code}" + _quote_body(head)
            elif p.declared is not None and p.declared != p.received:
                failure = "truncated"
                message = f"received {p.received} bytes of the {p.declared} declared"
        except BadAnswer as exc:
            if exc.status is not None:
                p.status = exc.status
            failure, message = exc.failure, exc.message
        except BodyTooLarge as exc:
            failure = "too-large"
            message = f"the output is {exc}; nothing past it was kept ([run] max_output_size)"
        except TimeoutError:
            failure, message = "timeout", f"no complete response within {conn.timeout} s"
        except aiohttp.ClientPayloadError as exc:
            failure, message = "truncated", f"the body broke off after {p.received} bytes: {exc}"
        except aiohttp.ClientResponseError as exc:
            # The server sent bytes that are not a valid HTTP answer (a bad status line,
            # a body where none may be, data past Content-Length).
            failure = "invalid-response"
            message = f"the answer is not valid HTTP: {type(exc).__name__}: {exc.message}"
        except (aiohttp.ClientConnectionError, OSError) as exc:
            if p.headers_ns is None:  # before the output's response began
                failure, message = "connect", f"{type(exc).__name__}: {exc}"
            else:
                failure = "truncated"
                message = (
                    f"the connection broke after {p.received} bytes: {type(exc).__name__}: {exc}"
                )
        sink = p.sink
        keep = sink is not None and sink.digest is not None and failure in (None, "http-status")
        if sink is not None and not keep:
            sink.discard()  # an incomplete or oversized body never reaches the store
            sink = None
        return p.observation(start_utc, failure, message), sink

    async def _stream(self, conn: Connection, resp: aiohttp.ClientResponse, p: _Progress) -> None:
        """Stream the output body of ``resp`` into a new sink, timing its chunks."""
        p.headers_ns = time.monotonic_ns()
        p.status = resp.status
        p.headers = selected(resp.headers)
        p.declared = resp.content_length
        p.media_type = media_type_of(resp.headers, self.default_media_type)
        # An error answer is kept as evidence too, but it is no output: the control bound.
        limit = conn.max_output if 200 <= resp.status < 300 else min(conn.max_output, CONTROL_MAX)
        if p.declared is not None and p.declared > limit:
            raise BodyTooLarge(limit)
        p.sink = sink = conn.new_sink(limit)
        times, ends = p.chunk_ns, p.chunk_end
        # Each chunk as it arrives (the session's read buffer is :data:`READ_BUFFER`).
        async for chunk in resp.content.iter_any():
            now = time.monotonic_ns()
            if p.first_ns is None:
                p.first_ns = now
            p.received += len(chunk)
            sink.write(chunk)
            if times is not None and ends is not None:
                times.append(now)
                ends.append(p.received)
        p.last_ns = time.monotonic_ns()
        sink.finish()


def _form_fields(req: RequestSpec) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name in ("prompt", "negative_prompt", "size", "seconds", "num_frames", "fps", "seed"):
        value = getattr(req, name)
        if value is not None:
            out.append((name, _text(value)))
    if req.num_inference_steps is not None:
        out.append(("num_inference_steps", str(req.num_inference_steps)))
    out.extend((k, _text(v)) for k, v in sorted(req.fields.items()))
    return out


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "%0D").replace("\n", "%0A")


def multipart_payload(workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
    """Request ``index`` as ``multipart/form-data``: its fields, then its input files.
    The boundary is derived from the fields' digest, never random."""
    req = workload.workload.request[index]
    fields = _form_fields(req)
    files = input_files(workload, index, store)
    seed = hash_bytes(
        json.dumps([fields, [(f, n, t, hash_bytes(d).digest) for f, n, t, d in files]]).encode()
    )
    boundary = "evstore-" + seed.digest.split(":")[1][:32]
    parts: list[bytes] = []
    for name, value in fields:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
        )
    for field_name, filename, media_type, content in files:
        parts.append(
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(field_name)}"; '
                f'filename="{_quote(filename)}"\r\nContent-Type: {media_type}\r\n\r\n'
            ).encode()
            + content
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    data = b"".join(parts)
    ctype = f"multipart/form-data; boundary={boundary}"
    return Payload(
        data, ctype, Descriptor(**hash_bytes(data)._asdict(), media_type="multipart/form-data")
    )


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


class VideosSync(Endpoint):
    """A multipart POST whose response body is the video."""

    kind = "videos-sync"

    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        return multipart_payload(workload, index, store)


class _Job(_Struct):
    id: str | int | None = None
    status: str | None = None


class VideosJob(VideosSync):
    """POST the request, poll ``{path}/{id}`` until it completes, GET the content."""

    kind = "videos-job"

    async def _control(self, resp: aiohttp.ClientResponse, what: str, p: _Progress) -> _Job:
        p.status = resp.status
        p.headers = selected(resp.headers)
        data = await read_capped(resp, CONTROL_MAX, what)
        if resp.status >= 400:
            raise BadAnswer("http-status", f"HTTP {resp.status}" + _quote_body(data), resp.status)
        return parse_json(data, _Job, what)

    async def _exchange(self, conn: Connection, payload: Payload, p: _Progress) -> None:
        base, path = conn.base, p.path
        async with conn.session.post(
            base + path,
            data=payload.data,
            headers={"Content-Type": payload.content_type},
            allow_redirects=False,
        ) as resp:
            created = await self._control(resp, "the job creation response", p)
        job = "" if created.id is None else str(created.id)
        if not job:
            raise BadAnswer("invalid-response", "the job creation response has no `id`", p.status)
        if not _JOB_ID.fullmatch(job):
            raise BadAnswer(
                "invalid-response",
                f"job id {job[:80]!r} is not usable in a URL path (expected a plain token)",
                p.status,
            )
        p.job = job
        unfinished_ns = p.sent_ns  # when the job was last known unfinished
        while True:
            poll_ns = time.monotonic_ns()
            async with conn.session.get(f"{base}{path}/{job}", allow_redirects=False) as resp:
                p.polls += 1
                info = await self._control(resp, f"the status of job {job}", p)
            if info.status is None:
                raise BadAnswer(
                    "invalid-response", "the job status response has no `status`", p.status
                )
            if info.status == "completed":
                # The job completed after the last poll that saw it unfinished was sent
                # and before this answer: that span bounds the waiting (runs/polling.py).
                p.resolution = (time.monotonic_ns() - unfinished_ns) / 1e9
                break
            if info.status in ("failed", "cancelled", "expired"):
                raise BadAnswer("http-status", f"job {job} {info.status[:80]}", p.status)
            unfinished_ns = poll_ns
            await _sleep(conn.poll.wait((time.monotonic_ns() - p.sent_ns) / 1e9))
        p.method, p.path = "GET", f"{path}/{job}/content"
        async with conn.session.get(base + p.path, allow_redirects=False) as resp:
            await self._stream(conn, resp, p)


class JsonEndpoint(Endpoint):
    """A JSON POST whose response body is the output."""

    kind = "json"

    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        req = workload.workload.request[index]
        body: dict[str, object] = {
            k: getattr(req, k) for k in _JSON_KEYS if getattr(req, k) is not None
        }
        body.update(req.fields)
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return Payload(
            data,
            "application/json",
            Descriptor(**hash_bytes(data)._asdict(), media_type="application/json"),
        )


class ChatEndpoint(JsonEndpoint):
    """OpenAI ``/v1/chat/completions``: a JSON POST answered by server-sent events (or,
    with ``stream = false``, one JSON completion); the stream is kept whole as the output
    and read back afterwards (``streams.py``)."""

    kind = "chat"
    default_media_type = "text/event-stream"
    marks = True
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
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return Payload(
            data,
            "application/json",
            Descriptor(**hash_bytes(data)._asdict(), media_type="application/json"),
        )

    def check_output(self, path: Path, size: int, media_type: str) -> tuple[Failure, str] | None:
        return None  # read back whole by `examine`

    def examine(
        self, data: bytes, observation: Observation, request: RequestSpec, stream: bool
    ) -> StreamOutcome | None:
        return examine(
            data,
            observation.chunk_ns,
            observation.chunk_end,
            request,
            stream=stream,
            chat=self.chat,
        )


class CompletionsEndpoint(ChatEndpoint):
    """OpenAI ``/v1/completions`` (``prompt`` in, ``choices[].text`` out)."""

    kind = "completions"
    chat = False


#: Endpoint kind -> endpoint.
ENDPOINTS: dict[str, Endpoint] = {
    e.kind: e
    for e in (VideosSync(), VideosJob(), JsonEndpoint(), ChatEndpoint(), CompletionsEndpoint())
}


def endpoint_for(kind: str) -> Endpoint:
    """The endpoint of ``kind`` (one of :data:`ENDPOINTS`)."""
    return ENDPOINTS[kind]


def build_payload(workload: LoadedWorkload, index: int, store: BlobStore | None = None) -> Payload:
    """Return the exact request body of request ``index`` (multipart, or JSON for ``json``)."""
    return endpoint_for(workload.workload.endpoint.kind).payload(workload, index, store)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)
