"""The HTTP end-to-end runner: server check, warmup, measured requests, media checks, seal.

Timing: every timestamp is ``time.monotonic_ns()`` taken in the event loop at the moment
the runner hands the request to the HTTP client (``sent_ns``), sees the response headers
(``headers_ns``), and receives the first and last chunk of the output body. The runner
does nothing between one request's last byte and the next request's send but append a
record: bodies stream into temporaries under the store as they arrive and are published
(fsynced, linked under their digest) only after the timed requests, and every output is
decoded and checked against its request's expectations afterwards too, so neither
disturbs the timings.

Concurrency: with ``concurrency = N``, N workers take requests from one queue (closed
loop: a request is due when a worker is free); with ``[run] request_rate``, requests are
due on a schedule fixed before the phase (``arrivals.py``: open loop), sent at their due
time or as soon after as at most N in flight allow, each recording its intended and
actual send time. Every warmup request finishes before the first measured request is
sent. Records are keyed by
their schedule index, so completion order cannot reorder or lose one.

Nothing but the server URL given is contacted; redirects are not followed. Each
request's bytes come from its endpoint (``endpoints/``), its exchange from the transport
(``transport.py``), which returns one observation per request, and its record from the
judge (``judge.py``); this module schedules them, publishes the bodies, and registers
the run. Everything given is checked before the first byte is sent;
once the server check begins the run is registered whatever happens (an internal error
becomes the run's reason, never a lost run).
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from .._keywords import check_keywords
from ..models import Descriptor, Registration
from ..progress import Observer, Tick
from . import polling
from .arrivals import arrival_offsets
from .audits import audit_run
from .body import BodySink
from .endpoints import Endpoint, endpoint_for
from .goodput import goodput
from .judge import Expected, Slot, judge, request_record
from .models import ClientLoad, Phase, RequestRecord, RunRecord, ServerIdentity
from .preflight import Prepared, RunOptions, check_server_url, preflight
from .recorder import RunRecorder
from .transport import (
    READ_BUFFER,
    Connection,
    Deadlines,
    Observation,
    Payload,
    exchange,
    get_control,
    utc_precise,
)
from .untrusted import model_ids
from .workload import LoadedWorkload, expectations_for

if TYPE_CHECKING:
    import aiohttp

__all__ = ["Progress", "check_server_url", "run_prepared", "run_workload"]

Progress = Callable[[int, int, RequestRecord], None]


@dataclass
class _Pending:
    slot: Slot
    observation: Observation
    sink: BodySink | None

    def preview(self, payload: Descriptor) -> RequestRecord:
        """The record as it stands before its body is published and judged (progress)."""
        sink = self.sink
        body = None
        if sink is not None and sink.digest is not None:
            body = Descriptor(
                digest=sink.digest, size=sink.size, media_type=self.observation.media_type
            )
        return request_record(self.observation, self.slot, payload=payload, body=body)


class _Counts:
    """The run's counts for an observer: requests sent, done and failed of the total."""

    def __init__(self, name: str, observer: Observer | None) -> None:
        self.label = f"run {name}"
        self.observer = observer
        self.total = self.sent = self.done = self.failed = 0

    def tell(self, what: str = "") -> None:
        if self.observer is not None:
            self.observer(
                Tick(self.label, self.done, self.total, "requests", self.failed, self.sent, what)
            )

    def sending(self) -> None:
        self.sent += 1
        self.tell()

    def finished(self, observation: Observation) -> None:
        self.done += 1
        self.failed += observation.failure is not None
        self.tell(observation.failure or "")


