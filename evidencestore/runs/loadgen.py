"""Import an MLPerf LoadGen log directory as a run (``evstore import loadgen``).

The whole directory is sealed (``mlperf_log_summary.txt``, ``mlperf_log_detail.txt``,
``mlperf_log_accuracy.json`` in full, the trace when present); the record is read from
the detail log's ``:::MLLOG`` lines, LoadGen's own machine-readable log: scenario and
mode (``effective_scenario``, ``effective_test_mode``), the result (``result_validity``)
with every rule LoadGen checked (``result_*_met``, ``early_stopping_met``), the latency
percentiles in ns, early stopping, every ``result_*`` value, every effective setting,
the errors and warnings it logged, and its version. LoadGen keeps no per-query record
in these files, so the run has no request records: its outcome is ``complete`` when
LoadGen reported a result (VALID or INVALID, as LoadGen says), else
``failed-before-inference``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .._canonical import canonical, loads_json
from ..errors import ConfigError
from .fit import CampaignRules
from .importing import HarnessDir, ImportResult, harness_dir, open_import
from .models import FieldValue, Harness, HarnessRule, LoadGenResult

__all__ = ["import_loadgen", "parse_detail"]

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
ACCURACY = "mlperf_log_accuracy.json"
_PREFIX = ":::MLLOG "
_PERCENTILE = re.compile(r"^result_(\d+\.\d+)_percentile_latency_ns$")

METRICS = {
    "latency_ns": "LoadGen: per query, from the query's scheduled issue time to the "
    "SUT's QuerySamplesComplete for its last sample (ns, LoadGen's clock)",
    "percentiles_ns": "LoadGen's latency percentiles over the performance run's queries",
    "completed_samples_per_sec": "LoadGen: samples completed over the run's duration",
}


def parse_detail(data: bytes, where: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The ``:::MLLOG`` lines of a detail log: key -> value (the last of a key), and the
    error and warning messages (``metadata.is_error`` / ``is_warning``). A line that is
    not JSON, or holds no ``key``, is a :class:`ConfigError` naming its line."""
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
        values[key] = value
    return values, errors, warnings


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


def loadgen_result(source: HarnessDir) -> tuple[LoadGenResult, dict[str, Any]]:
    """The record's LoadGen section from the detail log (and the accuracy log's count),
    and every value the detail log holds."""
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
    accuracy = None
    if source.has(ACCURACY):
        try:
            entries = loads_json(source.read(ACCURACY, "a LoadGen log directory"))
        except ValueError as exc:
            raise ConfigError(
                f"{source.directory / ACCURACY}: not JSON: {exc} (expected a list of "
                "{{qsl_idx, data, ...}} objects)"
            ) from None
        if not isinstance(entries, list):
            raise ConfigError(f"{source.directory / ACCURACY}: expected a JSON list")
        accuracy = len(entries)
    reason = values.get("result_invalid_reason")
    early = values.get("early_stopping_result")
    return LoadGenResult(
        scenario=scenario,
        mode=mode,
        validity=validity,
        invalid_reason=reason if isinstance(reason, str) and reason else None,
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
        accuracy_entries=accuracy,
    ), values


def import_loadgen(
    root: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    name: str,
    *,
    arm: str = "imported",
    campaign: CampaignRules | None = None,
    condition: str | None = None,
) -> ImportResult:
    """Seal a LoadGen log directory as run bundle ``name`` in the repository ``root``
    names (:func:`~evidencestore.config.as_repository`; see the module)."""
    from ..config import as_repository

    source = harness_dir(directory, "loadgen")
    result, values = loadgen_result(source)
    version = values.get("loadgen_version")
    opened = open_import(
        as_repository(root),
        name,
        source,
        arm=arm,
        workload=None,
        workload_bytes=canonical(result.settings),
        campaign=campaign,
        condition=condition,
    )
    if isinstance(opened, ImportResult):
        return opened
    recorder, digest = opened
    not_recorded = [
        "per-query records (request times, statuses): LoadGen keeps only aggregate results "
        "and sampled accuracy entries",
        "response body digests (the accuracy log holds sampled outputs as hex)",
        "the server's identity and logs",
    ]
    if not source.has(ACCURACY):
        not_recorded.append("the accuracy log")
    recorder.harness = Harness(
        name="loadgen",
        version=version if isinstance(version, str) else None,
        command=None,
        metrics=METRICS,
        not_recorded=tuple(not_recorded),
        sources={"loadgen": DETAIL},
        source_digest=digest,
        loadgen=result,
    )
    if result.validity is None:
        recorder.outcome = (
            "failed-before-inference",
            f"{DETAIL} reports no result_validity: LoadGen did not finish the test",
        )
    else:
        reason = f"LoadGen {result.scenario} {result.mode}: {result.validity}"
        if result.invalid_reason:
            reason += f" ({result.invalid_reason})"
        failed = [r.name for r in result.rules if not r.met]
        if failed:
            reason += f"; rules not met: {', '.join(failed)}"
        recorder.outcome = ("complete", reason)
    started = values.get("test_datetime")
    # LoadGen logs the test's start (UTC); its end is not logged as a time.
    recorder.started = started if isinstance(started, str) else "unknown"
    recorder.ended = recorder.started
    registration, record = recorder.seal()
    return ImportResult(name, registration.digest, False, record.outcome)
