"""`evstore run --launch` / `[server] command`: the server's own provenance (argv, cwd,
environment names and allow-listed values, log, time to ready, exit status, /metrics
and /version before and after), a server that refuses its configuration or never gets
ready as a failed-before-inference run with its log, and protocol `require = [...]`."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from helpers.paths import ROOT

pytest.importorskip("aiohttp")

from evidencestore.campaign.members import campaign_runs
from evidencestore.campaign.protocol import load_campaign
from evidencestore.cli import main
from evidencestore.cli._common import flag_of
from evidencestore.config import Repository, local_store
from evidencestore.runs import load_run
from evidencestore.testing.llm_server import chat_workload

SERVER = [sys.executable, "-m", "evidencestore.testing.llm_server"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    return root


def _env_for_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The launched server imports this checkout's evidencestore.
    here = str(ROOT)
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_launch_records_the_servers_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _env_for_server(monkeypatch)
    monkeypatch.setenv("EVSTORE_TEST_SECRET", "hunter2-do-not-record")
    monkeypatch.setenv("EVSTORE_TEST_ALLOWED", "allowed-value")
    root = _repo(tmp_path)
    port = _port()
    argv = [*SERVER, "--port", str(port), "--itl", "0.001"]
    wl = tmp_path / "w.toml"
    wl.write_text(
        chat_workload(("a", "b"), max_tokens=4)
        + "\n[server]\n"
        + f"command = {json.dumps(argv)}\n"
        + 'env = ["EVSTORE_TEST_ALLOWED"]\nready_timeout = 60\n'
    )
    code = main(["run", str(wl), "--arm", "base", "--server", f"http://127.0.0.1:{port}",
                 "--name", "launched", "--root", str(root)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(stopped by the run), log logs/server.log" in out
    record = load_run(root, "launched")
    assert record.outcome == "complete"
    s = record.launched
    assert s is not None
    assert list(s.argv) == argv and s.cwd == os.getcwd()
    assert "EVSTORE_TEST_SECRET" in s.env_names and "PATH" in s.env_names
    assert s.env_values == {"EVSTORE_TEST_ALLOWED": "allowed-value"}
    data = (root / "evidence" / "launched" / "run.json").read_bytes()
    assert b"hunter2" not in data  # a value not allow-listed is never recorded
    assert s.ready_s is not None and s.ready_s > 0
    assert s.exit_status == 0 and s.stopped_by_run is True
    store = local_store(root)
    assert s.log is not None and record.logs["logs/server.log"] == s.log
    log = store.get(s.log.digest)
    assert f"reference LLM server reference-llm on http://127.0.0.1:{port}".encode() in log
    assert s.metrics_before is not None and s.metrics_before.body is not None
    assert s.metrics_after is not None and s.metrics_after.body is not None
    assert b"reference_requests_total 0\n" in store.get(s.metrics_before.body.digest)
    assert b"reference_requests_total 2\n" in store.get(s.metrics_after.body.digest)
    assert s.version_after is not None and s.version_after.body is not None
    version = json.loads(store.get(s.version_after.body.digest))
    assert version["server"] == "evidencestore-reference-llm"
    # The server does not outlive the run.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_launch_server_refusing_its_options_is_a_failed_run_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _env_for_server(monkeypatch)
    root = _repo(tmp_path)
    port = _port()
    wl = tmp_path / "w.toml"
    wl.write_text(chat_workload(("a",), max_tokens=4))
    command = " ".join([*SERVER, "--port", str(port), "--error-at", "2", "--drop-at", "3"])
    code = main(["run", str(wl), "--arm", "rank-local", "--server", f"http://127.0.0.1:{port}",
                 "--name", "refused", "--launch", command, "--root", str(root)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "failed-before-inference" in out
    assert "the server exited with status 2 before it was ready" in out
    record = load_run(root, "refused")
    assert record.outcome == "failed-before-inference" and record.requests == ()
    s = record.launched
    assert s is not None and s.exit_status == 2 and s.stopped_by_run is False
    assert s.ready_s is None and s.metrics_before is None
    assert s.log is not None
    log = local_store(root).get(s.log.digest).decode()
    # The server's own message is the evidence.
    assert "--error-at and --drop-at conflict: a stream ends one way, not both" in log
    reg = json.loads((root / "evidence" / "refused" / "bundle.json").read_text())
    paths = {e["path"] for e in reg["manifest"]["entries"]}
    assert "logs/server.log" in paths


def test_launch_server_never_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path)
    port = _port()
    wl = tmp_path / "w.toml"
    wl.write_text(chat_workload(("a",), max_tokens=4) + "\n[server]\nready_timeout = 0.5\n")
    command = (
        f"{sys.executable} -c \"import time; print('warming up', flush=True); time.sleep(60)\""
    )
    code = main(["run", str(wl), "--arm", "a", "--server", f"http://127.0.0.1:{port}",
                 "--name", "slow", "--launch", command, "--root", str(root)])  # fmt: skip
    assert code == 1
    record = load_run(root, "slow")
    s = record.launched
    assert record.outcome == "failed-before-inference"
    assert s is not None and s.ready_s is None and s.stopped_by_run is True
    assert s.message == f"the server was not ready within 0.5 s (http://127.0.0.1:{port}/health)"
    assert s.exit_status is not None and s.exit_status < 0  # ended by a signal
    assert s.log is not None
    assert local_store(root).get(s.log.digest) == b"warming up\n"
    capsys.readouterr()


def test_launch_bad_command_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    wl = tmp_path / "w.toml"
    wl.write_text(chat_workload(("a",), max_tokens=4))
    code = main(["run", str(wl), "--arm", "a", "--server", "http://127.0.0.1:9",
                 "--name", "x", "--launch", "'unbalanced", "--root", str(root)])  # fmt: skip
    assert code == 2
    assert '--launch "\'unbalanced": cannot be split into arguments' in capsys.readouterr().err
    assert not (root / "evidence" / "x").exists()


PROTOCOL = """name = "prov"
require = ["server.argv", "server.log", "metrics"]

