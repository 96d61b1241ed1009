"""Open a run, record requests, attach configs and logs, seal it as a registered bundle.

The recorder is what the HTTP runner uses, and what harnesses that drive a server
themselves use directly. Everything a run produced goes into the repository's local
store (payloads, outputs, media check reports, configs, server logs, the server check's
responses); ``run.json`` is the one repo entry. Sealing registers the bundle
through the one registration path (``bundle.register_bundle``: staging directory,
renamed into place whole), so a run's bundle appears whole or not at all; a name already
taken is refused when the run is opened, before anything is sent, and a name another
process takes while the run is recorded costs nothing: the run is kept under a fresh one.
"""

from __future__ import annotations

import os
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

import msgspec

from .._canonical import decode, pretty
from .._keywords import check_keywords
from .._version import __version__
from ..bundle import RepoFile, check_name_free, free_name, register_bundle
from ..confined import MAX_CONTROL_FILE
from ..digest import hash_bytes
from ..errors import BodyTooLarge, BundleError, BundleNameTaken, ConfigError, ManifestError
from ..inventory import load_registration, read_entry, registration_path
from ..models import Descriptor, Entry, Registration
from ..storage import LocalBlobStore
from ..storage.leases import ActiveLease
from .body import BodySink, MemoryBudget, Spool
from .judge import Expected, Slot, judge
from .models import (
    MAX_OUTPUT_SIZE,
    Audit,
    ClientEnvironment,
    ClientLoad,
    Exchange,
    Goodput,
    Harness,
    LaunchedServer,
    Outcome,
    Phase,
    PhaseCounts,
    RequestRecord,
    RequestSpec,
    RunRecord,
    ServerIdentity,
)
from .transport import Observation, keeps_body, output_limit, too_large, utc_precise
from .untrusted import valid_media_type

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..config import Repository
    from ..media.records import Expectations
    from .tokenizer import TokenCounter

__all__ = [
    "RUN_ENTRY",
    "RUN_SIGNATURE",
    "RecordOptions",
    "RunRecorder",
    "client_environment",
    "load_run",
    "never_started",
    "open_run",
    "outcome_of",
    "phase_counts",
    "renamed",
]

RUN_ENTRY = "run.json"
RUN_MEDIA_TYPE = "application/vnd.evidencestore.run+json"
RUN_SIGNATURE = "run.dsse.json"
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"


def _version(module: str) -> str | None:
    """A package's version without importing it (PyAV's import alone costs more than a
    run of small requests when media checks are off)."""
    mod = sys.modules.get(module)
    if mod is not None:
        return str(getattr(mod, "__version__", "unknown"))
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


def client_environment() -> ClientEnvironment:
    """evidencestore, Python, PyAV and aiohttp versions, and the host."""
    return ClientEnvironment(
        evidencestore=__version__,
        python=platform.python_version(),
        pyav=_version("av"),
        aiohttp=_version("aiohttp"),
        host=platform.node(),
        platform=platform.platform(),
    )


def phase_counts(requests: Sequence[RequestRecord]) -> dict[str, PhaseCounts]:
    """Requests, successes and failures by class, per phase."""
    out: dict[str, PhaseCounts] = {}
    for phase in ("warmup", "measured"):
        mine = [r for r in requests if r.phase == phase]
        failures = Counter(r.failure for r in mine if r.failure is not None)
        out[phase] = PhaseCounts(
            requests=len(mine),
            ok=len(mine) - sum(failures.values()),
            failures=dict(sorted(failures.items())),
        )
    return out


def outcome_of(server_ok: bool, requests: Sequence[RequestRecord]) -> tuple[Outcome, str | None]:
    """``complete`` when every request delivered a valid output; ``failed-before-inference``
    when the server check failed or no request got a successful (2xx) response at all;
    else ``partial`` (some outputs missing or invalid)."""
    if not server_ok:
        return "failed-before-inference", "the server check failed; no request was sent"
    if not requests:
        return "failed-before-inference", "no request was sent"
    failed = [r for r in requests if r.failure is not None]
    if not failed:
        return "complete", None
    answered = [r for r in requests if r.status is not None and 200 <= r.status < 300]
    if not answered:
        first = failed[0]
        return (
            "failed-before-inference",
            f"no request got a successful response (first: request {first.index}: "
            f"{first.failure}: {first.message})",
        )
    return "partial", f"{len(failed)} of {len(requests)} requests failed"


