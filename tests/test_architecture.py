"""The package's shape, as the restructure left it: no import cycle (lazy imports
included), imports that go downwards only through the layer table of
docs/architecture.md (every module placed in it, every name in it a module), no switch
on a store class and no call of a store's private primitive outside ``storage/``, and
one place that adds the digest prefix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import paths

PACKAGE = paths.PACKAGE
ARCHITECTURE = paths.DOCS / "architecture.md"


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
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


def _private_reaches(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a private module (``pkg._mod``) from outside its package ``pkg``."""
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            owner, _, last = target.rpartition(".")
            private = last.startswith("_") and not last.startswith("__")
            if private and not (module == owner or module.startswith(f"{owner}.")):
                found.append(f"{module} imports {target}")
    return found


def test_no_module_imports_a_private_module_of_another_package() -> None:
    assert _private_reaches({"p.a": {"p.s._b", "p._c"}, "p.s.x": {"p.s._b"}}) == [
        "p.a imports p.s._b"
    ]
    assert _private_reaches(_import_graph(_modules())) == []


def _outside_storage() -> list[tuple[Path, str]]:
    return [
        (path, path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "storage" not in path.relative_to(PACKAGE).parts[:1]
    ]


def test_no_store_class_switch_or_private_primitive_outside_storage() -> None:
    switch = re.compile(r"isinstance\([^)]*,\s*\(?[\w.]*(Local|Memory|Fsspec|ReadThrough)\w*Store")
    private = re.compile(
        r"\b(?!self\b)\w+\.(_open_raw|_write|_write_file|_delete|_size|_exists|_iter|_tmp_in"
        r"|_read_raw|_download_raw|_read_batch)\("
    )
    assert switch.search("isinstance(store, LocalBlobStore)")
    assert private.search("cache._write(digest, data)")
    assert not private.search("self._write(digest, data)")
    assert private.search("source.store._read_raw(digest, limit=n)")
    found = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path, text in _outside_storage()
        for pattern in (switch, private)
        for m in pattern.finditer(text)
    ]
    assert found == []


def test_raw_reads_are_private_to_storage() -> None:
    """Every public read of a store is verified: the raw, unverified reads have private
    names (and the test above keeps their callers inside ``storage/``)."""
    from evidencestore.storage import (
        BlobStore,
        FsspecBlobStore,
        LocalBlobStore,
        MemoryBlobStore,
        ReadThroughStore,
        Upkeep,
    )
    from evidencestore.storage._fsspec import FsspecUpkeep
    from evidencestore.storage._local import LocalUpkeep
    from evidencestore.storage._memory import MemoryUpkeep

    raw = {"read_bytes", "download_to", "read_batch", "read_raw", "download_raw"}
    for cls in (BlobStore, LocalBlobStore, MemoryBlobStore, FsspecBlobStore, ReadThroughStore):
        assert not raw & set(dir(cls)), cls
        assert {"_read_raw", "_download_raw"} <= set(dir(cls))
    for upkeep in (Upkeep, LocalUpkeep, MemoryUpkeep, FsspecUpkeep):
        assert not raw & set(dir(upkeep)), upkeep
    assert hasattr(FsspecUpkeep, "_read_batch")  # on its upkeep: transfers read this way


def test_git_is_run_in_one_place() -> None:
    runs_git = re.compile(r"""\[\s*["']git["']\s*,""")
    assert runs_git.search('["git", "-C", str(root), *args]')
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if runs_git.search(path.read_text())
    )
    assert callers == ["gitrefs.py"]


def test_the_digest_prefix_is_added_in_one_place() -> None:
    # the conformance suite glues the prefix to malformed hex on purpose
    glued = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"[\"']blake3:[\"']\s*\+", path.read_text())
    ]
    assert glued == ["storage/conformance.py"]


# -- layers ------------------------------------------------------------------------
_LAYERS_HEADING = "## Layers (imports go downwards only)"


def _layer_table(markdown: str) -> list[tuple[str, list[str]]]:
    """The layer table of the architecture document, top layer first: each layer's
    name and its names (``x/`` a subpackage, ``x.py`` a module); text in parentheses
    is commentary."""
    after = markdown.split(_LAYERS_HEADING, 1)[1]
    block = after.split("```", 2)[1]
    table: list[tuple[str, list[str]]] = []
    for line in block.splitlines()[1:]:  # the first line is the fence's info string
        words = re.sub(r"\([^)]*\)", " ", line).split()
        if not words:
            continue
        names = words[1:]
        odd = [n for n in names if not (n.endswith("/") or n.endswith(".py"))]
        assert not odd, f"layer {words[0]!r}: {odd} are neither 'package/' nor 'module.py'"
        table.append((words[0], names))
    assert table, f"no layer table after {_LAYERS_HEADING!r}"
    return table