[[condition]]
name = "c"
workload = "w.toml"

[[arm]]
name = "baseline"
baseline = true
runs = 2

[[arm]]
name = "cand"
"""


def test_protocol_requires_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidencestore.testing.llm_server import serve_llm

    _env_for_server(monkeypatch)
    root = _repo(tmp_path)
    src = tmp_path / "proto"
    src.mkdir()
    (src / "w.toml").write_text(chat_workload(("a",), max_tokens=4))
    (src / "protocol.toml").write_text(PROTOCOL)
    assert main(["campaign", "init", "prov", "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    wl = str(root / "evidence" / "prov" / "w.toml")
    with serve_llm() as llm:
        assert main(["-q", "run", wl, "--arm", "baseline", "--server", llm.url, "--name",
                     "plain", "--campaign", "prov", "--condition", "c",
                     "--root", str(root)]) == 0  # fmt: skip
    port = _port()
    command = " ".join([*SERVER, "--port", str(port)])
    assert main(["-q", "run", wl, "--arm", "baseline", "--server", f"http://127.0.0.1:{port}",
                 "--name", "launched", "--launch", command, "--campaign", "prov",
                 "--condition", "c", "--root", str(root)]) == 0  # fmt: skip
    members = campaign_runs(root, load_campaign(root, "prov"))
    assert [m.name for m in members.runs] == ["launched"]
    (excluded,) = members.excluded
    assert excluded.run == "plain" and excluded.code == "missing-provenance"
    assert "server.argv, server.log, metrics" in excluded.message
    capsys.readouterr()


def test_one_preflight_for_run_launch_and_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run`, `run --launch`, `run_workload` and `launch_and_run` check what they are given
    by one pre-flight, with one error text each, before a server is started or a byte sent."""
    from evidencestore.errors import EvidenceStoreError
    from evidencestore.runs import open_run, run_workload
    from evidencestore.runs.launch import launch_and_run

    root = _repo(tmp_path)
    marker = tmp_path / "server-started"
    wl = tmp_path / "w.toml"
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    wl.write_text(chat_workload(("a",), max_tokens=4))
    open_run(root, "taken", arm="a", workload=b"# w\n").seal()
    url = f"http://127.0.0.1:{_port()}"
    cases = {
        "no such config": ({"name": "n", "configs": [str(tmp_path / "absent.yaml")]}, "absent.yaml: no such file"),
        "name taken": ({"name": "taken"}, "bundle 'taken' is already registered"),
        "bad url": ({"name": "n", "server": "ftp://x"}, "expected an http:// or https:// URL"),
    }  # fmt: skip
    for what, (given, expected) in cases.items():
        kw: dict[str, object] = {"arm": "a", "server": url, **given}
        texts, library = [], []  # the CLI's words, and the library's (its parameters)
        with pytest.raises(EvidenceStoreError) as info:
            run_workload(root, wl, **kw)  # type: ignore[arg-type]
        texts.append(info.value.worded(flag_of))
        library.append(str(info.value))
        with pytest.raises(EvidenceStoreError) as info:
            launch_and_run(root, wl, command=argv, **kw)  # type: ignore[arg-type]
        texts.append(info.value.worded(flag_of))
        library.append(str(info.value))
        flags = ["--arm", "a", "--server", str(kw["server"]), "--name", str(kw["name"])]
        for config in kw.get("configs", []):  # type: ignore[attr-defined]
            flags += ["--config", config]
        for launch in ([], ["--launch", " ".join(argv)]):
            code = main(["run", str(wl), *flags, *launch, "--root", str(root)])
            err = capsys.readouterr().err
            assert code == 2, (what, err)
            texts.append(err.strip().removeprefix("evstore: error: "))
        assert expected in texts[0], (what, texts)
        assert len(set(texts)) == 1, (what, texts)  # one text, whoever asked
        assert len(set(library)) == 1 and expected in library[0], (what, library)
        assert not marker.exists(), what  # refused before the server was started
    assert sorted(p.name for p in (root / "evidence").iterdir()) == ["taken"]


