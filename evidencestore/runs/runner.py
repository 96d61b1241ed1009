"""The HTTP end-to-end runner: server check, warmup, measured requests, media checks, seal.

Timing: every timestamp is ``time.monotonic_ns()`` taken in the event loop at the moment
the runner hands the request to the HTTP client (``sent_ns``), sees the response headers
(``headers_ns``), and receives the first and last chunk of the output body. The runner
does nothing between one request's last byte and the next request's send but append a
record: bodies stream into temporaries under the store as they arrive and are published
(fsynced, linked under their digest) only after the timed requests, and every output is
decoded and checked against its request's expectations afterwards too, so neither
disturbs the timings.

Concurrency: with ``concurrency = N``, N workers take requests from one queue; every
warmup request finishes before the first measured request is sent. Records are keyed by
their schedule index, so completion order cannot reorder or lose one.

Nothing but the server URL given is contacted; redirects are not followed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from ..errors import ConfigError
from ..models import Descriptor, Registration
from ..storage import LocalBlobStore
from .body import BodySink
from .models import Exchange, Failure, Phase, RequestRecord, RunRecord, ServerIdentity
from .recorder import RunRecorder, check_output, utc_precise
from .workload import LoadedWorkload, Payload, build_payload, expectations_for, load_workload

if TYPE_CHECKING:
    import aiohttp
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..media.records import Expectations

__all__ = ["Progress", "check_server_url", "run_workload"]

Progress = Callable[[int, int, RequestRecord], None]

_KEPT_HEADERS = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "server",
    "date",
    "x-request-id",
    "openai-processing-ms",
)
_CHUNK = 1 << 20


def check_server_url(url: str) -> str:
    """Return ``url`` without a trailing slash if it is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--server {url!r}: expected an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise ConfigError(f"--server {url!r}: give the base URL only (no query or fragment)")
    return url.rstrip("/")


@dataclass
class _Slot:
    index: int
    phase: Phase
    request: int
    repetition: int


@dataclass
class _Pending:
    record: RequestRecord
    sink: BodySink | None
    media_type: str


_EXCHANGE_MAX = 16 << 20


async def _read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or its first ``limit`` bytes (a server check answer is small)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(_CHUNK):
        parts.append(chunk[: limit - size])
        size += len(parts[-1])
        if size >= limit:
            break
    return b"".join(parts)


def _selected(headers: Any) -> dict[str, str]:
    return {k: headers[k] for k in _KEPT_HEADERS if k in headers}


def run_workload(
    root: str | os.PathLike[str],
    workload_path: str | os.PathLike[str],
    *,
    arm: str,
    server: str,
    name: str,
    configs: Sequence[str | os.PathLike[str]] = (),
    server_logs: Sequence[str | os.PathLike[str]] = (),
    campaign: str | None = None,
    protocol_digest: str | None = None,
    condition: str | None = None,
    store: LocalBlobStore | None = None,
    progress: Progress | None = None,
    signing_key: Ed25519PrivateKey | None = None,
) -> tuple[Registration, RunRecord]:
    """Run a workload against ``server`` and register the run as bundle ``name``.

    Every run is registered, whatever its outcome; errors in the inputs (workload,
    configs, logs, name, URL) raise before anything is sent. With ``signing_key``, the
    run record is signed (``run.dsse.json``, see :func:`evidencestore.attest.sign_run`).
    """
    base = check_server_url(server)
    loaded = load_workload(workload_path)
    for log in server_logs:
        if not Path(log).is_file():
            raise ConfigError(f"--server-log {log}: no such file")
    recorder = RunRecorder(
        root,
        name,
        arm=arm,
        workload=loaded.descriptor,
        workload_bytes=loaded.data,
        store=store,
        campaign=campaign,
        protocol_digest=protocol_digest,
        condition=condition,
        signing_key=signing_key,
    )
    payloads = [
        build_payload(loaded, i, recorder.store) for i in range(len(loaded.workload.request))
    ]
    for config in configs:
        recorder.attach_config(config)
    stored = [recorder.store.put(p.data, p.descriptor.media_type) for p in payloads]
    try:
        pending = asyncio.run(_drive(recorder, loaded, payloads, stored, base, progress))
        _finish(recorder, loaded, pending)
    finally:
        recorder.discard_unpublished()  # interrupted: no temporary is left behind
    for log in server_logs:
        recorder.attach_log(log)
    return recorder.seal()


