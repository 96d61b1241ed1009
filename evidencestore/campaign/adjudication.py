"""Repeatability (baseline vs baseline) and lossless adjudication (candidate vs baseline).

Outputs are paired by what was asked, never by position: the request's payload
(digest), phase and repetition (``_pairs``), so different warmup counts, request orders
or concurrencies pair the same requests. Each pair
is judged with the media comparison (``evidencestore.media``): both outputs checked
against the expectations derived from their request, then exact equality of decoded
frames and samples. Byte-identical outputs that the run already found valid are equal
without decoding again (equal bytes decode to equal content). Raw arrays kept beside an
output (``requests/<index>/arrays/<file>``) are compared exactly as well
(``arrays.py``): equal is PASS, a different dtype or shape UNAVAILABLE, different values
INCONCLUSIVE. A pair's verdict is the worst of its parts (FAIL, UNAVAILABLE,
INCONCLUSIVE, PASS), and so is a run's. LLM outputs (a stored completion beside the event
stream) are compared token-exactly instead (``tokens.py``): PASS for equal tokens and
logprobs, INCONCLUSIVE for equal tokens with different logprobs, FAIL at the first
divergent token; the completion was checked against its request when the stream was
read back.

Unchecked is never valid: an output the run did not check against its request (``[run]
check_media = false``, a record without a media outcome, a check that could not run)
makes its pair UNAVAILABLE with the reason, never PASS, even when both outputs are
byte-identical (two equally truncated outputs are identical too). An invalid output
still makes the pair FAIL. A baseline whose repeatability rests on unchecked outputs is
not repeatable-exact, and a candidate judged against it stays UNAVAILABLE whatever the
protocol's non-repeatable-baseline rule says: what was not checked was not compared. So
is an output whose audio length its container cannot state (its media check INCONCLUSIVE:
raw ADTS, MPEG-TS, AAC in Matroska), unless the protocol accepts bounded lengths
(``[quality] audio_length = "bounded"``); then every verdict resting on one names the
bound in samples and milliseconds.

Each pair is judged once (``Judge``): its result is kept by the digests of its inputs
(``memo.py``), and within one evaluation each distinct output is decoded at most once
(``decoded.py``: its analysis and frames serve every pair it is part of, metrics included).
An output neither the local store nor a configured remote holds makes its pair
UNAVAILABLE and is listed as missing (``evstore pull``), never kept.

Nothing compared is never PASS: a repeatability or an adjudication over zero output
pairs (runs that kept no outputs, such as LoadGen performance runs, or runs with no
request in common) is UNAVAILABLE with that reason, whatever kind of run it is.

The baseline is repeatable-exact when at least one pair of its runs was compared and
every pair is PASS. A candidate is
PASS only when every output pair is PASS under a repeatable-exact baseline; under a
non-repeatable baseline the protocol's declared rule applies (``inconclusive`` or
``fail``), decided before any result, never PASS: with ``inconclusive``, a candidate
difference at a request where the baseline disagrees with itself is INCONCLUSIVE, one
where the baseline is repeatable still FAILs. A verdict's first reason is one that
produces it (a FAIL leads with a failing pair, never an INCONCLUSIVE one). Unequal outputs within perceptual
thresholds stay INCONCLUSIVE: no threshold is a no-degradation certificate.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .._canonical import canonical
from ..config import Repository, as_repository
from ..digest import hash_bytes
from ..errors import EvidenceStoreError
from ..inventory import EVIDENCE_DIR
from ..media.records import Expectations
from ..models import Descriptor
from ..runs.models import RequestRecord, Workload
from ..runs.workload import expectations_for, load_workload
from ..storage import BlobStore
from .arrays import ARRAY_SUFFIXES, compare_array_files
from .decoded import DecodedOutputs
from .members import Member
from .memo import Memo, memo_key
from .models import (
    Adjudication,
    ArrayComparison,
    LpipsScore,
    OutputComparison,
    Repeatability,
    Verdict,
)
from .protocol import Campaign
from .tokens import compare_completions, load_completion

#: What every verdict, text and report of a retrospective campaign says.
RETROSPECTIVE = "retrospective: protocol registered after these results"

__all__ = [
    "RETROSPECTIVE",
    "Judge",
    "PairInputs",
    "adjudicate",
    "compare_runs",
    "lpips_scorer",
    "nothing_compared",
    "repeatability",
    "worst",
]

#: LPIPS scorers loaded in this process, by the digests of their weights.
_SCORERS: dict[tuple[str, str, str | None], Any] = {}


def lpips_scorer(repo: Repository) -> Any:
    """The LPIPS scorer pinned in ``repo``'s ``evstore.toml`` ``[lpips]``, loaded once per
    process (kept by the digests of its weights; a process forked afterwards inherits
    it); raises :class:`EvidenceStoreError` when it cannot be had."""
    pinned = repo.config.lpips
    weights = (
        None
        if pinned is None or pinned.backbone is None or pinned.linear is None
        else (pinned.backbone.digest, pinned.linear.digest, pinned.state_digest)
    )
    scorer = _SCORERS.get(weights) if weights else None
    if scorer is None:
        try:
            from ..perceptual import load_configured_scorer
        except ImportError as exc:
            raise EvidenceStoreError(
                "LPIPS is not available in this installation (evidencestore[lpips])"
            ) from exc
        scorer = load_configured_scorer(repo)
        if weights:  # loaded once per process: the same weights, by digest
            _SCORERS[weights] = scorer
    return scorer


_BOUNDED = "length bounded, not verified"  # in every reason naming a bound (LengthBound)
_ORDER: dict[str, int] = {"PASS": 0, "INCONCLUSIVE": 1, "UNAVAILABLE": 2, "FAIL": 3}


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The worst verdict (FAIL > UNAVAILABLE > INCONCLUSIVE > PASS); PASS for none."""
    return max(verdicts, key=lambda v: _ORDER[v], default="PASS")