_CONTROL_SERVER = """
import http.server, os, sys, threading

port, mode = int(sys.argv[1]), sys.argv[2]
# Gone as soon as the run closes its stdin (no wait for a signal).
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health" and mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/ready")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/version":
            self.send_response(307)
            self.send_header("Location", "/health")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"m" * ((16 << 20) + 1) if self.path == "/metrics" else b"ok"
        self.send_response(200)
        self.end_headers()  # no Content-Length: the reader learns the size as it reads
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.parametrize("proxy", [False, True])
def test_a_launched_servers_control_answers_follow_the_transport_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proxy: bool
) -> None:
    """Readiness, /metrics and /version go through the transport: a redirected health
    check is not ready (no redirect followed, none through a proxy in the environment),
    a /metrics answer past 16 MiB is refused naming its URL and the limit (not kept cut
    short), a redirected /version is its 3xx."""
    from evidencestore.runs.launch import MAX_ANSWER, launch_and_run

    if proxy:  # a proxy from the environment would refuse everything: never taken
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
    script = tmp_path / "control_server.py"
    script.write_text(_CONTROL_SERVER)
    root = _repo(tmp_path)
    records = {}
    for mode in ("redirect", "plain"):
        port = _port()
        wl = tmp_path / f"{mode}.toml"
        wl.write_text(
            chat_workload(("a",), max_tokens=4)
            + f"\n[server]\ncommand = {json.dumps([sys.executable, str(script), str(port), mode])}"
            + f"\nready_timeout = {1 if mode == 'redirect' else 30}\n"
        )
        _, records[mode] = launch_and_run(
            root, wl, command=None, arm="a", server=f"http://127.0.0.1:{port}", name=mode
        )
    redirected = records["redirect"]
    assert redirected.outcome == "failed-before-inference"
    assert redirected.launched is not None and redirected.launched.ready_s is None
    assert "the server was not ready within 1 s" in (redirected.launched.message or "")
    plain = records["plain"].launched
    assert plain is not None and plain.ready_s is not None
    url = f"{records['plain'].server.url}/metrics"
    for metrics in (plain.metrics_before, plain.metrics_after):
        assert metrics is not None and metrics.body is None and metrics.status == 200
        assert metrics.error == f"the answer to {url} is larger than {MAX_ANSWER} bytes"
    assert plain.version_before is not None and plain.version_before.body is None
    assert (plain.version_before.status, plain.version_before.error) == (307, "HTTP 307")


def _left_open(root: Path) -> list[str]:
    """What an opened run holds until it is sealed or abandoned: its lease
    (``<store>/leases/active-*``) and its body temporaries (``<store>/incoming/``)."""
    store = root / ".evstore"
    return sorted(
        str(p.relative_to(store))
        for where in ("leases", "incoming")
        if (store / where).is_dir()
        for p in (store / where).iterdir()
    )


def test_a_bad_server_section_is_refused_before_the_run_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `[server] cwd` that is no directory, or no server to launch, is refused by the
    pre-flight with its one text, before the run is opened: no lease, no temporary, no
    bundle is left behind, from the CLI (`run`, `run --launch`) or the library."""
    from evidencestore.errors import WorkloadError
    from evidencestore.runs.launch import launch_and_run

    root = _repo(tmp_path)
    marker = tmp_path / "server-started"
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    wl = tmp_path / "w.toml"
    wl.write_text(
        chat_workload(("a",), max_tokens=4)
        + f'\n[server]\ncommand = {json.dumps(argv)}\ncwd = "absent"\n'
    )
    expected = f"workload {wl}: [server] cwd 'absent': not a directory"
    url = f"http://127.0.0.1:{_port()}"
    common = ["--arm", "a", "--server", url, "--name", "x", "--root", str(root)]
    for launch in ([], ["--launch", " ".join(argv)]):
        assert main(["run", str(wl), *common, *launch]) == 2
        assert capsys.readouterr().err.strip() == f"evstore: error: {expected}"
        assert _left_open(root) == [], launch
    with pytest.raises(WorkloadError) as info:
        launch_and_run(root, wl, command=argv, arm="a", server=url, name="x")
    assert str(info.value) == expected
    assert _left_open(root) == []

    plain = tmp_path / "plain.toml"
    plain.write_text(chat_workload(("a",), max_tokens=4))
    with pytest.raises(WorkloadError) as info:
        launch_and_run(root, plain, command=None, arm="a", server=url, name="x")
    assert str(info.value) == (
        f'workload {plain}: no server to launch: give command "CMD ..." or [server] command = [...]'
    )
    assert info.value.worded(flag_of).startswith(
        f'workload {plain}: no server to launch: give --launch "CMD'
    )
    assert _left_open(root) == []
    assert not marker.exists() and not (root / "evidence" / "x").exists()


