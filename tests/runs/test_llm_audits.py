"""The run audits on LLM streams: a caching server and a seed-ignoring server are found
(each response has its own ``id`` and ``created``, so raw bytes never repeat), an
honest server is not."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from evidencestore.runs import run_workload
from evidencestore.runs.models import Audit, RunRecord
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _run(tmp_path: Path, server: LlmServer, name: str, text: str) -> RunRecord:
    (tmp_path / "evidence").mkdir(exist_ok=True)
    (tmp_path / "w.toml").write_text(text)
    return run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=server.url, name=name)[1]


def _audit(rec: RunRecord, name: str) -> Audit:
    return next(a for a in rec.audits if a.name == name)


def _seeded(seeds: tuple[int, ...]) -> str:
    text = chat_workload(("alpha",), max_tokens=8, logprobs=False)
    head, _, req = text.partition("[[request]]")
    return head + "".join(
        "[[request]]" + req.replace("seed = 7", f"seed = {s}") + "\n" for s in seeds
    )


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_output_caching_found_on_streams(
    tmp_path: Path, fresh_llm_server: LlmServer, kind: str
) -> None:
    fresh_llm_server.ttft, fresh_llm_server.itl = 0.03, 0.004
    wl = chat_workload(("alpha", "beta"), kind=kind, max_tokens=8, measured=4, logprobs=False)
    honest = _run(tmp_path, fresh_llm_server, "honest", wl)
    audit = _audit(honest, "output-caching")
    assert audit.examined == 6 and audit.findings == ()  # negative control
    fresh_llm_server.cache = True
    cached = _run(tmp_path, fresh_llm_server, "cached", wl)
    # The raw streams differ (fresh id per response), the decoded tokens do not.
    bodies = {r.body.digest for r in cached.requests if r.request == 0}  # type: ignore[union-attr]
    assert len(bodies) == 4
    audit = _audit(cached, "output-caching")
    assert audit.examined == 6 and len(audit.findings) == 6
    assert "possible output caching" in audit.findings[0].message


def test_seed_ignored_found_on_streams(tmp_path: Path, fresh_llm_server: LlmServer) -> None:
    wl = _seeded((1, 2, 3))
    honest = _run(tmp_path, fresh_llm_server, "honest", wl)
    audit = _audit(honest, "seed-ignored")
    assert audit.examined == 3 and audit.findings == ()  # negative control
    fresh_llm_server.ignore_seed = True
    ignoring = _run(tmp_path, fresh_llm_server, "ignoring", wl)
    audit = _audit(ignoring, "seed-ignored")
    assert audit.examined == 3 and len(audit.findings) == 3
    assert "the server ignored the seed" in audit.findings[0].message
