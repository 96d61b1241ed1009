"""A tiny deterministic MLPerf LoadGen SUT (run as a script: LoadGen keeps global state).

``python loadgen_sut.py SCENARIO MODE OUTDIR LATENCY_US QPS MIN_QUERIES [MIN_DURATION_MS
[TARGET_LATENCY_MS [ANSWER [WRONG]]]]``: scenario ``offline`` or ``server``, mode ``perf``
or ``acc``; each sample answers after ``LATENCY_US`` microseconds, with 4 bytes derived
from its index (``ANSWER`` ``bytes``, the default) or, with ``tokens``, three int32 token
ids derived from it and their count (``n_tokens``: LoadGen logs ``token_count``); with
``WRONG`` k > 0, samples whose index is 3 modulo k answer a different last token (a
candidate that is not token-exact). LoadGen
writes its real logs to OUTDIR. Verdicts are chosen so that machine load cannot change
them: a duration the SUT cannot reach, too few queries for early stopping, or a latency
bound of seconds.
"""

from __future__ import annotations

import array
import os
import sys
import time

import mlperf_loadgen as lg


def main(argv: list[str]) -> int:
    scenario, mode, outdir = argv[0], argv[1], argv[2]
    latency_us, qps, min_queries = int(argv[3]), int(argv[4]), int(argv[5])
    min_duration_ms = int(argv[6]) if len(argv) > 6 else 100
    target_latency_ms = int(argv[7]) if len(argv) > 7 else 50
    tokens = len(argv) > 8 and argv[8] == "tokens"
    wrong = int(argv[9]) if len(argv) > 9 else 0
    os.makedirs(outdir, exist_ok=True)
    keep: list[array.array[int]] = []

    def issue(queries: list[lg.QuerySample]) -> None:
        responses = []
        for q in queries:
            time.sleep(latency_us / 1e6)
            if tokens:
                last = 99 if wrong and q.index % wrong == 3 else 7
                data = array.array("i", (q.index, q.index + 1000, last))
                keep.append(data)
                address, count = data.buffer_info()
                responses.append(lg.QuerySampleResponse(q.id, address, count * 4, count))
                continue
            data = array.array("B", (q.index * 7 % 256,) * 4)
            keep.append(data)
            address, length = data.buffer_info()
            responses.append(lg.QuerySampleResponse(q.id, address, length))
        lg.QuerySamplesComplete(responses)

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(16, 16, lambda samples: None, lambda samples: None)
    settings = lg.TestSettings()
    settings.scenario = {"offline": lg.TestScenario.Offline, "server": lg.TestScenario.Server}[
        scenario
    ]
    settings.mode = {"perf": lg.TestMode.PerformanceOnly, "acc": lg.TestMode.AccuracyOnly}[mode]
    settings.min_query_count = min_queries
    settings.min_duration_ms = min_duration_ms
    settings.offline_expected_qps = qps
    settings.server_target_qps = qps
    settings.server_target_latency_ns = target_latency_ms * 1_000_000
    settings.use_token_latencies = tokens
    out = lg.LogOutputSettings()
    out.outdir = outdir
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    lg.StartTestWithLogSettings(sut, qsl, settings, log)
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
