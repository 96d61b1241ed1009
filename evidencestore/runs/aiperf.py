"""Import an AIPerf artifact directory as runs (``evstore import aiperf``).

Every file of the directory is sealed byte for byte (``profile_export.jsonl``,
``profile_export_aiperf.json``/``.csv``, ``inputs.json``, the raw export, per-phase
exports, logs). The run record is mapped from AIPerf's per-request records
(``profile_export.jsonl``, one ``MetricRecordInfo`` a line: ``metadata`` with
``benchmark_phase``, ``request_start_ns`` / ``request_ack_ns`` / ``request_end_ns``,
``worker_id``; ``metrics`` as ``{value, unit}``; ``error`` with code, type and message)
into the fields a native streamed run has: ``e2e_s`` (AIPerf's ``request_latency``),
``ttft_s`` (``time_to_first_token``), ``itl_s`` (``inter_token_latency``) and
``output_tokens`` (``output_token_count``). With the raw export
(``profile_export_raw.jsonl``, ``--export-level raw``) each request's payload and
response events are stored too, and the completion rebuilt from the events (text,
token ids when the server sent them), so token-exact verdicts apply. Each request's
payload is what was asked (the raw export's, else its ``inputs.json`` dataset entry),
so requests pair across runs by it.

``--num-profile-runs N`` (``profile_runs/run_000N/`` and ``aggregate/``) is one AIPerf
execution: its passes share one server process, one warmup (the first pass's) and one
seed (42), so it imports as one run holding every pass's requests
(``Harness.passes``), sealed whole, aggregate and top-level log included, and counts as
one run in claims: counting the passes as independent runs would give an interval the
degrees of freedom of a pooled run (26-48 % false claims measured). ``profile_runs/``
alone is refused (import its parent). A directory of separate AIPerf runs (each
subdirectory an artifact directory of its own) becomes one run per subdirectory,
``NAME-<subdir>``.

Impossible values refuse the import, naming file, line and field: negative or
non-finite times, an end before its start, a first token after the last byte, a
fractional token count, or a token count unlike the response's token ids.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .._canonical import canonical, loads_json, pretty
from .._keywords import check_keywords
from ..digest import hash_bytes
from ..errors import ConfigError
from .endpoints import endpoint_for
from .importing import (
    HarnessDir,
    ImportOptions,
    ImportResult,
    harness_dir,
    import_lock,
    json_objects,
    open_import,
)
from .judge import Expected, Slot, judge
from .models import Failure, Harness, Phase, RequestRecord, RequestSpec
from .recorder import RunRecorder
from .streams import Completion
from .transport import Observation

if TYPE_CHECKING:
    from ..config import Repository

__all__ = ["METRICS", "import_aiperf"]

RECORDS = "profile_export.jsonl"
RAW = "profile_export_raw.jsonl"
SUMMARY = "profile_export_aiperf.json"
INPUTS = "inputs.json"
PROFILE_RUNS = "profile_runs"
_PASS = re.compile(r"^run_\d{4}$")

#: AIPerf's metric definitions (its docs, ``aiperf/metrics/types/``), by run record field.
METRICS = {
    "e2e_s": "AIPerf request_latency: request_end_ns - request_start_ns, from just before "
    "the request was sent to the last response byte (AIPerf's client, wall-clock ns)",
    "ttft_s": "AIPerf time_to_first_token: from request start to the first response "
    "chunk carrying content",
    "itl_s": "AIPerf inter_token_latency: (request_latency - time_to_first_token) / "
    "(output_sequence_length - 1)",
    "output_tokens": "AIPerf output_token_count: output tokens counted by AIPerf's "
    "tokenizer (not the server's usage)",
    "tpot_s": "evidencestore's TPOT over the stream AIPerf received (raw export): first to "
    "last content event over output tokens - 1, each chunk at AIPerf's perf_ns",
    "sent_ns": "AIPerf metadata.request_start_ns (wall-clock ns, not monotonic)",
    "headers_ns": "AIPerf metadata.request_ack_ns (the response's acknowledgement)",
    "last_byte_ns": "AIPerf metadata.request_end_ns",
}


def _records(source: HarnessDir, rel: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL export, each checked to be an object."""
    lines = source.read(rel, "an AIPerf artifact directory").splitlines()
    return [obj for _, obj in json_objects(lines, source.directory / rel)]


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise ConfigError(f"{where}: field {key!r} is {value!r}: expected {expected}")
    return value


