"""Audits over a run's outputs, after MLPerf's compliance tests (TEST04 catches output
caching; TEST01 compares outputs across modes).

* ``seed-ignored``: requests of the workload that differ only in their seed (``seed`` or
  a ``seed`` form field) but returned identical decoded content: the server ignored the
  seed, so the run measured fewer distinct generations than it claims.
* ``output-caching``: a repetition of a request that returned content identical to that
  request's first output, ``cache_ratio`` times (``[run] cache_ratio``, default 3) or more
  faster than the first: possibly served from a cache rather than generated.

Content identity is the decoded content: for media, each stream's root and audio
content digest from the output's media check, so two encodes of the same frames and
samples are identical; for an LLM output, its decoded completion (token ids when the
server gave them, and every channel's text), never the raw event stream, whose bytes
carry a per-response ``id`` and ``created``. Any other output is identified by its
bytes. Only requests
that delivered an output (no failure) are compared. Each audit says what it examined,
so "no finding" and "nothing to examine" are told apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ..digest import new_hasher
from ..errors import EvidenceStoreError
from ..storage import BlobStore
from .models import Audit, AuditFinding, RequestRecord, RequestSpec, Workload

__all__ = ["audit_run", "content_identity"]

_NO_SEED = object()
_PIECE = 1 << 20


class _Channel(msgspec.Struct, forbid_unknown_fields=False):
    name: str
    text: msgspec.Raw


class _Identity(msgspec.Struct, forbid_unknown_fields=False):
    """What identifies a stored completion's content, its texts as their JSON bytes."""

    text: msgspec.Raw
    token_ids: msgspec.Raw = msgspec.Raw(b"null")
    channels: tuple[_Channel, ...] = ()


def content_identity(record: RequestRecord, store: BlobStore) -> tuple[Any, ...] | None:
    """What identifies an output's content: an LLM output's decoded completion, a media
    output's decoded streams' roots (from the stored media check) or, without either,
    its body digest; None without an output."""
    if record.body is None or record.failure is not None:
        return None
    if record.completion is not None:
        from ..runs.streams import COMPLETION_MEDIA_TYPE

        try:
            c = msgspec.json.decode(
                _read(store, record.completion.digest, record.completion.size), type=_Identity
            )
        except (EvidenceStoreError, msgspec.DecodeError, msgspec.ValidationError):
            return ("bytes", record.body.digest)
        # The fields as encoded (one encoder writes every completion, so equal values
        # are equal bytes), hashed: a huge text is neither decoded nor kept.
        hasher = new_hasher()
        parts: list[msgspec.Raw | bytes] = [c.token_ids, c.text]
        for ch in c.channels:
            parts += [ch.name.encode(), ch.text]
        for raw in parts:
            hasher.update(len(memoryview(raw)).to_bytes(8, "little"))
            hasher.update(raw)
        return (COMPLETION_MEDIA_TYPE, hasher.hexdigest())
    if record.media is not None and record.media.verdict in ("PASS", "INCONCLUSIVE"):
        from ..media.records import CheckReport

        try:
            report = msgspec.json.decode(
                store.get(record.media.report.digest, record.media.report.size),
                type=CheckReport,
            )
        except (EvidenceStoreError, msgspec.DecodeError, msgspec.ValidationError):
            pass
        else:
            streams = report.report.decoded
            if streams:
                return tuple(
                    (s.type, s.root, s.content_digest)
                    for s in sorted(streams, key=lambda s: s.index)
                )
    return ("bytes", record.body.digest)


def _read(store: BlobStore, digest: str, size: int) -> bytearray:
    """A blob's bytes, verified, read a piece at a time into one buffer of its size
    (``BlobStore.get`` joins what it reads: a huge completion would be held twice)."""
    data = bytearray(size)
    view = memoryview(data)
    with store.open(digest, size) as reader:
        got = 0
        while n := reader.readinto(
            view[got : got + _PIECE] if got < size else memoryview(bytearray(1))
        ):
            got += n  # past ``size``, the reader raises; at its end, it checks the digest
    return data