@dataclass(frozen=True)
class _Output:
    body: Descriptor | None
    valid: bool
    problem: str | None
    request: int
    arrays: dict[str, Descriptor]
    unchecked: str | None = None  # why the output was not checked against its request
    completion: Descriptor | None = None  # an LLM output's decoded tokens
    bound: str | None = None  # its audio length bounded, not verified: the bound in words


def _unchecked(r: RequestRecord, audio_length: str = "exact") -> str | None:
    """Why a delivered output was not checked against its request, or None; a length
    bounded, not verified, counts as unchecked unless the protocol accepts it."""
    if r.completion is not None:
        return None  # read back and checked against its request (runs/streams.py)
    if r.media is None:
        return (
            "not checked against its request (no media outcome in the run record: "
            "[run] check_media = false, or a harness recorded it without expectations)"
        )
    if r.media.verdict == "UNAVAILABLE":
        return f"its media check could not run: {r.media.message or 'no reason recorded'}"
    if r.media.verdict == "INCONCLUSIVE" and audio_length != "bounded":
        return (
            f"{r.media.message}; the protocol accepts only lengths the container states "
            '([quality] audio_length = "bounded" accepts bounded ones)'
        )
    return None


@dataclass(frozen=True)
class _Sent:
    """One output as pairing sees it: what was asked (phase, payload digest, and the
    how-manieth send of that payload in the phase), and how reports name it."""

    phase: str
    payload: str
    repetition: int
    label: str
    output: _Output


def _outputs(member: Member, phases: Sequence[str], audio_length: str = "exact") -> list[_Sent]:
    entries = {e.path: e.descriptor for e in member.registration.manifest.entries}
    out: list[_Sent] = []
    sends: dict[tuple[str, str], int] = {}
    for r in sorted(member.record.requests, key=lambda r: r.index):
        if r.phase not in phases:
            continue
        prefix = f"requests/{r.index:05d}/arrays/"
        arrays = {
            p[len(prefix) :]: d
            for p, d in entries.items()
            if p.startswith(prefix) and p.endswith(ARRAY_SUFFIXES)
        }
        unchecked = _unchecked(r, audio_length) if r.body is not None else None
        bounded = r.media is not None and r.media.verdict == "INCONCLUSIVE"
        bound = r.media.message if bounded and r.media is not None else None
        valid = r.failure is None or (r.media is not None and r.media.verdict == "UNAVAILABLE")
        problem = None if valid else f"{r.failure}: {r.message or 'failed'}"
        output = _Output(r.body, valid, problem, r.request, arrays, unchecked, r.completion, bound)
        k = sends.get((r.phase, r.payload.digest), 0)
        sends[(r.phase, r.payload.digest)] = k + 1
        out.append(_Sent(r.phase, r.payload.digest, k, r.label, output))
    return out


