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
    "MAX_OUTPUT_SIZE",
    "SCHEMA_TYPES",
    "AudioSection",
    "Audit",
    "AuditFinding",
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
Failure = Literal[
    "connect",
    "timeout",
    "http-status",
    "truncated",
    "invalid-media",
    "too-large",
    "invalid-response",
]
FAILURE_CLASSES: tuple[str, ...] = (
    "connect",
    "timeout",
    "http-status",
    "truncated",
    "invalid-media",
    "too-large",
    "invalid-response",
)
Outcome = Literal["complete", "partial", "failed-before-inference"]
EndpointKind = Literal["videos-sync", "videos-job", "json"]

Count = Annotated[int, Meta(ge=0)]
# Workload values are bounded (finite, in range) so none can fail a run after it started.
Seconds = Annotated[float, Meta(gt=0, le=604_800, description="seconds, at most 7 days")]
Frames = Annotated[int, Meta(gt=0, le=10_000_000)]
FrameRate = Annotated[int, Meta(gt=0, le=10_000)]
Seed = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
Size = Annotated[str, Meta(pattern=r"^[1-9][0-9]{0,4}x[1-9][0-9]{0,4}$", description="WxH")]
FieldValue = str | int | float | bool
UrlPath = Annotated[
    str, Meta(pattern=r"^/[!-~]*$", description="an absolute URL path (printable ASCII)")
]
InputMediaType = Annotated[
    str,
    Meta(pattern=r"^[A-Za-z0-9][\w.+-]*/[\w.+-]+(;[ -~]*)?$", description="IANA media type"),
]
#: Default ``[run] max_output_size``: larger than any real generated output.
MAX_OUTPUT_SIZE = 8 << 30


# -- workload ---------------------------------------------------------------------
class Endpoint(Model, frozen=True, kw_only=True):
    """Where requests go: ``videos-sync`` (multipart POST, the body is the video),
    ``videos-job`` (POST, poll ``{path}/{id}``, then GET ``{path}/{id}/content``) or
    ``json`` (a JSON POST whose response body is the output). The job flow waits
    ``min(poll_interval, max(poll_min, poll_relative * elapsed))`` between polls
    (``runs/polling.py``): its resolution stays near ``poll_relative`` of the time."""

    kind: EndpointKind
    path: UrlPath
    health_path: UrlPath = "/health"
    models_path: UrlPath = "/v1/models"
    poll_interval: Annotated[float, Meta(gt=0, le=3600)] = 0.5
    poll_relative: Annotated[float, Meta(gt=0, le=0.5)] = 0.01
    poll_min: Annotated[float, Meta(gt=0, le=3600)] = 0.005


class RunSection(Model, frozen=True, kw_only=True):
    """Repetitions (each request of the workload is sent ``warmup`` then ``measured``
    times), the per-request timeout in seconds, concurrency, whether outputs are
    checked as media (an unchecked output can make no verdict PASS), the largest output
    body accepted (bytes; a larger one is a ``too-large`` failure, never kept), and the
    output caching audit's threshold: a repetition returning its request's first output
    that many times faster than the first is a finding."""

    warmup: Annotated[int, Meta(ge=0, le=1_000_000)] = 0
    measured: Annotated[int, Meta(gt=0, le=1_000_000)] = 1
    timeout: Seconds = 600.0
    concurrency: Annotated[int, Meta(gt=0, le=1024)] = 1
    check_media: bool = True
    max_output_size: Annotated[int, Meta(gt=0, le=1 << 40)] = MAX_OUTPUT_SIZE
    cache_ratio: Annotated[float, Meta(gt=1)] = 3.0


class AudioSection(Model, frozen=True, kw_only=True):
    """What every output's audio must be (its length comes from each request)."""

    sample_rate: Annotated[int, Meta(gt=0, le=10_000_000)]
    channels: Annotated[int, Meta(gt=0, le=1024)]
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
    media_type: InputMediaType = "application/octet-stream"
    filename: str | None = None


class RequestSpec(Model, frozen=True, kw_only=True):
    """One request: the generation fields, extra form fields and input files."""

    prompt: str | None = None
    negative_prompt: str | None = None
    size: Size | None = None
    seconds: Seconds | None = None
    num_frames: Frames | None = None
    fps: FrameRate | None = None
    seed: Seed | None = None
    num_inference_steps: Annotated[int, Meta(gt=0, le=1_000_000)] | None = None
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
    """The media check of one output against the expectations derived from its request;
    ``UNAVAILABLE`` when the check itself could not run (the output is unchecked)."""

    verdict: Literal["PASS", "FAIL", "UNAVAILABLE"]
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
    last byte, so they include some waiting for the poll that saw the job complete:
    ``resolution_s`` bounds it (from the send of the last poll that saw the job
    unfinished to the answer of the one that saw it complete; the clock's resolution for
    a request without polling): the true time is within it below ``e2e_s``.
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
    resolution_s: float | None = None
    media: MediaOutcome | None = None
    failure: Failure | None = None
    message: str | None = None
    e2e_s: float | None = None
    ttfb_s: float | None = None

    @property
    def label(self) -> str:
        """How every report names this request: ``request R PHASE #K``, the workload's
        request ``R`` (``[[request]]`` in file order, from 0) in its ``K``-th repetition
        in ``PHASE`` (from 0); ``index`` is only its place in the run's ``requests``."""
        return f"request {self.request} {self.phase} #{self.repetition}"


class AuditFinding(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One thing an audit found, with the request records (``index``) it is about."""

    message: str
    requests: tuple[Count, ...]


class Audit(Model, frozen=True, kw_only=True, omit_defaults=False):
    """An audit over a run's outputs (MLPerf TEST04-style): ``seed-ignored`` (requests
    differing only in their seed returned identical decoded content) or
    ``output-caching`` (a repeated request returned its first output far faster than
    the first time). ``examined`` says what was compared, in words; no finding and
    nothing examined are told apart."""

    name: Literal["seed-ignored", "output-caching"]
    examined: Count
    description: str
    findings: tuple[AuditFinding, ...] = ()


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
    audits: tuple[Audit, ...] = ()


SCHEMA_TYPES: dict[str, type] = {"workload": Workload, "run-record": RunRecord}
