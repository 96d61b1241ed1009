"""Raw output arrays: exact comparison of dtype, shape and bytes, distances otherwise,
and their verdict inside a candidate-vs-baseline adjudication of recorded runs."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")

import numpy as np

from evidencestore.campaign.arrays import compare_array_files, compare_arrays, load_arrays
from evidencestore.errors import MediaError


def _npy(a: Any) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_equal_and_differing_arrays() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = a.copy()
    assert compare_arrays("x", a, b).equal
    b[1, 2] += 0.5
    b[2, 3] -= 2.0
    c = compare_arrays("x", a, b)
    assert not c.equal and c.differing == 2
    assert c.max_abs_diff == 2.0
    assert c.rms_diff is not None and abs(c.rms_diff - math.sqrt((0.25 + 4.0) / 12)) < 1e-12
    assert "2 of 12 elements differ" in c.message


def test_dtype_and_shape_mismatch_not_measured() -> None:
    a = np.zeros(4, dtype=np.float32)
    c = compare_arrays("x", a, a.astype(np.float64))
    assert not c.equal and c.differing is None and c.dtype == ("float32", "float64")
    c = compare_arrays("x", a, np.zeros((2, 2), dtype=np.float32))
    assert c.shape == ((4,), (2, 2)) and c.max_abs_diff is None


def test_negative_zero_and_nan_compare_by_bytes() -> None:
    a = np.array([0.0, np.nan], dtype=np.float32)
    b = np.array([-0.0, np.nan], dtype=np.float32)
    c = compare_arrays("x", a, b)
    assert not c.equal and c.differing == 1 and c.max_abs_diff == 0.0
    assert compare_arrays("x", a, a.copy()).equal  # same NaN bits


def test_npz_members_and_files() -> None:
    a = _npz(video=np.ones((2, 3), np.uint8), audio=np.zeros(5, np.int16))
    b = _npz(video=np.ones((2, 3), np.uint8), audio=np.array([0, 0, 1, 0, 0], np.int16))
    out = {c.name: c for c in compare_array_files("out.npz", a, b)}
    assert out["out.npz:video"].equal
    assert out["out.npz:audio"].differing == 1 and out["out.npz:audio"].max_abs_diff == 1.0
    assert compare_array_files("a.npy", _npy(np.arange(3)), _npy(np.arange(3)))[0].equal


def test_bad_array_files_are_refused() -> None:
    with pytest.raises(MediaError, match="bad.npy: not a readable array file"):
        load_arrays("bad.npy", b"not numpy")
    with pytest.raises(MediaError, match="expected .npy"):
        load_arrays("x.bin", b"")
    obj = io.BytesIO()
    np.save(obj, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(MediaError, match="not a readable array file"):
        load_arrays("pickled.npy", obj.getvalue())  # pickles are never loaded


def test_safetensors_outputs_compare_tensor_by_tensor() -> None:
    from safetensors.numpy import save  # the campaign extra installs it

    a = save({"t": np.arange(4, dtype=np.float32), "u": np.zeros(2, dtype=np.int8)})
    b = save({"t": np.array([0, 1, 2, 4], dtype=np.float32), "u": np.zeros(2, dtype=np.int8)})
    t, u = compare_array_files("o.safetensors", a, b)
    assert (t.name, t.differing, t.equal) == ("o.safetensors:t", 1, False)
    assert (u.name, u.differing, u.equal) == ("o.safetensors:u", 0, True)
    with pytest.raises(MediaError, match=r"^o\.safetensors: not a readable array file"):
        compare_array_files("o.safetensors", a, b"not a safetensors file")


def test_arrays_decide_adjudication_of_recorded_runs(tmp_path: Path) -> None:
    """Runs recorded through the runs library with raw arrays beside each output: equal
    media and unequal arrays are INCONCLUSIVE, never PASS."""
    from evidencestore.campaign.adjudication import compare_runs
    from evidencestore.campaign.members import campaign_runs
    from evidencestore.config import local_store

    latents = np.linspace(0, 1, 16, dtype=np.float32)
    root, campaign, _ = _arrays_campaign(tmp_path, latents + np.float32(2**-20))
    members = campaign_runs(root, campaign, history=False)
    runs = {m.name: m for m in members.runs}
    (comp,) = compare_runs(root, local_store(root), campaign, runs["b1"], runs["c1"])
    assert comp.verdict == "INCONCLUSIVE"
    (kept,) = comp.arrays
    assert kept.differing is not None and kept.differing > 0 and not kept.equal
    (same,) = compare_runs(root, local_store(root), campaign, runs["b1"], runs["b1"])
    assert same.verdict == "PASS" and same.arrays[0].equal


def _arrays_campaign(tmp_path: Path, candidate_latents: Any) -> tuple[Path, Any, Any]:
    """A campaign (baseline b1, b2 with equal arrays; candidate c1) whose outputs are
    one valid clip, checked against its request when recorded (an unchecked output would
    make the pair UNAVAILABLE whatever the arrays say); only the raw arrays differ."""
    from evidencestore.campaign.protocol import init_campaign
    from evidencestore.runs import Observation, expectations_for, load_workload, open_run
    from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip
    from evidencestore.testing.video_server import sample_workload

    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "p"
    (src / "workloads").mkdir(parents=True)
    wl = sample_workload(seconds=(1,), size="64x48", fps=8, warmup=0, measured=1)
    (src / "workloads/5s.toml").write_text(wl)
    (src / "protocol.toml").write_text(
        'name = "arrays"\n[timing]\nclaim = false\n[[condition]]\nname = "5s"\n'
        'workload = "workloads/5s.toml"\n[[arm]]\nname = "baseline"\nbaseline = true\n'
        'runs = 2\n[[arm]]\nname = "fp8"\n'
    )
    campaign = init_campaign(root, "arrays", src / "protocol.toml")
    expectations = expectations_for(load_workload(src / "workloads/5s.toml").workload, 0)
    video = VideoSpec(width=64, height=48, rate=8, frames=8)
    body = Path(write_clip(tmp_path / "out.mp4", video=video, audio=AudioSpec(samples=48000)))
    latents = np.linspace(0, 1, 16, dtype=np.float32)
    kept = None
    for name, arm, arr in (
        ("b1", "baseline", latents),
        ("b2", "baseline", latents),
        ("c1", "fp8", candidate_latents),
    ):
        rec = open_run(
            root, name, arm=arm, workload=wl.encode(), campaign="arrays",
            protocol_digest=campaign.digest, condition="5s",
        )  # fmt: skip
        seen = Observation(sent_ns=1, end_ns=10**9, last_byte_ns=10**9, status=200)
        rec.record_request(
            seen, phase="measured", payload=b"p", body=body, expectations=expectations
        )
        desc = rec.put("requests/00000/arrays/latents.npy", _npy(arr), "application/octet-stream")
        rec.seal()
        kept = desc
    return root, campaign, kept


def test_a_missing_raw_array_leaves_the_cell_open_never_rejected(tmp_path: Path) -> None:
    """A candidate whose raw array cannot be had here is UNAVAILABLE and still open (what
    remains names `evstore pull`); the same campaign with the array present is judged:
    unequal arrays make it INCONCLUSIVE, so rejected (the control)."""
    from evidencestore.campaign.status import evaluate
    from evidencestore.config import local_store

    differing = np.linspace(0, 1, 16, dtype=np.float32) + np.float32(2**-20)
    root, campaign, array = _arrays_campaign(tmp_path / "missing", differing)
    local_store(root).delete(array.digest)
    cells = {c.arm: c for c in evaluate(root, campaign).status.cells}
    assert cells["fp8"].conclusion == "open", cells["fp8"]
    assert any("evstore pull" in r for r in cells["fp8"].reasons), cells["fp8"].reasons
    root, campaign, _ = _arrays_campaign(tmp_path / "present", differing)
    cells = {c.arm: c for c in evaluate(root, campaign).status.cells}
    assert cells["fp8"].lossless == "INCONCLUSIVE"
    assert cells["fp8"].conclusion == "rejected", cells["fp8"]
