"""``evstore media probe|check|compare`` via ``main([...])``: output and exit codes."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from helpers.media import AV_EXPECT_TOML, AudioSpec, VideoSpec, clip, lossless, nudge_frame

from evidencestore.cli import main
from evidencestore.errors import ScorerError

EXPECT = AV_EXPECT_TOML


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli")
    (d / "expect.toml").write_text(EXPECT)
    (d / "garbage.mp4").write_bytes(np.random.default_rng(1).bytes(2048))
    (d / "empty.mp4").write_bytes(b"")
    return {
        "dir": str(d),
        "expect": str(d / "expect.toml"),
        "base": clip(d, "base.mp4", video=lossless(), audio=AudioSpec()),
        "same": clip(
            d,
            "same.mp4",
            video=lossless(),
            audio=AudioSpec(),
            container_options={"movflags": "faststart"},
        ),
        "nudged": clip(
            d, "nudged.mp4", video=lossless(), audio=AudioSpec(), video_hook=nudge_frame(3)
        ),
        "short": clip(d, "short.mp4", video=lossless(), audio=AudioSpec(samples=12000)),
        "small": clip(d, "small.mp4", video=VideoSpec(width=32, height=32), audio=AudioSpec()),
        "garbage": str(d / "garbage.mp4"),
        "empty": str(d / "empty.mp4"),
    }


def test_probe_prints_streams(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["media", "probe", files["base"]]) == 0
    out = capsys.readouterr().out
    assert "#0 video h264: 64x64 yuv420p 30/1 fps" in out
    assert "#1 audio aac: 48000 Hz 2 ch (stereo) fltp, codec frame 1024" in out
    assert main(["media", "probe", files["base"], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["streams"][1]["sample_rate"] == 48000


def test_probe_of_garbage_exits_2_without_traceback(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["media", "probe", files["garbage"]]) == 2
    err = capsys.readouterr().err
    assert "garbage.mp4: not a readable media container" in err
    assert "Traceback" not in err


def test_check_exit_codes_and_json(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["media", "check", files["base"], "--expect", files["expect"]]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "ok   audio.padding" in out
    assert main(["media", "check", files["short"], "--expect", files["expect"], "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "FAIL"
    bad = {c["name"] for c in data["checks"] if not c["ok"]}
    assert "audio.samples" in bad


def test_check_flags_override_the_file(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["media", "check", files["base"], "--expect", files["expect"], "--frames", "16"]) == 1
    )
    out = capsys.readouterr().out
    assert "FAIL video.frames: decoded 15 video frames, expected 16" in out
    flags = ["--frames", "15", "--frame-rate", "30", "--audio-duration", "0.5"]
    assert main(["media", "check", files["base"], *flags]) == 0


@pytest.mark.parametrize("name", ["garbage", "empty"])
def test_check_of_unusable_input_fails_cleanly(
    files: dict[str, str], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["media", "check", files[name], "--expect", files["expect"]]) == 1
    captured = capsys.readouterr()
    assert "FAIL open:" in captured.out
    assert f"{name}.mp4" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_usage_errors_exit_2(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["media", "check", files["base"]]) == 2
    assert "no expectations" in capsys.readouterr().err
    assert (
        main(
            ["media", "check", str(Path(files["dir"]) / "missing.mp4"), "--expect", files["expect"]]
        )
        == 2
    )
    assert "missing.mp4: cannot read media file" in capsys.readouterr().err
    assert main(["media", "compare", files["base"]]) == 2
    assert main(["media", "check", files["base"], "--expect", files["dir"] + "/nope.toml"]) == 2
    assert "nope.toml: cannot read expectations" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("cand", "code", "verdict"),
    [
        ("same", 0, "PASS"),
        ("short", 1, "FAIL"),
        ("nudged", 3, "INCONCLUSIVE"),
        ("small", 4, "UNAVAILABLE"),
    ],
)
def test_compare_exit_codes(
    files: dict[str, str], cand: str, code: int, verdict: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = files["expect"]
    if cand == "small":  # geometry differs from the reference; keep both valid
        expect = str(Path(files["dir"]) / "loose.toml")
        Path(expect).write_text("[video]\nframes = 15\n[audio]\nduration = 0.5\n")
    args = ["media", "compare", files["base"], files[cand], "--expect", expect, "--json"]
    assert main(args) == code
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == verdict
    assert data["reference"]["source"]["digest"].startswith("blake3:")
    assert "checks" in data["reference"]


def test_compare_writes_record_and_reads_thresholds(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = Path(files["dir"]) / "t.toml"
    thresholds.write_text("video_psnr_min = 200.0\n")
    out = Path(files["dir"]) / "record.json"
    args = ["media", "compare", files["base"], files["nudged"], "--expect", files["expect"]]
    assert main([*args, "--thresholds", str(thresholds), "--record", str(out)]) == 1
    text = capsys.readouterr().out
    assert "FAIL threshold.video_psnr_min" in text
    record = json.loads(out.read_text())
    assert record["verdict"] == "FAIL"
    assert record["thresholds"]["video_psnr_min"] == 200.0
    assert record["metrics"]["video"]["per_frame"][0]["planes"][0]["psnr"] is None
    assert main([*args]) == 3
    assert "min PSNR" in capsys.readouterr().out


class _FakeScorer:
    name = "lpips"
    batch_size = 8

    def score(self, reference: np.ndarray, candidate: np.ndarray) -> list[float]:
        return [
            0.0 if np.array_equal(r, c) else 0.001
            for r, c in zip(reference, candidate, strict=True)
        ]

    def provenance(self) -> dict[str, str]:
        return {"linear": "blake3:" + "1" * 64}


def test_compare_lpips_uses_the_configured_scorer(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("evidencestore.perceptual")
    fake.load_configured_scorer = lambda root: _FakeScorer()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evidencestore.perceptual", fake)
    args = ["media", "compare", files["base"], files["nudged"], "--expect", files["expect"]]
    assert main([*args, "--lpips", "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["scorers"] == {"lpips": {"linear": "blake3:" + "1" * 64}}
    assert data["metrics"]["video"]["perceptual"]["lpips"]["max"] == 0.001

    def refuse(root: object) -> None:
        raise ScorerError("LPIPS weights are not pinned in evstore.toml")

    fake.load_configured_scorer = refuse  # type: ignore[attr-defined]
    assert main([*args, "--lpips"]) == 2
    assert "LPIPS weights are not pinned" in capsys.readouterr().err


def test_compare_with_garbage_fails_cleanly(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["media", "compare", files["base"], files["garbage"], "--expect", files["expect"]]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "candidate: open:" in captured.out and "garbage.mp4" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_check_and_probe_by_digest(
    files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evidencestore.remotes import local_store

    (tmp_path / "evidence").mkdir()
    digest = local_store(tmp_path).put_file(files["base"]).digest
    monkeypatch.chdir(tmp_path)
    assert main(["media", "check", digest, "--expect", files["expect"]]) == 0
    assert f"{digest}: PASS" in capsys.readouterr().out
    assert main(["media", "probe", digest]) == 0
    assert "#0 video h264" in capsys.readouterr().out
    assert main(["media", "probe", "blake3:" + "f" * 64]) == 2
    assert "cannot get media from the store" in capsys.readouterr().err


def test_media_commands_take_root(
    files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evidencestore.remotes import local_store

    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    digest = local_store(repo).put_file(files["base"]).digest
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no repository here or above: only --root finds the blob
    assert main(["media", "probe", digest]) == 2
    assert "cannot get media from the store" in capsys.readouterr().err
    assert main(["media", "probe", digest, "--root", str(repo)]) == 0
    assert "#0 video h264" in capsys.readouterr().out
    assert main(["media", "check", digest, "--root", str(repo), "--expect", files["expect"]]) == 0
    assert f"{digest}: PASS" in capsys.readouterr().out
    compare = ["media", "compare", digest, files["base"], "--root", str(repo)]
    code = main([*compare, "--expect", files["expect"], "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "PASS"
    assert main(["media", "probe", digest, "--root", str(tmp_path / "missing")]) == 2
    assert "--root" in capsys.readouterr().err