def _pairs(a: list[_Sent], b: list[_Sent]) -> list[tuple[str, _Output | None, _Output | None]]:
    """Outputs of two runs paired by what was asked, never by position: the same
    payload (digest) in the same phase and repetition; an output whose repetition the
    other run did not make (another warmup count, another request count) is paired with
    the other run's first output of that payload (same phase first), and one whose
    payload the other run never sent stands alone (``run ... has no such request``).
    Request order, concurrency and warmup counts therefore change no pair."""
    exact_a = {(x.phase, x.payload, x.repetition): x for x in a}
    exact_b = {(x.phase, x.payload, x.repetition): x for x in b}

    def first(of: list[_Sent], sent: _Sent) -> _Sent | None:
        same = [x for x in of if x.payload == sent.payload]
        return min(same, key=lambda x: (x.phase != sent.phase, x.repetition), default=None)

    out: list[tuple[str, _Output | None, _Output | None]] = []
    for key, x in exact_a.items():
        y = exact_b.get(key)
        other = y if y is not None else first(b, x)
        out.append((x.label, x.output, other.output if other else None))
    for key, y in exact_b.items():
        if key in exact_a:
            continue
        other = first(a, y)
        out.append((y.label, other.output if other else None, y.output))
    return sorted(out, key=lambda t: t[0])


def _array_verdict(c: ArrayComparison) -> Verdict:
    if c.equal:
        return "PASS"
    return "INCONCLUSIVE" if c.differing is not None else "UNAVAILABLE"


class PairInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What judging one pair of unequal-or-equal media outputs reads (an ``output-pair``
    task, ``tasks.py``): both outputs and raw arrays by descriptor, the request's
    expectations, the protocol's audio-length policy, and the names reasons use."""

    label: str
    names: tuple[str, str]
    reference: Descriptor
    candidate: Descriptor
    arrays: dict[str, tuple[Descriptor | None, Descriptor | None]] = {}
    expectations: Expectations | None = None
    audio_length: str = "exact"


