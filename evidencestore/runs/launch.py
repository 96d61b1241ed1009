"""A run that starts its server itself (``evstore run --launch "CMD ..."`` or the
workload's ``[server] command``): the server's own provenance.

The command is started without a shell, its stdout and stderr going to one log file;
the run records its argv, working directory, the names of every environment variable it
was given and the values of the allow-listed ones only (``[server] env``: never any
other value, secrets stay out), then waits for the health path to answer 2xx. A server
that exits first, or is not ready within ``ready_timeout``, makes a
``failed-before-inference`` run holding its log and exit status, no request sent. A
ready one has its ``/metrics`` (Prometheus text) and ``/version`` captured, the
workload runs (``runner.run_workload``), both are captured again, and the server is
stopped (its stdin closed, then SIGTERM, then SIGKILL) before the run is sealed with
its log (``logs/server.log``), time to ready and exit status.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from .._keywords import check_keywords
from ..errors import ConfigError
from ..models import Registration
from ..progress import Observer, Tick
from .models import Exchange, LaunchedServer, RunRecord, ServerIdentity, ServerSection
from .recorder import RunRecorder
from .transport import CONTROL_MAX, get_once

if TYPE_CHECKING:
    from .preflight import Prepared, RunOptions

__all__ = ["MAX_SERVER_LOG", "launch_and_run", "launch_prepared", "parse_command"]

#: The most of a launched server's log kept (its tail beyond that is cut, and said so).
MAX_SERVER_LOG = 256 << 20
#: The most of a /metrics or /version answer kept (a larger one is an error, not kept).
MAX_ANSWER = CONTROL_MAX
_POLL = 0.05


def parse_command(command: str) -> tuple[str, ...]:
    """``--launch "CMD ..."`` split as a POSIX shell would (no shell runs it)."""
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise ConfigError(
            f"{{command}} {command!r}: cannot be split into arguments: {exc}",
            parameters=("command",),
        ) from None
    if not argv:
        raise ConfigError("{command}: an empty command", parameters=("command",))
    return argv


class _Server:
    """A started server process and its log file."""

    def __init__(self, argv: Sequence[str], cwd: Path, log_dir: Path) -> None:
        self.argv = tuple(argv)
        self.cwd = cwd
        self.log_path = log_dir / "server.log"
        self.env = dict(os.environ)
        self.started = time.monotonic()
        with open(self.log_path, "wb") as log:
            try:
                self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    self.argv,
                    cwd=cwd,
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                self.error: str | None = None
            except OSError as exc:
                self.proc = None
                self.error = f"the server could not be started: {self.argv[0]}: {exc.strerror}"

    def wait_ready(
        self, url: str, timeout: float, observer: Observer | None = None, label: str = ""
    ) -> tuple[float | None, str | None]:
        """Seconds to the first 2xx of ``url``, or None and why not; ``observer`` hears
        of the seconds waited (of ``timeout``) at each try."""
        if self.proc is None:
            return None, self.error
        deadline = self.started + timeout
        while True:
            if observer is not None:
                waited = int(time.monotonic() - self.started)
                observer(
                    Tick(
                        label,
                        waited,
                        math.ceil(timeout),
                        "s",
                        what="waiting for the server",
                        rate=False,
                    )
                )
            code = self.proc.poll()
            if code is not None:
                return None, f"the server exited with status {code} before it was ready"
            status = get_once(url, max(0.1, min(5.0, timeout))).status
            if status is not None and 200 <= status < 300:
                return time.monotonic() - self.started, None
            if time.monotonic() > deadline:
                return None, f"the server was not ready within {timeout:g} s ({url})"
            time.sleep(_POLL)

    def stop(self) -> tuple[int | None, bool]:
        """Stop the server (stdin closed, SIGTERM, SIGKILL); its exit status and whether
        this run stopped it (False: it had exited by itself)."""
        if self.proc is None:
            return None, False
        code = self.proc.poll()
        if code is not None:
            return code, False
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        for sig, wait in ((None, 5.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
            try:
                return self.proc.wait(timeout=wait), True
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll(), True

    def log(self) -> tuple[bytes, bool]:
        """The log's bytes (at most :data:`MAX_SERVER_LOG`) and whether it was cut."""
        with open(self.log_path, "rb") as fh:
            data = fh.read(MAX_SERVER_LOG + 1)
        return data[:MAX_SERVER_LOG], len(data) > MAX_SERVER_LOG


def _get(url: str, path: str) -> tuple[Exchange, bytes | None]:
    """One GET (``transport.get_once``): the exchange (its body not yet stored) and the
    body's bytes, None unless a 2xx answer within :data:`MAX_ANSWER` came."""
    got = get_once(url + path, 10, MAX_ANSWER)
    return Exchange(path=path, status=got.status, error=got.error), got.body


def _captured(recorder: RunRecorder, base: str, path: str, when: str) -> Exchange:
    """GET ``path`` of the launched server, its body kept as entry
    ``server/<path>-<when>``."""
    got, body = _get(base, path)
    if body is None:
        return got
    desc = recorder.put(_entry(path, when), body, _media(path), "server")
    return Exchange(path=path, status=got.status, body=desc)


