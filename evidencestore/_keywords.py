"""Keyword options declared once: a ``TypedDict`` names the options several entry points
take (``**options: Unpack[RunOptions]``), so their list and types are written in one
place. The type checker holds callers to it; :func:`check_keywords` does at run time
what a written-out signature did, refusing a keyword the declaration does not name.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["check_keywords"]


def check_keywords(function: str, given: Mapping[str, object], declared: type) -> None:
    """Refuse a keyword in ``given`` that the ``TypedDict`` ``declared`` does not name,
    with the :class:`TypeError` Python raises for an unexpected keyword argument."""
    for key in given:
        if key not in declared.__annotations__:
            raise TypeError(f"{function}() got an unexpected keyword argument {key!r}")