class Judge:
    """Judges output pairs for one evaluation in ``repo``, reading through ``store``.

    Each pair's result is memoised by the digests of its inputs (``memo.py``), so a
    later evaluation on any clone whose store holds the memo decodes nothing; within
    one evaluation each distinct output is decoded at most once (``outputs``: its
    analysis and frames are kept by digest, under a memory budget). An output that
    cannot be had (not in the local store nor on a configured remote) makes its pair
    UNAVAILABLE and is listed in ``missing`` (digest -> what needed it), never memoised:
    fetching it changes the answer.

    With ``plan``, a pair the memo lacks is not judged: ``plan(key, kind, inputs)`` is
    told what judging it (``output-pair``) or scoring it with LPIPS (``output-lpips``)
    would read, and the pair stays UNAVAILABLE (``tasks.py`` lists the work this way);
    ``plan_all`` tells it of kept ones too. ``computed`` counts the tasks computed here: pairs judged, outputs analysed.
    """

    def __init__(
        self,
        repo: Repository,
        store: BlobStore,
        memo: Memo | None = None,
        *,
        plan: Callable[[str, str, PairInputs], None] | None = None,
        plan_all: bool = False,
    ) -> None:
        self.repo = repo
        self.store = store
        self.memo = memo
        self.plan = plan
        self.plan_all = plan_all
        self.judged = 0
        self._lpips: dict[str, LpipsScore] = {}
        self._scorer: Any = None
        self.missing: dict[str, str] = {}
        #: (reference, candidate) digests of pairs judged without one of their inputs
        #: (an output or a raw array): UNAVAILABLE here, not a verdict on the outputs.
        self.lacking: set[tuple[str | None, str | None]] = set()
        self.outputs = DecodedOutputs(store, memo=memo)
        self._done: dict[str, OutputComparison] = {}
        self._workloads: dict[Path, tuple[Workload, dict[int, Expectations | None]]] = {}

    def workload(self, path: Path | None) -> tuple[Workload | None, dict[int, Expectations | None]]:
        """The workload at ``path`` (None: none) read once per evaluation, with the
        expectations derived from its requests so far (by request index)."""
        if path is None:
            return None, {}
        if path not in self._workloads:
            self._workloads[path] = (load_workload(path).workload, {})
        return self._workloads[path]

    @property
    def computed(self) -> int:
        """Tasks computed here: pairs judged and outputs analysed (``tasks.py``)."""
        return self.judged + self.outputs.analysed

    @property
    def decoded(self) -> int:
        """Decoding passes over outputs so far (``DecodedOutputs.decodes``)."""
        return self.outputs.decodes

    def _array_bytes(self, desc: Descriptor, what: str) -> bytes | None:
        try:
            return self.store.get(desc.digest, desc.size)
        except EvidenceStoreError as exc:
            self.missing.setdefault(desc.digest, f"{what}: {exc}")
            return None

    def pair(
        self,
        key: str,
        ref_name: str,
        cand_name: str,
        a: _Output | None,
        b: _Output | None,
        expect: Callable[[int], Expectations | None],
        needs_check: Callable[[int], bool] = lambda _index: True,
        audio_length: str = "exact",
        lpips: bool = False,
    ) -> OutputComparison:
        """One request's outputs in two runs, judged (see the module doc); with
        ``audio_length="bounded"`` a bounded length is accepted and named in the reasons;
        with ``lpips``, an INCONCLUSIVE pair of unequal video is scored with LPIPS too."""
        ref_digest = a.body.digest if a and a.body else None
        cand_digest = b.body.digest if b and b.body else None
        if a is None or b is None:
            missing = ref_name if a is None else cand_name
            return OutputComparison(
                key=key, verdict="FAIL", reference=ref_digest, candidate=cand_digest,
                reasons=(f"{key}: run {missing!r} has no such request",),
            )  # fmt: skip
        if not (a.valid and b.valid and a.body and b.body):
            reasons = [
                f"{name}: {key}: {o.problem or 'no output'}"
                for name, o in ((ref_name, a), (cand_name, b))
                if not (o.valid and o.body)
            ]
            return OutputComparison(
                key=key, verdict="FAIL", reference=ref_digest, candidate=cand_digest,
                reasons=tuple(reasons),
            )  # fmt: skip
        if a.completion is not None and b.completion is not None:
            return self._tokens(key, ref_name, cand_name, a, b, a.completion, b.completion)
        if needs_check(a.request) and (a.unchecked or b.unchecked):
            reasons = [
                f"{name}: {key}: {o.unchecked}"
                for name, o in ((ref_name, a), (cand_name, b))
                if o.unchecked
            ]
            return OutputComparison(
                key=key, verdict="UNAVAILABLE", reference=ref_digest, candidate=cand_digest,
                reasons=tuple(reasons), unchecked=True,
            )  # fmt: skip
        expectations = expect(a.request)
        names = sorted(set(a.arrays) | set(b.arrays))
        one_sided = any(n not in a.arrays or n not in b.arrays for n in names)
        inputs = {
            "reference": a.body.digest,
            "candidate": b.body.digest,
            "expectations": None
            if expectations is None
            else hash_bytes(canonical(expectations)).digest,
            "arrays": {
                n: [d.digest if d else None for d in (a.arrays.get(n), b.arrays.get(n))]
                for n in names
            },
            "names": [ref_name, cand_name] if one_sided else None,
        }
        if audio_length == "bounded":  # keys of the default policy stay as they were
            inputs["audio_length"] = audio_length
        mkey = memo_key("output-pair", inputs)
        done = self._done.get(mkey)
        if done is None and self.memo is not None:
            done = self.memo.get(mkey, OutputComparison)
        inputs_ = PairInputs(
            label=key, names=(ref_name, cand_name), reference=a.body, candidate=b.body,
            arrays={n: (a.arrays.get(n), b.arrays.get(n)) for n in names},
            expectations=expectations, audio_length=audio_length,
        )  # fmt: skip
        if self.plan is not None and (done is None or self.plan_all):
            self.plan(mkey, "output-pair", inputs_)
        if done is None:
            if self.plan is not None:
                done, lasting = self._planned(inputs_), False
            else:
                done, lasting = self.judge(inputs_)
            if lasting:
                self._done[mkey] = done
                if self.memo is not None:
                    self.memo.put(mkey, done)
            else:  # an input could not be had: the pair decides nothing yet
                self.lacking.add((done.reference, done.candidate))
        else:
            self._done[mkey] = done
        if lpips and done.verdict == "INCONCLUSIVE" and done.video_min_psnr is not None:
            done = self._with_lpips(done, inputs_)
        bounds = tuple(
            f"{name}: {key}: {o.bound}"
            for name, o in ((ref_name, a), (cand_name, b))
            if o.bound and done.verdict != "FAIL"
        )
        return msgspec.structs.replace(done, key=key, reasons=done.reasons + bounds)

    def _tokens(
        self,
        key: str,
        ref_name: str,
        cand_name: str,
        a: _Output,
        b: _Output,
        ca: Descriptor,
        cb: Descriptor,
    ) -> OutputComparison:
        """Two LLM outputs compared token-exactly (``tokens.py``; two small reads, so
        not memoised)."""
        ref = a.body.digest if a.body else None
        cand = b.body.digest if b.body else None
        loaded = []
        for desc, name in ((ca, ref_name), (cb, cand_name)):
            try:
                loaded.append(load_completion(self.store, desc.digest, desc.size))
            except EvidenceStoreError as exc:
                self.missing.setdefault(desc.digest, f"the completion of run {name!r}, {key}")
                return OutputComparison(
                    key=key, verdict="UNAVAILABLE", reference=ref, candidate=cand,
                    reasons=(f"{key}: cannot be compared: {exc}",),
                )  # fmt: skip
        tv = compare_completions(key, ref_name, cand_name, loaded[0], loaded[1])
        return OutputComparison(
            key=key,
            verdict=tv.verdict,
            reference=ref,
            candidate=cand,
            reasons=tv.reasons,
            token_position=tv.position,
            logprob_max_abs_diff=tv.logprob_max_abs_diff,
        )

    def lpips_key(self, p: PairInputs) -> str | None:
        """The memo key of the LPIPS score of pair ``p`` with the weights pinned in
        ``evstore.toml`` ``[lpips]``; None when none are pinned."""
        pinned = self.repo.config.lpips
        if pinned is None or pinned.backbone is None or pinned.linear is None:
            return None
        return memo_key(
            "output-lpips",
            {
                "reference": p.reference.digest,
                "candidate": p.candidate.digest,
                "expectations": None
                if p.expectations is None
                else hash_bytes(canonical(p.expectations)).digest,
                "scorer": [pinned.backbone.digest, pinned.linear.digest, pinned.state_digest],
            },
        )

    def _with_lpips(self, done: OutputComparison, p: PairInputs) -> OutputComparison:
        """An INCONCLUSIVE pair of unequal video with its LPIPS score: FAIL above the
        threshold; UNAVAILABLE while it cannot be scored (no weights pinned, an input
        missing), never left INCONCLUSIVE unscored."""
        lkey = self.lpips_key(p)
        if lkey is None:
            self.lacking.add((done.reference, done.candidate))
            return msgspec.structs.replace(done, verdict="UNAVAILABLE", reasons=(
                f"{p.label}: the protocol asks for LPIPS ([quality] lpips = true), but no "
                "weights are pinned in evstore.toml [lpips] (`evstore lpips import`)",
                *done.reasons))  # fmt: skip
        score = self._lpips.get(lkey)
        if score is None and self.memo is not None:
            score = self.memo.get(lkey, LpipsScore)
        if self.plan is not None and (score is None or self.plan_all):
            self.plan(lkey, "output-lpips", p)
        if score is None and self.plan is None:
            try:
                score = self.score_lpips(p)
            except EvidenceStoreError as exc:
                self.lacking.add((done.reference, done.candidate))
                return msgspec.structs.replace(done, verdict="UNAVAILABLE", reasons=(
                    f"{p.label}: cannot be scored with LPIPS: {exc}", *done.reasons))  # fmt: skip
            self._lpips[lkey] = score
            if self.memo is not None:
                self.memo.put(lkey, score)
        if score is None:  # planned
            return msgspec.structs.replace(done, verdict="UNAVAILABLE")
        verdict: Verdict = "FAIL" if score.verdict == "FAIL" else "INCONCLUSIVE"
        extra = tuple(r for r in score.reasons if "lpips" in r and r not in done.reasons)
        return msgspec.structs.replace(
            done, verdict=verdict, lpips_max=score.lpips_max, reasons=(*done.reasons, *extra)
        )

    def score_lpips(self, p: PairInputs) -> LpipsScore:
        """Pair ``p`` compared again with the pinned LPIPS scorer (what the memo keeps
        under ``lpips_key``); raises when the scorer or an output cannot be had."""
        from ..media.comparison import compare_reports

        self.judged += 1
        if self._scorer is None:
            self._scorer = lpips_scorer(self.repo)
        ref_src, ref = self.outputs.report(p.reference)
        cand_src, cand = self.outputs.report(p.candidate)
        record = compare_reports(
            ref_src, cand_src, ref, cand, p.expectations, scorers=[self._scorer],
            frames=self.outputs.frames,
            audio_length="bounded" if p.audio_length == "bounded" else "exact",
        )  # fmt: skip
        video = record.metrics.video if record.metrics else None
        summary = video.perceptual.get("lpips") if video else None
        return LpipsScore(
            verdict=record.verdict,
            reasons=tuple(record.reasons),
            lpips_max=summary.max if summary else None,
        )

    @staticmethod
    def _planned(p: PairInputs) -> OutputComparison:
        return OutputComparison(
            key="", verdict="UNAVAILABLE", reference=p.reference.digest,
            candidate=p.candidate.digest, reasons=(f"{p.label}: not judged yet (planned)",),
        )  # fmt: skip

    def judge(self, p: PairInputs) -> tuple[OutputComparison, bool]:
        """The comparison of one pair, and whether it may be kept (False when an input
        was missing); what the memo keeps under the pair's key."""
        from ..media.comparison import compare_reports
        from ..media.store import store_record

        self.judged += 1
        ref_name, cand_name = p.names
        key, expectations, audio_length = p.label, p.expectations, p.audio_length
        body_a, body_b = p.reference, p.candidate
        ref_digest, cand_digest = body_a.digest, body_b.digest
        arrays: list[ArrayComparison] = []
        lasting = True
        for name in sorted(p.arrays):
            da, db = p.arrays[name]
            xa = xb = None
            if da is None or db is None:
                why = f"kept by {ref_name if db is None else cand_name} only"
            else:
                xa = self._array_bytes(da, f"array {name} of run {ref_name!r}, {key}")
                xb = self._array_bytes(db, f"array {name} of run {cand_name!r}, {key}")
                why = "unavailable here (fetch it with `evstore pull`)"
                lasting = lasting and xa is not None and xb is not None
            if xa is None or xb is None:
                arrays.append(
                    ArrayComparison(
                        name=name, equal=False, dtype=("", ""), shape=((), ()),
                        message=f"{name}: {why}",
                    )
                )  # fmt: skip
                continue
            arrays += compare_array_files(name, xa, xb)
        array_verdicts = [_array_verdict(c) for c in arrays]
        array_reasons = tuple(c.message for c in arrays if not c.equal)
        if ref_digest == cand_digest:
            verdict = worst(["PASS", *array_verdicts])
            return OutputComparison(
                key="", verdict=verdict, reference=ref_digest, candidate=cand_digest,
                reasons=("byte-identical outputs, both valid against the request",
                         *array_reasons),
                arrays=tuple(arrays),
            ), lasting  # fmt: skip
        lacking: list[OutputComparison] = []
        for desc, name in ((body_a, ref_name), (body_b, cand_name)):
            try:
                self.outputs.source(desc)
            except EvidenceStoreError as exc:
                what = f"output of run {name!r}, {key}"
                lacking.append(self._unavailable(desc, what, exc, ref_digest, cand_digest))
        if lacking:
            return lacking[0], False
        try:
            ref_src, ref = self.outputs.report(body_a)
            cand_src, cand = self.outputs.report(body_b)
        except EvidenceStoreError as exc:
            return OutputComparison(
                key="", verdict="UNAVAILABLE", reference=ref_digest, candidate=cand_digest,
                reasons=(f"{key}: cannot be compared: {exc}",),
            ), False  # fmt: skip
        record = compare_reports(
            ref_src, cand_src, ref, cand, expectations, frames=self.outputs.frames,
            audio_length="bounded" if audio_length == "bounded" else "exact",
        )  # fmt: skip
        # The reference (the first baseline run's output) is measured against every
        # candidate of its request; a candidate's output, once.
        self.outputs.release(body_b)
        desc = store_record(record, self.store)
        metrics = record.metrics
        return OutputComparison(
            key="",
            verdict=worst([record.verdict, *array_verdicts]),
            reference=ref_digest,
            candidate=cand_digest,
            reasons=tuple(record.reasons) + array_reasons,
            record=desc.digest,
            audio_max_abs_diff=metrics.audio.max_abs_diff if metrics and metrics.audio else None,
            video_min_psnr=metrics.video.min_psnr if metrics and metrics.video else None,
            arrays=tuple(arrays),
        ), lasting

    def _unavailable(
        self,
        desc: Descriptor,
        what: str,
        exc: EvidenceStoreError,
        ref_digest: str,
        cand_digest: str,
    ) -> OutputComparison:
        self.missing.setdefault(desc.digest, f"{what}: {exc}")
        return OutputComparison(
            key="", verdict="UNAVAILABLE", reference=ref_digest, candidate=cand_digest,
            reasons=(f"{what} ({desc.digest}) is unavailable here: fetch it with "
                     "`evstore pull`",),
        )  # fmt: skip


