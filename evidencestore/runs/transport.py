"""The HTTP exchange of a run: one request in, one :class:`Observation` out (the cut
httpx makes at ``handle_async_request``; endpoints build the bytes and read the output
back, ``judge.py`` turns the observation into a record).

The transport owns the aiohttp exchange and everything about it that is not an API's:

- nothing but the server URL given is contacted, and redirects are never followed (a
  3xx is an answer like any other that is not 2xx: ``http-status``);
- every exchange has one time limit (:class:`Deadlines`: one timer for the whole run);
- every body has a size limit enforced while its bytes arrive, never after: an output
  streams to a sink under the store (``body.py``) that refuses the first chunk past
  ``[run] max_output_size``, so an endless stream stops at its limit; an error answer
  (not 2xx) in its place, and a control answer (job creation, poll, ``/health``,
  ``/v1/models``), up to :data:`CONTROL_MAX`. Past a limit the request fails
  ``too-large`` and its sink is discarded: a body over the limit is never kept, nor
  one cut short;
- what a server sends passes the guards of ``untrusted.py`` before it is kept.

Timing: ``time.monotonic_ns()`` when the request was due (``intended_ns``, given by the
runner), when it is handed to the HTTP client, when the output's headers are parsed, and
at its first and last body chunk; nothing but writing the chunk to its sink happens
between chunks. An endpoint that reads its output back as a stream (``marks``) also
keeps every chunk's arrival with the bytes received so far (``chunk_ns``,
``chunk_end``: compact integer arrays), taken as it is read, before any parsing.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import msgspec

from ..errors import BadAnswer, BodyTooLarge
from ..models import Descriptor
from .body import BodySink
from .models import Exchange, Failure, Unreached
from .polling import PollSchedule, clock_resolution
from .untrusted import (
    media_type_of,
    parse_json,
    plain_token,
    quote_body,
    selected,
    text_of,
)

if TYPE_CHECKING:
    import asyncio

    import aiohttp

__all__ = [
    "CONTROL_MAX",
    "READ_BUFFER",
    "Connection",
    "ControlAnswer",
    "Deadlines",
    "Observation",
    "Payload",
    "Shape",
    "exchange",
    "get_control",
    "get_once",
    "keeps_body",
    "output_limit",
    "read_capped",
    "too_large",
    "unreached",
    "utc_precise",
]

#: The largest control answer read (job creation, poll, health, model listing).
CONTROL_MAX = 16 << 20
_CHUNK = 1 << 20
#: The runner's session read buffer (``read_bufsize``): what an output's reader may
#: buffer before it stops reading the socket.
READ_BUFFER = _CHUNK


def output_limit(max_output: int, status: int | None) -> int:
    """The most bytes of a response body kept, by the one rule every recorder applies
    (the runner as bytes arrive, ``RunRecorder.keep_output`` for a harness's): an output
    (a 2xx answer, or one whose status was not recorded) up to ``max_output`` (``[run]
    max_output_size``), an error answer kept in its place up to :data:`CONTROL_MAX` too."""
    if status is None or 200 <= status < 300:
        return max_output
    return min(max_output, CONTROL_MAX)


def keeps_body(failure: Failure | None) -> bool:
    """Whether a body is kept with its request's outcome, by the one rule every recorder
    applies: the whole answer (no failure, or an error answer kept in its place), never
    a body cut short by a timeout, a broken connection or a refusal."""
    return failure in (None, "http-status")


def too_large(exc: BodyTooLarge) -> tuple[Failure, str]:
    """The failure of a body past its limit (:func:`output_limit`): nothing of it kept."""
    return "too-large", f"the output is {exc}; nothing past it was kept ([run] max_output_size)"


_SECOND: list[tuple[int, str]] = [(-1, "")]  # the last whole second formatted


def utc_precise() -> str:
    """The current UTC time, microseconds: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (the whole
    second's text is formatted once per second: the runner stamps every request)."""
    ns = time.time_ns()
    second = ns // 10**9
    last, text = _SECOND[0]
    if second != last:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _SECOND[0] = (second, text)
    return f"{text}.{ns // 1000 % 10**6:06d}Z"


@dataclass
class Observation:
    """Everything one request saw, in monotonic nanoseconds of this client.

    ``sent_ns`` when the request was handed to the HTTP client, ``headers_ns`` when the
    output's response headers were parsed, ``first_byte_ns`` / ``last_byte_ns`` for the
    output body, ``end_ns`` when the exchange ended however it ended. ``failure`` and
    ``message`` say how it failed, if it did. The transport fills one in while the
    exchange runs and hands it over when it ends; a harness that made the request
    itself gives one to ``RunRecorder.record_request``. The judge computes end-to-end
    latency and time to first byte from these, in one place (``judge.request_record``).
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


class Shape(Protocol):
    """What the transport needs to know of an endpoint: the media type its output has
    when the server names none, whether chunk arrivals are kept (``marks``: an output
    read back as a stream), and whether the output comes from a job (POST, poll
    ``{path}/{id}``, GET ``{path}/{id}/content``) rather than as the POST's answer."""

    @property
    def default_media_type(self) -> str: ...

    @property
    def marks(self) -> bool: ...

    @property
    def job(self) -> bool: ...


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
        error = text_of(f"{type(exc).__name__}: {exc}", 2000)
        return Exchange(path=path, status=None, error=error, unreached=unreached(exc))


@dataclass(frozen=True)
class ControlAnswer:
    """What one control GET outside a run's session got: the HTTP status (None: no
    answer), the body (only of a 2xx answer within the limit) and, when there is no
    body, why not."""

    status: int | None
    body: bytes | None = None
    error: str | None = None


def get_once(url: str, timeout: float, limit: int = CONTROL_MAX) -> ControlAnswer:
    """GET ``url`` once, outside a run's session (a launched server's readiness, its
    ``/metrics`` and ``/version``), by the rules of every exchange: no redirect followed
    (a 3xx is an answer that is not 2xx), no proxy taken from the environment, the
    answer given ``timeout`` seconds, its body bounded by ``limit`` while it arrives
    (past it: an error naming the URL and the limit, nothing kept)."""
    import asyncio

    import aiohttp

    async def get() -> ControlAnswer:
        async with (
            aiohttp.ClientSession(
                auto_decompress=False,
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=None),
            ) as session,
            asyncio.timeout(timeout),
            session.get(url, allow_redirects=False) as resp,
        ):
            if not 200 <= resp.status < 300:
                return ControlAnswer(resp.status, error=f"HTTP {resp.status}")
            try:
                data = await read_capped(resp, limit, f"the answer to {url}")
            except BadAnswer as exc:
                return ControlAnswer(resp.status, error=exc.message)
            return ControlAnswer(resp.status, data)

    try:
        return asyncio.run(get())
    except TimeoutError:
        return ControlAnswer(None, error=f"no answer within {timeout:g} s")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return ControlAnswer(None, error=text_of(f"{type(exc).__name__}: {exc}", 2000))


def unreached(exc: BaseException) -> Unreached | None:
    """Why ``exc`` means that no server was reached at all, before any byte was sent
    (the host name did not resolve, the connection was refused, no route led to the
    host); None for anything else: a TLS failure, a broken or timed-out connection or
    any answer means something listened there."""
    import errno
    import socket

    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return None
    cause = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else exc
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or isinstance(cause, socket.gaierror):
        return "unresolved"
    if not isinstance(exc, aiohttp.ClientConnectorError):
        return None  # refused only counts while connecting, never on a live connection
    code = getattr(cause, "errno", None)
    if isinstance(cause, ConnectionRefusedError) or code == errno.ECONNREFUSED:
        return "refused"
    if code in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "unreachable"
    return None


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


# -- one exchange ---------------------------------------------------------------------
@dataclass
class Connection:
    """What one exchange needs: the session, base URL, per-request timeout, where output
    bodies go (``new_sink(limit)``) and the output size limit; ``deadlines`` (for
    ``timeout``) keeps every exchange's time limit with one timer (without it each
    exchange runs under its own ``asyncio.timeout``)."""

    session: aiohttp.ClientSession
    base: str
    timeout: float
    new_sink: Callable[[int], BodySink]
    max_output: int
    poll: PollSchedule = field(default_factory=PollSchedule)
    deadlines: Deadlines | None = None


async def exchange(
    conn: Connection,
    shape: Shape,
    payload: Payload,
    path: str,
    start_utc: str,
    intended_ns: int | None = None,
) -> tuple[Observation, BodySink | None]:
    """Perform one request for an endpoint of ``shape``; return what it saw and the
    output's sink (finished, unpublished) when a body is to be kept: a complete output,
    or an error answer (``http-status``). Never raises for what a server does."""
    import asyncio

    import aiohttp

    obs = Observation(
        sent_ns=time.monotonic_ns(),
        end_ns=0,  # when it ends
        start_utc=start_utc,
        path=path,
        intended_ns=intended_ns,
        resolution_s=clock_resolution(),
        media_type=shape.default_media_type,
    )
    if shape.marks:
        obs.chunk_ns, obs.chunk_end = array("q"), array("q")
    held: list[BodySink] = []  # the output's sink, once its headers are in
    flow = _job if shape.job else _post
    failure: Failure | None = None
    message: str | None = None
    try:
        deadlines = conn.deadlines
        if deadlines is None:
            async with asyncio.timeout(conn.timeout):
                await flow(conn, payload, shape, obs, held)
        else:
            task = deadlines.start()
            try:
                await flow(conn, payload, shape, obs, held)
            except asyncio.CancelledError as exc:
                if deadlines.expired(task):
                    raise TimeoutError from exc
                raise
            finally:
                deadlines.stop(task)
        code = obs.status
        if code is not None and not 200 <= code < 300:
            head = held[0].head(300) if held else b""
            failure, message = "http-status", f"HTTP {code}" + quote_body(head)
        elif obs.declared_length is not None and obs.declared_length != obs.received:
            failure = "truncated"
            message = f"received {obs.received} bytes of the {obs.declared_length} declared"
    except BadAnswer as exc:
        if exc.status is not None:
            obs.status = exc.status
        failure, message = cast("Failure", exc.failure), exc.message
    except BodyTooLarge as exc:
        failure, message = too_large(exc)
    except TimeoutError:
        failure, message = "timeout", f"no complete response within {conn.timeout} s"
    except aiohttp.ClientPayloadError as exc:
        failure, message = "truncated", f"the body broke off after {obs.received} bytes: {exc}"
    except aiohttp.ClientResponseError as exc:
        # The server sent bytes that are not a valid HTTP answer (a bad status line,
        # a body where none may be, data past Content-Length).
        failure = "invalid-response"
        message = f"the answer is not valid HTTP: {type(exc).__name__}: {exc.message}"
    except (aiohttp.ClientConnectionError, OSError) as exc:
        if obs.headers_ns is None:  # before the output's response began
            failure, message = "connect", f"{type(exc).__name__}: {exc}"
        else:
            failure = "truncated"
            message = (
                f"the connection broke after {obs.received} bytes: {type(exc).__name__}: {exc}"
            )
    obs.end_ns = time.monotonic_ns()
    obs.failure = failure
    obs.message = None if message is None else text_of(message, 2000)
    sink = held[0] if held else None
    keep = sink is not None and sink.digest is not None and keeps_body(failure)
    if sink is not None and not keep:
        sink.discard()  # an incomplete or oversized body never reaches the store
        sink = None
    return obs, sink


async def _post(
    conn: Connection, payload: Payload, shape: Shape, obs: Observation, held: list[BodySink]
) -> None:
    """One POST whose response body is the output."""
    async with conn.session.post(
        conn.base + obs.path,
        data=payload.data,
        headers={"Content-Type": payload.content_type},
        allow_redirects=False,
    ) as resp:
        await _output(conn, resp, shape, obs, held)


class _Job(msgspec.Struct, forbid_unknown_fields=False):
    id: str | int | None = None
    status: str | None = None


async def _control(resp: aiohttp.ClientResponse, what: str, obs: Observation) -> _Job:
    obs.status = resp.status
    obs.headers = selected(resp.headers)
    data = await read_capped(resp, CONTROL_MAX, what)
    if resp.status >= 400:
        raise BadAnswer("http-status", f"HTTP {resp.status}" + quote_body(data), resp.status)
    return parse_json(data, _Job, what)


async def _job(
    conn: Connection, payload: Payload, shape: Shape, obs: Observation, held: list[BodySink]
) -> None:
    """POST the request, poll ``{path}/{id}`` until it completes, GET the content."""
    import asyncio

    base, path = conn.base, obs.path
    async with conn.session.post(
        base + path,
        data=payload.data,
        headers={"Content-Type": payload.content_type},
        allow_redirects=False,
    ) as resp:
        created = await _control(resp, "the job creation response", obs)
    job = "" if created.id is None else str(created.id)
    if not job:
        raise BadAnswer("invalid-response", "the job creation response has no `id`", obs.status)
    if not plain_token(job):
        raise BadAnswer(
            "invalid-response",
            f"job id {job[:80]!r} is not usable in a URL path (expected a plain token)",
            obs.status,
        )
    obs.job_id = job
    unfinished_ns = obs.sent_ns  # when the job was last known unfinished
    while True:
        poll_ns = time.monotonic_ns()
        async with conn.session.get(f"{base}{path}/{job}", allow_redirects=False) as resp:
            obs.polls += 1
            info = await _control(resp, f"the status of job {job}", obs)
        if info.status is None:
            raise BadAnswer(
                "invalid-response", "the job status response has no `status`", obs.status
            )
        if info.status == "completed":
            # The job completed after the last poll that saw it unfinished was sent
            # and before this answer: that span bounds the waiting (runs/polling.py).
            obs.resolution_s = (time.monotonic_ns() - unfinished_ns) / 1e9
            break
        if info.status in ("failed", "cancelled", "expired"):
            raise BadAnswer("http-status", f"job {job} {info.status[:80]}", obs.status)
        unfinished_ns = poll_ns
        await asyncio.sleep(conn.poll.wait((time.monotonic_ns() - obs.sent_ns) / 1e9))
    obs.method, obs.path = "GET", f"{path}/{job}/content"
    async with conn.session.get(base + obs.path, allow_redirects=False) as resp:
        await _output(conn, resp, shape, obs, held)


async def _output(
    conn: Connection,
    resp: aiohttp.ClientResponse,
    shape: Shape,
    obs: Observation,
    held: list[BodySink],
) -> None:
    """Stream the output body of ``resp`` into a new sink, timing its chunks; the sink
    refuses the first chunk past the limit (``BodyTooLarge``), so nothing past it is
    read into the store."""
    obs.headers_ns = time.monotonic_ns()
    obs.status = resp.status
    obs.headers = selected(resp.headers)
    obs.declared_length = declared = resp.content_length
    obs.media_type = media_type_of(resp.headers, shape.default_media_type)
    # An error answer is kept as evidence too, but it is no output: the control bound.
    limit = output_limit(conn.max_output, resp.status)
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    sink = conn.new_sink(limit)
    held.append(sink)
    times = obs.chunk_ns if isinstance(obs.chunk_ns, array) else None
    ends = obs.chunk_end if isinstance(obs.chunk_end, array) else None
    received = 0
    first: int | None = None
    try:
        # Each chunk as it arrives (the session's read buffer is :data:`READ_BUFFER`).
        async for chunk in resp.content.iter_any():
            now = time.monotonic_ns()
            if first is None:
                first = now
            received += len(chunk)
            sink.write(chunk)
            if times is not None and ends is not None:
                times.append(now)
                ends.append(received)
    finally:
        obs.first_byte_ns, obs.received = first, received
    obs.last_byte_ns = time.monotonic_ns()
    sink.finish()