def _seed(spec: RequestSpec) -> Any:
    if spec.seed is not None:
        return spec.seed
    return spec.fields.get("seed", _NO_SEED)


def _without_seed(spec: RequestSpec) -> bytes:
    fields = {k: v for k, v in spec.fields.items() if k != "seed"}
    return msgspec.json.encode(msgspec.structs.replace(spec, seed=None, fields=fields))


def _latency_ns(r: RequestRecord) -> int:
    return (r.last_byte_ns if r.last_byte_ns is not None else r.end_ns) - r.sent_ns


def _label(r: RequestRecord) -> str:
    return f"record {r.index} ({r.phase} #{r.repetition})"


class _Tally:
    """What one audit examined and found, made into its :class:`Audit` at the end."""

    def __init__(self) -> None:
        self.examined = 0
        self.findings: list[AuditFinding] = []

    def found(self, message: str, first: RequestRecord, second: RequestRecord) -> None:
        self.findings.append(AuditFinding(message=message, requests=(first.index, second.index)))

    def audit(self, name: Literal["seed-ignored", "output-caching"], description: str) -> Audit:
        return Audit(
            name=name,
            examined=self.examined,
            description=f"{self.examined} {description}",
            findings=tuple(self.findings),
        )


def _seed_audit(
    workload: Workload, delivered: Sequence[RequestRecord], ident: dict[int, Any]
) -> Audit:
    groups: dict[bytes, list[int]] = defaultdict(list)
    for i, spec in enumerate(workload.request):
        if _seed(spec) is not _NO_SEED:
            groups[_without_seed(spec)].append(i)
    by_request: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in delivered:
        by_request[r.request].append(r)
    tally = _Tally()
    for members in groups.values():
        seeds = {repr(_seed(workload.request[i])) for i in members}
        if len(seeds) < 2:
            continue
        for n, a in enumerate(members):
            for b in members[n + 1 :]:
                sa, sb = _seed(workload.request[a]), _seed(workload.request[b])
                if sa == sb or not by_request[a] or not by_request[b]:
                    continue
                tally.examined += 1
                ra, rb = by_request[a][0], by_request[b][0]
                if ident[ra.index] == ident[rb.index]:
                    tally.found(
                        f"requests {a} and {b} differ only in their seed ({sa!r} vs {sb!r}) "
                        f"but returned identical decoded content ({_label(ra)}, "
                        f"{_label(rb)}): the server ignored the seed",
                        ra,
                        rb,
                    )
    return tally.audit(
        "seed-ignored",
        "pair(s) of requests differing only in their seed compared by decoded content",
    )


def _cache_audit(delivered: Sequence[RequestRecord], ident: dict[int, Any], ratio: float) -> Audit:
    by_request: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in sorted(delivered, key=lambda r: (r.sent_ns, r.index)):
        by_request[r.request].append(r)
    tally = _Tally()
    for request, records in sorted(by_request.items()):
        first = records[0]
        t0 = _latency_ns(first)
        for later in records[1:]:
            tally.examined += 1
            if ident[later.index] != ident[first.index]:
                continue
            t = _latency_ns(later)
            if t <= 0 or t0 / t >= ratio:
                speed = "instantly" if t <= 0 else f"{t0 / t:.1f}x faster"
                tally.found(
                    f"request {request}: {_label(later)} returned the same content as its "
                    f"first, {_label(first)}, in {t / 1e9:.4f} s against {t0 / 1e9:.4f} s "
                    f"({speed}; threshold {ratio:g}x): possible output caching",
                    first,
                    later,
                )
    return tally.audit(
        "output-caching",
        "repetition(s) compared with their request's first output "
        f"(content and latency; threshold {ratio:g}x faster)",
    )


def audit_run(
    workload: Workload, requests: Sequence[RequestRecord], store: BlobStore
) -> tuple[Audit, ...]:
    """Both audits over a run's request records (see the module doc)."""
    delivered = [r for r in requests if r.failure is None and r.body is not None]
    ident = {r.index: content_identity(r, store) for r in delivered}
    return (
        _seed_audit(workload, delivered, ident),
        _cache_audit(delivered, ident, workload.run.cache_ratio),
    )
