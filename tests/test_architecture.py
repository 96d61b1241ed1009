"""The package's shape, as the restructure left it: no import cycle (lazy imports
included), no switch on a store class and no call of a store's private primitive outside
``storage/``, and one place that adds the digest prefix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "evidencestore"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere (functions and
    ``TYPE_CHECKING`` blocks included), with the packages above each."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if not target or target == name:
                    continue
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    up_name = ".".join(parts[:i])
                    if up_name in mods and up_name != name and not name.startswith(up_name + "."):
                        graph[name].add(up_name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    mods = _modules()
    graph = _import_graph(mods)
    assert "evidencestore.storage" in graph["evidencestore.remotes"]  # the graph sees imports
    assert _cycles(graph) == []


def _outside_storage() -> list[tuple[Path, str]]:
    return [
        (path, path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "storage" not in path.relative_to(PACKAGE).parts[:1]
    ]


def test_no_store_class_switch_or_private_primitive_outside_storage() -> None:
    switch = re.compile(r"isinstance\([^)]*,\s*\(?[\w.]*(Local|Memory|Fsspec|ReadThrough)\w*Store")
    private = re.compile(
        r"\b(?!self\b)\w+\.(_open_raw|_write|_write_file|_delete|_size|_exists|_iter|_tmp_in)\("
    )
    assert switch.search("isinstance(store, LocalBlobStore)")
    assert private.search("cache._write(digest, data)")
    assert not private.search("self._write(digest, data)")
    found = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path, text in _outside_storage()
        for pattern in (switch, private)
        for m in pattern.finditer(text)
    ]
    assert found == []


def test_the_digest_prefix_is_added_in_one_place() -> None:
    # the conformance suite glues the prefix to malformed hex on purpose
    glued = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"[\"']blake3:[\"']\s*\+", path.read_text())
    ]
    assert glued == ["storage/conformance.py"]