def _metric(metrics: dict[str, Any], tag: str, unit: str, where: str) -> float | None:
    """A metric's value in seconds (``ms`` / ``ns`` / ``s``) or as is (``tokens``); an
    impossible value (not finite, negative, a fractional token count) refuses the
    import naming file, line and field."""
    m = metrics.get(tag)
    if m is None:
        return None
    value = m.get("value") if isinstance(m, dict) else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where}: field metrics.{tag}: expected {{value: number, unit}}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(
            f"{where}: field metrics.{tag} is {value!r}: expected a finite value >= 0"
        )
    if unit == "tokens" and value != int(value):
        raise ConfigError(f"{where}: field metrics.{tag} is {value!r}: expected whole tokens")
    scale = {"ms": 1e-3, "ns": 1e-9, "s": 1.0, "sec": 1.0}.get(m.get("unit", ""))
    if unit == "s":
        if scale is None:
            raise ConfigError(
                f"{where}: field metrics.{tag}: unit {m.get('unit')!r}: expected ms, ns or s"
            )
        return float(value) * scale
    return float(value)


def _utc(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + (
        f".{ns // 1000 % 10**6:06d}Z"
    )


def _completion(responses: Any) -> Completion | None:
    """The completion rebuilt from a raw record's response packets (SSE data of chat or
    completions chunks); None when they hold none."""
    if not isinstance(responses, list):
        return None
    text: list[str] = []
    ids: list[int] = []
    ids_complete = True
    finish = None
    seen = False
    for response in responses:
        for packet in (response or {}).get("packets", []) if isinstance(response, dict) else []:
            value = packet.get("value") if isinstance(packet, dict) else None
            if not isinstance(value, str) or value.strip() == "[DONE]":
                continue
            try:
                chunk = loads_json(value)
            except ValueError:
                continue
            for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
                if not isinstance(choice, dict):
                    continue
                got = choice.get("delta")
                delta: dict[str, Any] = got if isinstance(got, dict) else {}
                piece = delta.get("content", choice.get("text"))
                if isinstance(piece, str) and piece:
                    seen = True
                    text.append(piece)
                    got = choice.get("token_ids")
                    if isinstance(got, list) and all(isinstance(t, int) for t in got):
                        ids.extend(got)
                    else:
                        ids_complete = False
                finish = choice.get("finish_reason") or finish
    if not seen:
        return None
    return Completion(
        text="".join(text),
        token_ids=tuple(ids) if ids_complete else None,
        finish_reason=finish,
        output_tokens=len(ids) if ids_complete else None,
    )


def _json_file(source: HarnessDir, rel: str) -> Any:
    """The JSON document ``rel`` of the artifact directory."""
    try:
        return loads_json(source.read(rel, "an AIPerf artifact directory"))
    except ValueError as exc:
        raise ConfigError(f"{source.directory / rel}: not JSON: {exc}") from None


def _summary(source: HarnessDir, rel: str) -> dict[str, Any]:
    if not source.has(rel):
        return {}
    loaded = _json_file(source, rel)
    if not isinstance(loaded, dict):
        raise ConfigError(f"{source.directory / rel}: expected a JSON object")
    return loaded


def _rows(source: HarnessDir, rel: str, pass_number: int) -> list[tuple[Any, ...]]:
    """One pass's request records, each checked: (start, pass, line, obj, meta, metrics,
    where)."""
    records = _records(source, rel)
    if not records:
        raise ConfigError(f"{source.directory / rel}: holds no request record")
    rows = []
    for number, obj in enumerate(records, 1):
        where = f"{source.directory / rel}: line {number}"
        meta = _field(obj, "metadata", dict, where)
        start = _field(meta, "request_start_ns", int, f"{where}: metadata")
        end = _field(meta, "request_end_ns", int, f"{where}: metadata")
        _field(meta, "benchmark_phase", str, f"{where}: metadata")
        ack = meta.get("request_ack_ns")
        if start < 0 or end < start:
            raise ConfigError(
                f"{where}: field metadata.request_end_ns is {end} and request_start_ns "
                f"{start}: expected 0 <= start <= end"
            )
        if ack is not None and (not isinstance(ack, int) or not start <= ack <= end):
            raise ConfigError(
                f"{where}: field metadata.request_ack_ns is {ack!r}: expected an integer "
                f"between request_start_ns ({start}) and request_end_ns ({end})"
            )
        metrics = obj.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise ConfigError(f"{where}: field 'metrics': expected an object")
        rows.append((start, pass_number, number, obj, meta, metrics, where))
    return rows


def _import_one(
    repo: Repository,
    source: HarnessDir,
    name: str,
    passes: list[str],
    options: ImportOptions,
) -> ImportResult:
    """Import ``source`` as one run: one AIPerf execution whose profile passes are the
    folders ``passes`` (``[""]`` for a single profile run)."""
    rows = [row for k, prefix in enumerate(passes) for row in _rows(source, prefix + RECORDS, k)]
    raws = [_records(source, p + RAW) for p in passes if source.has(p + RAW)]
    raw = [obj for part in raws for obj in part] if len(raws) == len(passes) else None
    summary = _summary(source, passes[0] + SUMMARY)
    inputs = passes[0] + INPUTS
    if source.has(inputs):
        first = source.read(inputs, "an AIPerf artifact directory")
        for p in passes[1:]:
            if source.has(p + INPUTS) and source.read(p + INPUTS, "") != first:
                raise ConfigError(
                    f"{source.directory / (p + INPUTS)}: differs from {source.directory / inputs}:"
                    " the profile passes of one execution sent different datasets"
                )
    execution = hash_bytes(
        canonical({"aiperf-execution": [hash_bytes(source.read(p + RECORDS, "")).digest
                                        for p in passes]})
    ).digest  # fmt: skip
    opened = open_import(
        repo,
        name,
        source,
        workload=inputs if source.has(inputs) else None,
        workload_bytes=canonical(summary.get("input_config") or {}),
        execution=execution,
        started=_utc(min(r[0] for r in rows)),
        **options,
    )
    if isinstance(opened, ImportResult):
        return opened
    recorder, digest = opened
    raw_by_id: dict[str, dict[str, Any]] = {}
    for obj in raw or []:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("x_request_id"), str):
            raw_by_id[meta["x_request_id"]] = obj
    endpoint = (summary.get("input_config") or {}).get("endpoint") or {}
    path = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}.get(
        str(endpoint.get("type")), str(endpoint.get("custom_endpoint") or "")
    )
    slots = _slots([(r[1], r[4]) for r in rows])
    dataset = _dataset(source, inputs)
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1], rows[i][0], rows[i][2]))
    counts = [0] * len(passes)
    for index, i in enumerate(order):
        start, pass_number, _number, obj, meta, metrics, where = rows[i]
        counts[pass_number] += 1
        request, repetition = slots[i]
        _add_request(
            recorder, index, start, obj, meta, metrics, where, raw_by_id, path,
            request, repetition, dataset,
        )  # fmt: skip
    version = summary.get("aiperf_version")
    not_recorded = [
        "the bytes of each response as received (AIPerf keeps parsed events)",
        "the server's identity (/health, /v1/models) and logs",
    ]
    if raw is None:
        not_recorded[:0] = [
            "request payloads and response bodies (no profile_export_raw.jsonl: "
            "AIPerf's --export-level raw keeps them)",
            "completions (token-exact verdicts need the raw export)",
        ]
    sources = {"requests": passes[0] + RECORDS}
    if raw is not None:
        sources["payloads"] = passes[0] + RAW
    if len(passes) > 1:
        sources = {f"{k}:{p.rstrip('/')}": p + v.split("/")[-1]
                   for p in passes for k, v in sources.items()}  # fmt: skip
    concurrency = _concurrency(summary)
    recorder.harness = Harness(
        name="aiperf",
        version=str(version) if version is not None else None,
        command=_command(summary),
        metrics=METRICS,
        not_recorded=tuple(not_recorded),
        sources=sources,
        source_digest=digest,
        execution=execution,
        passes=tuple(counts) if len(passes) > 1 else (),
        concurrency=concurrency,
    )
    recorder.started = _utc(min(r[0] for r in rows))
    recorder.ended = _utc(max(int(r[4]["request_end_ns"]) for r in rows))
    registration, record = recorder.seal()
    return ImportResult(name, registration.digest, False, record.outcome)


