"""Import a ``vllm bench serve`` result file as runs (``evstore import vllm-bench``).

``vllm bench serve --save-result --save-detailed`` writes one JSON object
(``vllm/benchmarks/serve.py``: default name
``{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json``): the run's settings
(``backend``, ``model_id``, ``num_prompts``, ``request_rate``, ``burstiness``,
``max_concurrency``, ``date``), its aggregates, and with ``--save-detailed`` one entry per
request in each of ``input_lens``, ``output_lens``, ``ttfts``, ``itls`` (the gaps
between chunks), ``latencies``, ``start_times``, ``generated_texts`` and ``errors``.
Without those arrays there is nothing per request to import: refused.
``--append-result`` appends one object per invocation to the same file, a newline
between them: each object is one run (``NAME-1``, ``NAME-2``, ... when there are
several), the whole file sealed with each. ``--metadata KEY=VALUE`` pairs are written
among vLLM's own keys, as strings, before its results: a key that shadows one of vLLM's
(``num_prompts`` as a string, ``backend`` unlike ``endpoint_type``, a ``date`` not in
vLLM's format) is refused, since which value vLLM measured cannot be told.

Each request becomes a request record through the one judge: ``e2e_s`` is vLLM's
``latency``, ``ttft_s`` its ``ttft``, ``itl_s`` the mean of its chunk gaps, ``tpot_s``
vLLM's TPOT (``(latency - ttft) / (output_len - 1)``), ``output_tokens`` its
``output_len``; the generated text is the output, compared character by character
(vLLM keeps no token ids). A request whose ``errors`` entry is not empty failed, with
vLLM's words kept as its message. Impossible values refuse the import naming the file,
request and field: arrays of different lengths, negative or non-finite times, a latency
unlike ``ttft + sum(itls)``, more chunks than tokens.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import msgspec

from .._canonical import canonical
from .._keywords import check_keywords
from ..errors import ConfigError
from .importing import (
    HarnessDir,
    ImportOptions,
    ImportResult,
    import_lock,
    json_objects,
    judge_kept,
    open_import,
)
from .judge import Slot
from .models import Failure, Harness
from .recorder import RunRecorder
from .streams import COMPLETION_MEDIA_TYPE, Completion
from .transport import Observation

if TYPE_CHECKING:
    from ..config import Repository

__all__ = ["DETAILED", "METRICS", "import_vllm_bench", "split_results"]

#: The per-request arrays ``--save-detailed`` keeps (and the importer needs).
DETAILED = ("ttfts", "itls", "start_times", "generated_texts", "errors", "output_lens")
_ALSO = ("latencies", "input_lens")
_DATE = re.compile(r"^\d{8}-\d{6}$")
#: vLLM's own keys written before ``--metadata`` pairs, with the types vLLM writes.
_TYPED: dict[str, tuple[type, ...]] = {
    "num_prompts": (int,),
    "burstiness": (int, float),
    "max_concurrency": (int, type(None)),
    "request_rate": (int, float, str),
}

METRICS = {
    "e2e_s": "vllm bench serve latency: from just before the request was sent to the "
    "last chunk (the client's perf_counter)",
    "ttft_s": "vllm bench serve ttft: from the send to the first chunk",
    "itl_s": "vllm bench serve itls, averaged: the gaps between successive chunks (a chunk "
    "may carry several tokens)",
    "tpot_s": "vllm bench serve TPOT: (latency - ttft) / (output_len - 1)",
    "output_tokens": "vllm bench serve output_lens: the server's usage count (else its "
    "tokenizer's count of the text)",
    "sent_ns": "vllm bench serve start_times, in ns (time.perf_counter, not wall-clock)",
}


def split_results(data: bytes, where: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a result file (several with ``--append-result``, one per
    line), with the line each starts on; a line that is not a JSON object is refused."""
    lines = data.decode("utf-8", "replace").splitlines()
    out = json_objects(lines, where, "a vllm bench serve result object")
    if not out:
        raise ConfigError(f"{where}: holds no result object")
    return out


