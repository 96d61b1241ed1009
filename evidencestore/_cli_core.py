"""``evstore`` subcommands: core."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add this module's subcommands to the ``evstore`` parser."""
