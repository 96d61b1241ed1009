"""``evstore`` run in-process with pytest's ``capsys``."""

from __future__ import annotations

import pytest

from evidencestore.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``evstore ARGV``; return (exit code, stdout, stderr) of this command alone."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
