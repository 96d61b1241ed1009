"""Token-exact verdicts for LLM outputs, and the determinism check across batch sizes.

Two completions (``runs/streams.py``: text per channel, token ids, logprobs, stored by
digest) are compared token by token: the token ids when both runs have them (a
divergence is named by token position and by its channel, ``reasoning``, ``content`` or
``tool_calls``, and index within it), and every channel's text; without token ids the
texts character by character, and the reason says it is that fallback.

- PASS: tokens (or texts) equal, and logprobs equal (or kept by neither run);
- INCONCLUSIVE: tokens equal, logprobs differ (the largest difference is given) or are
  kept by one run only;
- FAIL: at the first divergent token, naming the request, the position and both
  continuations.

The determinism check (:func:`determinism`) takes runs of the same prompts at different
concurrencies (batch sizes) and counts the distinct outputs per prompt (by payload
digest): every prompt must have exactly one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from .._canonical import decode
from ..errors import EvidenceStoreError
from ..models import Model
from ..runs import RunRecord
from ..runs.streams import CHANNELS, Completion
from ..storage import BlobStore
from .models import Verdict

if TYPE_CHECKING:
    from ..config import Repository

__all__ = [
    "Determinism",
    "PromptOutputs",
    "TokenVerdict",
    "compare_completions",
    "determinism",
    "determinism_of_runs",
    "load_completion",
]

_SHOWN = 8


@dataclass(frozen=True)
class TokenVerdict:
    """The verdict of one pair of completions, with the first divergent position and
    the largest logprob difference where they apply."""

    verdict: Verdict
    reasons: tuple[str, ...]
    position: int | None = None
    logprob_max_abs_diff: float | None = None


def load_completion(store: BlobStore, digest: str, size: int | None = None) -> Completion:
    """A stored completion, verified by digest."""
    try:
        return decode(store.get(digest, size), Completion)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise EvidenceStoreError(f"completion {digest}: not a valid completion: {exc}") from None


def _show(seq: Sequence[int] | str, at: int) -> str:
    part = seq[at : at + _SHOWN]
    more = "…" if len(seq) > at + _SHOWN else ""
    if isinstance(part, str):
        return repr(part) + more if part else "(end of output)"
    return (" ".join(str(t) for t in part) + more) if part else "(end of output)"


def _divergence(sa: Sequence[int] | str, sb: Sequence[int] | str) -> int | None:
    n = min(len(sa), len(sb))
    first = next((i for i in range(n) if sa[i] != sb[i]), None)
    if first is None and len(sa) != len(sb):
        first = n
    return first


def compare_completions(
    key: str, ref_name: str, cand_name: str, a: Completion, b: Completion
) -> TokenVerdict:
    """Compare two completions token-exactly, every channel (see module doc)."""
    if a.token_ids is not None and b.token_ids is not None:
        sa: Sequence[int] | str = a.token_ids
        sb: Sequence[int] | str = b.token_ids
        first = _divergence(sa, sb)
        if first is not None:
            channel, at = a.channel_at(first) if first < len(sa) else b.channel_at(first)
            return TokenVerdict(
                "FAIL",
                (
                    f"{key}: first divergent token at position {first} ({channel} token "
                    f"{at}): {ref_name!r} continues {_show(sa, first)}, {cand_name!r} "
                    f"continues {_show(sb, first)}",
                ),
                position=first,
            )
        unit = "token"
    else:
        unit = "character (text fallback: no token ids kept)"
    for channel in CHANNELS:
        ta, tb = a.channel_text(channel), b.channel_text(channel)
        first = _divergence(ta, tb)
        if first is None:
            continue
        where = (
            "the same token ids, first divergent character"
            if unit == "token"
            else "first divergent character (text fallback: no token ids kept)"
        )
        return TokenVerdict(
            "FAIL",
            (
                f"{key}: {where} in channel {channel} at position {first}: "
                f"{ref_name!r} continues "
                f"{_show(ta, first)}, {cand_name!r} continues {_show(tb, first)}",
            ),
            position=first,
        )
    sa = a.token_ids if unit == "token" and a.token_ids is not None else a.text
    what = "token ids" if unit == "token" else "texts (text fallback: no token ids kept)"
    if a.logprobs is None and b.logprobs is None:
        return TokenVerdict("PASS", (f"{key}: {len(sa)} {what} equal (no logprobs kept)",))
    if a.logprobs is None or b.logprobs is None:
        one = ref_name if a.logprobs is not None else cand_name
        return TokenVerdict(
            "INCONCLUSIVE",
            (f"{key}: {what} equal; logprobs kept by {one!r} only: not compared",),
        )
    if len(a.logprobs) != len(b.logprobs):
        return TokenVerdict(
            "INCONCLUSIVE",
            (f"{key}: {what} equal; {len(a.logprobs)} vs {len(b.logprobs)} logprobs kept",),
        )
    diffs = [abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)]
    largest = max(diffs, default=0.0)
    if largest == 0.0:
        return TokenVerdict(
            "PASS", (f"{key}: {len(sa)} {what} and their logprobs exactly equal",), None, 0.0
        )
    at = diffs.index(largest)
    return TokenVerdict(
        "INCONCLUSIVE",
        (
            f"{key}: {what} equal, logprobs differ: largest difference {largest:.3g} at "
            f"position {at}",
        ),
        logprob_max_abs_diff=largest,
    )


class PromptOutputs(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One prompt (request payload) across runs: how many distinct outputs it got, and
    the concurrency and output digest of every run that sent it."""

    payload: str
    request: int
    distinct: int
    outputs: tuple[tuple[str, int, str], ...]