_UNREACHED = {
    "refused": "the connection was refused",
    "unresolved": "the host name did not resolve",
    "unreachable": "no route to the host",
}


def _unreached(server: ServerIdentity) -> tuple[Outcome, str] | None:
    """``never-started`` when the server check reached no server at all (nothing was
    sent: an operator's error, such as a mistyped ``--server``, not the engine's)."""
    why = server.health.unreached
    if server.ok or why is None or server.health.status is not None or server.models:
        return None
    return (
        "never-started",
        f"no server was reached at {server.url} ({_UNREACHED[why]}): nothing was sent; "
        "the run never started and counts against no arm",
    )


def never_started(record: RunRecord) -> bool:
    """Whether ``record`` is a run that never started, as its own evidence shows: outcome
    ``never-started``, a server check that reached no server, no request, no launched
    server. A record that says ``never-started`` but shows otherwise is not one (a
    campaign counts it as the failed run it is)."""
    return (
        record.outcome == "never-started"
        and not record.requests
        and record.launched is None
        and record.harness is None
        and _unreached(record.server) is not None
    )


class RecordOptions(TypedDict, total=False):
    """What a run's record says besides its name, arm and workload, as keywords
    (:class:`RunRecorder`, :func:`open_run`): ``store`` (default: the repository's local
    store), ``campaign`` (its name), ``protocol_digest``, ``condition`` and
    ``signing_key`` (signs the record, ``run.dsse.json``)."""

    store: LocalBlobStore | None
    campaign: str | None
    protocol_digest: str | None
    condition: str | None
    signing_key: Ed25519PrivateKey | None


