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

from .._canonical import canonical_defaults
from ..models import Descriptor, DigestStr, Model

__all__ = [
    "FAILURE_CLASSES",
    "HARNESSES",
    "MAX_OUTPUT_SIZE",
    "SCHEMA_TYPES",
    "AudioSection",
    "Audit",
    "AuditFinding",
    "ClientEnvironment",
    "ClientLoad",
    "Endpoint",
    "EventTimes",
    "Exchange",
    "Failure",
    "Harness",
    "HarnessRule",
    "InputFile",
    "LaunchedServer",
    "LoadGenResult",
    "MediaOutcome",
    "Message",
    "Outcome",
    "OutputSize",
    "Phase",
    "PhaseCounts",
    "PromptSet",
    "RequestRecord",
    "RequestSpec",
    "RunRecord",
    "RunSection",
    "ServerIdentity",
    "ServerSection",
    "Unreached",
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
    "stream-error",
    "incomplete",
]
FAILURE_CLASSES: tuple[str, ...] = (
    "connect",
    "timeout",
    "http-status",
    "truncated",
    "invalid-media",
    "too-large",
    "invalid-response",
    "stream-error",
    "incomplete",
)
Outcome = Literal["complete", "partial", "failed-before-inference", "invalid", "never-started"]
#: Why no server was reached at all (nothing was sent): the connection was refused, the
#: host name did not resolve, or no route led to the host.
Unreached = Literal["refused", "unresolved", "unreachable"]
EndpointKind = Literal["videos-sync", "videos-job", "json", "chat", "completions"]

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
#: A ``[run] max_output_size`` value (bytes).
OutputSize = Annotated[int, Meta(gt=0, le=1 << 40)]


# -- workload ---------------------------------------------------------------------
class Endpoint(Model, frozen=True, kw_only=True):
    """Where requests go: ``videos-sync`` (multipart POST, the body is the video),
    ``videos-job`` (POST, poll ``{path}/{id}``, then GET ``{path}/{id}/content``) or
    ``json`` (a JSON POST whose response body is the output). The job flow waits
    ``min(poll_interval, max(poll_min, poll_relative * elapsed))`` between polls
    (``runs/polling.py``): its resolution stays near ``poll_relative`` of the time.

    ``chat`` and ``completions`` are OpenAI's ``/v1/chat/completions`` and
    ``/v1/completions``: ``model`` is sent with every request, ``stream`` asks for
    server-sent events (with ``stream_options.include_usage`` when ``include_usage``, and
    usage in every chunk, vLLM's ``continuous_usage_stats``, when ``continuous_usage``);
    ``token_ids`` asks the server for each output token's id so verdicts name token
    positions: ``"return_token_ids"`` (vLLM's ``return_token_ids``), ``"logprobs"``
    (logprobs with ``return_tokens_as_token_ids``), ``"none"`` (the default: texts, and
    verdicts say they fell back to characters). ``tokenizer`` counts output tokens when
    the server gives neither ids nor usage (``runs/tokenizer.py``)."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    kind: EndpointKind
    path: UrlPath
    model: str | None = None
    stream: bool = True
    include_usage: bool = True
    continuous_usage: bool = False
    token_ids: Literal["none", "return_token_ids", "logprobs"] = "none"
    tokenizer: TokenizerRef | None = None
    health_path: UrlPath = "/health"
    models_path: UrlPath = "/v1/models"
    poll_interval: Annotated[float, Meta(gt=0, le=3600)] = 0.5
    poll_relative: Annotated[float, Meta(gt=0, le=0.5)] = 0.01
    poll_min: Annotated[float, Meta(gt=0, le=3600)] = 0.005


class TokenizerRef(Model, frozen=True, kw_only=True):
    """A ``tokenizer.json`` pinned by ``digest``, read from ``path`` (relative to the
    workload) or, without one, from the store (``runs/tokenizer.py``)."""

    digest: DigestStr
    path: str | None = None


class RunSection(Model, frozen=True, kw_only=True):
    """Repetitions (each request of the workload is sent ``warmup`` then ``measured``
    times), the per-request timeout in seconds, concurrency, whether outputs are
    checked as media (an unchecked output can make no verdict PASS), the largest output
    body accepted (bytes; a larger one is a ``too-large`` failure, never kept), and the
    output caching audit's threshold: a repetition returning its request's first output
    that many times faster than the first is a finding. ``max_send_lag``: a run whose
    median send lag (actual minus intended send time) exceeds it, in seconds, is
    flagged client-bound.

    Open-loop load (``request_rate``, requests per second, or ``"inf"``: all at once):
    requests are due on a schedule fixed before the run, whatever the server does; the
    gaps are gamma-distributed with shape ``burstiness`` (1: a Poisson process; below 1
    burstier, above 1 more regular) and mean ``1 / request_rate``, drawn from
    ``arrival_seed`` (``vllm bench serve --request-rate --burstiness --seed``).
    ``concurrency`` still caps the requests in flight (vLLM's ``--max-concurrency``): a
    request due while the cap is reached waits, and its send lag says so. Without
    ``request_rate`` the loop is closed: a request is due when a worker is free."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    warmup: Annotated[int, Meta(ge=0, le=1_000_000)] = 0
    measured: Annotated[int, Meta(gt=0, le=1_000_000)] = 1
    timeout: Seconds = 600.0
    concurrency: Annotated[int, Meta(gt=0, le=1024)] = 1
    check_media: bool = True
    max_output_size: OutputSize = MAX_OUTPUT_SIZE
    cache_ratio: Annotated[float, Meta(gt=1)] = 3.0
    max_send_lag: Annotated[float, Meta(gt=0, le=60)] = 0.001
    request_rate: Annotated[float, Meta(gt=0)] | Literal["inf"] | None = None
    burstiness: Annotated[float, Meta(gt=0, le=1000)] = 1.0
    arrival_seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] = 0


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

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    field: Annotated[str, Meta(min_length=1)]
    path: str | None = None
    digest: DigestStr | None = None
    media_type: InputMediaType = "application/octet-stream"
    filename: str | None = None