class Determinism(Model, frozen=True, kw_only=True, omit_defaults=False):
    """The determinism check across batch sizes: ``deterministic`` when every prompt
    got exactly one distinct output over every run and concurrency."""

    kind: str = "evidencestore/determinism"
    runs: tuple[str, ...]
    concurrency: tuple[int, ...]
    deterministic: bool
    prompts: tuple[PromptOutputs, ...]
    reasons: tuple[str, ...] = ()


@dataclass
class _Seen:
    request: int
    ids: dict[str, str]
    outputs: list[tuple[str, int, str]]


def determinism(store: BlobStore, runs: Sequence[tuple[str, RunRecord, int]]) -> Determinism:
    """Count the distinct outputs per prompt over ``runs`` (name, record, concurrency);
    outputs are compared by their token ids (or text when there are none)."""
    seen: dict[str, _Seen] = {}
    for name, record, concurrency in runs:
        for r in record.requests:
            if r.completion is None or r.failure is not None:
                continue
            c = load_completion(store, r.completion.digest, r.completion.size)
            identity = repr(c.token_ids) if c.token_ids is not None else c.text
            slot = seen.setdefault(r.payload.digest, _Seen(r.request, {}, []))
            slot.ids.setdefault(identity, r.completion.digest)
            slot.outputs.append((name, concurrency, slot.ids[identity]))
    prompts = []
    reasons: list[str] = []
    for payload, slot in sorted(seen.items(), key=lambda kv: kv[1].request):
        prompts.append(
            PromptOutputs(
                payload=payload,
                request=slot.request,
                distinct=len(slot.ids),
                outputs=tuple(slot.outputs),
            )
        )
        if len(slot.ids) > 1:
            reasons.append(
                f"request {slot.request}: {len(slot.ids)} distinct outputs across "
                f"concurrencies {sorted({o[1] for o in slot.outputs})}"
            )
    if not prompts:
        reasons.append("no delivered completion to compare")
    return Determinism(
        runs=tuple(n for n, _, _ in runs),
        concurrency=tuple(c for _, _, c in runs),
        deterministic=bool(prompts) and all(p.distinct == 1 for p in prompts),
        prompts=tuple(prompts),
        reasons=tuple(reasons),
    )


def determinism_of_runs(repo: Repository, names: Sequence[str]) -> Determinism:
    """:func:`determinism` over runs registered in ``repo``, each at the concurrency its
    workload (read, verified, from the local store) declares, or an imported run's
    harness recorded (``Harness.concurrency``)."""
    from ..runs import load_run
    from ..runs.workload import parse_workload

    store = repo.local_store()
    runs = []
    for name in names:
        record = load_run(repo, name)
        if record.harness is not None:  # imported: the harness's own concurrency
            if record.harness.concurrency is None:
                raise EvidenceStoreError(
                    f"run {name!r}: imported from {record.harness.name}, which recorded no "
                    "client concurrency"
                )
            runs.append((name, record, record.harness.concurrency))
            continue
        try:
            data = store.get(record.workload.digest, record.workload.size)
        except EvidenceStoreError as exc:
            raise EvidenceStoreError(f"run {name!r}: its workload: {exc}") from exc
        concurrency = parse_workload(data, f"{name}: workload").run.concurrency
        runs.append((name, record, concurrency))
    return determinism(store, runs)
