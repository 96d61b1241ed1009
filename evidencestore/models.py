"""Frozen msgspec structs: the schema source for descriptors, bundles and reports.

Settings are declared once in :class:`Model`: frozen, keyword-only, unknown fields
rejected, defaults omitted when encoding (so canonical bytes stay stable when an
optional field is added later with a default). Omitted by value: a struct with a
default msgspec would compare by identity (a string, a float, a struct) declares
``__post_init__ = canonical_defaults`` (see ``_canonical``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ._canonical import canonical_defaults
from .digest import DIGEST_PATTERN
from .paths import entry_path_problem  # the one entry-path rule, re-exported

__all__ = [
    "SCHEMA_VERSION",
    "BundleHeader",
    "BundleManifest",
    "BundleReport",
    "Descriptor",
    "Entry",
    "Finding",
    "InclusionProof",
    "Metadata",
    "Model",
    "Registration",
    "Totals",
    "VerifyReport",
    "entry_path_problem",
]

SCHEMA_VERSION = 1

DigestStr = Annotated[str, Meta(pattern=DIGEST_PATTERN, description="blake3:<64 lowercase hex>")]
Size = Annotated[int, Meta(ge=0, description="size in bytes")]
MediaType = Annotated[
    str, Meta(pattern=r"^[A-Za-z0-9][\w.+-]*/[\w.+-]+(;.*)?$", description="IANA media type")
]
BundleName = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
        description="letters, digits, '.', '_', '-'; starts with a letter or digit",
    ),
]
Timestamp = Annotated[
    str,
    Meta(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$",
        description="UTC, whole seconds, RFC 3339 (YYYY-MM-DDTHH:MM:SSZ)",
    ),
]
EntryPath = Annotated[
    str, Meta(min_length=1, max_length=4096, description="normalised relative POSIX path")
]
Annotations = dict[str, str]
Location = Literal["repo", "store"]


class Model(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    """Base of every evidencestore struct.

    ``gc=False``: these structs never form reference cycles, and untracked instances
    make decoding a 100,000-entry manifest several times faster.
    """


class Descriptor(Model, frozen=True):
    """Content identified by digest and size, OCI style."""

    digest: DigestStr
    size: Size
    media_type: MediaType = "application/octet-stream"
    annotations: Annotations = {}

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value


class Entry(Model, frozen=True):
    """One file of a bundle: where it sits in the bundle and where its bytes live."""

    path: EntryPath
    descriptor: Descriptor
    location: Location
    role: str | None = None
    annotations: Annotations = {}


class Metadata(Model, frozen=True):
    """What a bundle is about; hashed into the bundle digest."""

    created: Timestamp
    producer: str
    references: tuple[str, ...] = ()
    annotations: Annotations = {}


class BundleManifest(Model, frozen=True, kw_only=True):
    """An immutable named set of entries, sorted by path."""

    schema_version: Literal[1] = 1
    name: BundleName
    metadata: Metadata
    entries: tuple[Entry, ...]


class BundleHeader(Model, frozen=True):
    """What the bundle digest is computed over: the Merkle root bound to the rest."""

    schema_version: int
    name: str
    metadata: Metadata
    root: DigestStr


class Registration(Model, frozen=True, dict=True, gc=True):
    """``evidence/<name>/bundle.json``: a manifest with its Merkle root and digest."""

    # A registration read from a file that is not exactly its value's encoding (one
    # written before canonical bytes were a function of values, with a default written
    # explicitly) keeps the root and digest of its manifest as it stands in the file
    # (merkle.registration_hashes): in its __dict__, not a field; kept when pickled,
    # dropped by structs.replace (a new value).

    digest: DigestStr
    root: DigestStr
    manifest: BundleManifest

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_registration, (self.digest, self.root, self.manifest, self.__dict__)


def _rebuild_registration(
    digest: str, root: str, manifest: BundleManifest, state: dict[str, object]
) -> Registration:
    reg = Registration(digest=digest, root=root, manifest=manifest)
    reg.__dict__.update(state)
    return reg


class InclusionProof(Model, frozen=True):
    """Proof that one entry belongs to a bundle, checkable without the other entries."""

    bundle: str
    bundle_digest: DigestStr
    schema_version: int
    metadata: Metadata
    entry: Entry
    leaf_index: Annotated[int, Meta(ge=0)]
    tree_size: Annotated[int, Meta(ge=1)]
    audit_path: tuple[DigestStr, ...]
    root: DigestStr


Severity = Literal["error", "warning", "info"]


class Finding(Model, frozen=True, omit_defaults=False):
    """One verification result worth telling: what, where, and how bad."""

    severity: Severity
    code: str
    message: str
    bundle: str | None = None
    path: str | None = None
    digest: str | None = None


class BundleReport(Model, frozen=True, omit_defaults=False):
    """Verification of one bundle."""

    name: str
    ok: bool
    digest: str | None
    entries: int
    checked: int
    unavailable: int
    findings: tuple[Finding, ...]


class Totals(Model, frozen=True, omit_defaults=False):
    """Sums over the bundles verified; computed, never pinned anywhere.

    ``unavailable`` counts the store entries that were not checked (absent from the
    store verified against); ``warnings`` counts every other warning: an unavailable
    entry's finding (``code = "unavailable"``, a warning unless availability is
    required, then an error counted in ``errors``) is counted in ``unavailable`` only.
    """

    bundles: int
    entries: int
    checked: int
    unavailable: int
    errors: int
    warnings: int


class VerifyReport(Model, frozen=True, omit_defaults=False):
    """The outcome of ``evstore verify``: every finding, per bundle and repository-wide."""

    ok: bool
    root: str
    bundles: tuple[BundleReport, ...]
    findings: tuple[Finding, ...]
    totals: Totals
