"""``evstore hash`` and Debian's ``b3sum`` read each other's lists, names holding a
backslash, a newline or a carriage return included (b3sum's escaping: ``\\\\``, ``\\n``,
the line prefixed with ``\\``). Skipped only where b3sum is absent; CI installs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from evidencestore.cli import main
from evidencestore.digest import format_sum_line, parse_sum_line

B3SUM = shutil.which("b3sum")
needs_b3sum = pytest.mark.skipif(B3SUM is None, reason="b3sum is not installed")

NAMES = {
    "plain.txt": b"plain",
    "back\\slash": b"a backslash",
    "new\nline": b"a newline",
    "both\\\nx": b"both",
    "cr\rret": b"a carriage return",
    "r\u00e9sum\u00e9 \u65e5\u672c": b"non-ASCII",
    "tab\tand  two spaces": b"spaces",
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    for name, data in NAMES.items():
        Path(name).write_bytes(data)
    return sorted(NAMES)


def b3sum(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert B3SUM is not None
    return subprocess.run([B3SUM, *args], input=stdin, capture_output=True, timeout=60)


def evstore(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, bytes, bytes]:
    capsysbinary.readouterr()
    code = main(list(argv))
    out, err = capsysbinary.readouterr()
    return code, out, err


@needs_b3sum
def test_evstore_b3sum_output_is_b3sums_byte_for_byte_and_b3sum_checks_it(
    files: list[str], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    code, ours, _ = evstore(capsysbinary, "hash", "--b3sum", "--", *files)
    theirs = b3sum("--", *files)
    assert code == 0 and theirs.returncode == 0
    assert ours == theirs.stdout
    assert ours.count(b"\n\\") + ours.startswith(b"\\") == 3  # three names escaped
    Path("ours.b3").write_bytes(ours)
    checked = b3sum("--check", "ours.b3")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count(b": OK\n") == len(files)


@needs_b3sum
def test_evstore_check_reads_b3sums_list(
    files: list[str], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    Path("sums.b3").write_bytes(b3sum("--", *files).stdout)
    code, out, err = evstore(capsysbinary, "hash", "--check", "sums.b3")
    assert (code, err) == (0, b"")
    # the results are shown as b3sum --check shows them
    assert out == b3sum("--check", "sums.b3").stdout
    # negative control: the file with a newline in its name changed
    Path("new\nline").write_bytes(b"changed")
    code, out, _ = evstore(capsysbinary, "hash", "--check", "sums.b3")
    assert code == 1 and b"\\new\\nline: FAILED (content differs)\n" in out
    assert b3sum("--check", "sums.b3").returncode == 1


@needs_b3sum
def test_evstore_check_reads_its_own_escaped_list_back(
    files: list[str], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    code, ours, _ = evstore(capsysbinary, "hash", "--", *files)
    assert code == 0 and b"\\blake3:" in ours and b"  11  back\\\\slash\n" in ours
    Path("sums").write_bytes(ours)
    code, out, err = evstore(capsysbinary, "hash", "--check", "sums")
    assert (code, err) == (0, b"") and out.count(b": OK\n") == len(files)
    Path("back\\slash").write_bytes(b"other bytes")
    code, out, _ = evstore(capsysbinary, "hash", "--check", "sums")
    assert code == 1 and b"\\back\\\\slash: FAILED" in out


@needs_b3sum
def test_an_undecodable_name_is_shown_as_b3sum_shows_it_and_never_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"y\xffy")
    Path(name).write_bytes(b"x")
    code, ours, _ = evstore(capsysbinary, "hash", "--b3sum", name)
    assert code == 0 and ours == b3sum(name).stdout and "\ufffd".encode() in ours
    Path("list").write_bytes(ours)
    code, _, err = evstore(capsysbinary, "hash", "--check", "list")
    assert code == 2 and b"U+FFFD" in err


def test_escapes_round_trip_and_bad_escapes_are_refused() -> None:
    d = "blake3:" + "ab" * 32
    for name in NAMES:
        for b3 in (False, True):
            line = format_sum_line(d, 5, name, b3sum=b3)
            assert "\n" not in line
            assert parse_sum_line(line) == (d, None if b3 else 5, name)
    with pytest.raises(ValueError, match=r"only '\\\\' and '\\n'"):
        parse_sum_line("\\" + "ab" * 32 + "  a\\tb")
    # without the leading backslash a backslash is a backslash (hand-made lists)
    assert parse_sum_line("ab" * 32 + "  a\\nb")[2] == "a\\nb"
    with pytest.raises(ValueError, match="NUL"):
        parse_sum_line("ab" * 32 + "  a\0b")