def _layer_of(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    """The index of the layer that holds ``module`` (a dotted name below the package),
    None for the package itself (its public API stands above every layer) or -1 when
    the table does not place it."""
    rel = module.split(".")[1:]
    if not rel:
        return None
    for index, (_layer, names) in enumerate(table):
        for name in names:
            if name.endswith("/") and rel[0] == name[:-1]:
                return index
            if len(rel) == 1 and name == f"{rel[0]}.py":
                return index
    return -1


def _layer_problems(
    mods: dict[str, Path], graph: dict[str, set[str]], table: list[tuple[str, list[str]]]
) -> list[str]:
    """Every upward import, every module the table does not place and every name in
    the table that is no module, each as a line that says what to change."""
    problems = [
        f"{m} is in no layer: add it to the layer table in docs/architecture.md"
        for m in sorted(mods)
        if _layer_of(m, table) == -1
    ]
    tops = {m.split(".")[1] for m in mods if m.count(".") >= 1}
    for layer, names in table:
        for name in names:
            stem = name[:-1] if name.endswith("/") else name[:-3]
            is_package = any(m.count(".") >= 2 and m.split(".")[1] == stem for m in mods)
            if stem not in tops or name.endswith("/") != is_package:
                problems.append(f"layer {layer!r} names {name}, which is not in the package")
    for module in sorted(graph):
        here = _layer_of(module, table)
        for target in sorted(graph[module]):
            there = _layer_of(target, table)
            if here is None or there is None or here < 0 or there < 0 or there >= here:
                continue
            problems.append(
                f"{module} ({table[here][0]}) imports {target} ({table[there][0]}): "
                "imports go downwards only"
            )
    return problems


def test_imports_go_downwards_through_the_documented_layers() -> None:
    table = _layer_table(ARCHITECTURE.read_text())
    assert [layer for layer, _ in table] == ["cli", "features", "repository", "core"]
    mods = _modules()
    assert _layer_problems(mods, _import_graph(mods), table) == []


def test_the_layer_check_fails_on_an_upward_import_and_on_drift(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "feat").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "feat" / "__init__.py").write_text("")
    (package / "feat" / "run.py").write_text("from ..low import x\n")  # downwards: fine
    (package / "low.py").write_text(
        "def f():\n    from .feat.run import y  # upward, even inside a function\n"
    )
    (package / "loose.py").write_text("")
    doc = (
        f"# a\n\n{_LAYERS_HEADING}\n\n```\n"
        "features   feat/ (commentary, ignored)\n"
        "core       low.py  gone.py  feat.py\n```\n"
    )
    table = _layer_table(doc)
    assert table == [("features", ["feat/"]), ("core", ["low.py", "gone.py", "feat.py"])]
    mods = _modules(package)
    assert _layer_problems(mods, _import_graph(mods), table) == [
        "pkg.loose is in no layer: add it to the layer table in docs/architecture.md",
        "layer 'core' names gone.py, which is not in the package",
        "layer 'core' names feat.py, which is not in the package",
        "pkg.low (core) imports pkg.feat (features): imports go downwards only",
        "pkg.low (core) imports pkg.feat.run (features): imports go downwards only",
    ]


def test_verify_returns_a_report_and_check_raises() -> None:
    """One verb convention (issue 33 item 7): a public ``verify_*`` returns a report,
    never None; a public ``check_*`` raises on what it refuses and returns nothing, the
    checked value (a path, a name) or, as the raising twin of ``verify_X``, the same report."""
    verifies: dict[str, str] = {}
    checks: dict[str, tuple[str, str]] = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                returns = ast.unparse(node.returns)
                if node.name.startswith("verify_"):
                    assert returns != "None", f"{name}.{node.name} returns None"
                    verifies[node.name.removeprefix("verify_")] = returns
                elif node.name.startswith("check_"):
                    checks[f"{name}.{node.name}"] = (node.name.removeprefix("check_"), returns)
    assert {"attestation", "repository", "inclusion", "remote", "history"} <= set(verifies)
    wrong = {
        where: returns
        for where, (stem, returns) in checks.items()
        if returns not in ("None", "str", verifies.get(stem))
    }
    assert not wrong, f"check_* returning a report (name it verify_*): {wrong}"


