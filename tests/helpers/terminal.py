"""Run the ``evstore`` CLI as a subprocess with its standard error on a real
pseudo-terminal (``os.openpty``) and its standard output on a pipe, as a person at a
terminal would; or with both on pipes, as CI does."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from helpers.paths import ROOT

ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    "TERM": "xterm",
}


def on_terminal(*argv: str, timeout: float = 120) -> tuple[int, str, str]:
    """Exit code, standard output and what the terminal received on standard error."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evidencestore", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=ENV,
    )
    os.close(slave)
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side closed
                return
            if not chunk:
                return
            received.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
        reader.join(timeout)
    finally:
        os.close(master)
    # the terminal turns "\n" into "\r\n" (onlcr): undo it, keep every "\r" drawn
    text = b"".join(received).decode("utf-8", "replace").replace("\r\n", "\n")
    return proc.returncode, out.decode(), text


def piped(*argv: str, timeout: float = 120) -> tuple[int, str, str]:
    """Exit code, standard output and standard error, both on pipes."""
    proc = subprocess.run(
        [sys.executable, "-m", "evidencestore", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=ENV,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def lines_drawn(terminal: str) -> list[str]:
    """The progress lines drawn in place (each begins with "\\r" and ends erasing the
    rest of the row, "\\x1b[K"); the clearing sequence alone is not a line."""
    return [
        part.split("\x1b[K", 1)[0]
        for part in terminal.split("\r")[1:]
        if part and not part.startswith("\x1b[K")
    ]
