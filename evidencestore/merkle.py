"""Merkle trees over bundle entries, RFC 6962 / RFC 9162 style.

``leaf = H(0x00 || canonical(entry))``, ``node = H(0x01 || left || right)``; the
bundle digest is ``H(0x02 || canonical(header))`` where the header binds the root to
the bundle's name, schema version and metadata. ``H`` is BLAKE3-256. The empty tree's
root is ``H()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from blake3 import blake3

from ._canonical import canonical, canonical_lines
from .digest import digest_hex
from .errors import ManifestError, VerificationError
from .models import BundleHeader, BundleManifest, Entry, InclusionProof

__all__ = [
    "bundle_digest",
    "check_inclusion",
    "entries_root",
    "inclusion_holds",
    "inclusion_proof",
    "leaf_hash",
    "leaf_hashes",
    "merkle_root",
    "verify_inclusion",
]

_LEAF = b"\x00"
_NODE = b"\x01"
_BUNDLE = b"\x02"
_PREFIX = "blake3:"


def leaf_hash(entry: Entry) -> bytes:
    """Return the 32-byte leaf hash of an entry."""
    return blake3(_LEAF + canonical(entry)).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return blake3(_NODE + left + right).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """Return the RFC 6962 Merkle tree hash over leaf hashes (bottom-up, iterative)."""
    if not leaves:
        return blake3().digest()
    level = list(leaves)
    # Pairing left to right and promoting an odd last node gives exactly the RFC's
    # "split at the largest power of two" tree.
    b3, node = blake3, _NODE
    while len(level) > 1:
        pairs = zip(level[::2], level[1::2], strict=False)  # an odd last node is promoted
        nxt = [b3(node + left + right).digest() for left, right in pairs]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def leaf_hashes(entries: Sequence[Entry]) -> list[bytes]:
    """Return the leaf hashes of entries, encoding them all in one call."""
    if not entries:
        return []
    # Canonical JSON never holds a raw newline (it is escaped inside strings), so the
    # lines of one encode_lines call are exactly each entry's canonical bytes; each
    # line gets its leaf prefix in the same two C-level passes.
    lines = (_LEAF + canonical_lines(entries)[:-1].replace(b"\n", b"\n" + _LEAF)).split(b"\n")
    b3 = blake3
    return [b3(line).digest() for line in lines]


def entries_root(entries: Sequence[Entry]) -> str:
    """Return the Merkle root of entries as a digest string."""
    return _PREFIX + merkle_root(leaf_hashes(entries)).hex()


def bundle_digest(manifest: BundleManifest, root: str | None = None) -> str:
    """Return the bundle digest binding the Merkle root to name, schema and metadata."""
    header = BundleHeader(
        schema_version=manifest.schema_version,
        name=manifest.name,
        metadata=manifest.metadata,
        root=root if root is not None else entries_root(manifest.entries),
    )
    return header_digest(header)


def header_digest(header: BundleHeader) -> str:
    """Return the digest of a bundle header."""
    return _PREFIX + blake3(_BUNDLE + canonical(header)).hexdigest()


def _audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    # RFC 6962 section 2.1.1, PATH(m, D[n]).
    n = len(leaves)
    if n <= 1:
        return []
    k = 1 << ((n - 1).bit_length() - 1)
    if index < k:
        return [*_audit_path(index, leaves[:k]), merkle_root(leaves[k:])]
    return [*_audit_path(index - k, leaves[k:]), merkle_root(leaves[:k])]


def inclusion_proof(manifest: BundleManifest, path: str) -> InclusionProof:
    """Return the inclusion proof of the entry at ``path`` (raises if absent)."""
    index = next((i for i, e in enumerate(manifest.entries) if e.path == path), None)
    if index is None:
        raise ManifestError(f"bundle {manifest.name!r} has no entry {path!r}")
    entry = manifest.entries[index]
    leaves = leaf_hashes(manifest.entries)
    root = _PREFIX + merkle_root(leaves).hex()
    return InclusionProof(
        bundle=manifest.name,
        bundle_digest=bundle_digest(manifest, root),
        schema_version=manifest.schema_version,
        metadata=manifest.metadata,
        entry=entry,
        leaf_index=index,
        tree_size=len(leaves),
        audit_path=tuple(_PREFIX + h.hex() for h in _audit_path(index, leaves)),
        root=root,
    )


def root_from_proof(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes | None:
    """Recompute the root from a leaf and its audit path (RFC 9162 section 2.1.3.2).

    Returns None when the path's length does not fit the index and tree size.
    """
    if index >= size:
        return None
    fn, sn = index, size - 1
    r = leaf
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def verify_inclusion(proof: InclusionProof, expected_bundle_digest: str | None = None) -> list[str]:
    """Check a proof; return the list of problems (empty when it holds)."""
    problems: list[str] = []
    path = [bytes.fromhex(digest_hex(d)) for d in proof.audit_path]
    computed = root_from_proof(leaf_hash(proof.entry), proof.leaf_index, proof.tree_size, path)
    if computed is None:
        problems.append(
            f"audit path of {len(path)} hashes does not fit leaf {proof.leaf_index} "
            f"of a tree of {proof.tree_size}"
        )
    elif _PREFIX + computed.hex() != proof.root:
        problems.append(
            f"entry {proof.entry.path!r} does not hash to root {proof.root} "
            f"(recomputed {_PREFIX + computed.hex()})"
        )
    header = BundleHeader(
        schema_version=proof.schema_version,
        name=proof.bundle,
        metadata=proof.metadata,
        root=proof.root,
    )
    digest = header_digest(header)
    if digest != proof.bundle_digest:
        problems.append(
            f"bundle header hashes to {digest}, but the proof claims {proof.bundle_digest}"
        )
    if expected_bundle_digest is not None and proof.bundle_digest != expected_bundle_digest:
        problems.append(
            f"proof is for bundle digest {proof.bundle_digest}, expected {expected_bundle_digest}"
        )
    return problems


def inclusion_holds(proof: InclusionProof, expected_bundle_digest: str) -> bool:
    """Whether ``proof`` holds for the trusted ``expected_bundle_digest``.

    The digest is required: a proof checked only against itself proves nothing, since
    anyone can build a self-consistent proof for a bundle of any name.
    """
    return not verify_inclusion(proof, expected_bundle_digest)


def check_inclusion(proof: InclusionProof, expected_bundle_digest: str) -> None:
    """Raise :class:`VerificationError` listing every problem unless ``proof`` holds for
    the trusted ``expected_bundle_digest`` (the raising twin of :func:`inclusion_holds`)."""
    problems = verify_inclusion(proof, expected_bundle_digest)
    if problems:
        raise VerificationError(
            f"inclusion proof of {proof.entry.path!r} in bundle {proof.bundle!r} does not "
            "hold:\n  " + "\n  ".join(problems)
        )