def _finish(recorder: RunRecorder, loaded: LoadedWorkload, pending: list[_Pending]) -> None:
    """Publish the bodies, check every delivered output, add the records."""
    for item in pending:
        record = item.record
        if item.sink is not None:
            body = item.sink.publish(item.media_type)
            record = msgspec.structs.replace(record, body=body)
            if record.failure is None and loaded.workload.run.check_media:
                exp = expectations_for(loaded.workload, record.request)
                if exp is not None:
                    if exp.audio is None:
                        exp = _audio_if_present(recorder.store, body, exp)
                    media, _ = check_output(recorder.store, body, exp, f"request {record.index}")
                    record = msgspec.structs.replace(record, media=media)
                    if media.verdict != "PASS":
                        record = msgspec.structs.replace(
                            record, failure="invalid-media", message=media.message, e2e_s=None
                        )
        recorder.add(record)


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


async def _exchange(
    session: aiohttp.ClientSession, recorder: RunRecorder, base: str, path: str, timeout: float
) -> Exchange:
    import aiohttp

    try:
        async with asyncio.timeout(timeout):
            async with session.get(base + path, allow_redirects=False) as resp:
                data = await _read_capped(resp, _EXCHANGE_MAX)
                kind = (
                    resp.headers.get("content-type", "application/octet-stream")
                    .split(";")[0]
                    .strip()
                )
                desc = recorder.put(
                    "server/" + (path.strip("/") or "index"),
                    data,
                    kind or "application/octet-stream",
                    "server",
                )
                return Exchange(
                    path=path, status=resp.status, headers=_selected(resp.headers), body=desc
                )
    except TimeoutError:
        return Exchange(path=path, status=None, error=f"no answer within {timeout} s")
    except aiohttp.ClientError as exc:
        return Exchange(path=path, status=None, error=f"{type(exc).__name__}: {exc}")


async def _check_server(
    session: aiohttp.ClientSession, recorder: RunRecorder, base: str, loaded: LoadedWorkload
) -> ServerIdentity:
    endpoint = loaded.workload.endpoint
    timeout = min(loaded.workload.run.timeout, 30.0)
    health = await _exchange(session, recorder, base, endpoint.health_path, timeout)
    # A server without a health route (404) may still serve the endpoint; anything else
    # that is not a 2xx (refused, 5xx, a start-up error) means no inference can follow.
    ok = health.status is not None and (200 <= health.status < 300 or health.status == 404)
    message = health.error
    if health.status is not None and not ok and health.body is not None:
        text = recorder.store.get(health.body.digest)[:2000].decode("utf-8", "replace").strip()
        message = f"{endpoint.health_path} answered {health.status}: {text}"
    models = None
    model_ids: tuple[str, ...] = ()
    if ok:
        models = await _exchange(session, recorder, base, endpoint.models_path, timeout)
        if models.status == 200 and models.body is not None:
            try:
                listing = json.loads(recorder.store.get(models.body.digest))
                model_ids = tuple(
                    str(m["id"])
                    for m in listing.get("data", [])
                    if isinstance(m, dict) and "id" in m
                )
            except (ValueError, AttributeError, TypeError):
                pass
    return ServerIdentity(
        url=base,
        ok=ok,
        health=health,
        models=models,
        model_ids=model_ids,
        server_header=health.headers.get("server"),
        message=message,
    )


