"""Lazily loaded re-exports: a package's public names, each from the submodule defining it.

A package lists its public API in one table (name -> submodule) and installs the two
module-level hooks this returns: ``__getattr__`` imports the submodule on first access
and caches the value in the package's namespace (so later lookups are plain attribute
reads), and ``__dir__`` lists the table's names too, so ``dir()``, ``help()`` and
completion see them before they are loaded. Importing this module imports nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


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