def _check(obj: dict[str, Any], where: str) -> int:
    """Refuse a result without the detailed arrays, with shadowed keys or impossible
    values; return its request count."""
    missing = [k for k in (*DETAILED, *_ALSO) if not isinstance(obj.get(k), list)]
    if missing:
        raise ConfigError(
            f"{where}: no per-request {', '.join(repr(k) for k in missing)}: not a "
            "--save-detailed result (vllm bench serve --save-result --save-detailed keeps "
            "one entry per request in each)"
        )
    for key, kinds in _TYPED.items():
        value = obj.get(key)
        bad = isinstance(value, bool) or not isinstance(value, kinds)
        if key == "request_rate" and isinstance(value, str) and value != "inf":
            bad = True
        if key in obj and bad:
            raise ConfigError(
                f"{where}: field {key!r} is {value!r}: vLLM writes a "
                f"{' or '.join(k.__name__ for k in kinds)} there; a --metadata {key}=... "
                "shadows vLLM's own value"
            )
    if obj.get("backend") != obj.get("endpoint_type"):
        raise ConfigError(
            f"{where}: field 'backend' is {obj.get('backend')!r} but 'endpoint_type' is "
            f"{obj.get('endpoint_type')!r}: vLLM writes the same value in both; a "
            "--metadata key shadows one"
        )
    date = obj.get("date")
    if not isinstance(date, str) or not _DATE.match(date):
        raise ConfigError(
            f"{where}: field 'date' is {date!r}: vLLM writes YYYYMMDD-HHMMSS; a --metadata "
            "date=... shadows it"
        )
    n = len(obj["ttfts"])
    for key in (*DETAILED, *_ALSO):
        if len(obj[key]) != n:
            raise ConfigError(
                f"{where}: field {key!r} has {len(obj[key])} entries, 'ttfts' {n}: one "
                "per request in each"
            )
    if isinstance(obj.get("num_prompts"), int) and obj["num_prompts"] != n:
        raise ConfigError(f"{where}: num_prompts is {obj['num_prompts']} but {n} requests")
    return n


def _number(value: Any, where: str, field: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where}: field {field} is {value!r}: expected a number")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: field {field} is {value!r}: expected a finite value >= 0")
    return float(value)


def _settings(obj: dict[str, Any]) -> dict[str, Any]:
    """What was asked, as far as the file says: the workload's digest binds it."""
    return {
        "harness": "vllm-bench",
        "backend": obj.get("backend"),
        "num_prompts": obj.get("num_prompts"),
        "input_lens": obj.get("input_lens"),
        "request_rate": obj.get("request_rate"),
        "burstiness": obj.get("burstiness"),
        "max_concurrency": obj.get("max_concurrency"),
    }


def _failure(error: str) -> Failure:
    """vLLM's error text as evstore's class: an HTTP status it names, else the stream."""
    return "http-status" if re.search(r"\b[45]\d\d\b", error) else "stream-error"


def _add(
    recorder: RunRecorder, obj: dict[str, Any], i: int, where: str, path: str, started: str
) -> None:
    at = f"{where}: request {i}"
    start = _number(obj["start_times"][i], at, f"start_times[{i}]")
    error = obj["errors"][i]
    if not isinstance(error, str):
        raise ConfigError(f"{at}: field errors[{i}] is {error!r}: expected a string")
    text = obj["generated_texts"][i]
    if not isinstance(text, str):
        raise ConfigError(f"{at}: field generated_texts[{i}] is {text!r}: expected a string")
    tokens = obj["output_lens"][i]
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ConfigError(f"{at}: field output_lens[{i}] is {tokens!r}: expected an integer")
    store = recorder.store
    asked = {"vllm_bench_request": i, "input_len": obj["input_lens"][i]}
    payload = store.put(canonical(asked), "application/json")
    sent = round(start * 1e9)
    e2e = ttft = itl = tpot = None
    body = completion = None
    if error:
        end = sent
        observation = Observation(
            sent_ns=sent, end_ns=end, start_utc=started, method="POST", path=path, status=None,
            failure=_failure(error), message=f"vllm bench serve: {error.strip()[:2000]}",
        )  # fmt: skip
    else:
        ttft = _number(obj["ttfts"][i], at, f"ttfts[{i}]")
        e2e = _number(obj["latencies"][i], at, f"latencies[{i}]")
        gaps = obj["itls"][i]
        if not isinstance(gaps, list):
            raise ConfigError(f"{at}: field itls[{i}] is {gaps!r}: expected a list")
        gaps = [_number(g, at, f"itls[{i}][{k}]") for k, g in enumerate(gaps)]
        if abs(e2e - (ttft + math.fsum(gaps))) > 1e-6 * max(1.0, e2e):
            raise ConfigError(
                f"{at}: field latencies[{i}] is {e2e!r} but ttfts[{i}] + sum(itls[{i}]) is "
                f"{ttft + math.fsum(gaps)!r}: vLLM's latency is the first chunk plus every gap"
            )
        if len(gaps) > tokens:
            raise ConfigError(
                f"{at}: field output_lens[{i}] is {tokens} but itls[{i}] has {len(gaps)} "
                "gaps: more chunks than tokens"
            )
        end = sent + round(e2e * 1e9)
        itl = math.fsum(gaps) / len(gaps) if gaps else None
        tpot = (e2e - ttft) / (tokens - 1) if tokens > 1 else None
        body = store.put(text.encode(), "text/plain; charset=utf-8")
        done = Completion(text=text, output_tokens=tokens)
        completion = store.put(msgspec.json.encode(done), COMPLETION_MEDIA_TYPE)
        observation = Observation(
            sent_ns=sent, end_ns=end, start_utc=started, method="POST", path=path, status=200,
            first_byte_ns=sent + round(ttft * 1e9), last_byte_ns=end,
        )  # fmt: skip
    # vLLM keeps the text, not the stream.
    slot = Slot(len(recorder.requests), "measured", i, 0)
    record = judge_kept(recorder, observation, body, slot, payload)
    recorder.add(
        msgspec.structs.replace(
            record,
            e2e_s=e2e,
            ttft_s=ttft,
            itl_s=itl,
            tpot_s=tpot,
            output_tokens=tokens if not error else None,
            completion=completion,
        )
    )