async def _drive(
    recorder: RunRecorder,
    loaded: LoadedWorkload,
    payloads: list[Payload],
    stored: list[Descriptor],
    base: str,
    progress: Progress | None,
) -> list[_Pending]:
    import aiohttp

    wl = loaded.workload
    slots: list[_Slot] = []
    phases: tuple[tuple[Phase, int], ...] = (
        ("warmup", wl.run.warmup),
        ("measured", wl.run.measured),
    )
    for phase, reps in phases:
        for rep in range(reps):
            for i in range(len(wl.request)):
                slots.append(_Slot(len(slots), phase, i, rep))
    results: dict[int, _Pending] = {}
    connector = aiohttp.TCPConnector(limit=wl.run.concurrency, force_close=False)
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=False, trust_env=False
    ) as session:
        server = await _check_server(session, recorder, base, loaded)
        recorder.set_server(server)
        if not server.ok:
            return []
        for phase in ("warmup", "measured"):
            queue = [s for s in slots if s.phase == phase]
            queue.reverse()

            async def worker(queue: list[_Slot]) -> None:
                while queue:
                    slot = queue.pop()
                    pending = await _one(
                        session,
                        base,
                        loaded,
                        payloads[slot.request],
                        stored[slot.request],
                        slot,
                        recorder,
                    )
                    results[slot.index] = pending
                    if progress is not None:
                        progress(slot.index + 1, len(slots), pending.record)

            await asyncio.gather(
                *(worker(queue) for _ in range(min(wl.run.concurrency, len(queue)) or 1))
            )
    return [results[i] for i in sorted(results)]


class _Observed:
    """What one request saw so far: timings, status, headers, bytes, job polling."""

    def __init__(self) -> None:
        self.start_utc = utc_precise()
        self.sent_ns = time.monotonic_ns()
        self.headers_ns: int | None = None
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.declared: int | None = None
        self.received = 0
        self.job: str | None = None
        self.polls = 0


