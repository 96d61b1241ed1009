"""evidencestore: a content-addressed evidence store for ML campaigns.

The public API is re-exported here and loaded on first use, so ``import evidencestore``
(and the ``evstore`` CLI) starts without importing what a command does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .bundle import create_bundle, make_manifest, seal
    from .config import Config, load_config, local_store
    from .digest import Hashed, hash_bytes, hash_file, hash_files, parse_digest
    from .errors import (
        BlobNotFoundError,
        BundleError,
        ConfigError,
        EvidenceStoreError,
        IntegrityError,
        InvalidDigestError,
        ManifestError,
        MediaError,
        ReadOnlyStoreError,
        ScorerError,
        StorageError,
        VerificationError,
    )
    from .inventory import Inventory, load_inventory
    from .merkle import (
        bundle_digest,
        check_inclusion,
        inclusion_holds,
        inclusion_proof,
        verify_inclusion,
    )
    from .models import (
        BundleManifest,
        BundleReport,
        Descriptor,
        Entry,
        Finding,
        InclusionProof,
        Metadata,
        Registration,
        VerifyReport,
    )
    from .remotes import repository_store
    from .storage import BlobStore, open_store
    from .verify import check_repository, verify_repository

_LAZY = {
    "create_bundle": "bundle",
    "make_manifest": "bundle",
    "seal": "bundle",
    "Config": "config",
    "load_config": "config",
    "local_store": "config",
    "Hashed": "digest",
    "hash_bytes": "digest",
    "hash_file": "digest",
    "hash_files": "digest",
    "parse_digest": "digest",
    "BlobNotFoundError": "errors",
    "BundleError": "errors",
    "ConfigError": "errors",
    "EvidenceStoreError": "errors",
    "IntegrityError": "errors",
    "InvalidDigestError": "errors",
    "ManifestError": "errors",
    "MediaError": "errors",
    "ReadOnlyStoreError": "errors",
    "ScorerError": "errors",
    "StorageError": "errors",
    "VerificationError": "errors",
    "Inventory": "inventory",
    "load_inventory": "inventory",
    "bundle_digest": "merkle",
    "check_inclusion": "merkle",
    "inclusion_holds": "merkle",
    "inclusion_proof": "merkle",
    "verify_inclusion": "merkle",
    "BundleManifest": "models",
    "BundleReport": "models",
    "Descriptor": "models",
    "Entry": "models",
    "Finding": "models",
    "InclusionProof": "models",
    "Metadata": "models",
    "Registration": "models",
    "VerifyReport": "models",
    "repository_store": "remotes",
    "BlobStore": "storage",
    "open_store": "storage",
    "check_repository": "verify",
    "verify_repository": "verify",
}

__all__ = [
    "BlobNotFoundError",
    "BlobStore",
    "BundleError",
    "BundleManifest",
    "BundleReport",
    "Config",
    "ConfigError",
    "Descriptor",
    "Entry",
    "EvidenceStoreError",
    "Finding",
    "Hashed",
    "InclusionProof",
    "IntegrityError",
    "InvalidDigestError",
    "Inventory",
    "ManifestError",
    "MediaError",
    "Metadata",
    "ReadOnlyStoreError",
    "Registration",
    "ScorerError",
    "StorageError",
    "VerificationError",
    "VerifyReport",
    "__version__",
    "bundle_digest",
    "check_inclusion",
    "check_repository",
    "create_bundle",
    "hash_bytes",
    "hash_file",
    "hash_files",
    "inclusion_holds",
    "inclusion_proof",
    "load_config",
    "load_inventory",
    "local_store",
    "make_manifest",
    "open_store",
    "parse_digest",
    "repository_store",
    "seal",
    "verify_inclusion",
    "verify_repository",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
