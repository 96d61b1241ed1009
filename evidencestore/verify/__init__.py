"""Verification: checks that return a report of every finding, and raising twins.

``verify_repository`` never stops at the first problem: each bundle's registration,
Merkle root and digest are recomputed, every ``repo`` entry is hashed against the
working tree (size first), files that no entry names are reported, ``store`` entries
are re-hashed in the local store (or reported unavailable), and with ``base`` the
registrations at a git revision must be unchanged.

Nothing outside the repository is read as evidence: an entry, bundle directory or
registration that resolves outside is a ``symlink-escape`` (``registration-symlink-
escape``) finding, a symlink loop is a ``symlink-loop`` finding (never an exception),
and a symlinked directory inside the repository is walked like a directory. Names are
judged by the one rule in ``paths.py`` (``bad-path``, ``misleading-name``,
``name-collision``), and staging directories left by a killed ``bundle create`` are
``stale-staging`` warnings. Verification only reads, so no interleaving with a writer
can lose anything here.

The package, one job a module:

- ``_repository``: the public entry points, repository-wide findings and the report;
- ``_pipeline``: the one pipeline (a frozen plan per bundle, one flat list of files
  hashed in forked workers while this process computes Merkle roots and walks the
  directories, then a judgement per bundle), with ``_checks`` (what the registration
  alone decides) and ``_walk`` (the directory walk and where directories resolve);
- ``_shares``: many bundles split bundle by bundle across forked workers that each run
  the pipeline (given no inventory, each also decodes its own registrations, a
  batch of directories at a time, so memory stays flat in the number of bundles); a failed
  worker's share is redone here, so the report never depends on forking;
- ``_base``: the registrations at a base revision, read in one git batch;
- ``render``: the report for people and CI (text, GitHub annotations, step summary).

The public names are loaded on first use, so importing :mod:`.render` alone (a command
that only formats) does not import the pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import guarded_imports, lazy_exports

if TYPE_CHECKING:
    from ._base import base_problem as base_problem
    from ._base import base_registrations as base_registrations
    from ._repository import RemoteChecker as RemoteChecker
    from ._repository import VerifyOptions as VerifyOptions
    from ._repository import check_repository as check_repository
    from ._repository import verify_registration as verify_registration
    from ._repository import verify_repository as verify_repository

_LAZY = guarded_imports(__file__)
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
