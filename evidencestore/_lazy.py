"""Lazily loaded re-exports: a package's public names, each from the submodule defining it.

A package lists its public API once, as the ``from .module import name`` lines of its
``if TYPE_CHECKING:`` block: type checkers read them as explicit re-exports, and
:func:`guarded_imports` reads the same lines from the package's source into the table
(name -> submodule) that the run-time hooks use, so the two can never disagree (the
lazy_loader ``attach_stub`` approach, without a separate stub file). The package then
installs the two module-level hooks :func:`lazy_exports` returns: ``__getattr__``
imports the submodule on first access and caches the value in the package's namespace
(so later lookups are plain attribute reads), and ``__dir__`` lists the table's names
too, so ``dir()``, ``help()`` and completion see them before they are loaded.
Importing this module imports nothing heavy (``ast`` parses one small file).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["guarded_imports", "lazy_exports"]


def guarded_imports(init_file: str) -> dict[str, str]:
    """The table of a package's public names: each name its ``if TYPE_CHECKING:`` block
    imports (``from .module import name`` or ``... as name``) and that submodule."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), init_file)
    table: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                if not (isinstance(imp, ast.ImportFrom) and imp.level == 1 and imp.module):
                    raise ImportError(
                        f"{init_file}:{imp.lineno}: the TYPE_CHECKING block may hold only "
                        "`from .module import name` lines (the package's public table)"
                    )
                for alias in imp.names:
                    table[alias.asname or alias.name] = imp.module
    return table


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict[str, Any], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` re-exporting ``table``'s names."""
    listed = frozenset(public)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | listed)

    return __getattr__, __dir__
