"""A server that replays recorded HTTP exchanges byte for byte (127.0.0.1, port 0).

Recorded real-engine traffic (``tests/data/vllm/``, written by
``benches/record_vllm.py``) holds, per case, the status, the raw header lines the
engine sent and its body as the chunks a client read. This server writes that status
line and those header lines as they were, and the body in the same chunks (re-framed
with HTTP/1.1 chunked encoding when the engine used it, so the client reads the same
bytes), with the recorded gaps between chunks scaled by ``pace`` (0: at once). So a
test covers the real engine's framing (``text/event-stream; charset=utf-8``, role-only
first chunks, ``"token_ids": null``, usage chunks with ``"choices": []``, OpenAI error
bodies) without installing it.

``routes`` maps ``(method, path)`` to the case answering it (any other route: the
recorded 404 case when there is one, else a bare 404); ``requests`` keeps every request
body received, in order, for a test to check what the client sent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Recorded", "ReplayServer", "load_case", "serve_replay"]

_HOP = {"content-length", "transfer-encoding", "connection"}


@dataclass(frozen=True)
class Recorded:
    """One recorded exchange: status, reason, raw headers and body chunks with their
    arrival (seconds after the send)."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[tuple[float, bytes], ...]
    request: Mapping[str, Any]

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(c for _, c in self.chunks)

    @property
    def chunked(self) -> bool:
        """Whether the engine sent the body with chunked transfer encoding."""
        return any(k.lower() == "transfer-encoding" for k, _ in self.headers)


def load_case(path: str | Path) -> Recorded:
    """A recorded case from its JSON file."""
    raw = json.loads(Path(path).read_text())
    return Recorded(
        status=int(raw["status"]),
        reason=str(raw.get("reason") or "OK"),
        headers=tuple((str(k), str(v)) for k, v in raw["headers"]),
        chunks=tuple((float(t), base64.b64decode(c)) for t, c in raw["chunks"]),
        request=raw["request"],
    )


@dataclass
class ReplayServer:
    """A running replay server: its URL, routes and the requests it received."""

    routes: dict[tuple[str, str], Recorded]
    not_found: Recorded | None = None
    pace: float = 0.0
    port: int = 0
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``)."""
        return f"http://127.0.0.1:{self.port}"

    def head(self, case: Recorded) -> bytes:
        """The response head as the engine wrote it (its own length framing kept)."""
        lines = [f"HTTP/1.1 {case.status} {case.reason}"]
        lines += [f"{k}: {v}" for k, v in case.headers if k.lower() != "connection"]
        if not case.chunked and not any(k.lower() == "content-length" for k, _ in case.headers):
            lines.append(f"content-length: {len(case.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _answer(self, writer: asyncio.StreamWriter, case: Recorded) -> None:
        writer.write(self.head(case))
        before = 0.0
        for at, chunk in case.chunks:
            if self.pace and at > before:
                await asyncio.sleep((at - before) * self.pace)
            before = at
            if case.chunked:
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            else:
                writer.write(chunk)
            await writer.drain()
        if case.chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path = target.split("?", 1)[0]
                self.requests.append((method, path, body))
                case = self.routes.get((method, path), self.not_found)
                if case is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                await self._answer(writer, case)
        finally:
            writer.close()


@contextlib.contextmanager
def serve_replay(
    routes: Mapping[tuple[str, str], Recorded],
    *,
    not_found: Recorded | None = None,
    pace: float = 0.0,
) -> Iterator[ReplayServer]:
    """Run a :class:`ReplayServer` on a background thread's event loop; yield it."""
    server = ReplayServer(dict(routes), not_found, pace)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        srv = await asyncio.start_server(server._client, "127.0.0.1", 0)
        server.port = srv.sockets[0].getsockname()[1]
        holder["srv"] = srv
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, name="evstore-replay", daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield server
    finally:

        async def stop() -> None:
            holder["srv"].close()
            await holder["srv"].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
