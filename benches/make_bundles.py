"""A large evidence repository, generated fast: many small bundles that verify.

Each bundle is ``files`` small files of distinct content kept beside its registration,
exactly what ``bundle create`` writes: the manifest is built and sealed by the library
(:func:`~evidencestore.bundle.make_manifest`, :func:`~evidencestore.bundle.seal`, the
Merkle root and bundle digest it computes) and written in its canonical pretty form.
What is skipped is only the per-bundle machinery of :func:`register_bundle` (name
checks that list ``evidence/`` on every call, staging, locks, rename), which would make
generating 100,000 bundles quadratic. ``evstore verify`` of the result is clean.

Run: ``python -m benches.make_bundles ROOT BUNDLES [FILES [SIZE]]``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["make_repository"]


def make_repository(root: Path, bundles: int, files: int = 10, size: int = 64) -> int:
    """Create an evidence repository at ``root`` holding ``bundles`` bundles of
    ``files`` files of ``size`` bytes each; return the number of entries."""
    from evidencestore._canonical import pretty
    from evidencestore.bundle import make_manifest, seal
    from evidencestore.config import init_repository
    from evidencestore.digest import hash_bytes
    from evidencestore.inventory import EVIDENCE_DIR, REGISTRATION_NAME
    from evidencestore.models import Descriptor, Entry

    init_repository(root)
    evidence = root / EVIDENCE_DIR
    evidence.mkdir(exist_ok=True)
    pad = os.urandom(max(0, size - 16))
    created = "2026-01-01T00:00:00Z"
    width = len(str(bundles - 1))
    for b in range(bundles):
        name = f"b{b:0{width}d}"
        bdir = evidence / name
        bdir.mkdir()
        entries = []
        for i in range(files):
            data = (b * files + i).to_bytes(16, "little") + pad
            path = f"f{i:03d}.bin"
            with open(os.path.join(bdir, path), "wb") as fh:
                fh.write(data)
            digest, n = hash_bytes(data)
            desc = Descriptor(digest=digest, size=n, media_type="application/octet-stream")
            entries.append(Entry(path=path, descriptor=desc, location="repo"))
        reg = seal(make_manifest(name, entries, created=created, producer="bench"))
        with open(bdir / REGISTRATION_NAME, "wb") as fh:
            fh.write(pretty(reg))
    return bundles * files


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    n = make_repository(Path(args[0]), *(int(a) for a in args[1:]))
    print(f"{n} entries")
