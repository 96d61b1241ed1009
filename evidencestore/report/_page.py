"""The page machinery shared by every report: the template environment and digest listing."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._version import __version__

if TYPE_CHECKING:
    import jinja2

__all__ = ["VERDICT_MEANING", "digests_in", "fmt", "render_page", "unique"]

VERDICT_MEANING = {
    "PASS": "Both outputs are complete and valid against what was requested, and their "
    "decoded frames and samples are exactly equal.",
    "FAIL": "An output is invalid or incomplete against what was requested, or a threshold "
    "is violated.",
    "INCONCLUSIVE": "Both outputs are valid but not exactly equal; every threshold is met. "
    "This is not a no-degradation certificate.",
    "UNAVAILABLE": "The outputs cannot be compared as they are (nothing was resized, "
    "resampled or trimmed to force a number).",
}

_DIGEST = re.compile(r"blake3:[0-9a-f]{64}")


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    from ._templates import TEMPLATES

    return jinja2.Environment(
        loader=jinja2.DictLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_page(template: str, context: Mapping[str, Any]) -> str:
    """Render one of the report templates with ``context`` (HTML-escaped by default)."""
    return _environment().get_template(template).render(generator=__version__, **context)


def digests_in(value: Any, where: str = "record") -> Iterator[tuple[str, str]]:
    """Yield ``(json path, digest)`` for every digest anywhere in a decoded record, also
    those quoted inside messages, so the page can show each one."""
    if isinstance(value, str):
        for d in _DIGEST.findall(value):
            yield where, d
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from digests_in(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from digests_in(v, f"{where}[{i}]")


def unique(rows: Iterator[tuple[str, str]]) -> list[tuple[str, str]]:
    """Rows in first-seen order without repeats."""
    return list(dict.fromkeys(rows))


def fmt(value: Any) -> str:
    """A value as shown in a table: floats to 6 significant digits, None as a dash."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
