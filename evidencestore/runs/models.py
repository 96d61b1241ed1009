"""Workload and run record structs (schema source).

A workload (``workload.toml``) says what to send; a run record (``run.json``, a repo
entry of the run's bundle) says what was sent and what came back. Run records hold
floats (latencies in seconds, derived from the integer nanosecond timestamps beside
them): they are evidence files hashed as bytes, never hashed structures themselves.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ..models import Descriptor, DigestStr, Model

__all__ = [
    "FAILURE_CLASSES",
    "SCHEMA_TYPES",
    "AudioSection",
    "ClientEnvironment",
    "Endpoint",
    "Exchange",
    "Failure",
    "InputFile",
    "MediaOutcome",
    "Outcome",
    "Phase",
    "PhaseCounts",
    "RequestRecord",
    "RequestSpec",
    "RunRecord",
    "RunSection",
    "ServerIdentity",
    "VideoSection",
    "Workload",
]

Phase = Literal["warmup", "measured"]
Failure = Literal["connect", "timeout", "http-status", "truncated", "invalid-media"]
FAILURE_CLASSES: tuple[str, ...] = (
    "connect",
    "timeout",
    "http-status",
    "truncated",
    "invalid-media",
)
Outcome = Literal["complete", "partial", "failed-before-inference"]
EndpointKind = Literal["videos-sync", "videos-job", "json"]

Count = Annotated[int, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(gt=0)]
Seconds = Annotated[float, Meta(gt=0)]
Size = Annotated[str, Meta(pattern=r"^[1-9][0-9]{0,4}x[1-9][0-9]{0,4}$", description="WxH")]
FieldValue = str | int | float | bool
UrlPath = Annotated[str, Meta(pattern=r"^/[^\s]*$", description="an absolute URL path")]


# -- workload ---------------------------------------------------------------------
class Endpoint(Model, frozen=True, kw_only=True):
    """Where requests go: ``videos-sync`` (multipart POST, the body is the video),
    ``videos-job`` (POST, poll ``{path}/{id}``, then GET ``{path}/{id}/content``) or
    ``json`` (a JSON POST whose response body is the output)."""

    kind: EndpointKind
    path: UrlPath
    health_path: UrlPath = "/health"
    models_path: UrlPath = "/v1/models"
    poll_interval: Seconds = 0.5


class RunSection(Model, frozen=True, kw_only=True):
    """Repetitions (each request of the workload is sent ``warmup`` then ``measured``
    times), the per-request timeout in seconds, concurrency, and whether outputs are
    checked as media."""

    warmup: Count = 0
    measured: PositiveInt = 1
    timeout: Seconds = 600.0
    concurrency: PositiveInt = 1
    check_media: bool = True


class AudioSection(Model, frozen=True, kw_only=True):
    """What every output's audio must be (its length comes from each request)."""

    sample_rate: PositiveInt
    channels: PositiveInt
    codec: str | None = None


class VideoSection(Model, frozen=True, kw_only=True):
    """What every output's video must be beyond the request's size and length."""

    pix_fmt: str | None = None
    codec: str | None = None


class InputFile(Model, frozen=True, kw_only=True):
    """A file sent as a multipart field: by ``path`` (relative to the workload) or by
    ``digest`` (read, verified, from the store)."""

    field: Annotated[str, Meta(min_length=1)]
    path: str | None = None
    digest: DigestStr | None = None
    media_type: str = "application/octet-stream"
    filename: str | None = None


class RequestSpec(Model, frozen=True, kw_only=True):
    """One request: the generation fields, extra form fields and input files."""

    prompt: str | None = None
    negative_prompt: str | None = None
    size: Size | None = None
    seconds: Seconds | None = None
    num_frames: PositiveInt | None = None
    fps: PositiveInt | None = None
    seed: int | None = None
    num_inference_steps: PositiveInt | None = None
    fields: dict[str, FieldValue] = msgspec.field(default_factory=dict)
    inputs: tuple[InputFile, ...] = ()


class Workload(Model, frozen=True, kw_only=True):
    """``workload.toml``: the endpoint, repetitions, audio expectations and requests."""

    endpoint: Endpoint
    request: Annotated[tuple[RequestSpec, ...], Meta(min_length=1)]
    run: RunSection = RunSection()
    audio: AudioSection | None = None
    video: VideoSection | None = None


# -- run record -------------------------------------------------------------------
class Exchange(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One HTTP exchange of the server check (``/health``, ``/v1/models``), body kept."""

    path: str
    status: int | None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: Descriptor | None = None
    error: str | None = None


class ServerIdentity(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The server as it answered the check before any request."""

    url: str
    ok: bool
    health: Exchange
    models: Exchange | None = None
    model_ids: tuple[str, ...] = ()
    server_header: str | None = None
    message: str | None = None


class ClientEnvironment(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The client side of the run (pyperf style: the environment kept with the values)."""

    evidencestore: str
    python: str
    pyav: str | None
    aiohttp: str | None
    host: str
    platform: str


class MediaOutcome(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The media check of one output against the expectations derived from its request."""

    verdict: Literal["PASS", "FAIL"]
    failed_checks: tuple[str, ...]
    report: Descriptor
    message: str | None = None


class RequestRecord(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One request: what was sent, when each byte moved, what came back, how it failed.

    ``*_ns`` are monotonic nanoseconds (``time.monotonic_ns``) of this client: ``sent_ns``
    when the runner handed the request to the HTTP client (connecting, if needed, is
    inside the measured time), ``headers_ns`` when the output's response headers were
    parsed, ``first_byte_ns`` / ``last_byte_ns`` for the output body. ``e2e_s`` is
    ``last_byte_ns - sent_ns`` of a request that delivered a valid output; ``ttfb_s`` is
    ``first_byte_ns - sent_ns``. For the job flow they span the POST to the content's
    last byte, so they include up to one poll interval of waiting.
    """

    index: Count
    phase: Phase
    request: Count
    repetition: Count
    method: str
    path: str
    payload: Descriptor
    start_utc: str
    sent_ns: int
    headers_ns: int | None = None
    first_byte_ns: int | None = None
    last_byte_ns: int | None = None
    end_ns: int
    status: int | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: Descriptor | None = None
    received: Count = 0
    declared_length: int | None = None
    job_id: str | None = None
    polls: Count = 0
    media: MediaOutcome | None = None
    failure: Failure | None = None
    message: str | None = None
    e2e_s: float | None = None
    ttfb_s: float | None = None


class PhaseCounts(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Requests of one phase and their failures by class."""

    requests: Count
    ok: Count
    failures: dict[str, int] = msgspec.field(default_factory=dict)


class RunRecord(
    Model, frozen=True, kw_only=True, omit_defaults=False, tag_field="kind", tag="evidencestore/run"
):
    """``run.json``: one execution of a workload by one arm against one server."""

    name: str
    arm: str
    campaign: str | None = None
    protocol_digest: DigestStr | None = None
    condition: str | None = None
    workload_digest: DigestStr
    workload: Descriptor
    server: ServerIdentity
    client: ClientEnvironment
    configs: dict[str, Descriptor] = msgspec.field(default_factory=dict)
    logs: dict[str, Descriptor] = msgspec.field(default_factory=dict)
    started: str
    ended: str
    outcome: Outcome
    reason: str | None = None
    counts: dict[str, PhaseCounts] = msgspec.field(default_factory=dict)
    requests: tuple[RequestRecord, ...] = ()


SCHEMA_TYPES: dict[str, type] = {"workload": Workload, "run-record": RunRecord}
