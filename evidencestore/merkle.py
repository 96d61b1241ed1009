"""Merkle trees over bundle entries, RFC 6962 / RFC 9162 style.

``leaf = H(0x00 || canonical(entry))``, ``node = H(0x01 || left || right)``; the
bundle digest is ``H(0x02 || canonical(header))`` where the header binds the root to
the bundle's name, schema version and metadata. ``H`` is BLAKE3-256. The empty tree's
root is ``H()``.

A digest is defined on the document as it stands (``schemas/CANONICAL.md``): the
canonical form of each entry object, and of the header built from the manifest's
``metadata`` object, exactly as they are in ``bundle.json`` or in a proof. For a
document that is exactly its value's encoding (everything this version writes) that
is the canonical form of the decoded structs, the fast path. A document written
before canonical bytes were a function of values can hold a default written
explicitly; its JSON value is hashed as it stands (the ``stored_*`` functions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blake3 import blake3

from ._canonical import canonical, canonical_lines
from .digest import digest_hex
from .errors import ManifestError, VerificationError
from .models import BundleHeader, BundleManifest, Entry, InclusionProof, Registration

__all__ = [
    "bundle_digest",
    "check_inclusion",
    "entries_root",
    "inclusion_holds",
    "inclusion_proof",
    "keep_stored",
    "leaf_hash",
    "leaf_hashes",
    "merkle_root",
    "registered_proof",
    "registration_hashes",
    "stored_bundle_digest",
    "stored_inclusion_proof",
    "stored_leaf_hashes",
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


# -- documents as they stand --------------------------------------------------------
def stored_leaf_hashes(entries: Sequence[Any]) -> list[bytes]:
    """The leaf hashes of entry objects (decoded JSON values) as they stand."""
    if not entries:
        return []
    # one encode_lines call, as leaf_hashes: canonical JSON holds no raw newline
    lines = (_LEAF + canonical_lines(entries)[:-1].replace(b"\n", b"\n" + _LEAF)).split(b"\n")
    return [blake3(line).digest() for line in lines]


def _stored_header(bundle: Any, schema_version: Any, metadata: Any, root: str) -> str:
    header = {"metadata": metadata, "name": bundle, "root": root, "schema_version": schema_version}
    return _PREFIX + blake3(_BUNDLE + canonical(header)).hexdigest()


def stored_bundle_digest(manifest: Mapping[str, Any], root: str | None = None) -> str:
    """The bundle digest of a manifest object (decoded JSON) as it stands: the header
    holds its ``metadata`` object unchanged and its ``schema_version`` (1 when absent)."""
    if root is None:
        root = _PREFIX + merkle_root(stored_leaf_hashes(manifest["entries"])).hex()
    return _stored_header(
        manifest["name"], manifest.get("schema_version", 1), manifest["metadata"], root
    )


def keep_stored(registration: Registration, manifest: Mapping[str, Any]) -> None:
    """Attach to ``registration`` the root and digest of ``manifest``, its manifest
    object as it stands in the file it was decoded from (when the file is not exactly
    the value's encoding); :func:`registration_hashes` returns them."""
    root = _PREFIX + merkle_root(stored_leaf_hashes(manifest["entries"])).hex()
    registration.__dict__["stored_hashes"] = (root, stored_bundle_digest(manifest, root))


def registration_hashes(registration: Registration) -> tuple[str, str]:
    """The Merkle root and bundle digest a registration's manifest hashes to, as it
    stands in its file: what its recorded ``root`` and ``digest`` must equal."""
    stored: tuple[str, str] | None = registration.__dict__.get("stored_hashes")
    if stored is not None:
        return stored
    root = entries_root(registration.manifest.entries)
    return root, bundle_digest(registration.manifest, root)


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


def stored_inclusion_proof(manifest: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The inclusion proof of the entry at ``path`` of a manifest object as it stands
    (decoded JSON), as a JSON object: the entry and metadata objects unchanged, so
    :func:`verify_stored_inclusion` recomputes the registered digest from them."""
    entries = manifest["entries"]
    index = next((i for i, e in enumerate(entries) if e.get("path") == path), None)
    if index is None:
        raise ManifestError(f"bundle {manifest['name']!r} has no entry {path!r}")
    leaves = stored_leaf_hashes(entries)
    root = _PREFIX + merkle_root(leaves).hex()
    return {
        "bundle": manifest["name"],
        "bundle_digest": stored_bundle_digest(manifest, root),
        "schema_version": manifest.get("schema_version", 1),
        "metadata": manifest["metadata"],
        "entry": entries[index],
        "leaf_index": index,
        "tree_size": len(leaves),
        "audit_path": [_PREFIX + h.hex() for h in _audit_path(index, leaves)],
        "root": root,
    }


def registered_proof(
    registration: Registration, data: bytes, path: str
) -> InclusionProof | dict[str, Any]:
    """The inclusion proof of entry ``path`` of ``registration``, decoded from the
    registration file ``data`` (``inventory.decode_registration``), proven as the file
    stands: an :class:`InclusionProof`, or, for a file that is not exactly its value's
    encoding, the proof's JSON object holding the entry and metadata objects as they
    stand. Raises :class:`ManifestError` when the manifest does not hash to the
    registered digest (nothing can be proven against it).
    """
    import msgspec

    reg = registration
    proof: InclusionProof | dict[str, Any]
    if "stored_hashes" in reg.__dict__:
        proof = stored_inclusion_proof(msgspec.json.decode(data)["manifest"], path)
        digest = proof["bundle_digest"]
    else:
        proof = inclusion_proof(reg.manifest, path)
        digest = proof.bundle_digest
    if digest != reg.digest:
        raise ManifestError(
            f"bundle {reg.manifest.name!r}: registration digest {reg.digest} does not match "
            f"its manifest ({digest}); run evstore verify"
        )
    return proof


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


def verify_inclusion(
    proof: InclusionProof,
    expected_bundle_digest: str | None = None,
    stored: Mapping[str, Any] | None = None,
) -> list[str]:
    """Check a proof; return the list of problems (empty when it holds).

    ``stored``: the proof's JSON object as it stands in its file, when the file is not
    exactly the value's encoding (a proof of a registration written with a default
    explicitly): its entry and metadata objects are hashed as they stand.
    """
    if stored is None:
        leaf = leaf_hash(proof.entry)
        header = BundleHeader(
            schema_version=proof.schema_version,
            name=proof.bundle,
            metadata=proof.metadata,
            root=proof.root,
        )
        digest = header_digest(header)
    else:
        leaf = stored_leaf_hashes([stored["entry"]])[0]
        digest = _stored_header(
            stored["bundle"], stored["schema_version"], stored["metadata"], proof.root
        )
    problems: list[str] = []
    path = [bytes.fromhex(digest_hex(d)) for d in proof.audit_path]
    computed = root_from_proof(leaf, proof.leaf_index, proof.tree_size, path)
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
