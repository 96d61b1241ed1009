"""Authenticated LPIPS scoring: weights by digest from the store, no download fallback.

One concept per module:

* :mod:`.provenance`: which weight files (torchvision's AlexNet backbone, lpips's
  ``weights/v0.1/alex.pth``), where they are found, their SHA-256 name check, the exact
  key sets and shapes, and the scorer-state digest (its format is documented there);
* :mod:`.prescan`: the security-critical static pre-scan that decodes a weight file's
  pickle opcode by opcode, executing nothing, and refuses anything but the expected
  plain state dict of tensors before any unpickling;
* :mod:`.loader`: fetching and re-verifying the weights, pre-scan, weights-only
  deserialisation, building the lpips module (:func:`load_scorer`,
  :func:`load_configured_scorer`), and the pinned provenance without loading
  (:func:`pinned_provenance`);
* :mod:`.scorer`: :class:`LpipsScorer`, the media comparison's frame scorer.

Importing this package imports neither torch nor numpy.
"""

from __future__ import annotations

from .loader import load_configured_scorer, load_scorer, pinned_provenance
from .prescan import scan_state_dict
from .provenance import (
    BACKBONE_SHAPES,
    LINEAR_SHAPES,
    SHA256_ANNOTATION,
    TITLE_ANNOTATION,
    TORCHVISION_BACKBONE_NAME,
    check_backbone_file,
    compute_state_digest,
    default_backbone_path,
    default_linear_path,
    installed_version,
    sha256_file,
    torchvision_hash_prefix,
)
from .scorer import CPU_BATCH_SIZE, CUDA_BATCH_SIZE, MIN_TORCH, LpipsScorer

__all__ = [
    "BACKBONE_SHAPES",
    "CPU_BATCH_SIZE",
    "CUDA_BATCH_SIZE",
    "LINEAR_SHAPES",
    "MIN_TORCH",
    "SHA256_ANNOTATION",
    "TITLE_ANNOTATION",
    "TORCHVISION_BACKBONE_NAME",
    "LpipsScorer",
    "check_backbone_file",
    "compute_state_digest",
    "default_backbone_path",
    "default_linear_path",
    "installed_version",
    "load_configured_scorer",
    "load_scorer",
    "pinned_provenance",
    "scan_state_dict",
    "sha256_file",
    "torchvision_hash_prefix",
]
