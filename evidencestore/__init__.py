"""evidencestore: a content-addressed evidence store for ML campaigns.

The public API is re-exported here and loaded on first use, so ``import evidencestore``
(and the ``evstore`` CLI) starts without importing what a command does not need.
The ``TYPE_CHECKING`` imports below are the one list of public names: type checkers
read them, and ``_LAZY`` (name -> submodule), ``__all__`` and ``dir()`` are derived
from the same lines at import (:mod:`._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import guarded_imports, lazy_exports
from ._version import __version__ as __version__

if TYPE_CHECKING:
    # The public API: explicit re-exports, read at run time by guarded_imports.
    from .bundle import create_bundle as create_bundle
    from .bundle import make_manifest as make_manifest
    from .bundle import seal as seal
    from .campaign.adjudication import adjudicate as adjudicate
    from .campaign.adjudication import repeatability as repeatability
    from .campaign.claims import make_claim as make_claim
    from .campaign.members import campaign_runs as campaign_runs
    from .campaign.plan import plan_campaign as plan_campaign
    from .campaign.protocol import Campaign as Campaign
    from .campaign.protocol import init_campaign as init_campaign
    from .campaign.protocol import load_campaign as load_campaign
    from .campaign.records import register_records as register_records
    from .campaign.status import evaluate as evaluate
    from .campaign.verify import verify_campaign as verify_campaign
    from .config import Config as Config
    from .config import init_repository as init_repository
    from .config import load_config as load_config
    from .config import local_store as local_store
    from .digest import Hashed as Hashed
    from .digest import hash_bytes as hash_bytes
    from .digest import hash_file as hash_file
    from .digest import hash_files as hash_files
    from .digest import parse_digest as parse_digest
    from .errors import AttestationError as AttestationError
    from .errors import BlobNotFoundError as BlobNotFoundError
    from .errors import BundleError as BundleError
    from .errors import BundleNotFoundError as BundleNotFoundError
    from .errors import CampaignFitError as CampaignFitError
    from .errors import ConfigError as ConfigError
    from .errors import EvidenceStoreError as EvidenceStoreError
    from .errors import GitError as GitError
    from .errors import IntegrityError as IntegrityError
    from .errors import InvalidDigestError as InvalidDigestError
    from .errors import ManifestError as ManifestError
    from .errors import MediaError as MediaError
    from .errors import NotFoundError as NotFoundError
    from .errors import NotMediaError as NotMediaError
    from .errors import ReadOnlyStoreError as ReadOnlyStoreError
    from .errors import RemoteConfigError as RemoteConfigError
    from .errors import ReportError as ReportError
    from .errors import ScorerError as ScorerError
    from .errors import StorageError as StorageError
    from .errors import TransferDeadlineError as TransferDeadlineError
    from .errors import TransferError as TransferError
    from .errors import VerificationError as VerificationError
    from .inventory import Inventory as Inventory
    from .inventory import load_inventory as load_inventory
    from .merkle import bundle_digest as bundle_digest
    from .merkle import check_inclusion as check_inclusion
    from .merkle import inclusion_holds as inclusion_holds
    from .merkle import inclusion_proof as inclusion_proof
    from .merkle import verify_inclusion as verify_inclusion
    from .models import BundleManifest as BundleManifest
    from .models import BundleReport as BundleReport
    from .models import Descriptor as Descriptor
    from .models import Entry as Entry
    from .models import Finding as Finding
    from .models import InclusionProof as InclusionProof
    from .models import Metadata as Metadata
    from .models import Registration as Registration
    from .models import VerifyReport as VerifyReport
    from .remotes import repository_store as repository_store
    from .runs.diff import diff_runs as diff_runs
    from .runs.models import RequestRecord as RequestRecord
    from .runs.models import RunRecord as RunRecord
    from .runs.models import Workload as Workload
    from .runs.recorder import RunRecorder as RunRecorder
    from .runs.recorder import load_run as load_run
    from .runs.recorder import open_run as open_run
    from .runs.runner import run_workload as run_workload
    from .runs.summary import summarize as summarize
    from .runs.workload import load_workload as load_workload
    from .storage import BlobStore as BlobStore
    from .storage import open_store as open_store
    from .verify import check_repository as check_repository
    from .verify import verify_repository as verify_repository

_LAZY = guarded_imports(__file__)
__all__ = sorted(["__version__", *_LAZY])
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