def test_an_error_after_the_run_is_opened_abandons_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that escapes a run opened by its pre-flight (here, before a byte is
    sent) registers nothing and ends the run's lease (negative control: the lease is
    held while a run is open)."""
    import evidencestore.runs.runner as runner
    from evidencestore.runs.launch import launch_and_run
    from evidencestore.runs.preflight import preflight

    root = _repo(tmp_path)
    wl = tmp_path / "w.toml"
    wl.write_text(chat_workload(("a",), max_tokens=4))
    url = f"http://127.0.0.1:{_port()}"
    opened = preflight(Repository(root), wl, arm="a", server=url, name="held")
    assert [p.split("/")[0] for p in _left_open(root)] == ["leases"]  # the control
    opened.recorder.abandon()
    assert _left_open(root) == []

    def broken(kind: str) -> object:
        raise RuntimeError(f"no endpoint {kind}")

    monkeypatch.setattr(runner, "endpoint_for", broken)
    with pytest.raises(RuntimeError, match="no endpoint chat"):
        runner.run_workload(root, wl, arm="a", server=url, name="x")
    assert _left_open(root) == []
    _env_for_server(monkeypatch)  # a launched server that gets ready, then the error
    port = _port()
    argv = [*SERVER, "--port", str(port)]
    with pytest.raises(RuntimeError, match="no endpoint chat"):
        launch_and_run(root, wl, command=argv, arm="a", server=f"http://127.0.0.1:{port}", name="x")
    assert _left_open(root) == []
    assert not (root / "evidence" / "x").exists()
