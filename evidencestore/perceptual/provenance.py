"""LPIPS weight provenance: which files, their names, shapes and the scorer-state digest.

lpips 0.1.4 builds its AlexNet trunk through torchvision, which downloads
``alexnet-owt-7be5be79.pth`` at run time (and loads any cached file of that name without
re-checking it); its linear layers come from ``weights/v0.1/alex.pth`` inside the
package. This module names those files, locates them without importing torch or lpips,
checks a backbone file against the SHA-256 prefix in its torchvision name, and states the
exact key sets and shapes both state dicts must have.

Scorer-state digest
-------------------
After loading, the scorer's complete state is hashed so that a comparison record can
name exactly the scorer that produced it. The digest is ``blake3:<64 hex>`` of::

    b"evidencestore/lpips-state/v1\\x00"
    u64be(number of entries)
    for each (name, tensor) of module.state_dict(), in its order:
        u64be(len(header)) header
        tensor bytes
    where header = canonical JSON (UTF-8, keys sorted, no whitespace) of
        {"dtype": "<torch dtype without 'torch.'>", "name": "<state key>",
         "nbytes": <byte count>, "shape": [<dims>]}
    and tensor bytes = the tensor on CPU, C-contiguous, elements little-endian.

``module.state_dict()`` of ``lpips.LPIPS(net="alex")`` has 22 entries: the scaling
layer's ``shift`` and ``scale`` buffers, ``net.slice1.0`` … ``net.slice5.10`` weights and
biases, ``lin0`` … ``lin4`` weights and their ``lins.0`` … ``lins.4`` aliases (the same
tensors, listed twice by torch). The digest is computed on CPU before the module is moved
to its device, so it does not depend on the device.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .._canonical import canonical
from ..digest import digest_from_hex, new_hasher
from ..errors import ScorerError

if TYPE_CHECKING:
    import torch

__all__ = [
    "BACKBONE_SHAPES",
    "LINEAR_SHAPES",
    "SHA256_ANNOTATION",
    "TITLE_ANNOTATION",
    "TORCHVISION_BACKBONE_NAME",
    "check_backbone_file",
    "compute_state_digest",
    "default_backbone_path",
    "default_linear_path",
    "import_hint",
    "installed_version",
    "sha256_file",
    "torchvision_hash_prefix",
]

TORCHVISION_BACKBONE_NAME = "alexnet-owt-7be5be79.pth"
"""The file name torchvision downloads for ``AlexNet_Weights.IMAGENET1K_V1``."""

TITLE_ANNOTATION = "org.opencontainers.image.title"
"""Descriptor annotation holding the imported file's name."""

SHA256_ANNOTATION = "evidencestore.sha256"
"""Descriptor annotation holding the imported file's SHA-256 (hex)."""

_STATE_DOMAIN = b"evidencestore/lpips-state/v1\x00"
_HASH_NAME_RE = re.compile(r"-([0-9a-f]{8,64})\.pth$")

_CONV: dict[int, tuple[int, ...]] = {
    0: (64, 3, 11, 11),
    3: (192, 64, 5, 5),
    6: (384, 192, 3, 3),
    8: (256, 384, 3, 3),
    10: (256, 256, 3, 3),
}

_LINEAR_LAYERS: dict[int, tuple[int, ...]] = {1: (4096, 9216), 4: (4096, 4096), 6: (1000, 4096)}


def _backbone_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for group, layers in (("features", _CONV), ("classifier", _LINEAR_LAYERS)):
        for index, shape in layers.items():
            shapes[f"{group}.{index}.weight"] = shape
            shapes[f"{group}.{index}.bias"] = (shape[0],)
    return shapes


BACKBONE_SHAPES: dict[str, tuple[int, ...]] = _backbone_shapes()
"""Every key of torchvision's AlexNet state dict, in its order, with its shape (float32)."""

_CHANNELS = (64, 192, 384, 256, 256)
LINEAR_SHAPES: dict[str, tuple[int, ...]] = {
    f"lin{k}.model.1.weight": (1, c, 1, 1) for k, c in enumerate(_CHANNELS)
}
"""Every key of lpips's ``weights/v0.1/alex.pth``, with its shape (all float32)."""

