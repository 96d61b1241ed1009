"""The README's and docs/ pages' examples are run, so they cannot drift from the code: the
README's two quickstarts are executed command by command against reference servers started
here, every TOML block is read by the loader of the file it shows, the protocol is
registered with the workload the campaigns page shows, every ``evstore`` command line of
every page names a command and options that exist, the Python blocks import what exists
(the library example runs as written), and every shell block of a docs/ page says which
test runs it or why it cannot run here."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from helpers import paths

from evidencestore.cli import build_parser, main

TOP = paths.ROOT
README = TOP / "README.md"
DOCS = TOP / "docs"
PAGES = [README, *sorted(p for p in DOCS.glob("*.md") if p.name != "cli.md")]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _page_id(page: Path) -> str:
    return str(page.relative_to(TOP))


def _blocks(kind: str, pages: list[Path] | None = None) -> list[str]:
    return [
        body
        for page in (PAGES if pages is None else pages)
        for lang, body in FENCE.findall(page.read_text())
        if lang == kind
    ]


def _block(kind: str, first_line: str, pages: list[Path] | None = None) -> str:
    found = [b for b in _blocks(kind, pages) if b.startswith(first_line)]
    assert len(found) == 1, f"expected one {kind} block starting {first_line!r}"
    return found[0]


def test_the_pages_hold_their_examples() -> None:
    """The examples moved out of the README are still somewhere (each kind at least as
    many as before), and the README stays short."""
    assert len(_blocks("toml")) >= 4
    assert len(_commands(PAGES)) >= 40
    assert len(_blocks("python")) >= 3
    assert sum(len(_imports(ast.parse(b))) for b in _blocks("python")) >= 5
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_toml_block_is_read_by_its_loader(page: Path, tmp_path: Path) -> None:
    from evidencestore.campaign import parse_protocol
    from evidencestore.config import load_config_file
    from evidencestore.media.expectations import load_expectations
    from evidencestore.media.thresholds import load_thresholds

    blocks = _blocks("toml", [page])
    for i, text in enumerate(blocks):
        tomllib.loads(text)  # valid TOML, whatever it is
        path = tmp_path / f"block-{i}.toml"
        path.write_text(text)
        first = text.splitlines()[0]
        if first.startswith("# request.toml"):
            load_expectations(path)
        elif first.startswith("# thresholds.toml"):
            load_thresholds(path)
        elif first.startswith("# workload.toml"):
            pytest.importorskip("aiohttp")
            from evidencestore.runs import load_workload

            load_workload(path)
        elif first.startswith("# chat-workload.toml"):
            pytest.importorskip("aiohttp")
            from evidencestore.runs import load_workload

            assert len(load_workload(path).workload.request) == 101  # 1 inline + [prompts]
        elif first.startswith("# protocol.toml"):
            parse_protocol(text.encode(), str(path))
        elif first.startswith("# in protocol.toml"):  # a piece, in the campaigns page's
            whole = _block("toml", "# protocol.toml", [DOCS / "campaigns.md"])
            parse_protocol(_merged(whole, text), str(path))
        elif first.startswith("# in workload.toml"):  # a piece, in the runs page's chat one
            from evidencestore.runs.workload import parse_workload

            whole = _block("toml", "# chat-workload.toml", [DOCS / "runs.md"])
            parse_workload(_merged(whole, text), path)
        else:  # a piece of evstore.toml
            load_config_file(path)


def _merged(whole: str, piece: str) -> bytes:
    """``piece``'s tables set over ``whole``'s (an array of tables replaces the array);
    a ``"blake3:..."`` placeholder is taken as a well-formed digest."""

    def merge(into: dict[str, Any], over: dict[str, Any]) -> None:
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    data = tomllib.loads(whole)
    merge(data, tomllib.loads(piece.replace('"blake3:..."', f'"blake3:{"0" * 64}"')))
    return tomli_w.dumps(data).encode()


def test_the_protocol_registers_with_the_workload_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.campaign import load_campaign

    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    protocol = _block("toml", "# protocol.toml", [DOCS / "campaigns.md"])
    workload = _block("toml", "# workload.toml", [DOCS / "runs.md"])
    for name in ("5s", "15s"):
        (root / "workloads").mkdir(exist_ok=True)
        (root / "workloads" / f"{name}.toml").write_text(workload)
    (root / "configs").mkdir()
    for arm in ("baseline", "rank-local"):
        (root / "configs" / f"{arm}.yaml").write_text(f"arm: {arm}\n")
    (root / "protocol.toml").write_text(protocol)
    capsys.readouterr()
    code = main(
        ["campaign", "init", "h3-lossless", "--protocol", str(root / "protocol.toml"),
         "--root", str(root)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    campaign = load_campaign(root, "h3-lossless")
    p = campaign.protocol
    assert [c.name for c in p.condition] == ["5s", "15s"]
    assert [(a.name, a.baseline, a.runs) for a in p.arm] == [
        ("baseline", True, 3),
        ("rank-local", False, 3),
    ]
    assert all(a.runs >= p.timing.min_runs for a in p.arm)  # as the page says to


def _commands(pages: list[Path]) -> list[list[str]]:
    out: list[list[str]] = []
    for block in _blocks("sh", pages):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            for part in re.split(r"&&|\|(?!\|)", line):
                words = part.split()
                if words[:1] == ["evstore"]:
                    out.append(words[1:])
    return out


def _help(path: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([*path, "--help"])
    assert code == 0, f"`evstore {' '.join(path)} --help` exits {code}"
    return out.getvalue()


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_command_line_names_options_that_exist(page: Path) -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    commands = _commands([page])
    where = _page_id(page)
    global_flags = {"-q", "-v", "--root", "--version"}
    checked = set()
    for words in commands:
        while words and words[0] in global_flags:
            words = words[2:] if words[0] == "--root" else words[1:]
        assert words and words[0] in top, f"{where}: `evstore {' '.join(words)}`: no such command"
        path = words[:1]
        sub = top[words[0]]
        groups = [a for a in sub._actions if a.dest.endswith("_command")]
        if groups and len(words) > 1:
            assert words[1] in groups[0].choices, f"{where}: `evstore {' '.join(words)}`"
            path = words[:2]
        elif words[0] == "run" and len(words) > 1 and words[1] in ("show", "diff"):
            path = words[:2]
        flags = {w.strip("[]").split("=")[0] for w in words if w.strip("[").startswith("-")}
        flags -= {"-", "--"}
        key = (tuple(path), tuple(sorted(flags)))
        if key in checked:
            continue
        checked.add(key)
        text = _help(path)
        for flag in flags:
            assert re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", text), (
                f"{where}: `evstore {' '.join(words)}`: {flag} is not an option of "
                f"`evstore {' '.join(path)}`"
            )


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evidencestore"):
            out += [(node.module or "", a.name) for a in node.names]
    return out


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_blocks_import_what_exists(page: Path) -> None:
    blocks = _blocks("python", [page])
    for text in blocks:
        tree = ast.parse(text)  # every block is valid Python
        for module, name in _imports(tree):
            try:
                value = getattr(importlib.import_module(module), name)
            except ImportError as exc:
                if exc.name in ("aiohttp", "av", "numpy", "torch", "jinja2", "scipy"):
                    continue  # an extra this environment lacks
                raise
            assert value is not None, f"{_page_id(page)}: from {module} import {name}"


def test_the_library_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _block("python", "import evidencestore as es\n", [DOCS / "library.md"])
    monkeypatch.chdir(tmp_path)  # the example initialises the repository itself
    Path("weights.pth").write_bytes(b"\x80\x02weights" * 100)
    Path("notes.txt").write_text("trained on H200\n")
    capsys.readouterr()
    namespace: dict[str, object] = {}
    exec(compile(text, str(DOCS / "library.md"), "exec"), namespace)
    assert "no-such-run" in capsys.readouterr().out  # the NotFoundError was caught
    assert namespace["blob"] == Path("weights.pth").read_bytes()
    report = namespace["report"]
    assert report.totals.checked == 2 and report.totals.unavailable == 0  # type: ignore[attr-defined]


# -- the quickstarts, run as written ------------------------------------------------------
SERVER_LINE = re.compile(r"^# (python -m evidencestore\.testing\.\w+ [^#]*?)\s+#")
EXIT = re.compile(r"#.*\bexit (\d+)")


def _quickstart(heading: str) -> str:
    section = README.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = [body for lang, body in FENCE.findall(section) if lang == "sh"]
    assert len(blocks) == 1, f"README {heading!r}: expected one sh block"
    return blocks[0]


def _statements(block: str) -> tuple[list[str], list[tuple[str, int]]]:
    """The commented server command lines, and the statements with the exit code each
    states (``# exit N``; 0 when it says nothing): a ``for`` loop is one statement."""
    servers: list[str] = []
    out: list[tuple[str, int]] = []
    pending: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("#"):
            if found := SERVER_LINE.match(line):
                servers.append(found.group(1))
            continue
        pending.append(line)
        opened = sum(len(re.findall(r"\bdo\b", p)) for p in pending)
        closed = sum(len(re.findall(r"\bdone\b", p)) for p in pending)
        if opened == closed:
            text = "\n".join(pending)
            stated = EXIT.search(pending[-1])
            out.append((text, int(stated.group(1)) if stated else 0))
            pending = []
    assert not pending, f"unterminated statement: {pending}"
    return servers, out


@contextlib.contextmanager
def _servers(commands: list[str]) -> Any:
    """Start each reference server as the README says (on a free port instead of the
    one written); yield {written port: URL}."""
    started: list[subprocess.Popen[str]] = []
    urls: dict[str, str] = {}
    try:
        for command in commands:
            argv = shlex.split(command)
            assert argv[:2] == ["python", "-m"]
            port = argv[argv.index("--port") + 1]
            argv[argv.index("--port") + 1] = "0"
            proc = subprocess.Popen(
                [sys.executable, *argv[1:]],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(TOP)},
            )
            started.append(proc)
            assert proc.stdout is not None
            urls[port] = proc.stdout.readline().strip()
            assert urls[port].startswith("http://127.0.0.1:"), command
        yield urls
    finally:
        for proc in started:
            assert proc.stdin is not None
            proc.stdin.close()  # the servers serve until stdin closes
            proc.wait(timeout=30)


