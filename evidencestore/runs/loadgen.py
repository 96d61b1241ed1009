"""Import an MLPerf LoadGen log directory as a run (``evstore import loadgen``).

The whole directory is sealed (``mlperf_log_summary.txt``, ``mlperf_log_detail.txt``,
``mlperf_log_accuracy.json`` in full, the trace when present); the record is read from
the detail log's ``:::MLLOG`` lines, LoadGen's own machine-readable log: scenario and
mode (``effective_scenario``, ``effective_test_mode``), the result (``result_validity``)
with every rule LoadGen checked (``result_*_met``, ``early_stopping_met``), the latency
percentiles in ns, early stopping, every ``result_*`` value, every effective setting,
the errors and warnings it logged, and its version. A key logged twice with different
values (a ``result_validity: VALID`` appended after LoadGen's own ``INVALID``), or a
summary (``mlperf_log_summary.txt``) that says otherwise than the detail log (result,
scenario, mode, percentiles), refuses the import: which one LoadGen wrote cannot be told.

Outcomes: a performance run LoadGen found ``VALID`` is ``complete``; one it found
``INVALID`` is ``invalid`` (its own outcome: shown as such, never counted for a claim
or a lossless verdict); an ``AccuracyOnly`` run (LoadGen logs no ``result_validity``
there) is ``complete`` when its accuracy log holds entries, and each entry becomes a
request record (request = ``qsl_idx``, repetition = earlier entries of that sample)
whose output is the entry's data, decoded from hex: its token ids (little-endian
integers of ``len(data) / token_count`` bytes, 4 or 8, when LoadGen logged
``token_count``; else one id per byte), so two LoadGen runs compare token for token.
A run that reports no result otherwise is ``failed-before-inference``. An accuracy
entry that is not an object with an integer ``qsl_idx`` and hex ``data``, or whose
``token_count`` does not match its data, refuses the import naming its line.

One LoadGen execution counts once: the run's ``execution`` digest is that of its detail
log (and trace), which no two executions share, so a copy of a result directory with a
side file changed (``stderr.txt``, a README) is the same run.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Unpack

import msgspec

from .._canonical import canonical, loads_json, pretty
from .._keywords import check_keywords
from ..digest import hash_bytes
from ..errors import ConfigError
from .importing import (
    HarnessDir,
    ImportOptions,
    ImportResult,
    harness_dir,
    import_lock,
    judge_kept,
    open_import,
)
from .judge import Slot
from .models import FieldValue, Harness, HarnessRule, LoadGenResult
from .recorder import RunRecorder
from .streams import COMPLETION_MEDIA_TYPE, Completion
from .transport import Observation

if TYPE_CHECKING:
    from ..config import Repository

__all__ = ["import_loadgen", "parse_detail", "parse_summary"]

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
ACCURACY = "mlperf_log_accuracy.json"
TRACE = "mlperf_log_trace.json"
_PREFIX = ":::MLLOG "
_PERCENTILE = re.compile(r"^result_(\d+\.\d+)_percentile_latency_ns$")
_SUMMARY_PERCENTILE = re.compile(r"^(\d+\.\d+) percentile latency \(ns\)\s*:\s*(\d+)\s*$")
_HEX = re.compile(r"^(?:[0-9A-Fa-f]{2})*$")
#: Keys whose value decides the record: logged twice with different values, refused.
_DECIDING = ("result_", "effective_", "early_stopping", "test_datetime", "loadgen_version")

METRICS = {
    "latency_ns": "LoadGen: per query, from the query's scheduled issue time to the "
    "SUT's QuerySamplesComplete for its last sample (ns, LoadGen's clock)",
    "percentiles_ns": "LoadGen's latency percentiles over the performance run's queries",
    "completed_samples_per_sec": "LoadGen: samples completed over the run's duration",
    "output_tokens": "LoadGen token_count of an accuracy entry (the SUT's own count)",
}


def parse_detail(data: bytes, where: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The ``:::MLLOG`` lines of a detail log: key -> value, and the error and warning
    messages (``metadata.is_error`` / ``is_warning``). A line that is not JSON, holds no
    ``key``, or logs a deciding key (``result_*``, ``effective_*``, ...) again with
    another value is a :class:`ConfigError` naming its line."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not raw.startswith(_PREFIX):
            continue
        try:
            obj = loads_json(raw[len(_PREFIX) :])
        except ValueError as exc:
            raise ConfigError(f"{where}: line {number}: not a :::MLLOG JSON line: {exc}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("key"), str):
            raise ConfigError(f"{where}: line {number}: expected an object with a string 'key'")
        key, value = obj["key"], obj.get("value")
        got = obj.get("metadata")
        meta: dict[str, Any] = got if isinstance(got, dict) else {}
        if meta.get("is_error"):
            errors.append(f"{key}: {value}")
        elif meta.get("is_warning"):
            warnings.append(f"{key}: {value}")
        if key in values and values[key] != value and key.startswith(_DECIDING):
            raise ConfigError(
                f"{where}: line {number}: {key} logged again as {value!r} after "
                f"{values[key]!r}: LoadGen logs it once; which value LoadGen wrote cannot "
                "be told"
            )
        values[key] = value
    return values, errors, warnings


def parse_summary(data: bytes) -> dict[str, str]:
    """What ``mlperf_log_summary.txt`` states: ``result`` (VALID/INVALID), ``scenario``,
    ``mode`` and ``<pct>`` -> ns for each percentile line (values as written)."""
    out: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        match = _SUMMARY_PERCENTILE.match(line.strip())
        if match:
            out[match.group(1)] = match.group(2)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        word = {"Result is": "result", "Scenario": "scenario", "Mode": "mode"}.get(key.strip())
        if word is not None and word not in out:
            out[word] = value.strip()
    return out


def _check_summary(source: HarnessDir, result: LoadGenResult) -> None:
    """Refuse a summary that says otherwise than the detail log."""
    if not source.has(SUMMARY):
        return
    said = parse_summary(source.read(SUMMARY, "a LoadGen log directory"))
    where = source.directory / SUMMARY
    detail = source.directory / DETAIL
    pairs = [
        ("result", result.validity),
        ("scenario", result.scenario),
        ("mode", result.mode),
        *((pct, str(ns)) for pct, ns in result.percentiles_ns.items()),
    ]
    for key, value in pairs:
        if key in said and value is not None and said[key] != value:
            what = f"{key} percentile latency (ns)" if key[0].isdigit() else key
            raise ConfigError(
                f"{where}: {what} is {said[key]!r} but {detail} says {value!r}: the summary "
                "and the detail log disagree, so which LoadGen wrote cannot be told"
            )
    if "result" in said and result.validity is None:
        raise ConfigError(
            f"{where}: result is {said['result']!r} but {detail} logs no result_validity: "
            "the summary and the detail log disagree"
        )


def _scalar(value: Any) -> FieldValue | None:
    return value if isinstance(value, (str, int, float, bool)) else None


def _need(values: dict[str, Any], key: str, where: str) -> str:
    value = values.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"{where}: not a LoadGen detail log: no {key!r} in its :::MLLOG lines "
            f"(expected a string such as 'Offline' or 'PerformanceOnly')"
        )
    return value


class AccuracyEntry:
    """One decoded accuracy-log entry: its line, sample, data and token ids."""

    __slots__ = ("data", "line", "qsl_idx", "token_count", "token_ids")

    def __init__(
        self, line: int, qsl_idx: int, data: bytes, token_ids: tuple[int, ...], count: int | None
    ) -> None:
        self.line, self.qsl_idx, self.data = line, qsl_idx, data
        self.token_ids, self.token_count = token_ids, count


def _entry_lines(text: str) -> list[tuple[int, str]] | None:
    """The accuracy log's entries with their line numbers, in LoadGen's layout (``[``,
    one object a line with a trailing comma, ``]``); None for another layout."""
    out = []
    lines = text.splitlines()
    body = [(n, x.strip()) for n, x in enumerate(lines, 1) if x.strip()]
    if not body or body[0][1] != "[" or body[-1][1] != "]":
        return None
    for number, line in body[1:-1]:
        if not line.startswith("{"):
            return None
        out.append((number, line.removesuffix(",")))
    return out


def decode_accuracy(data: bytes, where: str) -> list[AccuracyEntry]:
    """Every entry of an accuracy log, decoded and checked (see the module); a
    :class:`ConfigError` names the file, line and field of the first bad one."""
    text = data.decode("utf-8", "replace")
    layout = _entry_lines(text)
    if layout is None:
        try:
            whole = loads_json(data)
        except ValueError as exc:
            raise ConfigError(
                f"{where}: not JSON: {exc} (expected a list of {{qsl_idx, data, ...}} objects)"
            ) from None
        if not isinstance(whole, list):
            raise ConfigError(f"{where}: expected a JSON list of accuracy entries")
        items: list[tuple[str, Any]] = [(f"entry {i}", obj) for i, obj in enumerate(whole)]
    else:
        items = []
        for number, line in layout:
            try:
                items.append((f"line {number}", loads_json(line)))
            except ValueError as exc:
                raise ConfigError(f"{where}: line {number}: not a JSON object: {exc}") from None
    out = []
    for label, obj in items:
        at = f"{where}: {label}"
        if not isinstance(obj, dict):
            raise ConfigError(f"{at}: expected an object {{qsl_idx, data, ...}}")
        qsl = obj.get("qsl_idx")
        if not isinstance(qsl, int) or isinstance(qsl, bool) or qsl < 0:
            raise ConfigError(f"{at}: field 'qsl_idx' is {qsl!r}: expected an integer >= 0")
        hexed = obj.get("data")
        if not isinstance(hexed, str) or not _HEX.match(hexed):
            shown = hexed if not isinstance(hexed, str) else hexed[:40]
            raise ConfigError(
                f"{at}: field 'data' is {shown!r}: expected hex digits (an even number)"
            )
        raw = bytes.fromhex(hexed)
        count = obj.get("token_count")
        if count is None:
            ids = tuple(raw)
        else:
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ConfigError(f"{at}: field 'token_count' is {count!r}: expected an integer")
            width = len(raw) // count if count else 0
            if (count == 0 and raw) or (
                count and (width not in (4, 8) or width * count != len(raw))
            ):
                raise ConfigError(
                    f"{at}: field 'token_count' is {count} but field 'data' holds {len(raw)} "
                    "bytes: expected 4 or 8 bytes per token"
                )
            ids = tuple(
                int.from_bytes(raw[k : k + width], "little", signed=True)
                for k in range(0, len(raw), width or 1)
            )
        line_no = int(label.split()[1]) if label.startswith("line") else 0
        out.append(AccuracyEntry(line_no, qsl, raw, ids, count))
    return out


def loadgen_result(
    source: HarnessDir,
) -> tuple[LoadGenResult, dict[str, Any], list[AccuracyEntry] | None]:
    """The record's LoadGen section from the detail log (checked against the summary),
    every value the detail log holds, and the decoded accuracy entries (None without
    an accuracy log)."""
    where = str(source.directory / DETAIL)
    values, errors, warnings = parse_detail(source.read(DETAIL, "a LoadGen log directory"), where)
    scenario = _need(values, "effective_scenario", where)
    mode = _need(values, "effective_test_mode", where)
    validity = values.get("result_validity")
    if validity is not None and validity not in ("VALID", "INVALID"):
        raise ConfigError(f"{where}: result_validity is {validity!r}: expected VALID or INVALID")
    rules = [
        HarnessRule(name=k[len("result_") : -len("_met")], met=bool(v))
        for k, v in sorted(values.items())
        if k.startswith("result_") and k.endswith("_met") and isinstance(v, bool)
    ]
    if isinstance(values.get("early_stopping_met"), bool):
        rules.append(HarnessRule(name="early_stopping", met=values["early_stopping_met"]))
    percentiles: dict[str, int] = {}
    results: dict[str, FieldValue] = {}
    for key, value in sorted(values.items()):
        match = _PERCENTILE.match(key)
        if match and isinstance(value, int):
            percentiles[match.group(1)] = value
        elif key.startswith("result_") and key not in ("result_validity", "result_invalid_reason"):
            scalar = _scalar(value)
            if scalar is not None and not key.endswith("_met"):
                results[key[len("result_") :]] = scalar
    settings = {
        k[len("effective_") :]: s
        for k, v in sorted(values.items())
        if k.startswith("effective_") and (s := _scalar(v)) is not None
    }
    entries = None
    if source.has(ACCURACY):
        entries = decode_accuracy(
            source.read(ACCURACY, "a LoadGen log directory"), str(source.directory / ACCURACY)
        )
    reason = values.get("result_invalid_reason")
    early = values.get("early_stopping_result")
    result = LoadGenResult(
        scenario=scenario,
        mode=mode,
        validity=validity,
        invalid_reason=reason.strip() if isinstance(reason, str) and reason.strip() else None,
        rules=tuple(rules),
        percentiles_ns=percentiles,
        early_stopping=" ".join(early.split()) if isinstance(early, str) else None,
        early_stopping_met=values.get("early_stopping_met")
        if isinstance(values.get("early_stopping_met"), bool)
        else None,
        results=results,
        settings=settings,
        errors=tuple(errors),
        warnings=tuple(warnings),
        accuracy_entries=len(entries) if entries is not None else None,
    )
    _check_summary(source, result)
    return result, values, entries


def execution_digest(source: HarnessDir) -> str:
    """The digest identifying one LoadGen execution: its detail log's (and trace's)
    bytes, which carry its start time, pid and every event time."""
    parts = {rel: hash_bytes(source.read(rel, "a LoadGen log directory")).digest
             for rel in (DETAIL, TRACE) if source.has(rel)}  # fmt: skip
    return hash_bytes(canonical({"loadgen-execution": parts})).digest


def _add_entries(recorder: RunRecorder, entries: list[AccuracyEntry], started: str) -> None:
    """Each accuracy entry as a request record whose output is its decoded data."""
    seen: dict[int, int] = {}
    store = recorder.store
    for index, entry in enumerate(entries):
        repetition = seen.get(entry.qsl_idx, 0)
        seen[entry.qsl_idx] = repetition + 1
        payload = store.put(canonical({"loadgen_qsl_idx": entry.qsl_idx}), "application/json")
        body = store.put(entry.data, "application/octet-stream")
        done = Completion(
            text="",
            token_ids=entry.token_ids,
            output_tokens=entry.token_count if entry.token_count is not None else None,
        )
        completion = store.put(pretty(done), COMPLETION_MEDIA_TYPE)
        observation = Observation(
            sent_ns=0, end_ns=0, start_utc=started, method="LoadGen", path="QuerySample"
        )
        # The output is LoadGen's decoded data.
        slot = Slot(index, "measured", entry.qsl_idx, repetition)
        record = judge_kept(recorder, observation, body, slot, payload)
        recorder.add(
            msgspec.structs.replace(record, completion=completion, output_tokens=entry.token_count)
        )


def import_loadgen(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    name: str,
    **options: Unpack[ImportOptions],
) -> ImportResult:
    """Seal a LoadGen log directory as run bundle ``name`` in the repository ``root``
    names (:func:`~evidencestore.config.as_repository`; see the module); ``options``:
    :class:`~.importing.ImportOptions`."""
    from ..config import as_repository

    check_keywords("import_loadgen", options, ImportOptions)
    repo = as_repository(root)
    source = harness_dir(directory, "loadgen")
    result, values, entries = loadgen_result(source)
    with import_lock(repo):
        return _import(repo, source, name, result, values, entries, options)


def _import(
    repo: Repository,
    source: HarnessDir,
    name: str,
    result: LoadGenResult,
    values: dict[str, Any],
    entries: list[AccuracyEntry] | None,
    options: ImportOptions,
) -> ImportResult:
    version = values.get("loadgen_version")
    execution = execution_digest(source)
    opened = open_import(
        repo,
        name,
        source,
        workload=None,
        workload_bytes=canonical(result.settings),
        execution=execution,
        started=started if isinstance(started := values.get("test_datetime"), str) else None,
        **options,
    )
    if isinstance(opened, ImportResult):
        return opened
    recorder, digest = opened
    accuracy = result.mode == "AccuracyOnly"
    not_recorded = [
        "per-query times and statuses: LoadGen keeps only aggregate results"
        + (" (the accuracy entries are the outputs)" if accuracy else ""),
        "the server's identity and logs",
    ]
    if not accuracy:
        not_recorded.append(
            "outputs compared across runs: a performance run's accuracy entries, if any, "
            "are a sample (checked, not compared)"
        )
    if entries is None:
        not_recorded.append("the accuracy log")
    recorder.harness = Harness(
        name="loadgen",
        version=version if isinstance(version, str) else None,
        command=None,
        metrics=METRICS,
        not_recorded=tuple(not_recorded),
        sources={"loadgen": DETAIL, **({"outputs": ACCURACY} if accuracy and entries else {})},
        source_digest=digest,
        execution=execution,
        loadgen=result,
    )
    started = values.get("test_datetime")
    # LoadGen logs the test's start (UTC); its end is not logged as a time.
    recorder.started = started if isinstance(started, str) else "unknown"
    recorder.ended = recorder.started
    if result.validity is not None:
        reason = f"LoadGen {result.scenario} {result.mode}: {result.validity}"
        if result.invalid_reason:
            reason += f" ({result.invalid_reason})"
        failed = [r.name for r in result.rules if not r.met]
        if failed:
            reason += f"; rules not met: {', '.join(failed)}"
        recorder.outcome = ("complete" if result.validity == "VALID" else "invalid", reason)
    elif accuracy and entries:
        _add_entries(recorder, entries, recorder.started)
        recorder.outcome = (
            "complete",
            f"LoadGen {result.scenario} AccuracyOnly: {len(entries)} accuracy entries, "
            "each an output (LoadGen judges no validity in accuracy mode)",
        )
    else:
        why = f"{ACCURACY} holds no entry" if accuracy else f"{DETAIL} reports no result_validity"
        recorder.outcome = ("failed-before-inference", f"{why}: LoadGen did not finish the test")
    registration, record = recorder.seal()
    return ImportResult(name, registration.digest, False, record.outcome)