def compare_runs(
    root: str | os.PathLike[str],
    store: BlobStore,
    campaign: Campaign,
    reference: Member,
    candidate: Member,
    workload_path: Path | None = None,
    *,
    judge: Judge | None = None,
) -> list[OutputComparison]:
    """Every output pair of two runs of one condition, judged (see module doc)."""
    judge = judge or Judge(as_repository(root), store)
    phases = campaign.protocol.quality.compare_phases
    policy = campaign.protocol.quality.audio_length
    a, b = _outputs(reference, phases, policy), _outputs(candidate, phases, policy)
    workload, cache = judge.workload(workload_path)

    def expect(index: int) -> Expectations | None:
        if workload is None:
            return None
        if index not in cache:
            cache[index] = expectations_for(workload, index)
        return cache[index]

    def needs_check(index: int) -> bool:
        # Without the workload every output is held to a check; with it, only those
        # whose request asks for media (a JSON endpoint's output has nothing to check).
        return workload is None or expect(index) is not None

    lpips = campaign.protocol.quality.lpips
    return [
        judge.pair(key, reference.name, candidate.name, x, y, expect, needs_check, policy, lpips)
        for key, x, y in _pairs(a, b)
    ]


def _workload_file(repo: Repository, campaign: Campaign, condition: str) -> Path | None:
    """The condition's workload.toml; None for a harness's input file (imported runs:
    their outputs are compared as they are, no media expectations)."""
    cond = next(c for c in campaign.protocol.condition if c.name == condition)
    if cond.harness is not None:
        return None
    return repo / EVIDENCE_DIR / campaign.name / cond.workload