def _slots(metas: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, int]]:
    """Each record's (request, repetition), given (pass, metadata): the request is its
    conversation (AIPerf's ``conversation_id``: the dataset entry it sent), numbered in
    the order AIPerf issued them (phase, pass, then ``session_num``), never by timing, so
    two runs of one dataset number their prompts alike; the repetition counts earlier
    sends of it in the same phase (over every pass of the execution)."""
    order = sorted(
        range(len(metas)),
        key=lambda i: (
            metas[i][1]["benchmark_phase"] != "warmup",
            metas[i][0],
            s if isinstance(s := metas[i][1].get("session_num"), int) else i,
            i,
        ),
    )
    numbers: dict[str, int] = {}
    seen: dict[tuple[str, int], int] = {}
    out = [(0, 0)] * len(metas)
    for i in order:
        meta = metas[i][1]
        conv = str(meta.get("conversation_id", i))
        request = numbers.setdefault(conv, len(numbers))
        key = (str(meta["benchmark_phase"]), request)
        out[i] = (request, seen.get(key, 0))
        seen[key] = seen.get(key, 0) + 1
    return out


def _dataset(source: HarnessDir, inputs: str) -> dict[tuple[str, int], Any]:
    """AIPerf's dataset (``inputs.json``: ``data[].session_id`` with its ``payloads``),
    by (session, turn); empty when the directory has none or it is not that shape."""
    if not source.has(inputs):
        return {}
    loaded = _json_file(source, inputs)
    out: dict[tuple[str, int], Any] = {}
    data = loaded.get("data") if isinstance(loaded, dict) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("payloads"), list):
            for turn, payload in enumerate(entry["payloads"]):
                out[(str(entry.get("session_id")), turn)] = payload
    return out


