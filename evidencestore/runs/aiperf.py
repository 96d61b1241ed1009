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
token ids when the server sent them), so token-exact verdicts apply. A directory
holding several profile runs (``--num-profile-runs``: subdirectories each with a
``profile_export.jsonl``) becomes one run per subdirectory, named ``NAME-<subdir>``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._canonical import canonical, loads_json, pretty
from ..errors import ConfigError
from ..models import Descriptor
from .fit import CampaignRules
from .importing import HarnessDir, ImportResult, harness_dir, open_import
from .judge import Expected, Slot, judge
from .models import Failure, Harness, Phase, RequestRecord
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
    "sent_ns": "AIPerf metadata.request_start_ns (wall-clock ns, not monotonic)",
    "headers_ns": "AIPerf metadata.request_ack_ns (the response's acknowledgement)",
    "last_byte_ns": "AIPerf metadata.request_end_ns",
}


def _records(source: HarnessDir, rel: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL export, each checked to be an object."""
    where = source.directory / rel
    out = []
    for number, line in enumerate(source.read(rel, "an AIPerf artifact directory").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
        except ValueError as exc:
            raise ConfigError(f"{where}: line {number}: not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: line {number}: expected a JSON object")
        out.append(obj)
    return out


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise ConfigError(f"{where}: field {key!r} is {value!r}: expected {expected}")
    return value


def _metric(metrics: dict[str, Any], tag: str, unit: str, where: str) -> float | None:
    """A metric's value in seconds (``ms`` / ``ns`` / ``s``) or as is (``tokens``)."""
    m = metrics.get(tag)
    if m is None:
        return None
    if not isinstance(m, dict) or not isinstance(m.get("value"), (int, float)):
        raise ConfigError(f"{where}: metrics.{tag}: expected {{value: number, unit}}")
    scale = {"ms": 1e-3, "ns": 1e-9, "s": 1.0, "sec": 1.0}.get(m.get("unit", ""))
    if unit == "s":
        if scale is None:
            raise ConfigError(
                f"{where}: metrics.{tag}: unit {m.get('unit')!r}: expected ms, ns or s"
            )
        return float(m["value"]) * scale
    return float(m["value"])


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


def _failure(error: dict[str, Any]) -> Failure:
    code = error.get("code")
    return "http-status" if isinstance(code, int) and code >= 300 else "stream-error"


def _import_one(
    repo: Repository,
    source: HarnessDir,
    name: str,
    *,
    arm: str,
    campaign: CampaignRules | None,
    condition: str | None,
) -> ImportResult:
    records = _records(source, RECORDS)
    if not records:
        raise ConfigError(f"{source.directory / RECORDS}: holds no request record")
    raw = _records(source, RAW) if source.has(RAW) else None
    summary: dict[str, Any] = {}
    if source.has(SUMMARY):
        try:
            loaded = loads_json(source.read(SUMMARY, "an AIPerf artifact directory"))
        except ValueError as exc:
            raise ConfigError(f"{source.directory / SUMMARY}: not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{source.directory / SUMMARY}: expected a JSON object")
        summary = loaded
    opened = open_import(
        repo,
        name,
        source,
        arm=arm,
        workload=INPUTS if source.has(INPUTS) else None,
        workload_bytes=canonical(summary.get("input_config") or {}),
        campaign=campaign,
        condition=condition,
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
    rows = []
    for number, obj in enumerate(records, 1):
        where = f"{source.directory / RECORDS}: line {number}"
        meta = _field(obj, "metadata", dict, where)
        start = _field(meta, "request_start_ns", int, f"{where}: metadata")
        _field(meta, "request_end_ns", int, f"{where}: metadata")
        _field(meta, "benchmark_phase", str, f"{where}: metadata")
        metrics = obj.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise ConfigError(f"{where}: field 'metrics': expected an object")
        rows.append((start, number, obj, meta, metrics, where))
    slots = _slots([r[3] for r in rows])
    rows.sort(key=lambda r: (r[0], r[1]))
    for index, (start, number, obj, meta, metrics, where) in enumerate(rows):
        request, repetition = slots[number - 1]
        _add_request(
            recorder, index, start, obj, meta, metrics, where, raw_by_id, path,
            request, repetition,
        )  # fmt: skip
    version = summary.get("aiperf_version")
    not_recorded = [
        "the bytes of each response as received (AIPerf keeps parsed events)",
        "the server's identity (/health, /v1/models) and logs",
        "TPOT as evidencestore defines it (AIPerf's inter_token_latency is given as itl_s)",
    ]
    if raw is None:
        not_recorded[:0] = [
            "request payloads and response bodies (no profile_export_raw.jsonl: "
            "AIPerf's --export-level raw keeps them)",
            "completions (token-exact verdicts need the raw export)",
        ]
    recorder.harness = Harness(
        name="aiperf",
        version=str(version) if version is not None else None,
        command=_command(summary),
        metrics=METRICS,
        not_recorded=tuple(not_recorded),
        sources={"requests": RECORDS, **({"payloads": RAW} if raw is not None else {})},
        source_digest=digest,
    )
    recorder.started = _utc(rows[0][0])
    recorder.ended = _utc(max(int(r[3]["request_end_ns"]) for r in rows))
    registration, record = recorder.seal()
    return ImportResult(name, registration.digest, False, record.outcome)


def _slots(metas: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each record's (request, repetition): the request is its conversation (AIPerf's
    ``conversation_id``: the dataset entry it sent), numbered in the order AIPerf issued
    them (phase, then ``session_num``), never by timing, so two runs of one dataset number
    their prompts alike; the repetition counts earlier sends of it in the same phase."""
    order = sorted(
        range(len(metas)),
        key=lambda i: (
            metas[i]["benchmark_phase"] != "warmup",
            metas[i].get("session_num") if isinstance(metas[i].get("session_num"), int) else i,
            i,
        ),
    )
    numbers: dict[str, int] = {}
    seen: dict[tuple[str, int], int] = {}
    out = [(0, 0)] * len(metas)
    for i in order:
        conv = str(metas[i].get("conversation_id", i))
        request = numbers.setdefault(conv, len(numbers))
        key = (str(metas[i]["benchmark_phase"]), request)
        out[i] = (request, seen.get(key, 0))
        seen[key] = seen.get(key, 0) + 1
    return out


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
) -> RequestRecord:
    phase: Phase = "warmup" if meta["benchmark_phase"] == "warmup" else "measured"
    error = obj.get("error")
    if error is not None and not isinstance(error, dict):
        raise ConfigError(f"{where}: field 'error': expected an object or null")
    raw = raw_by_id.get(str(meta.get("x_request_id")))
    store = recorder.store
    if raw is not None and raw.get("payload") is not None:
        payload = store.put(pretty(raw["payload"]), "application/json")
    else:
        payload = store.put(
            canonical({"aiperf_request": meta.get("x_request_id")}), "application/json"
        )
    body: Descriptor | None = None
    completion: Descriptor | None = None
    done: Completion | None = None
    status: int | None = None
    if raw is not None:
        if raw.get("responses") is not None:
            body = store.put(pretty(raw["responses"]), "application/json")
        try:
            status = int(raw["status"]) if raw.get("status") is not None else None
        except (TypeError, ValueError):
            status = None
        done = _completion(raw.get("responses"))
        if done is not None and error is None:
            completion = store.put(pretty(done), "application/json")
    if status is None:
        code = error.get("code") if error else None
        status = code if isinstance(code, int) else (200 if error is None else None)
    failure: Failure | None = _failure(error) if error else None
    message = None
    if error:
        message = str(error.get("message"))
    e2e = _metric(metrics, "request_latency", "s", where)
    ttft = _metric(metrics, "time_to_first_token", "s", where)
    itl = _metric(metrics, "inter_token_latency", "s", where)
    tokens = _metric(metrics, "output_token_count", "tokens", where)
    ack = meta.get("request_ack_ns") if isinstance(meta.get("request_ack_ns"), int) else None
    end = int(meta["request_end_ns"])
    observation = Observation(
        method="POST",
        path=path,
        sent_ns=start,
        end_ns=end,
        start_utc=_utc(start),
        status=status,
        headers_ns=ack,
        last_byte_ns=end if failure is None else None,
        failure=failure,
        message=message,
    )
    # AIPerf keeps parsed events, not the stream as received: nothing to read back.
    base = judge(
        None,
        observation,
        body,
        Expected(),
        store=store,
        slot=Slot(index, phase, request, repetition),
        payload=payload,
    )
    record = _with(
        base,
        completion=completion,
        e2e_s=e2e if failure is None else None,
        ttft_s=ttft if failure is None else None,
        itl_s=itl if failure is None else None,
        output_tokens=int(tokens) if tokens is not None else None,
        finish_reason=done.finish_reason if done is not None else None,
        error_type=str(error.get("type")) if error and error.get("type") else None,
        worker=str(meta.get("worker_id")) if meta.get("worker_id") else None,
    )
    return recorder.add(record)


def _with(record: RequestRecord, **changes: Any) -> RequestRecord:
    import msgspec

    return msgspec.structs.replace(record, **changes)


def import_aiperf(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    name: str,
    *,
    arm: str = "imported",
    campaign: CampaignRules | None = None,
    condition: str | None = None,
) -> list[ImportResult]:
    """Seal an AIPerf artifact directory as run bundle ``name`` (or one run per profile
    run, ``NAME-<subdir>``) in the repository ``root`` names
    (:func:`~evidencestore.config.as_repository`); see the module."""
    from ..config import as_repository

    repo = as_repository(root)
    base = Path(directory)
    if not base.is_dir():
        raise ConfigError(f"import aiperf {base}: not a directory")
    if (base / RECORDS).is_file():
        sources = [(name, base)]
    else:
        subdirs = sorted(p.parent for p in base.glob(f"*/{RECORDS}"))
        if not subdirs:
            raise ConfigError(
                f"{base}: not an AIPerf artifact directory: no {RECORDS} (AIPerf writes it "
                "with every profile; expected it here or in one subdirectory per profile run)"
            )
        sources = [(f"{name}-{p.name}", p) for p in subdirs]
    return [
        _import_one(
            repo,
            harness_dir(path, "aiperf"),
            run_name,
            arm=arm,
            campaign=campaign,
            condition=condition,
        )
        for run_name, path in sources
    ]