def repeatability(
    root: str | os.PathLike[str],
    store: BlobStore,
    campaign: Campaign,
    condition: str,
    baseline_runs: Sequence[Member],
    *,
    judge: Judge | None = None,
) -> Repeatability | None:
    """Baseline runs compared with the first of them; None with fewer than two complete."""
    runs = [m for m in baseline_runs if m.complete]
    if len(runs) < 2:
        return None
    repo = as_repository(root)
    wl = _workload_file(repo, campaign, condition)
    comparisons = [
        c
        for other in runs[1:]
        for c in compare_runs(repo, store, campaign, runs[0], other, wl, judge=judge)
    ]
    return Repeatability(
        protocol_digest=campaign.digest,
        condition=condition,
        runs=tuple(m.digest for m in runs),
        run_names=tuple(m.name for m in runs),
        exact=bool(comparisons) and all(c.verdict == "PASS" for c in comparisons),
        comparisons=tuple(comparisons),
        unavailable=None if comparisons else nothing_compared(runs),
    )


def nothing_compared(runs: Sequence[Member]) -> str:
    """Why a verdict over ``runs`` compared nothing: no output pair in common."""
    names = ", ".join(repr(m.name) for m in runs)
    return (
        f"nothing compared: runs {names} have no output pair in common (a run that kept "
        "no outputs, such as a LoadGen performance run, cannot be compared): a verdict "
        "over zero comparisons is UNAVAILABLE"
    )


