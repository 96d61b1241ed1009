"""Run records as a library: workloads, payloads, expectations, the recorder, load_run, diffs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.digest import hash_bytes
from evidencestore.errors import ConfigError, ManifestError, WorkloadError
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import Observation, diff_configs, diff_runs, load_run, open_run
from evidencestore.runs.endpoints import build_payload
from evidencestore.runs.runner import check_server_url
from evidencestore.runs.summary import latency_stats, quantile
from evidencestore.runs.workload import expectations_for, load_workload
from evidencestore.testing.video_server import sample_workload


def _wl(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workload.toml"
    path.write_text(text)
    return path


def test_the_smallest_workload_as_written(tmp_path: Path) -> None:
    text = sample_workload()
    loaded = load_workload(_wl(tmp_path, text))
    assert loaded.descriptor.digest == hash_bytes(text.encode()).digest
    wl = loaded.workload
    assert (
        wl.endpoint.kind,
        wl.run.warmup,
        wl.run.measured,
        wl.run.timeout,
        wl.run.concurrency,
    ) == (
        "videos-sync",
        1,
        3,
        120,
        1,
    )
    exp = expectations_for(wl, 0)
    assert exp is not None and exp.video is not None and exp.audio is not None
    assert (exp.video.width, exp.video.height, exp.video.frames, exp.video.frame_rate) == (
        320,
        240,
        150,
        30,
    )
    assert (exp.audio.sample_rate, exp.audio.channels, exp.audio.samples) == (48000, 2, 240000)


def test_expectations_from_frames_and_fps(tmp_path: Path) -> None:
    text = (
        sample_workload().replace("seconds = 5", "num_frames = 121").replace("fps = 30", "fps = 24")
    )
    exp = expectations_for(load_workload(_wl(tmp_path, text)).workload, 0)
    assert exp is not None and exp.video is not None and exp.audio is not None
    assert exp.video.frames == 121 and exp.audio.samples == 242000  # 121 / 24 s at 48 kHz


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("warmup = 1", "warmpu = 1"), "unknown field `warmpu` - at `$.run`"),
        (lambda t: t.replace('size = "320x240"', 'size = "320*240"'), "at `$.request[0].size`"),
        (lambda t: t.replace("measured = 3", "measured = 0"), "at `$.run.measured`"),
        (lambda t: t.replace('kind = "videos-sync"', 'kind = "grpc"'), "at `$.endpoint.kind`"),
        (lambda t: t.replace('size = "320x240"\n', ""), "request[0]: `size` (WxH) is required"),
        (
            lambda t: t.replace("seconds = 5", "seconds = 5\nnum_frames = 100"),
            "is 150 frames, but num_frames = 100",
        ),
        (lambda t: t.replace("[endpoint]", "[endpoint"), "not valid TOML"),
        (lambda t: t.split("[[request]]")[0], "missing required field `request`"),
    ],
)
def test_malformed_workloads_name_the_file_and_field(
    tmp_path: Path, edit: object, message: str
) -> None:
    path = _wl(tmp_path, edit(sample_workload()))  # type: ignore[operator]
    with pytest.raises(WorkloadError) as info:  # a ConfigError still, for older callers
        load_workload(path)
    assert isinstance(info.value, ConfigError)
    assert str(path) in str(info.value) and message in str(info.value)


_CHAT = (
    '[endpoint]\nkind = "chat"\npath = "/v1/chat/completions"\nmodel = "m"\n'
    '{pin}\n[[request]]\nprompt = "hi"\nmax_tokens = 4\n'
)


@pytest.mark.parametrize(
    ("pin", "store", "message"),
    [
        ('path = "tok.json"', False, "endpoint.tokenizer: hashes to blake3:"),
        ("", False, "endpoint.tokenizer: no path, and no store to read blake3:"),
        ("", True, "endpoint.tokenizer: blake3:"),
    ],
)
def test_a_bad_tokenizer_pin_is_a_workload_error(
    tmp_path: Path, repo: Path, pin: str, store: bool, message: str
) -> None:
    """A tokenizer the workload pins but that cannot be had (other bytes, no store, not
    in the store) is the workload's fault: a WorkloadError naming the file and field."""
    (tmp_path / "tok.json").write_bytes(b"{}")
    digest = hash_bytes(b"another tokenizer").digest
    text = _CHAT.format(pin=f'\n[endpoint.tokenizer]\ndigest = "{digest}"\n{pin}\n')
    path = _wl(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        load_workload(path, store=local_store(repo) if store else None)
    assert str(info.value).startswith(f"workload {path}: ") and message in str(info.value)
    # The same workload with no pin loads, and counts no tokens itself.
    assert load_workload(_wl(tmp_path, _CHAT.format(pin=""))).tokenizer is None


def test_a_harness_run_counts_by_the_tokenizer_its_workload_pins(repo: Path) -> None:
    """``record_request`` counts by the workload's pinned tokenizer as the runner does:
    read by its digest from the store; one the store does not hold is a WorkloadError
    naming the digest, never a silent count of None."""
    data = b"not read: the pin is refused before the tokenizer is parsed"
    digest = hash_bytes(data).digest
    text = _CHAT.format(pin=f'\n[endpoint.tokenizer]\ndigest = "{digest}"\n').encode()
    run = open_run(repo, "pinned", arm="a", workload=text)
    with pytest.raises(WorkloadError) as info:
        run.workload_tokenizer()
    assert str(info.value) == (
        f"run 'pinned': workload: endpoint.tokenizer: {digest} is not in the store: put it "
        "there, or give the loaded tokenizer as tokenizer"
    )
    for name, workload in [("unpinned", _CHAT.format(pin="").encode()), ("bare", b"[x")]:
        assert open_run(repo, name, arm="a", workload=workload).workload_tokenizer() is None


def test_malformed_workload_exits_2_before_anything(
    tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _wl(tmp_path, sample_workload().replace("[audio]", "[audio]\nbits = 16"))
    code = main(
        [
            "run",
            str(path),
            "--arm",
            "a",
            "--server",
            "http://127.0.0.1:9",
            "--name",
            "x",
            "--root",
            str(repo),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown field `bits` - at `$.audio`" in err and str(path) in err
    assert not registration_path(repo, "x").exists()


def test_payloads_are_deterministic_multipart(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "ref.png").write_bytes(b"\x89PNG fake")
    text = (
        sample_workload()
        + '[[request.inputs]]\nfield = "input_reference"\npath = "ref.png"\nmedia_type = "image/png"\n'
    )
    loaded = load_workload(_wl(tmp_path, text))
    one, two = build_payload(loaded, 0), build_payload(loaded, 0)
    assert one.data == two.data and one.descriptor.digest == hash_bytes(one.data).digest
    boundary = one.content_type.split("boundary=")[1]
    body = one.data.decode("latin-1")
    assert body.startswith(f"--{boundary}\r\n") and body.endswith(f"--{boundary}--\r\n")
    assert 'name="size"\r\n\r\n320x240\r\n' in body and 'name="seconds"\r\n\r\n5\r\n' in body
    assert (
        'name="input_reference"; filename="ref.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG fake\r\n'
        in body
    )
    # by digest: read, verified, from the store
    store = local_store(repo)
    desc = store.put(b"\x89PNG fake")
    by_digest = _wl(
        tmp_path,
        text.replace('path = "ref.png"', f'digest = "{desc.digest}"\nfilename = "ref.png"'),
    )
    assert build_payload(load_workload(by_digest), 0, store).data == one.data
    missing = text.replace('path = "ref.png"', 'path = "nope.png"')
    with pytest.raises(
        ConfigError, match=r"request\[0\]\.inputs\[0\]\.path = 'nope\.png' .*: cannot read"
    ):
        build_payload(load_workload(_wl(tmp_path, missing)), 0)


def test_server_urls() -> None:
    assert (
        check_server_url("http://10.1.2.3:8000/") == "http://10.1.2.3:8000"
    )  # remote servers are fine
    assert check_server_url("https://gpu-7.example.org") == "https://gpu-7.example.org"
    for bad in ("ftp://x", "127.0.0.1:8000", "http://", "http://h/?x=1"):
        with pytest.raises(ConfigError, match=r"^server "):  # the parameter, not --server
            check_server_url(bad)


def _clip(tmp_path: Path, samples: int) -> bytes:
    pytest.importorskip("av")
    from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip

    path = tmp_path / f"clip-{samples}.mp4"
    write_clip(
        path,
        video=VideoSpec(width=64, height=48, rate=8, frames=8),
        audio=AudioSpec(samples=samples),
        format="mp4",
    )
    return path.read_bytes()


def test_a_harness_body_is_held_to_the_runners_size_limit(tmp_path: Path, repo: Path) -> None:
    """``record_request`` keeps a body by the runner's rule (``transport.output_limit``):
    an output up to the workload's ``max_output_size``, an error answer up to the
    control bound too, the default limit for a harness's own settings; past it nothing
    is kept and the request fails ``too-large`` with the runner's message. A limit out
    of range is the workload's fault."""
    from evidencestore.runs.models import MAX_OUTPUT_SIZE
    from evidencestore.runs.transport import CONTROL_MAX

    store = local_store(repo)
    limited = b"[run]\nmax_output_size = 100\n"
    run = open_run(repo, "limited", arm="a", workload=limited)
    assert run.max_output_size() == 100
    seen = Observation(sent_ns=1, first_byte_ns=2, last_byte_ns=3, end_ns=4, status=200)
    ok = run.record_request(seen, phase="measured", payload=b"p", body=b"x" * 100)
    assert ok.failure is None and ok.body is not None and ok.body.size == 100
    (tmp_path / "over").write_bytes(b"y" * 101)
    for body in (b"y" * 101, tmp_path / "over"):
        over = run.record_request(seen, phase="measured", payload=b"p", body=body)
        assert (over.failure, over.body, over.e2e_s) == ("too-large", None, None)
        assert over.message == (
            "the output is larger than the limit of 100 bytes; nothing past it was kept "
            "([run] max_output_size)"
        )
    assert not store.has(hash_bytes(b"y" * 101).digest)
    assert list(store.upkeep.iter_temporaries()) == []
    # An error answer past the control bound, under a larger max_output_size.
    error_page = tmp_path / "error.html"
    error_page.write_bytes(b"e" * (CONTROL_MAX + 1))
    big = open_run(repo, "big", arm="a", workload=b"[run]\nmax_output_size = 1099511627776\n")
    failed = big.record_request(
        Observation(sent_ns=1, end_ns=4, status=500), phase="measured", payload=b"p",
        body=error_page,
    )  # fmt: skip
    assert (failed.failure, failed.body) == ("too-large", None)
    assert f"limit of {CONTROL_MAX} bytes" in (failed.message or "")
    # A harness's own settings (not a TOML workload) get the default.
    assert open_run(repo, "own", arm="a", workload=b"[x").max_output_size() == MAX_OUTPUT_SIZE
    with pytest.raises(WorkloadError) as info:
        open_run(repo, "zero", arm="a", workload=b"[run]\nmax_output_size = 0\n").max_output_size()
    assert str(info.value).startswith("run 'zero': workload: ")
    assert "run.max_output_size" in str(info.value)


def test_a_body_cut_short_is_never_kept_whoever_recorded_it(repo: Path) -> None:
    """A harness that saw its stream time out or break keeps no partial body, as the
    runner keeps none (``transport.keeps_body``); a complete answer or an error answer
    is kept (the negative control: the same bytes, kept)."""
    store = local_store(repo)
    run = open_run(repo, "cut", arm="a", workload=b"[run]\n")
    partial = b"a partial answer, cut short"
    for failure in ("timeout", "truncated"):
        seen = Observation(sent_ns=1, end_ns=4, status=200, failure=failure, message="cut")
        cut = run.record_request(seen, phase="measured", payload=b"p", body=partial)
        assert (cut.failure, cut.body) == (failure, None)
    assert not store.has(hash_bytes(partial).digest)
    for status, failure in ((200, None), (503, "http-status")):
        seen = Observation(sent_ns=1, end_ns=4, status=status, failure=failure)
        kept = run.record_request(seen, phase="measured", payload=b"p", body=partial)
        assert kept.body is not None and kept.body.digest == hash_bytes(partial).digest


def test_recorder_for_harnesses(tmp_path: Path, repo: Path) -> None:
    from evidencestore.media.records import AudioExpectation, Expectations, VideoExpectation

    good, short = _clip(tmp_path, 48000), _clip(tmp_path, 24000)
    exp = Expectations(
        video=VideoExpectation(width=64, height=48, frame_rate=8, frames=8),
        audio=AudioExpectation(sample_rate=48000, channels=2, samples=48000),
    )
    (tmp_path / "engine.json").write_text('{"layers": 16}')
    (tmp_path / "server.log").write_text("ready\n")
    run = open_run(repo, "harness-1", arm="candidate", workload=b"# my harness\n", condition="1s")
    run.attach_config(tmp_path / "engine.json")
    run.attach_log(tmp_path / "server.log")
    (tmp_path / "body.mp4").write_bytes(good)
    a = run.record_request(
        Observation(sent_ns=10, first_byte_ns=20, last_byte_ns=40, end_ns=41, status=200),
        phase="warmup",
        payload=b"p",
        body=tmp_path / "body.mp4",
        expectations=exp,
    )
    b = run.record_request(
        Observation(sent_ns=100, first_byte_ns=150, last_byte_ns=300, end_ns=301, status=200),
        phase="measured",
        payload=b"p",
        body=good,
        expectations=exp,
    )
    c = run.record_request(
        Observation(sent_ns=400, first_byte_ns=450, last_byte_ns=600, end_ns=601, status=200),
        phase="measured",
        payload=b"p",
        body=short,
        expectations=exp,
    )
    assert (a.failure, b.failure, c.failure) == (None, None, "invalid-media")
    assert b.e2e_s == 200e-9 and b.ttfb_s == 50e-9 and c.e2e_s is None
    registration, record = run.seal()
    assert record.outcome == "partial" and record.counts["measured"].failures == {
        "invalid-media": 1
    }
    loaded = load_run(repo, "harness-1")
    assert loaded == record
    assert (
        loaded.condition == "1s" and loaded.workload_digest == hash_bytes(b"# my harness\n").digest
    )
    assert loaded.configs["configs/engine.json"].digest == hash_bytes(b'{"layers": 16}').digest
    reg = load_registration(registration_path(repo, "harness-1"))
    assert reg.digest == registration.digest and reg.manifest.metadata.annotations["kind"] == "run"
    assert {e.path for e in reg.manifest.entries} >= {
        "run.json",
        "workload/workload.toml",
        "configs/engine.json",
        "logs/server.log",
        "requests/00000/output",
        "requests/00002/check.json",
    }


def test_load_run_refuses_altered_or_foreign_bundles(tmp_path: Path, repo: Path) -> None:
    run = open_run(repo, "r", arm="a", workload=b"w")
    run.seal()
    path = repo / "evidence" / "r" / "run.json"
    data = json.loads(path.read_text())
    data["arm"] = "b"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="run.json: the run record hashes to blake3:"):
        load_run(repo, "r")
    with pytest.raises(ManifestError, match="no such registration"):
        load_run(repo, "absent")
    from evidencestore.bundle import create_bundle

    (tmp_path / "x.txt").write_text("x")
    create_bundle(repo, "plain", [tmp_path / "x.txt"], store=local_store(repo))
    with pytest.raises(ManifestError, match="bundle 'plain' is not a run"):
        load_run(repo, "plain")


def test_failed_before_inference_without_requests(repo: Path) -> None:
    run = open_run(repo, "empty", arm="a", workload=b"w")
    _, record = run.seal()
    assert record.outcome == "failed-before-inference" and record.reason == "no request was sent"


def test_diff_configs_by_key_path(tmp_path: Path, repo: Path) -> None:
    files = {
        "a": {
            "serve.json": '{"tp": 1, "cache": {"dtype": "fp8"}, "list": [1, 2]}',
            "base.toml": "[offload]\nlayers = 0\n",
            "notes.txt": "x",
        },
        "b": {
            "serve.json": '{"tp": 2, "cache": {}, "list": [1, 2, 3]}',
            "cand.toml": "[offload]\nlayers = 16\n",
            "notes.txt": "x",
        },
    }
    records = []
    for arm, contents in files.items():
        run = open_run(repo, f"d-{arm}", arm=arm, workload=b"w")
        for name, text in contents.items():
            (tmp_path / arm).mkdir(exist_ok=True)
            (tmp_path / arm / name).write_text(text)
            run.attach_config(tmp_path / arm / name)
        records.append(run.seal()[1])
    a, b = records
    diffs = [(d.key, d.a, d.b) for d in diff_configs(a, b, local_store(repo))]
    assert diffs == [
        ("configs/base.toml|configs/cand.toml:offload.layers", 0, 16),
        ("configs/serve.json:cache", "<absent>", {}),
        ("configs/serve.json:cache.dtype", "fp8", "<absent>"),
        ("configs/serve.json:list[2]", "<absent>", 3),
        ("configs/serve.json:tp", 1, 2),
    ]
    sections = {d.section for d in diff_runs(a, b, local_store(repo))}
    assert sections == {"config", "run"}  # same workload, server and client; arms differ


def test_statistics_match_numpy() -> None:
    np = pytest.importorskip("numpy")
    values = [3.1, 0.4, 2.2, 9.0, 5.5, 1.0, 7.25]
    for q in (0.0, 0.5, 0.9, 1.0):
        assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    stats = latency_stats(values)
    assert stats["sd"] == pytest.approx(float(np.std(values, ddof=1)))
    assert stats["mean"] == pytest.approx(float(np.mean(values)))
    assert latency_stats([2.0])["sd"] is None and latency_stats([])["n"] == 0


def test_diff_runs_workload_and_campaign_fields(repo: Path) -> None:
    a = open_run(repo, "w-a", arm="x", workload=b"measured = 3\n", condition="5s").seal()[1]
    b = open_run(repo, "w-b", arm="x", workload=b"measured = 5\n", condition="15s").seal()[1]
    diffs = [(d.section, d.key, d.a, d.b) for d in diff_runs(a, b, local_store(repo))]
    assert diffs == [
        ("workload", "workload_digest", a.workload_digest, b.workload_digest),
        ("run", "condition", "5s", "15s"),
    ]


def test_a_workload_nesting_bomb_is_a_clear_error(tmp_path: Path) -> None:
    from evidencestore.errors import ConfigError
    from evidencestore.runs.workload import load_workload

    bomb = tmp_path / "workload.toml"
    bomb.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"workload .*workload.toml: not valid TOML: nested too"):
        load_workload(bomb)
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 100 + "]" * 100 + "\n")
    with pytest.raises(ConfigError, match="nested deeper than 64 levels"):
        load_workload(deep)