# What ``LPIPS.load_state_dict(linear, strict=False)`` must report missing: the
# scaling buffers (constants of lpips's code), the trunk (loaded strictly before) and


# -- files -------------------------------------------------------------------------


def torchvision_hash_prefix(name: str) -> str | None:
    """Return the SHA-256 prefix in a torchvision-style file name (``<stem>-<hex>.pth``)."""
    match = _HASH_NAME_RE.search(name)
    return match.group(1) if match else None


def sha256_file(path: Path) -> str:
    """Return the hex SHA-256 of a file (as torchvision checks its downloads)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


def check_backbone_file(path: str | os.PathLike[str]) -> str:
    """Check a backbone file's SHA-256 against the prefix in its torchvision name.

    Returns the full SHA-256 hex. Raises :class:`ScorerError` when the name carries no
    ``-<8+ hex>.pth`` suffix or the content does not hash to it, as torchvision checks
    on download (and does not re-check for a file already in its cache).
    """
    p = Path(path)
    prefix = torchvision_hash_prefix(p.name)
    if prefix is None:
        raise ScorerError(
            f"{p}: not a torchvision weight file name: expected '<name>-<sha256 prefix>.pth' "
            f"(the AlexNet backbone is {TORCHVISION_BACKBONE_NAME})"
        )
    try:
        sha = sha256_file(p)
    except OSError as exc:
        raise ScorerError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    if not sha.startswith(prefix):
        raise ScorerError(
            f"{p}: SHA-256 is {sha}, which does not start with {prefix} as its file name "
            "says; refusing it (torchvision would refuse it on download)"
        )
    return sha


def default_linear_path() -> Path:
    """Return ``weights/v0.1/alex.pth`` of the installed lpips package, without importing it."""
    try:
        spec = importlib.util.find_spec("lpips")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ScorerError(
            "the lpips package is not installed, so its linear weights cannot be located: "
            "install evidencestore[lpips] or give the linear weights' path"
        )
    for location in locations:
        candidate = Path(location) / "weights" / "v0.1" / "alex.pth"
        if candidate.is_file():
            return candidate
    raise ScorerError(
        f"the lpips package at {locations[0]} has no weights/v0.1/alex.pth: give the linear "
        "weights' path"
    )


def default_backbone_path() -> Path:
    """Return where torch hub caches the AlexNet backbone (it may not exist).

    ``$TORCH_HOME/hub/checkpoints/alexnet-owt-7be5be79.pth``, ``$TORCH_HOME`` defaulting
    to ``$XDG_CACHE_HOME/torch`` (``~/.cache/torch``), computed without importing torch.
    """
    home = os.environ.get("TORCH_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(cache, "torch")
    return Path(os.path.expanduser(home)) / "hub" / "checkpoints" / TORCHVISION_BACKBONE_NAME


def installed_version(dist: str) -> str:
    """The installed version of distribution ``dist`` from its metadata (without importing
    it), or ``"unknown"``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def import_hint() -> str:
    """Say how to import the LPIPS weights into the repository."""
    return (
        "import the weights with `evstore lpips import --backbone "
        f".../{TORCHVISION_BACKBONE_NAME}` (torchvision's AlexNet file, e.g. "
        f"{default_backbone_path()}; the linear weights default to lpips's "
        "weights/v0.1/alex.pth)"
    )


def compute_state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """Return the scorer-state digest of a state dict (format in the module docstring)."""
    import numpy as np

    hasher = new_hasher()
    hasher.update(_STATE_DOMAIN)
    hasher.update(struct.pack(">Q", len(state)))
    for name, tensor in state.items():
        t = tensor.detach().to("cpu").contiguous()
        array = t.numpy()
        if array.dtype.byteorder == ">" or (
            array.dtype.byteorder == "=" and sys.byteorder == "big"
        ):
            array = array.astype(array.dtype.newbyteorder("<"))
        data = np.ascontiguousarray(array).tobytes()
        header = canonical(
            {
                "dtype": str(t.dtype).removeprefix("torch."),
                "name": name,
                "nbytes": len(data),
                "shape": list(t.shape),
            }
        )
        hasher.update(struct.pack(">Q", len(header)))
        hasher.update(header)
        hasher.update(data)
    return digest_from_hex(hasher.hexdigest())