def _package_imports(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """``(module imported from, names)`` of each import in ``path`` (module ``name``),
    relative ones resolved; ``import x`` gives ``(x, [])``."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[: len(here) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            out.append((base, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def test_the_face_stands_above_every_layer() -> None:
    """No module imports the package's ``__init__`` (``from .. import __version__``,
    ``import evidencestore``); importing a submodule through it (``from .. import
    _steps``) is an import of that submodule, not of the face."""
    mods = _modules()
    found = set()
    for name, path in mods.items():
        if name == "evidencestore":
            continue
        for base, names in _package_imports(path, name):
            face = base == "evidencestore" and (
                not names or any(f"evidencestore.{n}" not in mods for n in names)
            )
            if face:
                found.add(name)
    assert found == set()


def test_cli_groups_import_only_cli_common() -> None:
    mods = _modules()
    groups = [
        m for m in mods if m.startswith("evidencestore.cli.") and m != "evidencestore.cli._common"
    ]
    assert "evidencestore.cli.remote" in groups
    for name in ["evidencestore.cli._common", *groups]:
        for base, names in _package_imports(mods[name], name):
            targets = [base] if base != "evidencestore.cli" else [f"{base}.{n}" for n in names]
            inside = {t for t in targets if t.startswith("evidencestore.cli") and t != name}
            allowed = set() if name.endswith("_common") else {"evidencestore.cli._common"}
            if name == "evidencestore.cli.reference":  # documents the whole command table
                allowed |= {"evidencestore.cli.main", "evidencestore.cli.build_parser"}
            assert inside <= allowed, f"{name} imports {sorted(inside - allowed)}"


def _upkeep_sentence() -> set[str]:
    text = " ".join(ARCHITECTURE.read_text().split())
    sentence = re.search(r"Only (`.*?) use it \(", text)
    assert sentence is not None, "the upkeep sentence of docs/architecture.md"
    return set(re.findall(r"`([\w/.]+)`", sentence.group(1)))


def test_only_the_documented_modules_use_a_store_s_upkeep() -> None:
    """``store.upkeep`` (bulk writes, leases, quarantine, deferred sync) is used only
    where docs/architecture.md says."""
    named = _upkeep_sentence()
    assert {"storage/", "gc.py"} <= named
    using = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.Attribute) and n.attr == "upkeep" for n in ast.walk(tree)):
            rel = path.relative_to(PACKAGE).as_posix()
            using.add("storage/" if rel.startswith("storage/") else rel)
    assert using == named


def test_tests_mirror_the_package() -> None:
    """A directory of tests is a subpackage's name (``tests/runs/`` for
    ``evidencestore/runs/``), has no ``__init__.py``, and no two test files share a
    basename (pytest imports them by basename)."""
    files = [
        p
        for p in paths.TESTS.rglob("test_*.py")
        if p.relative_to(paths.TESTS).parts[0] not in {"data", "fixtures", "helpers"}
    ]
    assert len(files) > 50, files  # the tests were found at all
    for directory in sorted({p.parent for p in files} - {paths.TESTS}):
        rel = directory.relative_to(paths.TESTS)
        assert (PACKAGE / rel / "__init__.py").is_file(), f"tests/{rel}/: no evidencestore/{rel}/"
        assert not (directory / "__init__.py").exists(), f"tests/{rel}/__init__.py"
    names = [p.name for p in files]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def _fixture_names(path: Path) -> set[str]:
    return {
        node.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    }


def test_no_test_file_redefines_a_shared_fixture() -> None:
    """A fixture ``tests/conftest.py`` defines means one thing everywhere: no test file
    or helper defines its own under that name."""
    shared = _fixture_names(paths.TESTS / "conftest.py")
    assert {"repo", "video_server", "llm_server"} <= shared
    clashes = {
        str(p.relative_to(paths.TESTS)): sorted(_fixture_names(p) & shared)
        for p in sorted(paths.TESTS.rglob("*.py"))
        if p.name != "conftest.py" and "data" not in p.relative_to(paths.TESTS).parts
    }
    assert {k: v for k, v in clashes.items() if v} == {}
