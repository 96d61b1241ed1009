"""Each distinct output decoded once per evaluation (campaign/decoded.py): the frames an
analysis decoded serve the metrics of an unequal pair, giving the very record a second
decoding gives; what does not fit the budget is decoded again, and counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("av")
pytest.importorskip("numpy")

from evidencestore._canonical import canonical
from evidencestore.campaign.decoded import DecodedOutputs
from evidencestore.media.comparison import compare, compare_reports
from evidencestore.media.records import AudioExpectation, Expectations, VideoExpectation
from evidencestore.models import Descriptor
from evidencestore.storage import MemoryBlobStore
from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip


def _clip(path: Path, *, shift: int = 0, bump: bool = False) -> bytes:
    def audio(first: int, data: Any) -> Any:
        data = data.copy()
        if bump and first == 0:
            data[0, 100:200] += 0.01  # a short blip in one channel
        return data

    write_clip(
        path,
        video=VideoSpec(width=64, height=48, rate=8, frames=8,
                        options={"preset": "ultrafast", "threads": "1"}),
        audio=AudioSpec(rate=48000, layout="stereo", samples=48000, frequency=330.0),
        format="mp4",
        video_hook=(lambda i, p: p + shift if i == 3 else p) if shift else None,
        audio_hook=audio,
    )  # fmt: skip
    return path.read_bytes()


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryBlobStore, list[Descriptor]]:
    """A reference and two candidates: a blip in the audio, and one frame brighter too."""
    tmp = tmp_path_factory.mktemp("decoded")
    store = MemoryBlobStore()
    descs = [
        store.put(_clip(tmp / "ref.mp4")),
        store.put(_clip(tmp / "lsb.mp4", bump=True)),
        store.put(_clip(tmp / "both.mp4", shift=4, bump=True)),
    ]
    assert len({d.digest for d in descs}) == 3
    return store, descs


EXPECT = Expectations(
    video=VideoExpectation(width=64, height=48, frames=8, frame_rate=8),
    audio=AudioExpectation(sample_rate=48000, channels=2, samples=48000),
)


def _judged(outputs: DecodedOutputs, a: Descriptor, b: Descriptor) -> bytes:
    sa, ra = outputs.report(a)
    sb, rb = outputs.report(b)
    return canonical(compare_reports(sa, sb, ra, rb, EXPECT, frames=outputs.frames))


def test_kept_frames_give_the_record_a_second_decoding_gives(
    clips: tuple[MemoryBlobStore, list[Descriptor]],
) -> None:
    store, (ref, lsb, both) = clips
    outputs = DecodedOutputs(store)
    got = {d.digest: _judged(outputs, ref, d) for d in (lsb, both)}
    # Three distinct outputs, each decoded once: the reference's frames served both pairs.
    assert outputs.decodes == 3
    for d in (lsb, both):
        fresh = compare(outputs.source(ref), outputs.source(d), EXPECT)  # decodes both again
        assert got[d.digest] == canonical(fresh)
    import msgspec

    from evidencestore.media.records import ComparisonRecord

    rec = msgspec.json.decode(got[both.digest], type=ComparisonRecord)
    assert rec.verdict in ("INCONCLUSIVE", "FAIL")
    assert rec.metrics is not None and rec.metrics.audio and rec.metrics.video
    assert rec.metrics.audio.max_abs_diff > 0 and not rec.metrics.video.identical
    assert 0 < rec.metrics.video.identical_frames < 8  # frames from the fourth on differ
    rec = msgspec.json.decode(got[lsb.digest], type=ComparisonRecord)
    assert rec.metrics is not None and rec.metrics.video and rec.metrics.video.identical
    # Asking again decodes nothing.
    assert _judged(outputs, ref, lsb) == got[lsb.digest] and outputs.decodes == 3


def test_frames_over_the_budget_are_decoded_again_and_counted(
    clips: tuple[MemoryBlobStore, list[Descriptor]],
) -> None:
    store, (ref, lsb, _) = clips
    kept = _judged(DecodedOutputs(store), ref, lsb)
    tight = DecodedOutputs(store, frame_budget=1)  # nothing fits
    assert _judged(tight, ref, lsb) == kept
    # Two analyses, then each input's video and audio stream decoded again for metrics.
    assert tight.decodes == 2 + 4
    # A budget for one output's frames: the reference's are evicted by the candidate's,
    # so only the reference is decoded again (video and audio).
    one = DecodedOutputs(store)
    one.report(ref)
    size = one.kept_bytes  # one output's frames
    assert 0 < size <= one.frame_budget
    single = DecodedOutputs(store, frame_budget=size + size // 2)
    assert _judged(single, ref, lsb) == kept and single.decodes == 2 + 2


def test_an_analysis_that_fails_keeps_nothing(tmp_path: Path) -> None:
    """Bytes that are not media: the report says so (an ``open`` error), once."""
    store = MemoryBlobStore()
    desc = store.put(b"not a container at all")
    outputs = DecodedOutputs(store)
    _, report = outputs.report(desc)
    assert report.errors and report.errors[0].stage == "open"
    outputs.report(desc)
    assert outputs.decodes == 1


def test_released_frames_free_their_memory_and_are_decoded_again_if_asked(
    clips: tuple[MemoryBlobStore, list[Descriptor]],
) -> None:
    store, (ref, lsb, both) = clips
    outputs = DecodedOutputs(store)
    kept = _judged(outputs, ref, lsb)
    with_both = outputs.kept_bytes
    outputs.release(lsb)
    alone = outputs.kept_bytes
    assert 0 < alone < with_both  # the reference's frames stay
    outputs.release(lsb)  # releasing twice changes nothing
    assert outputs.kept_bytes == alone
    _judged(outputs, ref, both)
    assert outputs.decodes == 3  # the reference's frames served the second pair
    # Asked again, the released candidate is decoded again (video and audio): same record.
    assert _judged(outputs, ref, lsb) == kept and outputs.decodes == 3 + 2
