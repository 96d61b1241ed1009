"""The importers of harness outputs, by harness name: the one registry that ``evstore
import`` (a subcommand each) and the re-derivation of imported runs (``rederive.py``)
read. Adding an importer is its module (``import_<harness>(root, source, name,
**ImportOptions)``, recording ``Harness.name``) and its line here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Unpack

from ..errors import ConfigError

if TYPE_CHECKING:
    from .importing import ImportOptions, ImportResult

__all__ = ["IMPORTERS", "Importer", "importer_for"]


@dataclass(frozen=True)
class Importer:
    """One harness's importer: the harness name (``Harness.name``, ``evstore import
    NAME``), the module and function that import its output, whether that output is a
    ``directory`` or one ``file``, and what the output is (the subcommand's help)."""

    harness: str
    module: str
    function: str
    source: Literal["directory", "file"]
    describes: str

    def load(self) -> Callable[..., Any]:
        """The import function (its module imported now, not before)."""
        module = importlib.import_module(f"{__package__}.{self.module}")
        function: Callable[..., Any] = getattr(module, self.function)
        return function

    def run(
        self,
        root: str | os.PathLike[str],
        source: str | os.PathLike[str],
        name: str,
        **options: Unpack[ImportOptions],
    ) -> list[ImportResult]:
        """Import ``source`` as run ``name`` (several runs for some outputs: each
        result)."""
        got = self.load()(root, source, name, **options)
        return got if isinstance(got, list) else [got]


IMPORTERS: dict[str, Importer] = {
    i.harness: i
    for i in (
        Importer("aiperf", "aiperf", "import_aiperf", "directory",
                 "an AIPerf artifact directory (profile_export.jsonl, ...)"),
        Importer("loadgen", "loadgen", "import_loadgen", "directory",
                 "an MLPerf LoadGen log directory (mlperf_log_detail.txt, ...)"),
        Importer("vllm-bench", "vllm_bench", "import_vllm_bench", "file",
                 "a vllm bench serve result file (--save-result --save-detailed)"),
    )
}  # fmt: skip


def importer_for(harness: str) -> Importer:
    """The importer of ``harness``; a :class:`ConfigError` naming the known ones for
    any other (never another harness's importer in its place)."""
    found = IMPORTERS.get(harness)
    if found is None:
        raise ConfigError(
            f"harness {harness!r}: no importer of this version reads its files "
            f"(known: {', '.join(sorted(IMPORTERS))})"
        )
    return found