def _effective(
    campaign: Campaign,
    repeat: Repeatability,
    judged: Sequence[Member],
    comparisons: Sequence[OutputComparison],
) -> list[tuple[Verdict, str]]:
    """Each candidate pair's verdict under the baseline rule, with its first reason.

    With ``non_repeatable_baseline = "inconclusive"``, a difference between valid
    outputs at a request where the baseline disagrees with itself is INCONCLUSIVE: that
    request's reference is one of several outputs the baseline gives. A difference at a
    request where the baseline is repeatable stays as judged (FAIL), and so does an
    invalid output anywhere."""
    unstable = {c.key for c in repeat.comparisons if c.verdict != "PASS"}
    soften = (
        not repeat.exact and campaign.protocol.quality.non_repeatable_baseline == "inconclusive"
    )
    invalid: set[str] = set()
    if soften and unstable:
        phases = campaign.protocol.quality.compare_phases
        for m in judged:
            invalid |= {
                x.label
                for x in _outputs(m, phases, campaign.protocol.quality.audio_length)
                if not (x.output.valid and x.output.body)
            }
    out: list[tuple[Verdict, str]] = []
    for c in comparisons:
        first = c.reasons[0] if c.reasons else c.verdict
        if c.key not in first:  # a media comparison's reasons do not name the request
            first = f"{c.key}: {first}"
        if soften and c.key in unstable and c.verdict == "FAIL" and c.key not in invalid:
            out.append(
                (
                    "INCONCLUSIVE",
                    f"{c.key}: the baseline disagrees with itself here (non_repeatable_"
                    f"baseline = 'inconclusive'), so this difference decides nothing: {first}",
                )
            )
        else:
            out.append((c.verdict, first))
    return out