def _concurrency(summary: dict[str, Any]) -> int | None:
    """The profiling phase's concurrency as AIPerf recorded it (``input_config.phases``,
    or ``input_config.loadgen.concurrency`` in older exports)."""
    config = summary.get("input_config")
    if not isinstance(config, dict):
        return None
    for phase in config.get("phases") or []:
        if isinstance(phase, dict) and phase.get("kind") == "profiling":
            got = phase.get("concurrency")
            return got if isinstance(got, int) and got > 0 else None
    loadgen = config.get("loadgen")
    got = loadgen.get("concurrency") if isinstance(loadgen, dict) else None
    return got if isinstance(got, int) and got > 0 else None


def _command(summary: dict[str, Any]) -> str | None:
    """AIPerf's command line as its summary export recorded it (``run_info.cli_command``)."""
    info = summary.get("run_info")
    command = info.get("cli_command") if isinstance(info, dict) else None
    return command if isinstance(command, str) else None


def _add_request(
    recorder: RunRecorder,
    index: int,
    start: int,
    obj: dict[str, Any],
    meta: dict[str, Any],
    metrics: dict[str, Any],
    where: str,
    raw_by_id: dict[str, dict[str, Any]],
    path: str,
    request: int,
    repetition: int,
    dataset: dict[tuple[str, int], Any],
) -> RequestRecord:
    phase: Phase = "warmup" if meta["benchmark_phase"] == "warmup" else "measured"
    error = obj.get("error")
    if error is not None and not isinstance(error, dict):
        raise ConfigError(f"{where}: field 'error': expected an object or null")
    raw = raw_by_id.get(str(meta.get("x_request_id")))
    store = recorder.store
    # The payload is what was asked: the raw export's, else the dataset entry's
    # (inputs.json), so requests pair across runs by it (never by AIPerf's request id).
    asked = raw.get("payload") if raw is not None else None
    if asked is None:
        got = meta.get("turn_index")
        turn = got if isinstance(got, int) else 0
        asked = dataset.get((str(meta.get("conversation_id")), turn))
    if asked is not None:
        payload = store.put(pretty(asked), "application/json")
    else:
        payload = store.put(
            canonical({"aiperf_conversation": meta.get("conversation_id"),
                       "turn": meta.get("turn_index")}),
            "application/json",
        )  # fmt: skip
    status: int | None = None
    if raw is not None:
        try:
            status = int(raw["status"]) if raw.get("status") is not None else None
        except (TypeError, ValueError):
            status = None
    if status is None:
        code = error.get("code") if error else None
        status = code if isinstance(code, int) else (200 if error is None else None)
    e2e = _metric(metrics, "request_latency", "s", where)
    ttft = _metric(metrics, "time_to_first_token", "s", where)
    itl = _metric(metrics, "inter_token_latency", "s", where)
    tokens = _metric(metrics, "output_token_count", "tokens", where)
    if e2e is not None and ttft is not None and ttft > e2e:
        raise ConfigError(
            f"{where}: field metrics.time_to_first_token ({ttft * 1e3:g} ms) exceeds "
            f"metrics.request_latency ({e2e * 1e3:g} ms): a first token after the last byte"
        )
    done = _completion(raw.get("responses")) if raw is not None else None
    ids = done.token_ids if done is not None else None
    if error is None and tokens is not None and ids is not None and int(tokens) != len(ids):
        raise ConfigError(
            f"{where}: field metrics.output_token_count is {int(tokens)} but the "
            f"response in {RAW} carries {len(ids)} token ids"
        )
    ack = meta.get("request_ack_ns") if isinstance(meta.get("request_ack_ns"), int) else None
    end = int(meta["request_end_ns"])
    sse = _sse(raw, start, end, where) if raw is not None else None
    # AIPerf's error, in evstore's classes (the judge's, as the runner would see it): a
    # 2xx answer that streamed is decided by reading the stream back below (its own
    # error event, else cut short), whatever code AIPerf gave the error; else an HTTP
    # status AIPerf names; no response at all: connect (or timeout).
    failure: Failure | None = None
    words = None
    if error:
        words = str(error.get("message"))  # AIPerf's own words (its type: error_type)
        code = error.get("code")
        streamed = sse is not None and bool(sse[1]) and (status is None or status < 300)
        if streamed:
            pass  # an answer of 200 that streamed: its own error event, or cut short
        elif (isinstance(code, int) and code >= 300) or (status is not None and status >= 300):
            failure = "http-status"
        else:
            failure = "timeout" if "timeout" in words.lower() else "connect"
    chunk_ns, chunk_end = (sse[1], sse[2]) if sse is not None else ((), ())
    observation = Observation(
        method="POST",
        path=path,
        sent_ns=start,
        end_ns=end,
        start_utc=_utc(start),
        status=status,
        headers_ns=ack,
        first_byte_ns=chunk_ns[0] if chunk_ns else None,
        last_byte_ns=(chunk_ns[-1] if chunk_ns else end) if failure is None else None,
        failure=failure,
        message=words if failure is not None else None,
        media_type="text/event-stream",
        chunk_ns=chunk_ns,
        chunk_end=chunk_end,
    )
    # Kept by the runner's size rule (the workload's max_output_size): past it, nothing.
    observation, body = recorder.keep_output(observation, sse[0] if sse is not None else None)
    asked_max = asked.get("max_tokens") if isinstance(asked, dict) else None
    spec = RequestSpec(
        max_tokens=asked_max if isinstance(asked_max, int) and asked_max > 0 else None
    )
    kind = "chat" if path.endswith("/chat/completions") else "completions"
    base = judge(
        endpoint_for(kind) if body is not None else None,
        observation,
        body,
        Expected(request=spec, stream=True, tokenizer=recorder.workload_tokenizer()),
        store=store,
        slot=Slot(index, phase, request, repetition),
        payload=payload,
        data=sse[0] if sse is not None and body is not None else None,
    )
    if words is not None and failure is None:
        if base.failure in (None, "incomplete"):  # the stream was cut, as a runner sees it
            base = _with(
                base,
                failure="truncated",
                message=f"the stream stopped before its end (AIPerf: {words})",
            )
        else:  # the stream's own error event: the judge's class, AIPerf's words beside
            base = _with(base, message=f"{base.message} (AIPerf: {words})")
    ok = base.failure is None
    record = _with(
        base,
        e2e_s=e2e if ok else None,
        ttft_s=ttft if ok else None,
        itl_s=itl if ok else None,
        tpot_s=base.tpot_s if ok else None,
        completion=base.completion if ok else None,
        output_tokens=int(tokens) if tokens is not None else None,
        error_type=str(error.get("type")) if error and error.get("type") else None,
        worker=str(meta.get("worker_id")) if meta.get("worker_id") else None,
    )
    return recorder.add(record)