def _internal(when: str, exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" (at {Path(where[0].filename).name}:{where[0].lineno})" if where else ""
    return f"internal error {when}: {type(exc).__name__}: {exc}{at}"


def run_workload(
    root: str | os.PathLike[str],
    workload_path: str | os.PathLike[str],
    *,
    arm: str,
    server: str,
    name: str,
    progress: Progress | None = None,
    before_seal: Callable[[RunRecorder], None] | None = None,
    observer: Observer | None = None,
    **options: Unpack[RunOptions],
) -> tuple[Registration, RunRecord]:
    """Run a workload against ``server`` and register the run as bundle ``name``.

    Everything given is checked before anything is sent: the URL, every workload value,
    the workload, its input files, configs and logs by the one file-reading rule
    (``confined.py``), the name, and every payload is built; an error there raises and
    registers nothing. Once the server check begins the run is registered whatever
    happens, failed ones and internal errors included (the run is then ``partial`` or
    ``failed-before-inference`` and its reason says what happened). A run that does not
    fit ``campaign`` (``evidencestore.campaign.campaign_rules(root, NAME)``: its condition,
    arm, workload digest and declared configuration files) is refused before too. With ``signing_key`` the run
    record is signed (``run.dsse.json``, see :func:`evidencestore.dsse.sign_run`).
    ``progress`` hears of each finished request with its record as it stands;
    ``observer`` (``evidencestore.progress``) of the counts as they move: requests sent,
    done and failed of the total, from the server check on.
    """
    check_keywords("run_workload", options, RunOptions)
    from ..config import as_repository

    prepared = preflight(
        as_repository(root), workload_path, arm=arm, server=server, name=name, **options
    )
    return run_prepared(prepared, progress=progress, before_seal=before_seal, observer=observer)


def run_prepared(
    prepared: Prepared,
    *,
    progress: Progress | None = None,
    before_seal: Callable[[RunRecorder], None] | None = None,
    observer: Observer | None = None,
) -> tuple[Registration, RunRecord]:
    """Run a workload that passed its pre-flight (``preflight.preflight``) and register
    it; see :func:`run_workload`. ``before_seal`` runs last (a launched server: stopped,
    its log and metrics kept). An error that escapes before the run is sealed abandons
    it (nothing registered, nothing left open)."""
    try:
        return _run(prepared, progress, before_seal, observer)
    except BaseException:
        prepared.recorder.abandon()
        raise


def _run(
    prepared: Prepared,
    progress: Progress | None,
    before_seal: Callable[[RunRecorder], None] | None,
    observer: Observer | None,
) -> tuple[Registration, RunRecord]:
    loaded, recorder, base = prepared.loaded, prepared.recorder, prepared.base
    configs, server_logs = prepared.configs, prepared.server_logs
    endpoint = endpoint_for(loaded.workload.endpoint.kind)
    payloads = [
        endpoint.payload(loaded, i, recorder.store) for i in range(len(loaded.workload.request))
    ]
    # Payloads, bodies and completions are published without an fsync each and made
    # durable at once before the registration that names them (upkeep.deferred_sync).
    with recorder.store.upkeep.deferred_sync():
        for config in configs:
            recorder.attach_config(config)
        stored = [recorder.store.put(p.data, p.descriptor.media_type) for p in payloads]
        results: dict[int, _Pending] = {}
        clock: dict[str, float] = {}
        try:
            try:
                asyncio.run(
                    _drive(
                        recorder,
                        loaded,
                        endpoint,
                        payloads,
                        stored,
                        base,
                        progress,
                        results,
                        clock,
                        _Counts(recorder.name, observer),
                    )
                )
            except Exception as exc:  # the run started: it is registered whatever happened
                recorder.fail(_internal("while sending the requests", exc))
            recorder.load = client_load(
                [p.observation for p in results.values() if p.slot.phase == "measured"],
                clock,
                loaded.workload.run.max_send_lag,
                rate
                if isinstance(rate := loaded.workload.run.request_rate, float) and rate != math.inf
                else None,
            )
            _finish(recorder, loaded, endpoint, [results[i] for i in sorted(results)], stored)
            try:
                recorder.audits = audit_run(loaded.workload, recorder.requests, recorder.store)
                timing = loaded.workload.timing
                if timing is not None and timing.slo is not None:
                    recorder.goodput = goodput(timing.slo, recorder.requests)
            except Exception as exc:
                recorder.fail(_internal("while auditing the outputs", exc))
        finally:
            recorder.discard_unpublished()  # interrupted: no temporary is left behind
        for log in server_logs:
            try:
                recorder.attach_log(log)
            except Exception as exc:
                recorder.fail(_internal(f"while keeping server log {log}", exc))
        if before_seal is not None:  # a launched server: stopped, its log and metrics kept
            try:
                before_seal(recorder)
            except Exception as exc:
                recorder.fail(_internal("while stopping the launched server", exc))
    return recorder.seal()


#: A client using this fraction of one core while it sends is saturated.
SATURATED = 0.9


def client_load(
    observations: Sequence[Observation],
    clock: dict[str, float],
    max_send_lag: float,
    request_rate: float | None = None,
) -> ClientLoad | None:
    """The client's load over the measured requests: CPU over wall time, the send lag
    (actual minus intended send time), and whether the run is client-bound."""
    if "wall" not in clock or clock["wall"] <= 0:
        return None
    lags = sorted(
        (o.sent_ns - o.intended_ns) / 1e9 for o in observations if o.intended_ns is not None
    )
    median = statistics.median(lags) if lags else None
    fraction = clock["cpu"] / clock["wall"]
    reasons = []
    if median is not None and median > max_send_lag:
        reasons.append(
            f"median send lag {median * 1e3:.3f} ms exceeds [run] max_send_lag = "
            f"{max_send_lag * 1e3:g} ms: requests left later than intended"
        )
    if fraction >= SATURATED:
        reasons.append(
            f"the client used {fraction:.0%} of a core while sending: its CPU was saturated"
        )
    sends = sorted(o.sent_ns for o in observations)
    achieved = (
        (len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9)
        if len(sends) > 1 and sends[-1] > sends[0]
        else None
    )
    return ClientLoad(
        request_rate=request_rate,
        achieved_rate=achieved,
        send_lag_p99_s=lags[min(len(lags) - 1, math.ceil(0.99 * len(lags)) - 1)] if lags else None,
        cpu_s=clock["cpu"],
        wall_s=clock["wall"],
        cpu_fraction=fraction,
        send_lag_median_s=median,
        send_lag_max_s=lags[-1] if lags else None,
        max_send_lag_s=max_send_lag,
        client_bound=bool(reasons),
        reasons=tuple(reasons),
    )


def _finish(
    recorder: RunRecorder,
    loaded: LoadedWorkload,
    endpoint: Endpoint,
    pending: list[_Pending],
    stored: list[Descriptor],
) -> None:
    """Publish the bodies, judge every request, add the records."""
    for item in pending:
        payload = stored[item.slot.request]
        try:
            record = _judged(recorder, loaded, endpoint, item, payload)
        except Exception as exc:
            if item.sink is not None:
                item.sink.discard()
            recorder.fail(_internal(f"while checking request {item.slot.index}", exc))
            record = judge(
                endpoint,
                item.observation,
                None,
                Expected(),
                store=recorder.store,
                slot=item.slot,
                payload=payload,
            )
        recorder.add(record)


def _judged(
    recorder: RunRecorder,
    loaded: LoadedWorkload,
    endpoint: Endpoint,
    item: _Pending,
    payload: Descriptor,
) -> RequestRecord:
    """One request's record once its body is published."""
    obs = item.observation
    wl = loaded.workload
    body = data = None
    if item.sink is not None:
        if obs.failure is None and endpoint.marks:
            data = item.sink.content()  # a small stream: not read back from the store
        body = recorder.publish(item.sink, obs.media_type)
    request = item.slot.request
    expected = Expected(
        request=wl.request[request],
        stream=wl.endpoint.stream,
        media=expectations_for(wl, request) if wl.run.check_media else None,
        tokenizer=loaded.tokenizer,
    )
    return judge(
        endpoint,
        obs,
        body,
        expected,
        store=recorder.store,
        slot=item.slot,
        payload=payload,
        data=data,
    )


async def _check_server(
    session: aiohttp.ClientSession, recorder: RunRecorder, base: str, loaded: LoadedWorkload
) -> ServerIdentity:
    endpoint = loaded.workload.endpoint
    timeout = min(loaded.workload.run.timeout, 30.0)

    def keep(entry: str, data: bytes, media_type: str) -> Descriptor:
        return recorder.put(entry, data, media_type, "server")

    health = await get_control(session, base, endpoint.health_path, timeout, keep)
    # A server without a health route (404) may still serve the endpoint; anything else
    # that is not a 2xx (refused, 5xx, a start-up error, an answer too large) means no
    # inference can follow.
    ok = (
        health.status is not None
        and health.error is None
        and (200 <= health.status < 300 or health.status == 404)
    )
    message = health.error
    if health.status is not None and not ok and health.body is not None:
        text = recorder.store.get(health.body.digest)[:2000].decode("utf-8", "replace").strip()
        message = f"{endpoint.health_path} answered {health.status}: {text}"
    elif health.status is not None and not ok:
        message = f"{endpoint.health_path} answered {health.status}: {health.error}"
    models = None
    ids: tuple[str, ...] = ()
    if ok:
        models = await get_control(session, base, endpoint.models_path, timeout, keep)
        if models.status == 200 and models.body is not None:
            ids = model_ids(recorder.store.get(models.body.digest))
    return ServerIdentity(
        url=base,
        ok=ok,
        health=health,
        models=models,
        model_ids=ids,
        server_header=health.headers.get("server"),
        message=message,
    )


async def _drive(
    recorder: RunRecorder,
    loaded: LoadedWorkload,
    endpoint: Endpoint,
    payloads: list[Payload],
    stored: list[Descriptor],
    base: str,
    progress: Progress | None,
    results: dict[int, _Pending],
    clock: dict[str, float],
    counts: _Counts,
) -> None:
    """Check the server, then send every warmup and measured request; each request's
    observation lands in ``results`` (by schedule index) as soon as it ends, so what
    was done survives an error in what follows."""
    import aiohttp

    wl = loaded.workload
    slots: list[Slot] = []
    phases: tuple[tuple[Phase, int], ...] = (
        ("warmup", wl.run.warmup),
        ("measured", wl.run.measured),
    )
    for phase, reps in phases:
        for rep in range(reps):
            for i in range(len(wl.request)):
                slots.append(Slot(len(slots), phase, i, rep))
    counts.total = len(slots)
    counts.tell("checking the server")
    # No TLS context is built for a plain-http server.
    connector = aiohttp.TCPConnector(
        limit=wl.run.concurrency, force_close=False, ssl=not base.startswith("http://")
    )
    # Every exchange runs under its own asyncio.timeout ([run] timeout, the server check's
    # too), so aiohttp's own timers (a 5-minute total by default) are not armed as well.
    async with aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=None),
        read_bufsize=READ_BUFFER,
    ) as session:
        server = await _check_server(session, recorder, base, loaded)
        recorder.set_server(server)
        if not server.ok:
            counts.tell(server.health.unreached or "the server check failed")
            return
        deadlines = Deadlines(wl.run.timeout)  # every request's time limit, one timer
        conn = Connection(
            session=session,
            base=base,
            timeout=wl.run.timeout,
            new_sink=recorder.body_sink,
            max_output=wl.run.max_output_size,
            poll=polling.schedule_of(wl.endpoint),
            deadlines=deadlines,
        )
        for phase in ("warmup", "measured"):
            queue = [s for s in slots if s.phase == phase]
            queue.reverse()

            async def send(slot: Slot, due: int | None) -> tuple[Observation, BodySink | None]:
                counts.sending()
                # Closed loop (no due time): a request is due the moment a worker is free for it.
                at = time.monotonic_ns() if due is None else due
                return await exchange(
                    conn, endpoint, payloads[slot.request], wl.endpoint.path, utc_precise(), at
                )

            def finished(slot: Slot, observation: Observation, sink: BodySink | None) -> None:
                pending = results[slot.index] = _Pending(slot, observation, sink)
                counts.finished(observation)
                if progress is not None:
                    progress(slot.index + 1, len(slots), pending.preview(stored[slot.request]))

            async def worker(queue: list[Slot]) -> None:
                while queue:
                    slot = queue.pop()
                    finished(slot, *await send(slot, None))

            async def one(slot: Slot, due: int, cap: asyncio.Semaphore) -> None:
                async with cap:
                    observation, sink = await send(slot, due)
                finished(slot, observation, sink)

            async def open_loop(queue: list[Slot]) -> None:
                # Due times fixed before the first send (arrivals.py); each request is
                # sent at its due time, or as soon after as the concurrency cap allows.
                order = list(reversed(queue))
                rate = wl.run.request_rate
                assert rate is not None
                offsets = arrival_offsets(len(order), rate, wl.run.burstiness, wl.run.arrival_seed)
                cap = asyncio.Semaphore(wl.run.concurrency)
                start = time.monotonic_ns()
                tasks = []
                for slot, offset in zip(order, offsets, strict=True):
                    due = start + round(offset * 1e9)
                    wait = (due - time.monotonic_ns()) / 1e9
                    if wait > 0:
                        await asyncio.sleep(wait)
                    tasks.append(asyncio.ensure_future(one(slot, due, cap)))
                await asyncio.gather(*tasks)

            cpu0, wall0 = time.process_time(), time.perf_counter()
            # What exists before the requests (modules, the workload, the payloads) is
            # left out of the garbage collector's full passes while they run; young
            # objects are still collected, and everything is again after.
            gc.freeze()
            try:
                if wl.run.request_rate is not None:
                    await open_loop(queue)
                else:
                    await asyncio.gather(
                        *(worker(queue) for _ in range(min(wl.run.concurrency, len(queue)) or 1))
                    )
            finally:
                gc.unfreeze()
            if phase == "measured":
                clock["cpu"] = time.process_time() - cpu0
                clock["wall"] = time.perf_counter() - wall0
        deadlines.close()