class Message(Model, frozen=True, kw_only=True):
    """One chat message."""

    role: Annotated[str, Meta(min_length=1, max_length=64)]
    content: str


class RequestSpec(Model, frozen=True, kw_only=True):
    """One request: the generation fields, extra form fields and input files.

    For ``chat`` / ``completions``: ``prompt`` (or ``messages`` for chat), ``max_tokens``,
    ``seed``, ``temperature``, ``logprobs`` (and ``top_logprobs``), ``ignore_eos``; extra
    ``fields`` are passed through as top-level JSON members."""

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
    messages: tuple[Message, ...] | None = None
    max_tokens: Annotated[int, Meta(gt=0, le=10_000_000)] | None = None
    temperature: Annotated[float, Meta(ge=0, le=100)] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=100)] | None = None
    ignore_eos: bool | None = None


EnvName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


class ServerSection(Model, frozen=True, kw_only=True):
    """``[server]``: the server ``evstore run`` starts itself (or ``--launch``):
    ``command`` (argv, no shell), ``cwd`` (relative to the workload's directory),
    ``env`` (the names whose values are recorded: an allow-list; every other variable is
    recorded by name only, never its value), how long it may take to answer the health
    check (``ready_timeout``), and the paths of its Prometheus ``/metrics`` and
    ``/version``, captured before and after the run when it offers them."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    command: Annotated[tuple[str, ...], Meta(min_length=1)] | None = None
    cwd: str | None = None
    env: tuple[EnvName, ...] = ()
    ready_timeout: Annotated[float, Meta(gt=0, le=86_400)] = 600.0
    metrics_path: UrlPath = "/metrics"
    version_path: UrlPath = "/version"


class PromptSet(Model, frozen=True, kw_only=True):
    """More requests for ``chat`` / ``completions``, after the inline ones: prompts from a
    JSONL file by ``path`` (relative to the workload) or ``digest`` (from the store), one
    object per line with ``prompt`` or ``messages`` (and optionally ``max_tokens``), the
    first ``count`` of them; or, without a file, ``count`` synthetic prompts of
    ``input_tokens`` words (up to ``input_tokens_max``, sampled). Output lengths are
    ``max_tokens`` (up to ``max_tokens_max``, sampled). Every sample is drawn from
    ``seed``, so the requests are a pure function of the workload; ``request_seed`` is
    the ``seed`` each request sends."""

    path: str | None = None
    digest: DigestStr | None = None
    count: Annotated[int, Meta(gt=0, le=1_000_000)] | None = None
    input_tokens: Annotated[int, Meta(gt=0, le=1_000_000)] | None = None
    input_tokens_max: Annotated[int, Meta(gt=0, le=1_000_000)] | None = None
    max_tokens: Annotated[int, Meta(gt=0, le=10_000_000)] | None = None
    max_tokens_max: Annotated[int, Meta(gt=0, le=10_000_000)] | None = None
    seed: Seed = 0
    request_seed: Seed | None = None
    temperature: Annotated[float, Meta(ge=0, le=100)] | None = None
    logprobs: bool | None = None
    ignore_eos: bool | None = None


class Slo(Model, frozen=True, kw_only=True):
    """Service-level objectives of one request, in seconds: ``ttft`` (``ttft_s``),
    ``tpot`` (per output token: ``itl_s``, vLLM's TPOT, AIPerf's ITL) and ``e2e``
    (``e2e_s``); a request meets the SLO when it succeeded and is within every one given."""

    ttft: Annotated[float, Meta(gt=0)] | None = None
    tpot: Annotated[float, Meta(gt=0)] | None = None
    e2e: Annotated[float, Meta(gt=0)] | None = None


class TimingSection(Model, frozen=True, kw_only=True):
    """``[timing]`` of a workload: ``slo`` makes the run's goodput (measured requests per
    second meeting every objective) part of its record, and a metric claims can use."""

    slo: Slo | None = None


class Workload(Model, frozen=True, kw_only=True):
    """``workload.toml``: the endpoint, repetitions, audio expectations and requests
    (inline ``[[request]]`` and, for LLM endpoints, ``[prompts]``)."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    endpoint: Endpoint
    request: tuple[RequestSpec, ...] = ()
    prompts: PromptSet | None = None
    run: RunSection = RunSection()
    audio: AudioSection | None = None
    video: VideoSection | None = None
    server: ServerSection | None = None
    timing: TimingSection | None = None


