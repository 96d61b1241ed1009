"""`evstore` subcommands: inspect."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Register this group's subcommands."""
