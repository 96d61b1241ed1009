"""The README's examples are run, so they cannot drift from the code: every TOML block is
read by the loader of the file it shows, the protocol is registered with the workload the
README shows, every ``evstore`` command line names a command and options that exist, and
the Python blocks import what exists (the library example runs as written)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import tomllib
from pathlib import Path

import pytest

from evidencestore.cli import build_parser, main

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == kind]


def _block(kind: str, first_line: str) -> str:
    found = [b for b in _blocks(kind) if b.startswith(first_line)]
    assert len(found) == 1, f"README: expected one {kind} block starting {first_line!r}"
    return found[0]


def test_every_toml_block_is_read_by_its_loader(tmp_path: Path) -> None:
    from evidencestore.campaign import parse_protocol
    from evidencestore.config import load_config_file
    from evidencestore.media.expectations import load_expectations
    from evidencestore.media.thresholds import load_thresholds

    blocks = _blocks("toml")
    assert len(blocks) >= 4
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
        elif first.startswith("# protocol.toml"):
            parse_protocol(text.encode(), str(path))
        else:  # a piece of evstore.toml
            load_config_file(path)


def test_the_protocol_registers_with_the_workload_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.campaign import load_campaign

    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    protocol = _block("toml", "# protocol.toml")
    workload = _block("toml", "# workload.toml")
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
    assert all(a.runs >= p.timing.min_runs for a in p.arm)  # as the README says to


def _commands() -> list[list[str]]:
    out: list[list[str]] = []
    for block in _blocks("sh"):
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


def test_every_command_line_names_options_that_exist() -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    commands = _commands()
    assert len(commands) >= 40
    global_flags = {"-q", "-v", "--root", "--version"}
    checked = set()
    for words in commands:
        while words and words[0] in global_flags:
            words = words[2:] if words[0] == "--root" else words[1:]
        assert words and words[0] in top, f"README: `evstore {' '.join(words)}`: no such command"
        path = words[:1]
        sub = top[words[0]]
        groups = [a for a in sub._actions if a.dest.endswith("_command")]
        if groups and len(words) > 1:
            assert words[1] in groups[0].choices, f"README: `evstore {' '.join(words)}`"
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
                f"README: `evstore {' '.join(words)}`: {flag} is not an option of "
                f"`evstore {' '.join(path)}`"
            )


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evidencestore"):
            out += [(node.module or "", a.name) for a in node.names]
    return out


def test_python_blocks_import_what_exists() -> None:
    blocks = _blocks("python")
    assert len(blocks) >= 3
    seen = 0
    for text in blocks:
        tree = ast.parse(text)  # every block is valid Python
        for module, name in _imports(tree):
            try:
                value = getattr(importlib.import_module(module), name)
            except ImportError as exc:
                if exc.name in ("aiohttp", "av", "numpy", "torch", "jinja2", "scipy"):
                    continue  # an extra this environment lacks
                raise
            assert value is not None, f"README: from {module} import {name}"
            seen += 1
    assert seen >= 5


def test_the_library_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _block("python", "import evidencestore as es\n")
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    Path("weights.pth").write_bytes(b"\x80\x02weights" * 100)
    Path("notes.txt").write_text("trained on H200\n")
    capsys.readouterr()
    namespace: dict[str, object] = {}
    exec(compile(text, str(README), "exec"), namespace)
    assert "no-such-run" in capsys.readouterr().out  # the NotFoundError was caught
    assert namespace["blob"] == Path("weights.pth").read_bytes()
    report = namespace["report"]
    assert report.totals.checked == 2 and report.totals.unavailable == 0  # type: ignore[attr-defined]
