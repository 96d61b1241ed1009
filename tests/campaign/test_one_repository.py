"""Campaign code below its entry points is handed the resolved ``Repository``: it never
walks up from a path again, and reads ``evstore.toml`` once."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.walks import walks_and_reads

from evidencestore.campaign.adjudication import Judge, PairInputs
from evidencestore.config import Repository
from evidencestore.models import Descriptor
from evidencestore.storage import MemoryBlobStore

_ONE = Descriptor(digest="blake3:" + "1" * 64, size=1)
_PINS = f"""[lpips]
backbone = {{ digest = "{_ONE.digest}", size = 1 }}
linear = {{ digest = "{"blake3:" + "2" * 64}", size = 1 }}
"""


def test_a_judge_reads_the_lpips_pins_of_its_own_repository_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge asks its repository for the pinned weights: a root named exactly (a plain
    subfolder of another repository, as ``--root`` names one) is not the outer one, and
    asking again neither walks up nor reads ``evstore.toml`` again."""
    outer = tmp_path / "outer"
    (outer / "evidence").mkdir(parents=True)
    (outer / "evstore.toml").write_text(_PINS)
    sub = outer / "notes"
    sub.mkdir()
    pair = PairInputs(label="request 0", names=("a", "b"), reference=_ONE, candidate=_ONE)
    walks, reads = walks_and_reads(monkeypatch)
    pinned = Judge(Repository(outer), MemoryBlobStore())
    first = pinned.lpips_key(pair)
    assert first is not None and pinned.lpips_key(pair) == first
    assert (walks, reads) == ([], [outer])
    own = Judge(Repository(sub), MemoryBlobStore())
    assert own.lpips_key(pair) is None  # sub pins nothing; the outer pins are not its own
    assert own.lpips_key(pair) is None
    assert (walks, reads) == ([], [outer, sub])