# -- run record -------------------------------------------------------------------
class Exchange(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One HTTP exchange of the server check (``/health``, ``/v1/models``), body kept.
    ``unreached`` says why no server was reached at all (``refused``, ``unresolved``,
    ``unreachable``): no connection was made, nothing was sent; ``error`` holds the
    client's own words."""

    path: str
    status: int | None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: Descriptor | None = None
    error: str | None = None
    unreached: Unreached | None = None


class ServerIdentity(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The server as it answered the check before any request."""

    url: str
    ok: bool
    health: Exchange
    models: Exchange | None = None
    model_ids: tuple[str, ...] = ()
    server_header: str | None = None
    message: str | None = None


class LaunchedServer(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The server this run started itself (``--launch`` / ``[server] command``): its
    argv and working directory, the names of every environment variable it was given
    and the values of the allow-listed ones only (``env_values``), its stdout and stderr
    (``log``, also the run's ``logs/server.log`` entry), seconds from start to its first
    healthy answer (``ready_s``; None when it never got ready), its exit status
    (negative: the signal that ended it) and whether this run stopped it, and its
    ``/metrics`` and ``/version`` answers before and after the run (None when it was not
    asked: it never got ready)."""

    argv: tuple[str, ...]
    cwd: str
    env_names: tuple[str, ...]
    env_values: dict[str, str]
    log: Descriptor | None
    ready_s: float | None
    exit_status: int | None
    stopped_by_run: bool
    message: str | None = None
    metrics_before: Exchange | None = None
    metrics_after: Exchange | None = None
    version_before: Exchange | None = None
    version_after: Exchange | None = None


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
    ``UNAVAILABLE`` when the check itself could not run (the output is unchecked);
    ``INCONCLUSIVE`` when every check holds but an audio length is bounded, not verified
    (``message`` names the bound: a campaign accepts it only when its protocol says
    ``[quality] audio_length = "bounded"``)."""

    verdict: Literal["PASS", "FAIL", "UNAVAILABLE", "INCONCLUSIVE"]
    failed_checks: tuple[str, ...]
    report: Descriptor
    message: str | None = None


class EventTimes(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Every server-sent event of a streamed output, compactly: ``offsets_us[i]`` is event
    ``i``'s arrival in microseconds after ``sent_ns`` (taken at the socket, when the chunk
    completing it was read, before any parsing), ``tokens[i]`` the output tokens it
    carried (0 for a role-only, usage-only or ``[DONE]`` event; 1 marks a token-carrying
    event whose count the server did not give, when only a final usage total or a
    tokenizer counted the output: ``output_tokens`` holds the total). Per-token times follow:
    the first content event's tokens at its arrival, each later event's ``k`` tokens
    spread evenly over the gap since the previous content event."""

    offsets_us: tuple[int, ...]
    tokens: tuple[Count, ...]


class RequestRecord(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One request: what was sent, when each byte moved, what came back, how it failed.

    ``*_ns`` are monotonic nanoseconds (``time.monotonic_ns``) of this client: ``sent_ns``
    when the runner handed the request to the HTTP client (connecting, if needed, is
    inside the measured time), ``headers_ns`` when the output's response headers were
    parsed, ``first_byte_ns`` / ``last_byte_ns`` for the output body. ``e2e_s`` is
    ``last_byte_ns - intended_ns`` (``- sent_ns`` in records without ``intended_ns``) of a
    request that delivered a valid output; ``ttfb_s`` is
    ``first_byte_ns - sent_ns``. For the job flow they span the POST to the content's
    last byte, so they include some waiting for the poll that saw the job complete:
    ``resolution_s`` bounds it (from the send of the last poll that saw the job
    unfinished to the answer of the one that saw it complete; the clock's resolution for
    a request without polling): the true time is within it below ``e2e_s``.

    ``intended_ns`` is when the request was due (the moment a worker took it from the
    schedule); ``send_lag_s = (sent_ns - intended_ns)`` is client-side queueing, and
    ``e2e_s`` is measured from ``intended_ns`` when it is recorded, so it includes it.

    Streamed LLM outputs (``chat``, ``completions``) add ``events`` (every SSE event's
    arrival and token count: the event-gap list, vLLM's ITL list, comes from it), and
    from them: ``ttft_s``, from ``intended_ns`` to the first event carrying a token of
    any channel (a role-only first chunk does not count; AIPerf's TTFT, vLLM's TTFT),
    ``ttft_visible_s`` to the first ``content`` token (differs for reasoning models);
    ``itl_s``, the per-token inter-token latency ``(e2e_s - ttft_s) / (output_tokens -
    1)`` (AIPerf's ITL, vLLM's TPOT); ``tpot_s``, the time from the first to the last
    token-carrying event over ``output_tokens - 1``; and ``output_tokens`` with its
    source ``output_tokens_from`` (``runs/streams.py``: token ids, logprob entries,
    continuous or final usage; None, and no per-token metric, when the server gave none
    of them: never the number of events). An output that was not streamed has no TTFT,
    ITL or TPOT. ``completion`` is the decoded output (text per channel, token ids,
    logprobs, finish reason) stored by digest beside the raw event stream (``body``).
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
    intended_ns: int | None = None
    send_lag_s: float | None = None
    events: EventTimes | None = None
    error_type: str | None = None
    worker: str | None = None
    completion: Descriptor | None = None
    finish_reason: str | None = None
    ttft_s: float | None = None
    itl_s: float | None = None
    tpot_s: float | None = None
    output_tokens: Count | None = None
    output_tokens_from: (
        Literal["token_ids", "logprobs", "continuous-usage", "usage", "tokenizer", "events"] | None
    ) = None
    ttft_visible_s: float | None = None

    @property
    def label(self) -> str:
        """How every report names this request: ``request R PHASE #K``, the workload's
        request ``R`` (``[[request]]`` in file order, from 0) in its ``K``-th repetition
        in ``PHASE`` (from 0); ``index`` is only its place in the run's ``requests``."""
        return f"request {self.request} {self.phase} #{self.repetition}"


class ClientLoad(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The client's own load while the requests ran: process CPU seconds over wall
    seconds, the send lag's median and largest value, and whether the run is
    ``client_bound`` (median send lag above ``[run] max_send_lag``, or the client's CPU
    saturated: at least 0.9 of one core), with why. For an open-loop run the send lag is
    the schedule's slip: ``request_rate`` is the rate asked for (None: closed loop or
    ``inf``), ``achieved_rate`` the measured requests over the span of their actual
    sends, ``send_lag_p99_s`` the slip's 99th percentile."""

    cpu_s: float
    wall_s: float
    cpu_fraction: float
    send_lag_median_s: float | None
    send_lag_max_s: float | None
    max_send_lag_s: float
    client_bound: bool
    reasons: tuple[str, ...] = ()
    request_rate: float | None = None
    achieved_rate: float | None = None
    send_lag_p99_s: float | None = None


class Goodput(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The run's goodput under its workload's SLO (``runs/goodput.py``): how many
    measured requests met every objective, of how many, over the measured span (first
    intended send to last byte), and their rate per second (vLLM's ``--goodput``,
    AIPerf's ``--goodput``); ``missed`` counts, per objective, the requests beyond it."""

    slo: Slo
    good: Count
    measured: Count
    span_s: float
    rate: float
    missed: dict[str, int] = msgspec.field(default_factory=dict)


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


#: Harnesses whose results ``evstore import`` reads (``runs/harnesses/``).
HARNESSES: tuple[str, ...] = ("aiperf", "loadgen", "vllm-bench")


class HarnessRule(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One rule a harness checked and reported (LoadGen: ``min_duration``, ...)."""

    name: str
    met: bool


class LoadGenResult(Model, frozen=True, kw_only=True, omit_defaults=False):
    """What an MLPerf LoadGen log reports (``mlperf_log_detail.txt``'s ``:::MLLOG``
    lines): scenario, mode, the VALID/INVALID result with every rule it checked, the
    latency percentiles in ns (``"50.00"`` -> ns), early stopping, the counts and rates
    it reports (``result_*``), and every effective setting."""

    scenario: str
    mode: str
    validity: str | None
    invalid_reason: str | None = None
    rules: tuple[HarnessRule, ...] = ()
    percentiles_ns: dict[str, int] = msgspec.field(default_factory=dict)
    early_stopping: str | None = None
    early_stopping_met: bool | None = None
    results: dict[str, FieldValue] = msgspec.field(default_factory=dict)
    settings: dict[str, FieldValue] = msgspec.field(default_factory=dict)
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    accuracy_entries: Count | None = None


class Harness(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The harness that produced an imported run: its name and version, the command
    that ran it (as the harness recorded it), how it defines each metric the run record
    carries (``metrics``: field -> definition, in the harness's own terms), what it did
    not record (``not_recorded``: what a native run has and this one lacks), the source
    file each imported value was read from (``sources``), and ``source_digest``, the
    digest of the imported files (path and digest of each, canonical): one directory
    imports once. ``execution`` identifies the harness's execution itself (LoadGen: its
    detail log and trace; AIPerf: its per-request records), so one execution counts once
    however its side files differ. ``passes``: the requests of each profile pass of one
    execution, in ``requests`` order (AIPerf ``--num-profile-runs``: one server process,
    one warmup, one seed, so one run); ``concurrency``: the harness's client concurrency
    as it recorded it."""

    name: Literal["aiperf", "loadgen", "vllm-bench"]
    version: str | None
    command: str | None = None
    metrics: dict[str, str] = msgspec.field(default_factory=dict)
    not_recorded: tuple[str, ...] = ()
    sources: dict[str, str] = msgspec.field(default_factory=dict)
    source_digest: DigestStr
    execution: DigestStr | None = None
    profile_run: Count | None = None
    passes: tuple[Count, ...] = ()
    concurrency: Count | None = None
    loadgen: LoadGenResult | None = None


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
    load: ClientLoad | None = None
    harness: Harness | None = None
    goodput: Goodput | None = None
    launched: LaunchedServer | None = None


SCHEMA_TYPES: dict[str, type] = {"workload": Workload, "run-record": RunRecord}
