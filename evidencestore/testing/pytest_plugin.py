"""A pytest plugin for tests that use evidence (entry point ``pytest11``: ``evidencestore``).

The repository is verified once per session, on first use, by the session-scoped
``evidence_report`` fixture; each test then asserts its own bundle against that one
report through the ``evidence`` fixture (``evidence.assert_bundle(name)``; one test may
``evidence.assert_inventory()``), so five tests cost one full re-hash, not five.
Failures show the findings, not this module's source (``__tracebackhide__``), and a
misspelt bundle name comes with the closest registered ones.

Options: ``--evidence-root DIR`` (or the ``evidence_root`` ini value; default: the
evidence repository found from pytest's rootdir) and ``--evidence-require-available``
(store entries absent from the local store fail instead of counting as unavailable).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..config import Repository
    from ..models import BundleReport, VerifyReport

__all__ = ["Evidence", "evidence", "evidence_report"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evidencestore")
    group.addoption(
        "--evidence-root",
        metavar="DIR",
        default=None,
        help="evidence repository the evidence fixtures verify (default: found from rootdir)",
    )
    group.addoption(
        "--evidence-require-available",
        action="store_true",
        default=False,
        help="store entries missing from the local store are errors",
    )
    parser.addini("evidence_root", "evidence repository for the evidence fixtures", default="")


class Evidence:
    """One verified evidence repository, and assertions about its bundles."""

    def __init__(self, repository: Repository, report: VerifyReport) -> None:
        self.repository = repository
        self.root: Path = repository.root
        self.report = report

    @property
    def names(self) -> list[str]:
        """The names of the verified bundles."""
        return [b.name for b in self.report.bundles]

    def assert_bundle(
        self,
        name: str,
        *,
        entries: int | None = None,
        digest: str | None = None,
        unavailable: int = 0,
    ) -> BundleReport:
        """Assert that bundle ``name`` verified (see :func:`evidencestore.testing.assert_bundle`),
        using the session's report: nothing is hashed again."""
        __tracebackhide__ = True
        from . import assert_bundle

        return assert_bundle(
            self.repository,
            name,
            entries=entries,
            digest=digest,
            unavailable=unavailable,
            report=self.report,
            whole_inventory=False,
        )

    def assert_inventory(self) -> None:
        """Assert that the whole repository verified: every bundle, and nothing
        repository-wide (unreadable registrations, stray files, changed bundles)."""
        __tracebackhide__ = True
        from ..verify.render import describe

        errors = [
            f
            for f in (*(f for b in self.report.bundles for f in b.findings), *self.report.findings)
            if f.severity == "error"
        ]
        if errors:
            raise AssertionError(
                f"the evidence repository {self.root} does not verify:\n"
                + "\n".join(f"  {f.bundle or '-'}: {describe(f)}" for f in errors)
            )


def _repository(config: pytest.Config) -> Repository:
    """The evidence repository of the session, resolved once (the one walk up):
    ``--evidence-root`` / ``evidence_root`` by :func:`~evidencestore.config.as_repository`,
    else the one at or above pytest's rootdir (refused when there is none)."""
    from ..config import Repository, as_repository, require_root

    chosen = config.getoption("evidence_root") or config.getini("evidence_root")
    if chosen:
        base = Path(str(chosen))
        return as_repository((base if base.is_absolute() else config.rootpath / base).absolute())
    return Repository(require_root(config.rootpath))


_REPOSITORY = pytest.StashKey["Repository"]()


@pytest.fixture(scope="session")
def evidence_report(pytestconfig: pytest.Config) -> VerifyReport:
    """The verification report of the evidence repository, made once per session."""
    from ..errors import EvidenceStoreError
    from ..verify import verify_repository

    try:
        repo = _repository(pytestconfig)
        pytestconfig.stash[_REPOSITORY] = repo
        return verify_repository(
            repo,
            store=repo.local_store(),
            require_available=bool(pytestconfig.getoption("evidence_require_available")),
        )
    except EvidenceStoreError as exc:
        pytest.fail(f"evidencestore: cannot verify the evidence repository: {exc}", pytrace=False)


@pytest.fixture
def evidence(pytestconfig: pytest.Config, evidence_report: VerifyReport) -> Evidence:
    """The session's verified evidence repository: ``evidence.assert_bundle(name, ...)``."""
    return Evidence(pytestconfig.stash[_REPOSITORY], evidence_report)