def _sse(
    raw: dict[str, Any], start: int, end: int, where: str
) -> tuple[bytes, tuple[int, ...], tuple[int, ...]] | None:
    """The stream AIPerf received, rebuilt from its raw export's responses (each a
    chunk: its ``perf_ns`` and SSE ``packets``) as SSE bytes, with each chunk's arrival
    on the request's clock (``request_start_ns + perf_ns - start_perf_ns``) and the
    bytes received by then; None when the export holds no responses."""
    responses = raw.get("responses")
    origin = raw.get("start_perf_ns")
    if not isinstance(responses, list) or not responses or not isinstance(origin, int):
        return None
    data = bytearray()
    chunk_ns: list[int] = []
    chunk_end: list[int] = []
    for k, response in enumerate(responses):
        perf = response.get("perf_ns") if isinstance(response, dict) else None
        if not isinstance(perf, int) or perf < origin:
            raise ConfigError(
                f"{where}: {RAW}: field responses[{k}].perf_ns is {perf!r}: expected an "
                f"integer >= start_perf_ns ({origin})"
            )
        for packet in response.get("packets") or []:
            if isinstance(packet, dict) and isinstance(packet.get("value"), str):
                name = packet.get("name") if isinstance(packet.get("name"), str) else "data"
                data += f"{name}: {packet['value']}\n".encode()
        data += b"\n"
        chunk_ns.append(min(start + perf - origin, end))
        chunk_end.append(len(data))
    return bytes(data), tuple(chunk_ns), tuple(chunk_end)