def _entry(path: str, when: str) -> str:
    return f"server/{path.strip('/').replace('/', '-') or 'root'}-{when}"


def _media(path: str) -> str:
    return "application/json" if "version" in path else "text/plain"


def _env(env: dict[str, str], allow: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    return tuple(sorted(env)), {k: env[k] for k in sorted(set(allow)) if k in env}


def _launched(
    server: _Server,
    recorder: RunRecorder,
    allow: Sequence[str],
    ready_s: float | None,
    message: str | None,
    exchanges: dict[str, Exchange],
) -> LaunchedServer:
    exit_status, stopped = server.stop()
    data, cut = server.log()
    if cut:
        message = (message + "; " if message else "") + (
            f"the server log was cut at {MAX_SERVER_LOG} bytes"
        )
    log = recorder.put("logs/server.log", data, "text/plain", "log")
    recorder.logs["logs/server.log"] = log
    names, values = _env(server.env, allow)
    return LaunchedServer(
        argv=server.argv,
        cwd=str(server.cwd),
        env_names=names,
        env_values=values,
        log=log,
        ready_s=ready_s,
        exit_status=exit_status,
        stopped_by_run=stopped,
        message=message,
        metrics_before=exchanges.get("metrics_before"),
        metrics_after=exchanges.get("metrics_after"),
        version_before=exchanges.get("version_before"),
        version_after=exchanges.get("version_after"),
    )


def launch_and_run(
    root: str | os.PathLike[str],
    workload_path: str | os.PathLike[str],
    *,
    command: Sequence[str] | None,
    arm: str,
    server: str,
    name: str,
    observer: Observer | None = None,
    **options: Unpack[RunOptions],
) -> tuple[Registration, RunRecord]:
    """Start the server (``command``, else the workload's ``[server] command``), run
    the workload against ``server`` once it is ready, stop it, and register the run with
    the server's provenance (see the module). A server that exits or never gets ready is
    a registered ``failed-before-inference`` run with its log."""
    from ..config import as_repository
    from .preflight import RunOptions, preflight

    check_keywords("launch_and_run", options, RunOptions)

    # Everything the run needs is checked, and the run opened, before the server starts.
    prepared = preflight(
        as_repository(root),
        workload_path,
        arm=arm,
        server=server,
        name=name,
        command=command,
        launch=True,
        **options,
    )
    return launch_prepared(prepared, observer=observer)


def launch_prepared(
    prepared: Prepared, *, observer: Observer | None = None
) -> tuple[Registration, RunRecord]:
    """:func:`launch_and_run` for a run that passed its pre-flight
    (``preflight.preflight``, which checked the server it starts: ``prepared.launch``).
    An error before the run is sealed abandons it (nothing registered, nothing left
    open)."""
    try:
        return _launch(prepared, observer)
    except BaseException:
        prepared.recorder.abandon()
        raise


def _launch(prepared: Prepared, observer: Observer | None) -> tuple[Registration, RunRecord]:
    from .runner import run_prepared

    loaded, recorder, base = prepared.loaded, prepared.recorder, prepared.base
    section = loaded.workload.server or ServerSection()
    if prepared.launch is None:
        raise ConfigError("no server to launch: prepare the run with preflight(..., launch=True)")
    argv, cwd = prepared.launch.argv, prepared.launch.cwd
    health = base + loaded.workload.endpoint.health_path
    label = f"run {recorder.requested_name}"
    with tempfile.TemporaryDirectory(prefix="evstore-server-") as tmp:
        proc = _Server(argv, cwd, Path(tmp))
        ready_s, why = proc.wait_ready(health, section.ready_timeout, observer, label)
        if ready_s is None:  # a failed run, with the server's log
            for config in prepared.configs:
                recorder.attach_config(config)
            for log in prepared.server_logs:
                recorder.attach_log(log)
            recorder.launched = _launched(proc, recorder, section.env, None, why, {})
            recorder.set_server(
                ServerIdentity(
                    url=base,
                    ok=False,
                    health=Exchange(
                        path=loaded.workload.endpoint.health_path, status=None, error=why
                    ),
                    message=f"{why}; its log is logs/server.log",
                )
            )
            return recorder.seal()
        exchanges: dict[str, Exchange] = {}
        for what, path in (("metrics", section.metrics_path), ("version", section.version_path)):
            exchanges[f"{what}_before"] = _captured(recorder, base, path, "before")

        def before_seal(recorder: RunRecorder) -> None:
            for what, path in (
                ("metrics", section.metrics_path),
                ("version", section.version_path),
            ):
                exchanges[f"{what}_after"] = _captured(recorder, base, path, "after")
            recorder.launched = _launched(proc, recorder, section.env, ready_s, None, exchanges)

        try:
            return run_prepared(prepared, before_seal=before_seal, observer=observer)
        finally:
            proc.stop()  # whatever happened, the server does not outlive the run
