"""Runs confined (issue 19): nothing a workload or protocol names is read from outside the repository or
its own directory, no workload value fails a run after it started, a started run is
always registered, ``campaign init`` registers all or nothing, and gc never deletes the
body a live run is receiving.

Each bad input exits 2 naming the workload (or protocol) file, the request and the
field, and nothing is sent: the server below counts every request it receives.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from helpers.repos import init_repo

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.confined import read_file
from evidencestore.digest import hash_bytes
from evidencestore.errors import BodyTooLarge, ConfigError
from evidencestore.gc import collect_garbage
from evidencestore.inventory import registration_path
from evidencestore.runs import judge, load_run, run_workload, transport
from evidencestore.runs import runner as runner_module
from evidencestore.runs.body import BodySink
from evidencestore.testing.hostile import HostileServer, hostile_workload, serve_hostile
from evidencestore.testing.interleave import Interleaving

SECRET = "hunter2-evstore-secret"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def well_behaved_server() -> Iterator[HostileServer]:
    with serve_hostile("well-behaved") as s:
        yield s


def _run(
    repo: Path, wl: Path, well_behaved_server: HostileServer, *extra: str
) -> tuple[int, str, str]:
    return _cli(
        "run", str(wl), "--arm", "a", "--server", well_behaved_server.url, "--name", "r",
        "--root", str(repo), *extra,
    )  # fmt: skip


def _with_input(tmp_path: Path, path: str) -> Path:
    wl = hostile_workload(tmp_path, "well-behaved")
    wl.write_text(
        wl.read_text() + f'[[request.inputs]]\nfield = "input_reference"\npath = "{path}"\n'
    )
    return wl


def _nothing_sent_nothing_kept(repo: Path, well_behaved_server: HostileServer) -> None:
    assert [r for r in well_behaved_server.requests if r[0] == "POST"] == []
    assert not registration_path(repo, "r").exists()
    store = local_store(repo)
    for blob in store.upkeep.iter_blobs():
        assert SECRET.encode() not in store.get(blob.digest)


# -- 1, 5, 7: the one file-reading rule ------------------------------------------------
@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("../../../../../../../../etc/passwd", "is outside"),
        ("/etc/passwd", "is outside"),
        ("/proc/self/environ", "a /proc file"),
        ("/dev/zero", "a /dev file"),
        ("link-to-passwd", "(a symlink to /etc/passwd) is outside"),
        ("link-to-environ", "a /proc file"),
        ("fifo", "is a FIFO: expected a regular file"),
        ("folder", "is a directory: expected a regular file"),
        ("missing.png", "cannot read: No such file or directory"),
    ],
)
def test_workload_inputs_are_confined(
    tmp_path: Path,
    repo: Path,
    well_behaved_server: HostileServer,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    says: str,
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    (tmp_path / "link-to-passwd").symlink_to("/etc/passwd")
    (tmp_path / "link-to-environ").symlink_to("/proc/self/environ")
    os.mkfifo(tmp_path / "fifo")  # read, it would block for ever
    (tmp_path / "folder").mkdir()
    wl = _with_input(tmp_path, path)
    code, _, err = _run(repo, wl, well_behaved_server)
    assert code == 2, err
    assert f"workload {wl}: request[0].inputs[0].path = {path!r}" in err
    assert says in err and "internal error" not in err
    _nothing_sent_nothing_kept(repo, well_behaved_server)


def test_inputs_inside_the_workload_directory_or_the_repository_are_read(
    tmp_path: Path, repo: Path, well_behaved_server: HostileServer
) -> None:
    (tmp_path / "ref.png").write_bytes(b"\x89PNG beside the workload")
    (repo / "inputs").mkdir()
    (repo / "inputs" / "ref2.png").write_bytes(b"\x89PNG in the repository")
    (tmp_path / "in-repo.png").symlink_to(repo / "inputs" / "ref2.png")
    wl = _with_input(tmp_path, "ref.png")
    wl.write_text(wl.read_text() + '[[request.inputs]]\nfield = "second"\npath = "in-repo.png"\n')
    code, out, err = _run(repo, wl, well_behaved_server)
    assert code == 0, out + err
    sent = local_store(repo).get(load_run(repo, "r").requests[0].payload.digest)
    assert b"\x89PNG beside the workload" in sent and b"\x89PNG in the repository" in sent


def test_the_rule_bounds_sizes_and_refuses_a_file_that_grows(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 100)
    with pytest.raises(ConfigError, match=r"where: .*big\.bin is 100 bytes, more than the 99"):
        read_file(big, [tmp_path], limit=99, where="where")
    assert read_file(big, [tmp_path], limit=100, where="where") == b"x" * 100


@pytest.mark.parametrize("kind", ["symlink", "fifo", "proc"])
def test_workload_file_itself_config_and_log(
    tmp_path: Path, repo: Path, well_behaved_server: HostileServer, kind: str
) -> None:
    wl = hostile_workload(tmp_path, "well-behaved")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.toml").write_text(wl.read_text() + f"# {SECRET}\n")
    here = tmp_path / "here"
    here.mkdir()
    bad = here / "file"
    if kind == "symlink":
        bad.symlink_to(outside / "secret.toml")
    elif kind == "fifo":
        os.mkfifo(bad)
    else:
        bad = Path("/proc/self/environ")
    code, _, err = _run(repo, bad, well_behaved_server)
    assert code == 2 and f"workload {bad}" in err, err
    code, _, err = _run(repo, wl, well_behaved_server, "--config", str(bad))
    assert code == 2 and f"--config {bad}" in err, err
    code, _, err = _run(repo, wl, well_behaved_server, "--server-log", str(bad))
    assert code == 2 and f"--server-log {bad}" in err, err
    _nothing_sent_nothing_kept(repo, well_behaved_server)


def test_bundle_create_refuses_proc_files(repo: Path) -> None:
    code, _, err = _cli("bundle", "create", "b", "/proc/self/environ", "--root", str(repo))
    assert code == 2 and "/proc/self/environ: a /proc file, not evidence" in err


# -- 5: workload values ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("seconds = 1", "seconds = inf"), "request[0].seconds"),
        (("seconds = 1", "seconds = nan"), "request[0].seconds"),
        (("seconds = 1", "seconds = 1e308"), "request[0].seconds"),
        (("timeout = 20.0", "timeout = inf"), "run.timeout"),
        (("poll_interval = 0.01", "poll_interval = inf"), "endpoint.poll_interval"),
        (("measured = 2", "measured = 1000000000"), "run.measured"),
        (("fps = 8", "fps = 8\nseed = 99999999999999999999"), "request[0].seed"),
        (("fps = 8", "fps = 8\nfields = { guidance = inf }"), "request[0].fields.guidance"),
        (("fps = 8", "fps = 100000"), "request[0].fps"),
        (("max_output_size = 1048576", "max_output_size = 0"), "run.max_output_size"),
        (('path = "/v1/videos/sync"', 'path = "/v1/x\\u0001"'), "endpoint.path"),
        (("[run]", 'health_path = "/../x"\n[run]'), "endpoint.health_path"),
    ],
)
def test_every_workload_value_is_checked_before_anything_is_sent(
    tmp_path: Path,
    repo: Path,
    well_behaved_server: HostileServer,
    edit: tuple[str, str],
    field: str,
) -> None:
    wl = hostile_workload(tmp_path, "well-behaved")
    text = wl.read_text()
    assert edit[0] in text
    wl.write_text(text.replace(edit[0], edit[1], 1))
    code, _, err = _run(repo, wl, well_behaved_server)
    assert code == 2, err
    assert f"workload {wl}" in err and "internal error" not in err
    assert field in err or f"`$.{field}`" in err, err
    assert well_behaved_server.requests == []
    assert not registration_path(repo, "r").exists()


# -- 3, 8: a run that starts is registered -------------------------------------------
def test_an_internal_error_while_sending_still_registers_the_run(
    tmp_path: Path, repo: Path, well_behaved_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: object, *args: object) -> None:
        raise RuntimeError("boom in the exchange")

    monkeypatch.setattr(transport, "_post", broken)
    wl = hostile_workload(tmp_path, "well-behaved")
    code, out, err = _run(repo, wl, well_behaved_server)
    assert code == 1, out + err
    record = load_run(repo, "r")
    assert record.outcome == "failed-before-inference" and record.server.ok
    assert record.reason is not None
    assert record.reason.startswith(
        "internal error while sending the requests: RuntimeError: boom in the exchange"
    )
    assert "internal error while sending" in out
    assert _cli("verify", "--root", str(repo))[0] == 0


def test_an_internal_error_while_checking_keeps_the_measurements(
    tmp_path: Path, repo: Path, well_behaved_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def broken(*args: object) -> None:
        calls.append(args)
        if len(calls) == 2:
            raise MemoryError("decoder ran out")
        return None

    monkeypatch.setattr(judge, "json_problem", broken)
    wl = hostile_workload(tmp_path, "well-behaved")
    _, record = run_workload(
        repo, wl, arm="a", server=well_behaved_server.url, name="r", store=local_store(repo)
    )
    assert record.outcome == "partial"
    assert record.reason is not None and "while checking request 1: MemoryError" in record.reason
    first, second = record.requests
    assert first.failure is None and first.body is not None and first.e2e_s is not None
    assert second.body is None  # its body was not checked, so it is not an output
    assert load_run(repo, "r") == record


# -- 6, 7: campaign init is atomic and confined ---------------------------------------
PROTOCOL = """\
name = "c"
[timing]
min_runs = 2
[quality]
non_repeatable_baseline = "inconclusive"
[[condition]]
name = "5s"
workload = "WORKLOAD"
[[arm]]
name = "baseline"
baseline = true
runs = 2
configs = CONFIGS
[[arm]]
name = "candidate"
runs = 1
"""


def _protocol(tmp_path: Path, workload: str = "wl.toml", configs: str = "[]") -> Path:
    folder = tmp_path / "proto"
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    hostile_workload(folder, "well-behaved").rename(folder / "wl.toml")
    path = folder / "protocol.toml"
    path.write_text(PROTOCOL.replace("WORKLOAD", workload).replace("CONFIGS", configs))
    return path


@pytest.mark.parametrize(
    ("workload", "configs", "says"),
    [
        ("sub/../wl.toml", "[]", "'sub/../wl.toml' cannot be an entry of the protocol bundle"),
        ("wl.toml", '["cfg.yaml"]', "(a symlink to /etc/hostname) is outside"),
        ("wl.toml", '["../outside.yaml"]', "'../outside.yaml' cannot be an entry"),
        ("wl.toml", '["fifo"]', "is a FIFO"),
        ("bad.toml", "[]", "bad.toml: Expected `float` <= 604800.0 - at `$.run.timeout`"),
    ],
)
def test_campaign_init_registers_nothing_on_error(
    tmp_path: Path, repo: Path, workload: str, configs: str, says: str
) -> None:
    path = _protocol(tmp_path, workload, configs)
    (path.parent / "cfg.yaml").symlink_to("/etc/hostname")
    (tmp_path / "outside.yaml").write_text("secret: 1\n")
    os.mkfifo(path.parent / "fifo")
    (path.parent / "bad.toml").write_text("[run]\ntimeout = inf\n")
    code, _, err = _cli("campaign", "init", "c", "--protocol", str(path), "--root", str(repo))
    assert code == 2 and says in err, err
    assert not registration_path(repo, "c").exists()
    # the name is not burnt: a corrected protocol registers under it
    good = _protocol(tmp_path)
    code, out, err = _cli("campaign", "init", "c", "--protocol", str(good), "--root", str(repo))
    assert code == 0, out + err
    assert _cli("campaign", "status", "c", "--root", str(repo))[0] in (0, 1)


def test_protocol_argument_symlink_leaving_its_directory_is_refused(
    tmp_path: Path, repo: Path
) -> None:
    real = _protocol(tmp_path)
    link = tmp_path / "elsewhere" / "protocol.toml"
    link.parent.mkdir()
    link.symlink_to(real)
    code, _, err = _cli("campaign", "init", "c", "--protocol", str(link), "--root", str(repo))
    assert code == 2 and f"protocol {link}" in err and "is outside" in err, err
    assert not registration_path(repo, "c").exists()


# -- 4: bounded bodies -----------------------------------------------------------------
def test_a_sink_never_writes_past_its_limit(repo: Path) -> None:
    sink = BodySink(local_store(repo), limit=10)
    sink.write(b"123456")
    with pytest.raises(BodyTooLarge, match="larger than the limit of 10 bytes"):
        sink.write(b"789012")
    sink.finish()
    assert sink.size == 6 and sink.tmp is not None and sink.tmp.stat().st_size == 6
    sink.discard()


# -- 8: incoming temporaries are locked against gc ------------------------------------
@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "git-repo")
    (root / "evidence").mkdir()
    (root / "evstore.toml").write_text("")
    return root


def test_gc_grace_0_never_deletes_a_live_body(git_repo: Path) -> None:
    store = local_store(git_repo)
    sink = BodySink(store, limit=1 << 20)
    sink.write(b"first half ")
    plan = collect_garbage(git_repo, delete=True, grace=0)
    assert plan.temporaries == [] and sink.tmp is not None and sink.tmp.exists()
    sink.write(b"second half")
    sink.finish()
    desc = sink.publish("text/plain")
    assert store.get(desc.digest) == b"first half second half"
    # a leftover nobody holds (a killed run) is removed
    dead = store.upkeep.incoming_path()
    dead.write_bytes(b"left by a killed run")
    plan = collect_garbage(git_repo, delete=True, grace=0)
    assert plan.temporaries == [str(dead)] and not dead.exists()


def test_gc_between_creation_and_lock_makes_the_sink_start_again(git_repo: Path) -> None:
    store = local_store(git_repo)
    with Interleaving() as il:
        il.start("sink", lambda: BodySink(store, limit=100), pause_at="incoming:created")
        assert il.wait_paused("sink") == "incoming:created"
        (created,) = list((store.root / "incoming").iterdir())
        plan = collect_garbage(git_repo, delete=True, grace=0)  # not yet locked: removed
        assert plan.temporaries == [str(created)] and not created.exists()
        il.resume("sink")
        sink: BodySink = il.join("sink")
    assert il.points("sink") == ["incoming:created", "incoming:created"]
    assert sink.tmp is not None and sink.tmp != created and sink.tmp.exists()
    sink.write(b"kept")
    sink.finish()
    assert store.get(sink.publish("text/plain").digest) == b"kept"


def test_gc_during_a_run_loses_nothing(
    tmp_path: Path, git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc --grace 0 runs between a body's last byte and its publication (the runner
    publishes after the timed requests): the run's outputs all survive."""
    ran = []
    finish = runner_module._finish

    def gc_then_finish(*args: object, **kw: object) -> None:
        ran.append(collect_garbage(git_repo, delete=True, grace=0))
        finish(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(runner_module, "_finish", gc_then_finish)
    wl = hostile_workload(tmp_path, "well-behaved", measured=3)
    with serve_hostile("well-behaved") as well_behaved_server:
        _, record = run_workload(git_repo, wl, arm="a", server=well_behaved_server.url, name="r")
    assert ran and ran[0].temporaries == []
    assert record.outcome == "complete" and len(record.requests) == 3
    body = local_store(git_repo).get(record.requests[0].body.digest)  # type: ignore[union-attr]
    assert hash_bytes(body).digest == record.requests[0].body.digest  # type: ignore[union-attr]


def test_a_harness_cannot_register_an_invalid_media_type(repo: Path) -> None:
    from evidencestore.runs import Observation, open_run

    run = open_run(repo, "h", arm="a", workload=b"# w\n")
    with pytest.raises(ConfigError, match=r"media type '<script>' of request 0: expected"):
        run.record_request(
            Observation(sent_ns=1, end_ns=2, media_type="<script>"), phase="measured", payload=b""
        )
    run.record_request(Observation(sent_ns=1, end_ns=2), phase="measured", payload=b"p", body=b"x")
    _, record = run.seal()
    assert record.requests[0].body is not None
    assert record.requests[0].body.media_type == "video/mp4"
