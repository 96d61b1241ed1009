"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client).

The page is opened from a ``file://`` URL with the network cut off for it: every proxy
points at a closed port and every host name resolves to nothing, so any fetch the page
tried would fail and be seen (``Network.loadingFailed``) besides being listed. Console
errors, uncaught exceptions and CSP violations are collected as well.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "PageResult",
    "assert_clean_page",
    "chromium_path",
    "needs_chromium",
    "open_page",
    "png_variance",
]


def chromium_path() -> str | None:
    """The Chromium executable from Debian's package, if installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="headless Chromium (Debian package 'chromium') is not installed",
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PageResult:
    """What loading one page showed."""

    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    facts: Any = None
    screenshots: dict[int, bytes] = field(default_factory=dict)
    pdf: bytes = b""


class _Browser:
    def __init__(self, exe: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="evstore-chromium-")
        port = _closed_port()
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                f"--user-data-dir={self.profile}",
                f"--proxy-server=http://127.0.0.1:{port}",
                "--proxy-bypass-list=<-loopback>",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not active.exists() or len(active.read_text().splitlines()) < 2:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        self.port = int(active.read_text().splitlines()[0])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


_FACTS = """(() => {
  const svgs = [...document.querySelectorAll('figure.plot svg')].map(s => {
    const r = s.getBoundingClientRect(); return [r.width, r.height]; });
  const imgs = [...document.querySelectorAll('img')].map(i => [i.naturalWidth, i.naturalHeight,
    i.getBoundingClientRect().width]);
  const plots = [...document.querySelectorAll('figure.plot')].map(f => Object.assign({}, f.dataset));
  return {verdict: document.body.dataset.verdict || null,
    verdictText: (document.getElementById('verdict') || {}).innerText || null,
    text: document.body.innerText, svgs, imgs, plots,
    worst: [...document.querySelectorAll('.worst-frame')].map(e => e.dataset.frame),
    digests: [...document.querySelectorAll('code.digest')].map(e => e.textContent),
    identicalAll: [...document.querySelectorAll('.identical-all')].map(e => e.dataset.frames),
    scrollWidth: document.documentElement.scrollWidth,
    figureOverflow: [...document.querySelectorAll('figure.plot')].map(f => f.scrollWidth - f.clientWidth),
    plotFontPx: Math.min(...[...document.querySelectorAll('figure.plot svg')].flatMap(s => {
      const scale = s.getBoundingClientRect().width / s.viewBox.baseVal.width;
      return [...s.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
    })),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    anchors: [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href'))};
})()"""


async def _drive(port: int, url: str, widths: tuple[int, ...], full: bool) -> PageResult:
    import aiohttp

    result = PageResult()
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as resp:
            target = await resp.json(content_type=None)
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            counter = 0
            pending: dict[int, asyncio.Future[Any]] = {}
            loaded = asyncio.get_running_loop().create_future()

            async def reader() -> None:
                async for msg in ws:
                    data = json.loads(msg.data)
                    if "id" in data and data["id"] in pending:
                        pending.pop(data["id"]).set_result(data)
                        continue
                    method, params = data.get("method"), data.get("params", {})
                    if method == "Network.requestWillBeSent":
                        result.requests.append(params["request"]["url"])
                    elif method == "Network.loadingFailed":
                        result.failed.append(f"{params.get('errorText')} {params.get('requestId')}")
                    elif method == "Runtime.consoleAPICalled" and params["type"] in (
                        "error",
                        "assert",
                        "warning",
                    ):
                        result.errors.append(json.dumps(params["args"])[:500])
                    elif method == "Runtime.exceptionThrown":
                        result.errors.append(json.dumps(params["exceptionDetails"])[:500])
                    elif method == "Log.entryAdded" and params["entry"]["level"] in (
                        "error",
                        "warning",
                    ):
                        result.errors.append(params["entry"].get("text", "")[:500])
                    elif method == "Page.loadEventFired" and not loaded.done():
                        loaded.set_result(True)

            task = asyncio.create_task(reader())

            async def call(method: str, **params: Any) -> Any:
                nonlocal counter
                counter += 1
                fut = asyncio.get_running_loop().create_future()
                pending[counter] = fut
                await ws.send_str(json.dumps({"id": counter, "method": method, "params": params}))
                reply = await asyncio.wait_for(fut, 60)
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result")

            for domain in ("Page", "Network", "Runtime", "Log"):
                await call(f"{domain}.enable")
            await call(
                "Emulation.setDeviceMetricsOverride",
                width=widths[0],
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Page.navigate", url=url)
            await asyncio.wait_for(loaded, 60)
            got = await call("Runtime.evaluate", expression=_FACTS, returnByValue=True)
            result.facts = got["result"]["value"]
            for width in widths:
                height = 900 if width > 600 else 780
                for _ in range(2 if full else 1):
                    await call(
                        "Emulation.setDeviceMetricsOverride",
                        width=width,
                        height=height,
                        deviceScaleFactor=1,
                        mobile=width <= 600,
                    )
                    got = await call(
                        "Runtime.evaluate",
                        expression="document.documentElement.scrollHeight",
                        returnByValue=True,
                    )
                    height = min(int(got["result"]["value"]), 16000)
                shot = await call(
                    "Page.captureScreenshot", format="png", captureBeyondViewport=False
                )
                result.screenshots[width] = base64.b64decode(shot["data"])
            printed = await call("Page.printToPDF", printBackground=True)
            result.pdf = base64.b64decode(printed["data"])
            await asyncio.sleep(0)  # let queued events land before the socket closes
            task.cancel()
    return result


def open_page(
    path: str | os.PathLike[str], widths: tuple[int, ...] = (1280, 390), *, full: bool = False
) -> PageResult:
    """Open ``path`` in headless Chromium with the network cut off; return what it saw and
    a screenshot at each width (``full``: of the whole page, else of the first screen)."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed")
    browser = _Browser(exe)
    try:
        return asyncio.run(_drive(browser.port, Path(path).absolute().as_uri(), widths, full))
    finally:
        browser.close()


def png_variance(data: bytes) -> float:
    """Pixel variance of a PNG screenshot (decoded with PyAV): near zero means blank."""
    import io

    import av
    import numpy as np

    with av.open(io.BytesIO(data)) as container:
        frame = next(container.decode(video=0))
        arr = frame.to_ndarray(format="gray").astype(np.float64)
    return float(arr.var())


_DIGEST = re.compile(r"blake3:[0-9a-f]{64}")


def assert_clean_page(result: PageResult, verdict: str, record: bytes, html: str) -> None:
    """The page loaded offline and clean, shows ``verdict``, its plots, every digest of
    ``record`` (the stored bytes) and of the page, and screenshots that are not blank."""
    assert result.failed == []
    assert result.errors == []
    # Nothing but the page itself and its inline data: URIs was requested.
    assert [u for u in result.requests if not u.startswith(("file://", "data:"))] == []
    assert sum(u.startswith("file://") for u in result.requests) == 1
    facts = result.facts
    assert facts["verdict"] == verdict
    assert verdict in facts["verdictText"]
    assert facts["svgs"] and all(w > 100 and h > 50 for w, h in facts["svgs"])
    shown = set(facts["digests"])
    for digest in set(_DIGEST.findall(record.decode())):
        assert digest in shown, digest
    assert set(_DIGEST.findall(html)) <= shown
    assert set(facts["anchors"]) <= {"#" + i for i in facts["ids"]}  # every link lands
    for width, png in result.screenshots.items():
        assert png_variance(png) > 100, f"blank screenshot at width {width}"