async def _one(
    session: aiohttp.ClientSession,
    base: str,
    loaded: LoadedWorkload,
    payload: Payload,
    payload_desc: Descriptor,
    slot: _Slot,
    recorder: RunRecorder,
) -> _Pending:
    import aiohttp

    wl = loaded.workload
    endpoint = wl.endpoint
    timeout = wl.run.timeout
    t = _Observed()
    sink: BodySink | None = None
    failure: Failure | None = None
    message: str | None = None
    media_type = "video/mp4"
    method, path = "POST", endpoint.path

    async def stream(resp: aiohttp.ClientResponse) -> None:
        nonlocal sink, media_type
        t.headers_ns = time.monotonic_ns()
        t.status = resp.status
        t.headers = _selected(resp.headers)
        t.declared = resp.content_length
        media_type = (
            resp.headers.get("content-type", media_type).split(";")[0].strip() or media_type
        )
        sink = recorder.body_sink()
        async for chunk in resp.content.iter_chunked(_CHUNK):
            if t.first_ns is None:
                t.first_ns = time.monotonic_ns()
            sink.write(chunk)
            t.received += len(chunk)
        t.last_ns = time.monotonic_ns()
        sink.finish()

    headers = {"Content-Type": payload.content_type}
    try:
        async with asyncio.timeout(timeout):
            if endpoint.kind == "videos-job":
                async with session.post(
                    base + path, data=payload.data, headers=headers, allow_redirects=False
                ) as resp:
                    t.status = resp.status
                    t.headers = _selected(resp.headers)
                    created = await resp.read()
                if resp.status >= 400:
                    raise _HttpStatus(resp.status, created)
                job = _job_id(created)
                t.job = job
                while True:
                    async with session.get(f"{base}{path}/{job}", allow_redirects=False) as resp:
                        t.polls += 1
                        info = await resp.read()
                    if resp.status >= 400:
                        raise _HttpStatus(resp.status, info)
                    status = _job_status(info)
                    if status == "completed":
                        break
                    if status in ("failed", "cancelled", "expired"):
                        raise _HttpStatus(resp.status, info, f"job {job} {status}")
                    await asyncio.sleep(endpoint.poll_interval)
                method, path = "GET", f"{path}/{job}/content"
                async with session.get(base + path, allow_redirects=False) as resp:
                    await stream(resp)
            else:
                async with session.post(
                    base + path, data=payload.data, headers=headers, allow_redirects=False
                ) as resp:
                    await stream(resp)
        code = t.status
        if code is not None and not 200 <= code < 300:
            failure, message = "http-status", f"HTTP {code}" + _snippet(sink)
        elif t.declared is not None and t.declared != t.received:
            failure = "truncated"
            message = f"received {t.received} bytes of the {t.declared} declared"
    except _HttpStatus as exc:
        t.status = exc.status
        failure, message = "http-status", exc.message
    except TimeoutError:
        failure, message = "timeout", f"no complete response within {timeout} s"
    except aiohttp.ClientPayloadError as exc:
        failure, message = "truncated", f"the body broke off after {t.received} bytes: {exc}"
    except (aiohttp.ClientConnectionError, aiohttp.ClientResponseError, OSError) as exc:
        if t.headers_ns is None:  # before the output's response began
            failure, message = "connect", f"{type(exc).__name__}: {exc}"
        else:
            failure = "truncated"
            message = f"the connection broke after {t.received} bytes: {type(exc).__name__}: {exc}"
    end_ns = time.monotonic_ns()
    keep = sink is not None and sink.digest is not None and failure in (None, "http-status")
    if sink is not None and not keep:
        sink.discard()  # an incomplete body never reaches the store
        sink = None
    digest = sink.digest if sink is not None else None
    record = RequestRecord(
        index=slot.index,
        phase=slot.phase,
        request=slot.request,
        repetition=slot.repetition,
        method=method,
        path=path,
        payload=payload_desc,
        start_utc=t.start_utc,
        sent_ns=t.sent_ns,
        headers_ns=t.headers_ns,
        first_byte_ns=t.first_ns,
        last_byte_ns=t.last_ns,
        end_ns=end_ns,
        status=t.status,
        headers=t.headers,
        # the real descriptor is set when the body is published after the timed requests
        body=Descriptor(digest=digest, size=t.received, media_type=media_type) if digest else None,
        received=t.received,
        declared_length=t.declared,
        job_id=t.job,
        polls=t.polls,
        failure=failure,
        message=message,
        e2e_s=(t.last_ns - t.sent_ns) / 1e9 if failure is None and t.last_ns is not None else None,
        ttfb_s=(t.first_ns - t.sent_ns) / 1e9 if t.first_ns is not None else None,
    )
    return _Pending(record, sink, media_type)


def _snippet(sink: BodySink | None) -> str:
    """``: <the start of an error body>`` (what the server said), or nothing."""
    if sink is None or sink.tmp is None:
        return ""
    try:
        with open(sink.tmp, "rb") as fh:
            text = fh.read(300).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f": {text}" if text else ""


class _HttpStatus(Exception):
    def __init__(self, status: int, body: bytes, message: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        text = body[:300].decode("utf-8", "replace").strip()
        self.message = (message or f"HTTP {status}") + (f": {text}" if text else "")


def _job_id(body: bytes) -> str:
    try:
        job = json.loads(body)["id"]
    except (ValueError, KeyError, TypeError):
        raise _HttpStatus(200, body, "the job creation response has no `id`") from None
    text = str(job)
    if not text or "/" in text or "?" in text or "#" in text:
        raise _HttpStatus(200, body, f"job id {text!r} is not usable in a URL path")
    return text


def _job_status(body: bytes) -> str:
    try:
        return str(json.loads(body)["status"])
    except (ValueError, KeyError, TypeError):
        raise _HttpStatus(200, body, "the job status response has no `status`") from None
