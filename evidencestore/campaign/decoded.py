"""The outputs one evaluation reads: each read, analysed and decoded at most once.

A campaign compares the same outputs many times (a baseline output with every other run's
output of the same request), so within one evaluation each distinct output is read from
the store once (its bytes kept under a budget), analysed once (``media.decode.analyse``:
every frame decoded and hashed, the report kept by digest), and the frames of that one
decoding are kept (under a budget) for the metrics of any unequal pair it is part of
(``media.comparison.compare_reports``' ``frames``). Kept frames are the very frames the
analysis hashed, so a metric computed from them is the one a second decoding would give.
An output whose frames do not fit the budget is decoded again for its metrics: memory
stays bounded, and ``decodes`` counts every decoding pass either way. A caller releases
the frames of an output it will not measure again (the Judge: a candidate's, once its pair
is measured; the reference's serve every candidate of its request).

With a memo, an output's analysis is kept by the digest of its bytes and the tool version
(``analysis_key``: the key of an ``output-check`` task, ``tasks.py``), so an analysis made
by another process or machine is read instead of decoding again; its frames are then
decoded only for the metrics of an unequal pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..models import Descriptor
from ..storage import BlobStore
from .memo import Memo, memo_key

if TYPE_CHECKING:
    from ..media.records import MediaReport
    from ..media.source import MediaSource

__all__ = ["DecodedOutputs", "analysis_key"]

SOURCE_BUDGET = 256 << 20  # bytes of encoded output kept in memory between pairs
FRAME_BUDGET = 1 << 30  # bytes of decoded frames kept in memory between pairs


def analysis_key(digest: str) -> str:
    """The memo key of the analysis of the output with ``digest``."""
    return memo_key("output-analysis", {"output": digest})


def _frame_bytes(frame: Any) -> int:
    return sum(int(p.buffer_size) for p in frame.planes)


class DecodedOutputs:
    """Outputs read through ``store`` for one evaluation (see module doc)."""

    def __init__(
        self,
        store: BlobStore,
        *,
        source_budget: int | None = None,
        frame_budget: int | None = None,
        memo: Memo | None = None,
    ) -> None:
        self.store = store
        self.memo = memo
        self.source_budget = SOURCE_BUDGET if source_budget is None else source_budget
        self.frame_budget = FRAME_BUDGET if frame_budget is None else frame_budget
        #: Decoding passes over outputs: one per analysis, plus one per stream decoded
        #: again for metrics because its frames were not kept.
        self.decodes = 0
        #: Outputs analysed here (``output-check`` tasks computed), not read from the memo.
        self.analysed = 0
        self._sources: dict[str, MediaSource] = {}
        self._reports: dict[str, MediaReport] = {}
        # digest -> (bytes held, stream index -> frames); oldest first
        self._frames: dict[str, tuple[int, dict[int, list[Any]]]] = {}
        self._held = 0  # bytes of the frames in ``_frames``

    def source(self, desc: Descriptor) -> MediaSource:
        """The output's bytes, read (verified) from the store once while they fit the
        budget; raises :class:`~evidencestore.errors.EvidenceStoreError` when the store
        cannot give them."""
        from ..media.source import MediaSource

        src = self._sources.get(desc.digest)
        if src is None:
            data = self.store.get(desc.digest, desc.size)
            src = MediaSource(name=desc.digest, descriptor=desc, data=data)
            held = sum(s.descriptor.size for s in self._sources.values())
            while self._sources and held + desc.size > self.source_budget:
                held -= self._sources.pop(next(iter(self._sources))).descriptor.size
            self._sources[desc.digest] = src
        return src

    def report(self, desc: Descriptor) -> tuple[MediaSource, MediaReport]:
        """The output and its analysis, decoded once; its frames are kept for
        :meth:`frames` while they fit the budget."""
        from ..media.decode import analyse
        from ..media.records import MediaReport

        source = self.source(desc)
        report = self._reports.get(desc.digest)
        if report is None and self.memo is not None:
            report = self.memo.get(analysis_key(desc.digest), MediaReport)
            if report is not None:  # analysed elsewhere: frames decoded again if needed
                self._reports[desc.digest] = report
        if report is None:
            kept: dict[int, list[Any]] = {}
            held = 0
            whole = True

            def keep(index: int, frame: Any) -> None:
                nonlocal held, whole
                if not whole:
                    return
                held += _frame_bytes(frame)
                while self._frames and self._held + held > self.frame_budget:
                    self._held -= self._frames.pop(next(iter(self._frames)))[0]  # oldest
                if held > self.frame_budget:  # too large to keep: decoded again if needed
                    whole = False
                    kept.clear()
                    return
                kept.setdefault(index, []).append(frame)

            report = analyse(source, on_frame=keep)
            self.decodes += 1
            self.analysed += 1
            self._reports[desc.digest] = report
            if self.memo is not None:
                self.memo.put(analysis_key(desc.digest), report)
            if whole:
                self._frames[desc.digest] = (held, kept)
                self._held += held
        return source, report

    def release(self, desc: Descriptor) -> None:
        """Drop the output's kept frames (its analysis stays): a caller done with it.
        Asked for again, its frames are decoded again."""
        held = self._frames.pop(desc.digest, None)
        if held is not None:
            self._held -= held[0]

    @property
    def kept_bytes(self) -> int:
        """Bytes of decoded frames kept now (at most ``frame_budget``)."""
        return self._held

    def frames(self, source: MediaSource, kind: str, pair: int = 0) -> Iterator[Any]:
        """The frames of ``source``'s ``pair``-th decodable stream of ``kind``: those its
        analysis kept, else decoded again (a ``media.comparison.FrameReader``)."""
        from ..media.comparison import stream_frames

        digest = source.descriptor.digest
        report, kept = self._reports.get(digest), self._frames.get(digest)
        if report is not None and kept is not None:
            streams = [s for s in report.decoded if s.type == kind]
            if pair < len(streams):
                self._frames[digest] = self._frames.pop(digest)  # most recently used
                return iter(kept[1].get(streams[pair].index, ()))
        self.decodes += 1
        return stream_frames(source, kind, pair)