def _utc(date: str) -> str:
    """vLLM's ``date`` (``YYYYMMDD-HHMMSS``, the client's clock) as ISO 8601."""
    return f"{date[0:4]}-{date[4:6]}-{date[6:8]}T{date[9:11]}:{date[11:13]}:{date[13:15]}Z"


def import_vllm_bench(
    root: str | os.PathLike[str],
    file: str | os.PathLike[str],
    name: str,
    **options: Unpack[ImportOptions],
) -> list[ImportResult]:
    """Seal a ``vllm bench serve`` result file as run bundle ``name`` (``NAME-<k>`` for
    each of several ``--append-result`` objects); see the module."""
    from ..config import as_repository
    from ..confined import check_file, read_file
    from .importing import MAX_PARSED_FILE

    check_keywords("import_vllm_bench", options, ImportOptions)
    repo = as_repository(root)
    path = Path(file)
    if not path.is_file():
        raise ConfigError(f"import vllm-bench {path}: not a file")
    real = check_file(path, (path.parent,), limit=MAX_PARSED_FILE, where=f"vllm-bench {path}")
    source = HarnessDir(path.parent, {path.name: real}, "vllm-bench")
    data = read_file(real, (path.parent,), limit=MAX_PARSED_FILE, where=f"vllm-bench {path}")
    objects = split_results(data, str(path))
    checked = [(line, obj, _check(obj, f"{path}: line {line}")) for line, obj in objects]
    out = []
    for k, (line, obj, n) in enumerate(checked, 1):
        run_name = name if len(checked) == 1 else f"{name}-{k}"
        where = f"{path}: line {line}"
        with import_lock(repo):
            out.append(
                _import_one(repo, source, run_name, obj, n, where, line, len(checked), options)
            )
    return out


def _import_one(
    repo: Repository,
    source: HarnessDir,
    name: str,
    obj: dict[str, Any],
    n: int,
    where: str,
    line: int,
    parts: int,
    options: ImportOptions,
) -> ImportResult:
    rel = next(iter(source.files))
    started = _utc(obj["date"])
    part = f"line {line}" if parts > 1 else None
    opened = open_import(
        repo,
        name,
        source,
        workload=None,
        workload_bytes=canonical(_settings(obj)),
        execution=None,
        started=started,
        part=part,
        **options,
    )
    if isinstance(opened, ImportResult):
        return opened
    recorder, digest = opened
    path = "/v1/chat/completions" if "chat" in str(obj.get("backend")) else "/v1/completions"
    for i in range(n):
        _add(recorder, obj, i, where, path, started)
    recorder.harness = Harness(
        name="vllm-bench",
        version=None,
        command=None,
        metrics=METRICS,
        not_recorded=(
            "the prompts sent (vllm bench serve keeps their lengths: requests pair by "
            "their place in the run and input length)",
            "the bytes of each response and its token ids (it keeps the generated text)",
            "warmup requests (--num-warmups are not written)",
            "the server's identity and logs",
            "the command line (the file keeps its settings); vLLM's version",
            "a wall-clock time per request (start_times are perf_counter seconds; the "
            "run's date is the client's local clock)",
        ),
        sources={"requests": f"{rel}#{part}" if part else rel},
        source_digest=digest,
        concurrency=obj["max_concurrency"] if isinstance(obj.get("max_concurrency"), int) else None,
    )
    recorder.started = started
    recorder.ended = started
    registration, record = recorder.seal()
    return ImportResult(name, registration.digest, False, record.outcome)
