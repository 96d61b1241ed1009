"""Campaign structs (schema source): the protocol, and the records computed under it.

The protocol (``protocol.toml``) is read strictly: unknown fields are refused, so a typo
cannot silently drop a rule. Records (repeatability, adjudication, claim, status) hold
floats (latencies, ratios, distances); they are evidence files hashed as bytes and bound
to the digests they were computed from, never hashed structures themselves.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from .._canonical import canonical_defaults
from ..models import DigestStr, Model
from .percentiles import Percentile

__all__ = [
    "SCHEMA_TYPES",
    "Adjudication",
    "ArmConclusion",
    "ArmSpec",
    "ArrayComparison",
    "CellStatus",
    "Claim",
    "ClaimVerdict",
    "Conclusion",
    "ConditionSpec",
    "Evaluation",
    "Exclusion",
    "LpipsScore",
    "MissingInput",
    "OutputComparison",
    "Protocol",
    "QualityRule",
    "RecordCheck",
    "Repeatability",
    "RunValue",
    "RunVoid",
    "SigningRule",
    "Speedup",
    "StatusRecord",
    "TimingRule",
    "Withdrawal",
]

Name = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="letters, digits, '.', '_', '-'"
    ),
]
RelPath = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$",
        description="a relative POSIX path beside protocol.toml",
    ),
]
Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE", "UNAVAILABLE"]
ESTIMATOR: Literal["welch-log-t"] = "welch-log-t"


class TimingRule(Model, frozen=True, kw_only=True):
    """How speedups are estimated and what a claim must show.

    ``min_runs``: complete runs per arm (the run is the unit of replication);
    ``min_speedup``: the interval's low end must exceed it (1.0: strictly faster; a
    smaller value declares a non-inferiority claim, 0.98 = "at most 2 % slower");
    ``claim = false``: the campaign makes no timing claim (losslessness only) and its
    verdict says so; ``order = "interleaved"``: baseline and candidate runs must alternate
    (A B A B ...) and are paired in that order (estimator ``paired-log-t``).
    ``metric``: the request time claims are about: ``e2e`` (default), or for LLM serving
    ``ttft``, ``itl`` (each request's mean inter-token latency), ``tpot``, or
    ``output_throughput`` (each run's output tokens per second over its measured span;
    the speedup is candidate over baseline throughput), or ``goodput`` (each run's
    requests per second meeting its workload's ``[timing] slo``: the run is the unit;
    the speedup is candidate over baseline goodput).
    """

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    metric: Literal["e2e", "ttft", "itl", "tpot", "output_throughput", "goodput"] = "e2e"
    min_runs: Annotated[int, Meta(ge=2)] = 3
    confidence: Annotated[float, Meta(gt=0.5, lt=1)] = 0.95
    estimator: Literal["welch-log-t", "paired-log-t"] = ESTIMATOR
    min_speedup: Annotated[float, Meta(gt=0)] = 1.0
    claim: bool = True
    order: Literal["any", "interleaved"] = "any"


class QualityRule(Model, frozen=True, kw_only=True):
    """What a baseline that is not bit-exact with itself means for every candidate:
    ``inconclusive`` (no candidate can PASS) or ``fail`` (every candidate FAILs).
    ``repeatability_first = true``: a candidate run counts only when it was committed
    after enough baseline runs of its condition (the arm's ``runs``) to establish the
    baseline's repeatability (from git history). ``set_aside_after_results``: a void or
    withdrawal committed after the results it removes is named in the verdict
    (``allow``), or takes no effect (``refuse``).
    ``audio_length``: ``exact`` (default) accepts only audio lengths the container states;
    an output whose length is bounded, not verified (raw ADTS, MPEG-TS, AAC in Matroska:
    ``docs/media.md``) makes its pair UNAVAILABLE, so no lossless verdict PASSes and no
    campaign is ACCEPTED on it. ``bounded`` accepts such lengths, and every verdict that
    rests on one names its bound in samples and milliseconds. ``lpips = true``: every
    pair that is INCONCLUSIVE with unequal video is also scored with the LPIPS weights
    pinned in ``evstore.toml`` ``[lpips]`` (``docs/lpips.md``); a frame above the
    threshold (0.01) makes it FAIL."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    non_repeatable_baseline: Literal["inconclusive", "fail"] = "inconclusive"
    compare_phases: tuple[Literal["warmup", "measured"], ...] = ("warmup", "measured")
    repeatability_first: bool = False
    set_aside_after_results: Literal["allow", "refuse"] = "allow"
    audio_length: Literal["exact", "bounded"] = "exact"
    lpips: bool = False


class ConditionSpec(Model, frozen=True, kw_only=True):
    """A condition (``5s``, ``15s``): its workload file, optionally pinned by digest.

    ``harness``: the benchmark harness whose imported runs this condition takes
    (``evstore import aiperf`` / ``loadgen`` / ``vllm-bench``); its workload is then that harness's input
    file (AIPerf's ``inputs.json``), not a ``workload.toml``. Without it the condition
    takes ``evstore run``'s runs only: harnesses are never mixed within a condition.

    ``request_rate`` / ``concurrency`` make the condition a point of a sweep: its runs run
    ``workload`` with those ``[run]`` values (registered at init as ``workload_path``), so
    one workload file serves every rate or concurrency of a load curve."""

    name: Name
    workload: RelPath
    workload_digest: DigestStr | None = None
    harness: Literal["aiperf", "loadgen", "vllm-bench"] | None = None
    request_rate: Annotated[float, Meta(gt=0)] | Literal["inf"] | None = None
    concurrency: Annotated[int, Meta(gt=0, le=1024)] | None = None

    @property
    def point(self) -> dict[str, float | int | str]:
        """The ``[run]`` values this condition sets on its workload: a point of a sweep
        over request rate or concurrency (empty: the workload as it is)."""
        out: dict[str, float | int | str] = {}
        if self.request_rate is not None:
            out["request_rate"] = self.request_rate
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        return out

    @property
    def workload_path(self) -> str:
        """The path of the workload its runs run: ``workload``, or for a point of a
        sweep the derived file ``<workload without .toml>.<name>.toml`` that
        ``campaign init`` registers beside it."""
        if not self.point:
            return self.workload
        stem = self.workload[:-5] if self.workload.endswith(".toml") else self.workload
        return f"{stem}.{self.name}.toml"


class ArmSpec(Model, frozen=True, kw_only=True):
    """An arm: baseline or candidate, runs required per condition, configuration files.

    ``runs`` defaults to 1; the baseline needs at least 2 (its repeatability), and a
    speedup claim counts ``timing.min_runs`` complete runs per arm, so an arm whose
    speedup is claimed declares at least that many.
    """

    name: Name
    baseline: bool = False
    runs: Annotated[int, Meta(ge=1)] = 1
    configs: tuple[RelPath, ...] = ()


class SigningRule(Model, frozen=True, kw_only=True):
    """``keys``: runs count only when signed (``evstore run --sign KEY``) by one of these
    ed25519 public keys; ``workers``: a result computed elsewhere (``evstore campaign
    work --sign KEY``) counts without a recheck when one of these signed it. PEM files
    beside ``protocol.toml``, registered with it; at least one of the two lists."""

    keys: tuple[RelPath, ...] = ()
    workers: tuple[RelPath, ...] = ()

    def __post_init__(self) -> None:
        if not (self.keys or self.workers):
            raise ValueError("[signing] needs keys = [...] or workers = [...]")


#: Provenance a protocol can require of every run (``require = [...]``): the launched
#: server's argv, environment (names and allow-listed values) and log, and its
#: ``/metrics`` and ``/version`` answers before and after the run.
Provenance = Literal["server.argv", "server.env", "server.log", "metrics", "version"]


class Protocol(Model, frozen=True, kw_only=True):
    """``protocol.toml``: conditions, arms, timing and quality rules, the keys allowed to
    sign runs, the campaign's acceptance rule: ``accept = "every-arm"`` (every candidate
    arm not withdrawn is qualified, and at least one is) or ``"any-arm"`` (at least one
    is), and the provenance every run must carry (``require``: runs without it are
    excluded). ``retrospective = true``: the protocol is registered after (some of) its
    results, which then count; every verdict, text and report says "retrospective:
    protocol registered after these results"."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    name: Name
    description: str | None = None
    accept: Literal["every-arm", "any-arm"] = "every-arm"
    require: tuple[Provenance, ...] = ()
    timing: TimingRule = TimingRule()
    quality: QualityRule = QualityRule()
    signing: SigningRule | None = None
    retrospective: bool = False
    condition: Annotated[tuple[ConditionSpec, ...], Meta(min_length=1)]
    arm: Annotated[tuple[ArmSpec, ...], Meta(min_length=2)]


class Exclusion(Model, frozen=True, kw_only=True, omit_defaults=False):
    """A run of the campaign that contributes nothing, and why."""

    run: str
    code: str
    message: str
    condition: str | None = None
    arm: str | None = None


class ArrayComparison(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Exact comparison of one raw array (dtype, shape, bytes), with distances otherwise."""

    name: str
    equal: bool
    dtype: tuple[str, str]
    shape: tuple[tuple[int, ...], tuple[int, ...]]
    differing: int | None = None
    max_abs_diff: float | None = None
    rms_diff: float | None = None
    message: str


class OutputComparison(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One request's output in two runs: verdict, digests compared, distances;
    ``unchecked`` when it is UNAVAILABLE because an output was not checked against its
    request. LLM outputs are compared token-exactly (``campaign/tokens.py``):
    ``token_position`` is the first divergent token of a FAIL, ``logprob_max_abs_diff``
    the largest logprob difference of equal tokens."""

    key: str
    verdict: Verdict
    reference: DigestStr | None
    candidate: DigestStr | None
    reasons: tuple[str, ...]
    record: DigestStr | None = None
    audio_max_abs_diff: float | None = None
    video_min_psnr: float | None = None
    arrays: tuple[ArrayComparison, ...] = ()
    unchecked: bool = False
    token_position: int | None = None
    logprob_max_abs_diff: float | None = None
    lpips_max: float | None = None


class LpipsScore(Model, frozen=True, kw_only=True, omit_defaults=False):
    """An unequal pair scored with LPIPS (an ``output-lpips`` task, ``tasks.py``): the
    comparison's verdict with the scorer's threshold, its reasons, the largest per-frame
    score (None: nothing could be scored)."""

    verdict: Verdict
    reasons: tuple[str, ...]
    lpips_max: float | None = None


class Repeatability(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-repeatability",
):
    """Baseline run vs baseline run, per request, for one condition. ``exact`` only when
    at least one pair was compared and every pair is PASS; ``unavailable`` says why
    nothing could be compared (runs without outputs, such as LoadGen performance runs):
    a repeatability over zero comparisons is UNAVAILABLE, never exact."""

    protocol_digest: DigestStr
    condition: str
    runs: tuple[DigestStr, ...]
    run_names: tuple[str, ...]
    exact: bool
    comparisons: tuple[OutputComparison, ...]
    unavailable: str | None = None


class Adjudication(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-adjudication",
):
    """Candidate vs baseline for one condition and arm, under the protocol's rule."""

    protocol_digest: DigestStr
    condition: str
    arm: str
    verdict: Verdict
    reasons: tuple[str, ...]
    baseline_runs: tuple[DigestStr, ...]
    candidate_runs: tuple[DigestStr, ...]
    baseline_repeatable: bool
    comparisons: tuple[OutputComparison, ...]
    baseline_run_names: tuple[str, ...] = ()
    candidate_run_names: tuple[str, ...] = ()


class RunValue(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One run as the unit of replication: its measured end-to-end latencies (seconds),
    their mean and coefficient of variation, and its one value ``value``: the geometric
    mean over distinct requests of each request's geometric mean. ``started`` (UTC) gives
    the runs' order; ``resolution_s`` is the largest measurement bound of its requests.
    ``audit_findings``: the findings of the run's audits (seed ignored, possible output
    caching), carried into every claim that uses the run."""

    run: str
    digest: DigestStr
    arm: str
    values: tuple[float, ...]
    mean: float
    cv: float | None
    value: float = 0.0
    request_values: tuple[float, ...] = ()
    started: str = ""
    resolution_s: float | None = None
    audit_findings: tuple[str, ...] = ()
    client_bound: bool = False


class Speedup(Model, frozen=True, kw_only=True, omit_defaults=False):
    """baseline / candidate end-to-end latency, with its confidence interval."""

    ratio: float
    low: float
    high: float


ClaimVerdict = Literal[
    "STANDS", "NOT_CLEARED", "UNRESOLVED", "REFUSED", "NO_TIMING_CLAIM", "UNAVAILABLE"
]
Conclusion = Literal["qualified", "rejected", "withdrawn", "open"]


class Claim(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-claim",
):
    """A speedup claim, or its refusal, citing every run and value it used.

    ``verdict``: ``STANDS`` only when the interval's low end exceeds ``min_speedup`` and
    stays above it within the measurement resolution (``bounded``: the interval recomputed
    with each request's time anywhere within its bound); ``NOT_CLEARED`` when it does not;
    ``UNRESOLVED`` when the resolution could change the verdict; ``REFUSED`` when no
    interval can be computed (``reasons``); ``NO_TIMING_CLAIM`` when the protocol makes
    none. ``n_*`` count measured requests, ``runs_*`` complete runs (the interval's unit);
    ``run_spread_*`` / ``within_spread_*`` are the log-scale standard deviations between
    runs and between requests inside a run; ``order`` says whether the arms' runs
    alternated or one arm ran entirely first (drift then cannot be told from the effect).
    ``confidence`` is the family's: the campaign's ``family_size`` joint claims (its
    candidate arms under ``any-arm``, its conditions under ``every-arm``) cover together
    at it, each interval at ``interval_confidence`` (``correction``: ``bonferroni`` when
    there is more than one).
    """

    protocol_digest: DigestStr
    condition: str
    arm: str
    baseline_arm: str
    refused: bool
    reasons: tuple[str, ...]
    estimator: str = ESTIMATOR
    confidence: float
    speedup: Speedup | None = None
    n_baseline: int = 0
    n_candidate: int = 0
    df: float | None = None
    cv_baseline: float | None = None
    cv_candidate: float | None = None
    runs: tuple[RunValue, ...] = ()
    failed_runs: tuple[str, ...] = ()
    config_diff: tuple[dict[str, Any], ...] = ()
    excluded: tuple[Exclusion, ...] = ()
    verdict: ClaimVerdict = "REFUSED"
    stands: bool = False
    min_speedup: float | None = None
    clears: bool | None = None
    runs_baseline: int = 0
    runs_candidate: int = 0
    run_spread_baseline: float | None = None
    run_spread_candidate: float | None = None
    within_spread_baseline: float | None = None
    within_spread_candidate: float | None = None
    bounded: Speedup | None = None
    resolution_s: float | None = None
    order: Literal["alternating", "baseline-first", "candidate-first", "mixed"] | None = None
    pairs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    metric: str = "e2e"
    percentiles: tuple[Percentile, ...] = ()
    client_bound_runs: tuple[str, ...] = ()
    harness: str = "evidencestore"
    metric_definition: str | None = None
    correction: Literal["none", "bonferroni"] = "none"
    family_size: int = 1
    interval_confidence: float | None = None


class CellStatus(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One condition and arm: runs required / done / failed, verdicts, speedup, and the
    candidate's claim verdict (``Claim.verdict``)."""

    condition: str
    arm: str
    baseline: bool
    runs_required: int
    runs_done: int
    runs_failed: int
    failed_runs: tuple[str, ...]
    repeatability: Literal["exact", "not-exact", "unavailable"] | None
    lossless: Verdict | None
    speedup: Speedup | None
    qualified: bool
    claim: ClaimVerdict | None = None
    conclusion: Conclusion | None = None
    reasons: tuple[str, ...] = ()


class ArmConclusion(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One arm over every condition: ``qualified`` (every cell is), ``rejected`` (a cell
    has a definite FAIL, an output that is not exactly equal, or a speedup that does not
    clear the threshold with its required runs done), ``withdrawn`` (a committed
    withdrawal record) or ``open`` (``reasons``: what remains)."""

    arm: str
    baseline: bool
    conclusion: Conclusion
    reasons: tuple[str, ...] = ()


class MissingInput(Model, frozen=True, kw_only=True, omit_defaults=False):
    """An input the verdict reads that neither the local store nor a configured remote
    could give: its digest and what needed it."""

    digest: DigestStr
    needed_by: str


class StatusRecord(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-status",
):
    """``evstore campaign status``: the matrix, the overall verdict, what remains.
    ``qualifier`` is part of the verdict line: set-asides committed after the results
    they remove (``with 4 arms withdrawn after their results``), each in
    ``set_aside_after_results``; a withdrawn arm's cells keep their verdicts.
    ``never_started``: runs that reached no server (nothing was sent), which count
    against no arm."""

    campaign: str
    protocol_digest: DigestStr
    verdict: Literal["ACCEPTED", "NOT_ACCEPTED", "UNAVAILABLE"]
    remaining: tuple[str, ...]
    cells: tuple[CellStatus, ...]
    excluded: tuple[Exclusion, ...] = ()
    notes: tuple[str, ...] = ()
    accept: Literal["every-arm", "any-arm"] = "every-arm"
    arms: tuple[ArmConclusion, ...] = ()
    missing: tuple[MissingInput, ...] = ()
    voided: tuple[Exclusion, ...] = ()
    withdrawn: tuple[Exclusion, ...] = ()
    records: tuple[RecordCheck, ...] = ()
    set_aside_after_results: tuple[Exclusion, ...] = ()
    qualifier: str | None = None
    never_started: tuple[Exclusion, ...] = ()


class RecordCheck(Model, frozen=True, kw_only=True, omit_defaults=False):
    """A registered campaign record (status, claim, ...) held against the recomputation:
    history, never authoritative. ``agrees`` is None when it was computed from other
    inputs (another history, protocol state or tool version: its ``evaluation`` key
    differs), else whether it equals what its inputs give now; a False is the finding
    ``record-mismatch``."""

    bundle: str
    entry: str
    says: str
    agrees: bool | None
    message: str


class RunVoid(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-void",
):
    """A committed record setting one mistaken run aside: the run, its bundle digest
    (the void applies to exactly that registration) and why."""

    campaign: str
    protocol_digest: DigestStr
    run: str
    run_digest: DigestStr
    reason: Annotated[str, Meta(min_length=1)]


class Withdrawal(
    Model,
    frozen=True,
    kw_only=True,
    omit_defaults=False,
    tag_field="kind",
    tag="evidencestore/campaign-withdrawal",
):
    """A committed record withdrawing a candidate arm from the campaign, and why."""

    campaign: str
    protocol_digest: DigestStr
    arm: str
    reason: Annotated[str, Meta(min_length=1)]


class Evaluation(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The computations a status is concluded from (kept by the digests of their inputs,
    ``memo.py``): never the status itself, which is always concluded from these."""

    repeatability: dict[str, Repeatability] = msgspec.field(default_factory=dict)
    adjudications: dict[str, Adjudication] = msgspec.field(default_factory=dict)
    claims: dict[str, Claim] = msgspec.field(default_factory=dict)


SCHEMA_TYPES: dict[str, type] = {
    "campaign-protocol": Protocol,
    "campaign-repeatability": Repeatability,
    "campaign-adjudication": Adjudication,
    "campaign-claim": Claim,
    "campaign-status": StatusRecord,
    "campaign-void": RunVoid,
    "campaign-withdrawal": Withdrawal,
}