def _run_quickstart(heading: str, tmp_path: Path) -> tuple[str, Path]:
    """Run the quickstart's statements in one bash from the clone's root, as a reader
    would; assert each exits as the README says. Return the output and the temp dir."""
    servers, statements = _statements(_quickstart(heading))
    assert 1 <= len(statements) <= 15, f"{heading}: {len(statements)} commands"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "evstore"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m evidencestore "$@"\n')
    shim.chmod(0o755)
    rcs = tmp_path / "rcs"
    work = tmp_path / "work"
    work.mkdir()
    with _servers(servers) as urls:
        script = []
        for i, (text, _) in enumerate(statements):
            if text.startswith("export ") and "127.0.0.1:" in text:
                for port, url in urls.items():
                    text = text.replace(f"http://127.0.0.1:{port}", url)
            script += [text, f'echo "{i} $?" >> "{rcs}"']
        env = {
            **os.environ,
            "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(TOP),
            "TMPDIR": str(work),
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.org",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=TOP,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    output = done.stdout + done.stderr
    codes = [int(line.split()[1]) for line in rcs.read_text().splitlines()]
    assert len(codes) == len(statements), output
    for (text, expected), code in zip(statements, codes, strict=True):
        assert code == expected, f"`{text}` exited {code}, the README says {expected}\n{output}"
    return output, work


def test_the_video_quickstart_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    pytest.importorskip("av")
    pytest.importorskip("scipy")
    block = _quickstart("Quickstart: a video engine, lossless and faster")
    protocol = (TOP / "docs/quickstart/video/protocol.toml").read_text()
    assert _block("toml", "# protocol.toml: declared, and committed", [README]) == protocol
    output, work = _run_quickstart("Quickstart: a video engine, lossless and faster", tmp_path)
    assert "verdict ACCEPTED" in output
    assert re.search(r"5s\s+candidate\s+3/3\s+0 exact\s+PASS\s+qualified\s+[\d.]+ \[", output)
    assert re.search(r"15s\s+candidate\s+3/3\s+0 exact\s+PASS\s+qualified\s+[\d.]+ \[", output)
    assert "15s candidate vs baseline: the claim stands" in output
    assert "verified: 12 run(s) recorded under the frozen protocol, 0 finding(s)" in output
    (page,) = work.glob("*/fast-lossless.html")
    html = page.read_text()
    assert "candidate engine: lossless and faster end to end at 5 s and 15 s" in html
    assert "min_speedup = 1" in html
    assert "evstore campaign status fast-lossless --base main" in block


def test_the_llm_quickstart_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    output, work = _run_quickstart("Quickstart: LLM serving, token-exact", tmp_path)
    # the candidate diverges at token 6 (the server's --diverge-at 6): the verdict finds it
    assert "verdict NOT_ACCEPTED" in output
    assert "kv-fp8 (candidate): rejected" in output
    assert "first divergent token at position 6 (content token 6):" in output
    assert re.search(r"chat\s+baseline\s+2/2\s+0 exact", output)  # repeatable baseline
    assert "TTFT s (n=8)" in output and "ITL s (n=8)" in output
    assert "imported from aiperf 0.13.0" in output
    (repo,) = work.iterdir()
    assert (repo / "evidence" / "aiperf-baseline-1" / "run.json").is_file()


MARK = re.compile(r"^<!-- (run|not run): (.+) -->$")


@pytest.mark.parametrize("page", [p for p in PAGES if p != README], ids=_page_id)
def test_every_shell_block_of_a_page_says_how_it_is_run(page: Path) -> None:
    """A docs/ page's shell block is either run by a named test or says why it is not, and
    the tests it names exist."""
    lines = page.read_text().splitlines()
    fence = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not fence and line == "```sh":
                found = MARK.match(lines[i - 1]) if i else None
                assert found, f"{_page_id(page)}:{i + 1}: a sh block without a run/not run mark"
                for name in re.findall(r"tests/[\w/]+\.py", found.group(2)):
                    assert (TOP / name).is_file(), f"{_page_id(page)}:{i}: no {name}"
            fence = not fence