def adjudicate(
    root: str | os.PathLike[str],
    store: BlobStore,
    campaign: Campaign,
    condition: str,
    arm: str,
    repeat: Repeatability,
    baseline_runs: Sequence[Member],
    candidate_runs: Sequence[Member],
    *,
    judge: Judge | None = None,
) -> Adjudication | None:
    """A candidate arm's verdict for one condition; None when it has no output to judge.
    A retrospective protocol's verdict says so first (``RETROSPECTIVE``)."""
    reference = next(m for m in baseline_runs if m.complete and m.digest == repeat.runs[0])
    # A run the harness found INVALID supports no lossless verdict, whatever its outputs.
    judged = [
        m for m in candidate_runs if m.record.outcome not in ("failed-before-inference", "invalid")
    ]
    if not judged:
        return None
    repo = as_repository(root)
    wl = _workload_file(repo, campaign, condition)
    comparisons = [
        c
        for m in judged
        for c in compare_runs(repo, store, campaign, reference, m, wl, judge=judge)
    ]
    verdict, reasons = _verdict(campaign, condition, repeat, reference, judged, comparisons)
    if campaign.protocol.retrospective:
        reasons.insert(0, RETROSPECTIVE)
    return Adjudication(
        protocol_digest=campaign.digest,
        condition=condition,
        arm=arm,
        verdict=verdict,
        reasons=tuple(reasons),
        baseline_runs=repeat.runs,
        candidate_runs=tuple(m.digest for m in judged),
        baseline_repeatable=repeat.exact,
        comparisons=tuple(comparisons),
        baseline_run_names=repeat.run_names,
        candidate_run_names=tuple(m.name for m in judged),
    )


def _verdict(
    campaign: Campaign,
    condition: str,
    repeat: Repeatability,
    reference: Member,
    judged: Sequence[Member],
    comparisons: Sequence[OutputComparison],
) -> tuple[Verdict, list[str]]:
    """The verdict of ``judged`` against baseline run ``reference`` and its reasons, the
    headline first."""
    empty = None
    if not comparisons:
        empty = nothing_compared([reference, *judged])
    elif repeat.unavailable is not None:
        empty = f"the baseline's repeatability is UNAVAILABLE: {repeat.unavailable}"
    if empty is not None:
        return "UNAVAILABLE", [empty]
    rule = campaign.protocol.quality.non_repeatable_baseline
    effective = _effective(campaign, repeat, judged, comparisons)
    verdict = worst([v for v, _ in effective])
    if not repeat.exact and rule == "fail":
        verdict = "FAIL"
    elif not repeat.exact and verdict == "PASS":
        verdict = "INCONCLUSIVE"
    # The headline (first) reason is one that produces the verdict: the pairs judged
    # so first, then the baseline's rule, then every other pair that is not PASS.
    producing = [r for (v, r) in effective if v == verdict and v != "PASS"]
    others = [r for (v, r) in effective if v not in (verdict, "PASS")]
    reasons = list(dict.fromkeys(producing))
    if not repeat.exact:
        reasons.append(
            f"the baseline is not repeatable-exact at {condition}; the protocol declares "
            f"non_repeatable_baseline = {rule!r}"
        )
    reasons += [r for r in dict.fromkeys(others) if r not in reasons]
    if verdict == "PASS":
        reasons.append(
            f"every output of {len(judged)} run(s) valid and exactly equal to baseline "
            f"run {reference.name!r}"
        )
        # Accepted under [quality] audio_length = "bounded": the bounds it rests on.
        reasons += dict.fromkeys(r for c in comparisons for r in c.reasons if _BOUNDED in r)
    unchecked = [
        r for c in (*repeat.comparisons, *comparisons) if c.unchecked for r in c.reasons[:1]
    ]
    if unchecked and verdict != "FAIL":  # an invalid output FAILs whatever else holds
        verdict = "UNAVAILABLE"
        reasons = [
            f"{len(unchecked)} output pair(s) rest on outputs not checked against their "
            "request: unchecked is never valid"
            + next((f"; first: {r}" for r in unchecked if _BOUNDED in r), ""),
            *dict.fromkeys(unchecked),
        ]
    return verdict, reasons
