"""Test helpers shipped with the package: ``assert_bundle`` and a store conformance suite.

``evidencestore.testing.store_suite`` imports pytest; this module does not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..models import BundleReport, Finding, VerifyReport
from ..storage import BlobStore

__all__ = ["assert_bundle"]


def _describe(findings: Iterable[Finding]) -> str:
    from ..verify.render import describe

    return "\n".join(f"  {f.severity}: {describe(f)}" for f in findings)


def assert_bundle(
    root: str | os.PathLike[str],
    name: str,
    *,
    entries: int | None = None,
    digest: str | None = None,
    unavailable: int = 0,
    store: BlobStore | None = None,
    report: VerifyReport | None = None,
    whole_inventory: bool = True,
) -> BundleReport:
    """Assert that bundle ``name`` verifies fully and the whole inventory verifies.

    Checks that the bundle is registered, that its own findings hold no error, its
    entry count, digest and number of unavailable store entries when given, and that
    the inventory it belongs to verifies, without asserting any global total, so
    parallel pull requests that each add a bundle never conflict here. A ``report``
    already made (the pytest plugin's session-wide one) is used instead of verifying
    the repository again; ``whole_inventory=False`` leaves the other bundles out (the
    plugin's ``evidence.assert_inventory()`` checks them once).
    """
    __tracebackhide__ = True  # pytest shows the finding, not this helper's source
    if report is None:
        from ..config import as_repository
        from ..verify import verify_repository

        repo = as_repository(root)
        report = verify_repository(repo, store=store or repo.local_store())
    mine = [b for b in report.bundles if b.name == name]
    if not mine:
        import difflib

        names = [b.name for b in report.bundles]
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise AssertionError(
            f"bundle {name!r} is not registered under {root}/evidence{hint} "
            f"(found: {', '.join(names) or 'none'})"
        )
    bundle = mine[0]
    if not bundle.ok:
        raise AssertionError(f"bundle {name!r} does not verify:\n{_describe(bundle.findings)}")
    if entries is not None and bundle.entries != entries:
        raise AssertionError(f"bundle {name!r} has {bundle.entries} entries, expected {entries}")
    if digest is not None and bundle.digest != digest:
        raise AssertionError(f"bundle {name!r} has digest {bundle.digest}, expected {digest}")
    if bundle.unavailable != unavailable:
        raise AssertionError(
            f"bundle {name!r} has {bundle.unavailable} unavailable store entries, expected {unavailable}"
        )
    if whole_inventory and not report.ok:
        others = [
            f for b in report.bundles if b.name != name for f in b.findings if f.severity == "error"
        ]
        others += [f for f in report.findings if f.severity == "error"]
        raise AssertionError(
            f"bundle {name!r} verifies, but the inventory does not:\n{_describe(others)}"
        )
    return bundle