def _with(record: RequestRecord, **changes: Any) -> RequestRecord:
    import msgspec

    return msgspec.structs.replace(record, **changes)


def import_aiperf(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    name: str,
    **options: Unpack[ImportOptions],
) -> list[ImportResult]:
    """Seal an AIPerf artifact directory as run bundle ``name`` in the repository
    ``root`` names (:func:`~evidencestore.config.as_repository`): one execution, one run
    (its ``--num-profile-runs`` passes included); see the module. ``options``:
    :class:`~.importing.ImportOptions`."""
    from ..config import as_repository

    check_keywords("import_aiperf", options, ImportOptions)
    repo = as_repository(root)
    base = Path(directory)
    if not base.is_dir():
        raise ConfigError(f"import aiperf {base}: not a directory")
    passes = sorted(p.parent.name for p in base.glob(f"{PROFILE_RUNS}/run_*/{RECORDS}"))
    if (base / RECORDS).is_file():
        layouts = [(name, base, [""])]
    elif passes:
        layouts = [(name, base, [f"{PROFILE_RUNS}/{p}/" for p in passes])]
    elif base.name == PROFILE_RUNS or any(_PASS.match(p.parent.name)
                                          for p in base.glob(f"*/{RECORDS}")):  # fmt: skip
        raise ConfigError(
            f"{base}: these are the profile passes of one AIPerf execution "
            f"(--num-profile-runs: one server process, one warmup, one seed); import the "
            f"artifact directory that holds {PROFILE_RUNS}/ and aggregate/ as one run"
        )
    else:
        subdirs = sorted(p.parent for p in base.glob(f"*/{RECORDS}"))
        if not subdirs:
            raise ConfigError(
                f"{base}: not an AIPerf artifact directory: no {RECORDS} (AIPerf writes it "
                f"with every profile; expected it here, in {PROFILE_RUNS}/run_NNNN/ "
                "(--num-profile-runs), or in one subdirectory per separate AIPerf run)"
            )
        layouts = [(f"{name}-{p.name}", p, [""]) for p in subdirs]
    out = []
    for run_name, path, parts in layouts:
        source = harness_dir(path, "aiperf")
        with import_lock(repo):
            out.append(_import_one(repo, source, run_name, parts, options))
    return out
