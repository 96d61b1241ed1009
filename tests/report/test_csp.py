"""Report pages run no inline script but their own (issue 36 item 9).

The Content-Security-Policy allows the page's one script by its SHA-256 hash
(``report._templates.SCRIPT_HASH``), never ``'unsafe-inline'``. In headless Chromium a
real report still renders clean, and a script injected into it is refused; the negative
control (the same page under the old ``'unsafe-inline'`` policy) runs it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from helpers.browser import assert_clean_page, needs_chromium, open_page
from helpers.remotes import run
from helpers.run_records import bundle_run, run_record

from evidencestore.report._templates import SCRIPT_HASH

INJECTED = "<script>document.body.insertAdjacentText('beforeend', 'INJECTED-RAN')</script>"
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def _report(initialized_repo: Path, tmp_path: Path) -> tuple[bytes, Path]:
    data = bundle_run(initialized_repo, "baseline-5s-1", run_record())
    out = tmp_path / "run.html"
    code, _, err = run("report", "baseline-5s-1", "-o", str(out), "--root", str(initialized_repo))
    assert code == 0, err
    return data, out


def test_policy_allows_only_the_pages_own_script_by_hash(
    initialized_repo: Path, tmp_path: Path
) -> None:
    _, out = _report(initialized_repo, tmp_path)
    html = out.read_text()
    policy = re.search(r'Content-Security-Policy" content="([^"]*)"', html)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in policy.group(1).split(";"))
    assert directives["script-src"] == f"'{SCRIPT_HASH}'"
    assert "unsafe-inline" not in directives["script-src"]
    scripts = _SCRIPT.findall(html)
    assert len(scripts) == 1  # the one script, and it is the one the hash names
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"sha256-{digest}" == SCRIPT_HASH


@needs_chromium
def test_report_renders_and_an_injected_script_is_blocked(
    initialized_repo: Path, tmp_path: Path
) -> None:
    data, out = _report(initialized_repo, tmp_path)
    html = out.read_text()
    assert_clean_page(open_page(out, widths=(1280,)), "partial", data, html)
    injected = tmp_path / "injected.html"
    injected.write_text(html.replace("</main>", INJECTED + "</main>"))
    blocked = open_page(injected, widths=(1280,))
    assert "INJECTED-RAN" not in blocked.facts["text"]
    assert any("Content Security Policy" in e for e in blocked.errors), blocked.errors
    assert blocked.facts["verdict"] == "partial"  # the page itself still renders
    # Negative control: under the old policy the same injection runs.
    old = injected.read_text().replace(f"script-src '{SCRIPT_HASH}'", "script-src 'unsafe-inline'")
    control = tmp_path / "control.html"
    control.write_text(old)
    assert "INJECTED-RAN" in open_page(control, widths=(1280,)).facts["text"]