class RunRecorder:
    """A run being recorded in ``repo`` (resolved by the entry point: :func:`open_run`,
    ``run_workload``, an importer); :meth:`seal` registers it as bundle ``name``."""

    def __init__(
        self,
        repo: Repository | str | os.PathLike[str],
        name: str,
        *,
        arm: str,
        workload: Descriptor,
        workload_bytes: bytes | None = None,
        tokenizer: TokenCounter | None = None,
        **options: Unpack[RecordOptions],
    ) -> None:
        from ..config import as_repository

        check_keywords("RunRecorder.__init__", options, RecordOptions)
        self.repo = as_repository(repo)  # the entry points hand theirs over as it is
        self.root = self.repo.root
        try:
            self.name = check_name_free(self.repo, name)
        except BundleNameTaken as exc:
            raise BundleNameTaken(f"{exc}; choose another {{name}}", parameters=("name",)) from None
        self.requested_name = name
        if not arm:
            raise ConfigError("a run needs an arm name ({arm})", parameters=("arm",))
        store = options.get("store")
        self.store = store if store is not None else self.repo.local_store()
        # gc keeps every blob this run stores or relies on until it is sealed, --grace 0
        # too (storage.leases.ActiveLease); taken before the first put
        self.lease = ActiveLease(self.store)
        self.arm = arm
        self.campaign = options.get("campaign")
        self.protocol_digest = options.get("protocol_digest")
        self.condition = options.get("condition")
        self.signing_key = options.get("signing_key")
        self.audits: tuple[Audit, ...] = ()  # the runner's audits of the outputs
        self.load: ClientLoad | None = None  # the runner's own load while it sent
        self.goodput: Goodput | None = None  # under the workload's SLO, when it has one
        self.started = utc_precise()
        self.client = client_environment()
        self.entries: dict[str, Entry] = {}
        self.configs: dict[str, Descriptor] = {}
        self.logs: dict[str, Descriptor] = {}
        self.requests: list[RequestRecord] = []
        self._sinks: list[BodySink] = []
        self._budget = MemoryBudget()  # small bodies kept in memory until published
        self._spool = Spool(self.store)  # and the small bodies past it (one file)
        self._published: set[str] = set()  # body digests this run stored already
        self.server: ServerIdentity | None = None
        self.error: str | None = None
        # Set by importers of harness outputs (``importing.py``): the harness, its
        # own end time and outcome (a run without request records, such as LoadGen's).
        self.harness: Harness | None = None
        self.launched: LaunchedServer | None = None  # the server the run started itself
        self.ended: str | None = None
        self.outcome: tuple[Outcome, str | None] | None = None
        try:
            self.store.upkeep.incoming_path()  # where large bodies stream to, from the start
            if workload_bytes is not None:
                workload = self.put(
                    f"workload/{workload_name(workload)}",
                    workload_bytes,
                    workload.media_type,
                    "workload",
                )
        except BaseException:
            self.lease.release()  # not opened: nothing is left held
            raise
        self.workload = workload
        # The workload's pinned tokenizer as its entry point loaded it; else read from
        # the workload when a stream needs it (workload_tokenizer).
        self._tokenizer = tokenizer
        self._tokenizer_read = tokenizer is not None
        self._max_output: int | None = None  # the workload's, read when a body is kept

    # -- entries ------------------------------------------------------------------
    def add_entry(self, path: str, descriptor: Descriptor, role: str | None = None) -> None:
        """Add a store entry (its bytes must be in the store already)."""
        old = self.entries.get(path)
        if old is not None and old.descriptor.digest != descriptor.digest:
            raise BundleError(
                f"run {self.name!r}: entry {path!r} given twice with different content"
            )
        self.entries[path] = Entry(path=path, descriptor=descriptor, location="store", role=role)

    def put(self, path: str, data: bytes, media_type: str, role: str | None = None) -> Descriptor:
        """Store bytes as entry ``path``; return their descriptor."""
        desc = self.store.put(data, media_type)
        self.add_entry(path, desc, role)
        return desc

    def _attach(
        self, kind: str, path: str | os.PathLike[str], into: dict[str, Descriptor]
    ) -> Descriptor:
        src = Path(path)
        if not src.is_file():
            raise ConfigError(f"--{kind} {src}: no such file")
        entry = f"{kind}s/{src.name}"
        if entry in self.entries:
            raise ConfigError(f"--{kind} {src}: another {kind} file is also named {src.name!r}")
        import mimetypes

        media_type = mimetypes.guess_type(src.name, strict=False)[0] or "text/plain"
        try:
            desc = self.store.put_file(src, media_type)
        except OSError as exc:
            raise ConfigError(f"--{kind} {src}: cannot read: {exc.strerror}") from exc
        self.add_entry(entry, desc, kind)
        into[entry] = desc
        return desc

    def attach_config(self, path: str | os.PathLike[str]) -> Descriptor:
        """Store a resolved configuration file as ``configs/<name>``."""
        return self._attach("config", path, self.configs)

    def attach_log(self, path: str | os.PathLike[str]) -> Descriptor:
        """Store a server log as ``logs/<name>``."""
        return self._attach("log", path, self.logs)

    def body_sink(self, limit: int | None = None) -> BodySink:
        """A sink streaming one response body (at most ``limit`` bytes) into the store
        (discarded by :meth:`discard_unpublished` if it is never published)."""
        sink = BodySink(self.store, limit, self._budget, self._spool)
        self._sinks.append(sink)
        return sink

    def publish(self, sink: BodySink, media_type: str) -> Descriptor:
        """Publish a finished body; a digest this run already published is not stored
        (nor verified) again: its descriptor is returned and the sink discarded."""
        digest = sink.digest
        if digest is not None and digest in self._published:
            sink.discard()
            return Descriptor(digest=digest, size=sink.size, media_type=media_type)
        desc = sink.publish(media_type)
        self._published.add(desc.digest)
        return desc

    def discard_unpublished(self) -> None:
        """Remove the temporaries of bodies not published (an interrupted run), and the
        spool (every body in it is published or discarded by then)."""
        for sink in self._sinks:
            sink.discard()
        self._sinks.clear()
        self._spool.close()

    def abandon(self) -> None:
        """Give the run up unregistered (an error before it was sealed): the temporaries
        of its bodies and its spool removed, its lease ended. What it stored stays in the
        store, named by nothing, for gc; a sealed run is left as it is."""
        self.discard_unpublished()
        self.lease.release()

    # -- requests -----------------------------------------------------------------
    def set_server(self, server: ServerIdentity) -> None:
        """Record the server check."""
        self.server = server

    def add(self, record: RequestRecord) -> RequestRecord:
        """Record a request whose payload and body (if any) are stored already; their
        entries are added as ``requests/<index>/payload`` and ``.../output``."""
        base = f"requests/{record.index:05d}"
        self.add_entry(f"{base}/payload", record.payload, "payload")
        if record.body is not None:
            self.add_entry(f"{base}/output", record.body, "output")
        if record.media is not None:
            self.add_entry(f"{base}/check.json", record.media.report, "media")
        if record.completion is not None:
            self.add_entry(f"{base}/completion.json", record.completion, "completion")
        self.requests.append(record)
        return record

    def record_request(
        self,
        observation: Observation,
        *,
        phase: Phase,
        payload: bytes,
        body: bytes | str | os.PathLike[str] | None = None,
        expectations: Expectations | None = None,
        request: int = 0,
        repetition: int = 0,
        llm: Literal["chat", "completions"] | None = None,
        spec: RequestSpec | None = None,
        streamed: bool = True,
        tokenizer: TokenCounter | None = None,
    ) -> RequestRecord:
        """Record one request a harness made itself: what it saw (timings in monotonic
        ns, status, failure: an :class:`~evidencestore.runs.transport.Observation`), the
        payload sent and the body as bytes or a file (``observation.media_type``). The
        body is kept by the runner's rules (:meth:`keep_output`: past the workload's
        ``[run] max_output_size`` nothing is kept and the request fails ``too-large``; a
        body cut short is not kept), and the request is judged exactly as the runner
        judges its own (``judge.judge``): an output that says it is JSON must be
        well-formed; a body is checked against ``expectations`` when they are given
        (audio it carries must last as long as the request asked, even when they
        prescribe none), and an invalid one makes the request an ``invalid-media``
        failure. ``llm``: the body is an OpenAI ``chat`` or ``completions`` answer (an
        SSE stream unless ``streamed`` is false), read back up to 256 MiB (``too-large``
        past it; ``streams.py``: events timed by ``observation.chunk_ns`` /
        ``chunk_end``, the completion stored, checked against ``spec``'s
        ``max_tokens``); a stream whose server gave no token count is counted by
        ``tokenizer``, by default the workload's, as the runner counts
        (:meth:`workload_tokenizer`)."""
        media_type = observation.media_type
        if not valid_media_type(media_type):
            raise ConfigError(
                f"run {self.name!r}: media type {media_type!r} of request {len(self.requests)}: "
                "expected type/subtype (such as video/mp4)"
            )
        payload_desc = self.store.put(payload, "application/octet-stream")
        observation, body_desc = self.keep_output(observation, body)
        endpoint = None
        if llm is not None:
            from .endpoints import endpoint_for

            endpoint = endpoint_for(llm)
            if tokenizer is None:
                tokenizer = self.workload_tokenizer()
        expected = Expected(
            request=spec or RequestSpec(),
            stream=streamed,
            media=expectations,
            tokenizer=tokenizer,
        )
        return self.add(
            judge(
                endpoint,
                observation,
                body_desc,
                expected,
                store=self.store,
                slot=Slot(len(self.requests), phase, request, repetition),
                payload=payload_desc,
            )
        )

    def keep_output(
        self, observation: Observation, body: bytes | str | os.PathLike[str] | None
    ) -> tuple[Observation, Descriptor | None]:
        """Store a response body a harness received (bytes or a file, of
        ``observation.media_type``) by the runner's size rule
        (``transport.output_limit``: the workload's ``[run] max_output_size``,
        :meth:`max_output_size`): a file is copied only up to the limit, and a body past
        it is never kept; the request then fails ``too-large`` as the runner's does
        (``transport.too_large``). Returns the observation as judged and the body's
        descriptor (None when none is kept). A body is kept only with an outcome the
        runner keeps one with (``transport.keeps_body``): never one cut short."""
        if body is None or not keeps_body(observation.failure):
            return observation, None
        limit = output_limit(self.max_output_size(), observation.status)
        media_type = observation.media_type
        try:
            if isinstance(body, bytes):
                if len(body) > limit:
                    raise BodyTooLarge(limit)
                return observation, self.store.put(body, media_type)
            sink = self.body_sink(limit)
            try:
                with open(body, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        sink.write(chunk)  # refused past the limit: nothing more is read
                sink.finish()
                return observation, sink.publish(media_type)
            except OSError as exc:
                raise ConfigError(
                    f"{os.fspath(body)}: cannot read the body: {exc.strerror}"
                ) from exc
            finally:
                sink.discard()  # gone once published; else a partial body, dropped
        except BodyTooLarge as exc:
            failure, message = too_large(exc)
            return replace(observation, failure=failure, message=message), None

    def max_output_size(self) -> int:
        """The largest output the run's workload accepts (``[run] max_output_size``,
        its default when the workload sets none or is a harness's own settings), read
        once from the store."""
        if self._max_output is None:
            from .workload import max_output_size

            data = self._workload_bytes()
            where = f"run {self.name!r}: workload"
            self._max_output = MAX_OUTPUT_SIZE if data is None else max_output_size(data, where)
        return self._max_output

    def _workload_bytes(self) -> bytes | None:
        """The workload's bytes from the store; None when it is not there or too large
        to be a workload file (a harness's own settings may be large, or absent)."""
        wl = self.workload
        if wl.size <= MAX_CONTROL_FILE and self.store.has(wl.digest):
            return self.store.get(wl.digest)
        return None

    def workload_tokenizer(self) -> TokenCounter | None:
        """The tokenizer the run's workload pins (``[endpoint.tokenizer]``), which
        counts a stream's tokens when its server gave none: the one the entry point
        loaded (``run_workload``), else read once by its digest from the store; None when
        the workload pins none. A pin the store cannot give is a
        :class:`~evidencestore.errors.WorkloadError`."""
        if not self._tokenizer_read:
            from .workload import pinned_tokenizer

            data = self._workload_bytes()
            if data is not None:
                self._tokenizer = pinned_tokenizer(data, self.store, f"run {self.name!r}: workload")
            self._tokenizer_read = True
        return self._tokenizer

    def fail(self, reason: str) -> None:
        """Say why the run stopped before it finished (an error after its first request
        was sent): the run is still sealed, ``partial`` or ``failed-before-inference``,
        with this reason."""
        self.error = reason

    # -- sealing ------------------------------------------------------------------
    def record(self) -> RunRecord:
        """The run record as it stands."""
        server = self.server or ServerIdentity(
            url="",
            ok=True,
            health=Exchange(path="", status=None, error="not checked by this harness"),
        )
        requests = tuple(sorted(self.requests, key=lambda r: r.index))
        outcome, reason = self.outcome or outcome_of(server.ok, requests)
        if (
            self.outcome is None
            and self.error is None
            and self.launched is None  # a server it started that went away: the engine's
            and self.harness is None
            and not requests
            and (unreached := _unreached(server)) is not None
        ):
            outcome, reason = unreached
        if self.error is not None:
            answered = any(r.status is not None and 200 <= r.status < 300 for r in requests)
            outcome = "partial" if answered else "failed-before-inference"
            reason = self.error if reason is None else f"{self.error}; {reason}"
        return RunRecord(
            name=self.name,
            arm=self.arm,
            campaign=self.campaign,
            protocol_digest=self.protocol_digest,
            condition=self.condition,
            workload_digest=self.workload.digest,
            workload=self.workload,
            server=server,
            client=self.client,
            configs=dict(sorted(self.configs.items())),
            logs=dict(sorted(self.logs.items())),
            started=self.started,
            ended=self.ended or utc_precise(),
            outcome=outcome,
            reason=reason,
            counts=phase_counts(requests),
            requests=requests,
            audits=self.audits,
            load=self.load,
            goodput=self.goodput,
            harness=self.harness,
            launched=self.launched,
        )

    def seal(self) -> tuple[Registration, RunRecord]:
        """Register the run as bundle :attr:`name` (metadata ``kind = run``), ``run.json``
        its one git entry, through the one registration path
        (:func:`~evidencestore.bundle.register_bundle`).

        A name another process registered meanwhile does not cost the measurements: the
        run is registered under the first free ``<name>-<k>`` instead, and
        :attr:`renamed` says so (``name`` and the record's ``name`` are the new one)."""
        self._spool.close()  # a harness's bodies are published as they come
        for _ in range(100):
            record = self.record()
            annotations = {"kind": "run", "arm": self.arm, "outcome": record.outcome}
            if self.campaign:
                annotations["campaign"] = self.campaign
            if self.condition:
                annotations["condition"] = self.condition
            if self.harness is not None:
                annotations["harness"] = self.harness.name
                annotations["harness-source"] = self.harness.source_digest
                if self.harness.execution is not None:
                    annotations["harness-execution"] = self.harness.execution
            data = pretty(record)
            files = {RUN_ENTRY: RepoFile(data, media_type=RUN_MEDIA_TYPE, role="run")}
            envelope = self._signature(record, data)
            if envelope is not None:  # signed under the name it is registered as
                files[RUN_SIGNATURE] = RepoFile(
                    envelope, media_type=DSSE_MEDIA_TYPE, role="signature"
                )
            try:
                registration = register_bundle(
                    self.repo,
                    self.name,
                    files=files,
                    stored=self.entries.values(),
                    annotations=annotations,
                    # A run is kept whatever its size: the size policy guards what people
                    # put in git, and refusing the record here would lose the run.
                    max_git_file_size=None,
                )
            except BundleNameTaken:
                self.name = free_name(self.repo, self.requested_name)
                continue
            except BundleError as exc:
                raise BundleError(f"run {self.name!r}: cannot register the bundle: {exc}") from exc
            self.lease.release()  # the registration names every entry now
            return registration, record
        raise BundleError(f"run {self.requested_name!r}: no free bundle name to register it under")

    def _signature(self, record: RunRecord, data: bytes) -> bytes | None:
        """``run.dsse.json``: the run record signed as an in-toto statement, when the run
        was opened with a signing key."""
        if self.signing_key is None:
            return None
        from ..dsse import sign_run

        predicate = {
            "run": record.name,
            "arm": record.arm,
            "campaign": record.campaign,
            "protocol_digest": record.protocol_digest,
            "condition": record.condition,
            "started": record.started,
            "outcome": record.outcome,
        }
        # every entry but the signature: the manifest, not run.json alone, is signed
        entries = self.entries.values()
        envelope = sign_run(self.name, data, predicate, self.signing_key, entries, self._sha256)
        return pretty(envelope)

    def _sha256(self, entry: Entry) -> str:
        """An entry's SHA-256 (hex), read back from the store, verified."""
        import hashlib

        h = hashlib.sha256()
        with self.store.open(entry.descriptor.digest, entry.descriptor.size) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    @property
    def renamed(self) -> str | None:
        """Why the run is registered under another name than asked, or None."""
        return None if self.name == self.requested_name else renamed(self.requested_name, self.name)


def renamed(asked: str, name: str) -> str:
    """What to say of a run registered as ``name`` because ``asked`` was taken meanwhile."""
    return (
        f"bundle {asked!r} was registered by another process while this run was recorded; "
        f"its measurements are kept as bundle {name!r}"
    )


def workload_name(descriptor: Descriptor) -> str:
    """The entry name of a workload file."""
    return "workload.toml" if descriptor.media_type == "application/toml" else "workload"


def open_run(
    root: str | os.PathLike[str],
    name: str,
    *,
    arm: str,
    workload: bytes,
    **options: Unpack[RecordOptions],
) -> RunRecorder:
    """Open a run of ``workload`` (the workload file's bytes) by ``arm``, to be registered
    as bundle ``name`` in the repository ``root`` names (:func:`~evidencestore.config.as_repository`:
    a :class:`~evidencestore.config.Repository` as it is, a path's repository at or above
    it) (a name taken, or differing only in
    letter case from a bundle, is refused now). ``campaign``, ``protocol_digest`` and
    ``condition`` are recorded as given: a harness is not checked against the protocol
    (``run_workload`` is), and ``campaign status`` excludes a run that does not fit. With
    ``signing_key`` the record is signed (``run.dsse.json``)."""
    check_keywords("open_run", options, RecordOptions)
    from ..config import as_repository

    desc = Descriptor(**hash_bytes(workload)._asdict(), media_type="application/toml")
    return RunRecorder(
        as_repository(root), name, arm=arm, workload=desc, workload_bytes=workload, **options
    )


def load_run(root: str | os.PathLike[str], bundle_name: str) -> RunRecord:
    """Return the run record of bundle ``bundle_name``, its bytes checked against the
    registration's ``run.json`` entry. Raises :class:`BundleNotFoundError` (a
    :class:`NotFoundError`) when no such bundle is registered, :class:`ManifestError`
    when it is not a run or its ``run.json`` is missing, altered or invalid. ``root``: as
    for :func:`open_run`."""
    from ..config import as_repository

    reg_path = registration_path(as_repository(root), bundle_name)
    registration = load_registration(reg_path)
    entry = next((e for e in registration.manifest.entries if e.path == RUN_ENTRY), None)
    if entry is None or registration.manifest.metadata.annotations.get("kind") != "run":
        raise ManifestError(
            f"bundle {bundle_name!r} is not a run (no {RUN_ENTRY} entry with kind = run)"
        )
    path = reg_path.parent / RUN_ENTRY
    data = read_entry(reg_path.parent, bundle_name, entry, "the run record")
    try:
        return decode(data, RunRecord)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ManifestError(f"{path}: not a valid run record: {exc}") from None
