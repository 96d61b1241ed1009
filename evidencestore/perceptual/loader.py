"""Load an LPIPS scorer from weights addressed by digest: no download fallback.

Both weight files are resolved by BLAKE3 digest through the repository's store, their size
and digest are re-checked against the pinned descriptors (and their SHA-256 against the
name and annotation they were imported with), then their pickles are statically scanned
(:mod:`.prescan`) so that a wrong key set, dtype or shape, or anything but a plain state
dict of tensors, is refused before any unpickling; only then are they deserialised, from
memory, by torch's weights-only unpickler (still the guard against code execution) and
checked again. The lpips module is built with ``pretrained=False, pnet_rand=True`` so
nothing is fetched or read from disk, and the verified tensors are loaded into it with
exact key and shape checks.
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..digest import hash_bytes
from ..errors import BlobNotFoundError, EvidenceStoreError, IntegrityError, ScorerError
from ..integrity import check_content
from ..models import Descriptor
from .prescan import scan_state_dict
from .provenance import (
    BACKBONE_SHAPES,
    LINEAR_SHAPES,
    SHA256_ANNOTATION,
    TITLE_ANNOTATION,
    compute_state_digest,
    import_hint,
    installed_version,
    torchvision_hash_prefix,
)
from .scorer import CPU_BATCH_SIZE, CUDA_BATCH_SIZE, LpipsScorer, require_torch

if TYPE_CHECKING:
    import torch

    from ..config import Repository
    from ..storage import BlobStore

__all__ = ["load_configured_scorer", "load_scorer", "pinned_provenance"]

_TRUNK = {  # torchvision features index -> lpips slice
    0: 1,
    3: 2,
    6: 3,
    8: 4,
    10: 5,
}

# What ``LPIPS.load_state_dict(linear, strict=False)`` must report missing: the
# scaling buffers (constants of lpips's code), the trunk (loaded strictly before) and
# the ``lins.k`` aliases of ``link``.
_EXPECTED_MISSING = frozenset(
    ["scaling_layer.shift", "scaling_layer.scale"]
    + [f"net.slice{s}.{i}.{p}" for i, s in _TRUNK.items() for p in ("weight", "bias")]
    + [f"lins.{k}.model.1.weight" for k in range(len(LINEAR_SHAPES))]
)


def _fetch(store: BlobStore, role: str, descriptor: Descriptor) -> bytes:
    """Return a weight file's bytes, verified against its descriptor (never unpickled)."""
    where = f"LPIPS {role} weights {descriptor.digest}"
    try:
        data = store.get(descriptor.digest, descriptor.size)
    except BlobNotFoundError as exc:
        raise ScorerError(
            f"{where} ({descriptor.size} bytes) not found: {exc}; " + import_hint()
        ) from exc
    except EvidenceStoreError as exc:
        raise ScorerError(f"{where}: {exc}") from exc
    # The store verified them; check again against the pinned descriptor.
    observed = hash_bytes(data)
    try:
        check_content(f"LPIPS {role} weights", descriptor.digest, descriptor.size, *observed)
    except IntegrityError as exc:
        raise ScorerError(str(exc)) from exc
    title = descriptor.annotations.get(TITLE_ANNOTATION)
    pinned_sha = descriptor.annotations.get(SHA256_ANNOTATION)
    prefix = torchvision_hash_prefix(title) if title else None
    if prefix is not None or pinned_sha is not None:
        sha = hashlib.sha256(data).hexdigest()
        if prefix is not None and not sha.startswith(prefix):
            raise ScorerError(
                f"{where}: SHA-256 is {sha}, which does not start with {prefix} as its "
                f"file name {title!r} says"
            )
        if pinned_sha is not None and sha != pinned_sha:
            raise ScorerError(f"{where}: SHA-256 is {sha}, expected {pinned_sha}")
    return data


def _key_problems(keys: Iterable[object], shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Name the missing and unexpected keys of a state dict (order does not matter)."""
    present = set(keys)
    problems: list[str] = []
    missing = [k for k in shapes if k not in present]
    extra = [repr(k)[:100] for k in keys if k not in shapes]
    if len(extra) > 10:
        extra[10:] = [f"and {len(extra) - 10} more"]
    if missing:
        problems.append("missing " + ", ".join(f"{k} {list(shapes[k])}" for k in missing))
    if extra:
        problems.append("unexpected " + ", ".join(extra))
    return problems


def _prescan(
    role: str, descriptor: Descriptor, data: bytes, shapes: Mapping[str, tuple[int, ...]]
) -> None:
    """Refuse verified bytes whose keys, dtypes or shapes are wrong, before unpickling."""
    where = f"LPIPS {role} weights {descriptor.digest}"
    entries = scan_state_dict(data, where)
    problems = _key_problems(list(entries), shapes)
    for key, expected in shapes.items():
        if key not in entries:
            continue
        dtype, shape = entries[key]
        if dtype != "float32":
            problems.append(f"{key} is torch.{dtype} (torch.strided), expected torch.float32")
        elif shape != expected:
            problems.append(f"{key} has shape {list(shape)}, expected {list(expected)}")
    if problems:
        raise ScorerError(
            f"{where}: not the expected state dict: "
            + "; ".join(problems)
            + " (refused before unpickling)"
        )


def _deserialise(
    torch: Any,
    role: str,
    descriptor: Descriptor,
    data: bytes,
    shapes: Mapping[str, tuple[int, ...]],
) -> dict[str, torch.Tensor]:
    """Unpickle pre-scanned bytes with the weights-only loader; check keys, dtypes, shapes.

    :func:`_prescan` has refused wrong keys, dtypes and shapes, and anything but a plain
    state dict of tensors, before any unpickling; the weights-only load remains the guard
    against code execution, and its result is checked again (defence in depth).
    """
    where = f"LPIPS {role} weights {descriptor.digest}"
    try:
        loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScorerError(
            f"{where}: refused by torch's weights-only loader: {type(exc).__name__}: {first}"
        ) from exc
    if not isinstance(loaded, Mapping):
        raise ScorerError(f"{where}: expected a state dict, found {type(loaded).__name__}")
    problems = _key_problems(list(loaded), shapes)
    state: dict[str, torch.Tensor] = {}
    for key, expected in shapes.items():
        if key not in loaded:
            continue
        value = loaded[key]
        if not isinstance(value, torch.Tensor):
            problems.append(f"{key} is a {type(value).__name__}, expected a tensor")
            continue
        if value.layout != torch.strided or value.dtype != torch.float32:
            problems.append(f"{key} is {value.dtype} ({value.layout}), expected torch.float32")
            continue
        if tuple(value.shape) != expected:
            problems.append(f"{key} has shape {list(value.shape)}, expected {list(expected)}")
            continue
        state[key] = value
    if problems:
        raise ScorerError(f"{where}: not the expected state dict: " + "; ".join(problems))
    return state


def _build(torch: Any, trunk: dict[str, torch.Tensor], linear: dict[str, torch.Tensor]) -> Any:
    """Build ``lpips.LPIPS(net="alex")`` without fetching anything and load the tensors."""
    try:
        import lpips
    except ImportError as exc:
        raise ScorerError("LPIPS needs the lpips package: install evidencestore[lpips]") from exc
    # Building draws random initial weights: keep the caller's RNG state untouched.
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision's `pretrained=` notice
        module = lpips.LPIPS(net="alex", pretrained=False, pnet_rand=True, verbose=False)
    mapped = {
        f"slice{_TRUNK[int(key.split('.')[1])]}.{key.split('.', 1)[1]}": value
        for key, value in trunk.items()
        if key.startswith("features.")
    }
    try:
        module.net.load_state_dict(mapped, strict=True)
        result = module.load_state_dict(linear, strict=False)
    except RuntimeError as exc:
        raise ScorerError(f"the installed lpips does not accept AlexNet weights: {exc}") from exc
    if set(result.missing_keys) != _EXPECTED_MISSING or result.unexpected_keys:
        raise ScorerError(
            "the installed lpips has an unexpected structure: loading the linear layers "
            f"left missing {sorted(result.missing_keys)}, unexpected "
            f"{sorted(result.unexpected_keys)}; expected missing {sorted(_EXPECTED_MISSING)}"
        )
    # The flags lpips.LPIPS(net="alex") ends with: eval mode, a frozen trunk
    # (requires_grad=pnet_tune=False), trainable linear layers.
    module.eval()
    for name, param in module.named_parameters():
        param.requires_grad_(not name.startswith("net."))
    return module


def _pick_device(torch: Any, device: str | torch.device | None) -> Any:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ScorerError(f"invalid device {device!r}: {exc}") from exc


def load_scorer(
    store: BlobStore,
    backbone: Descriptor,
    linear: Descriptor,
    *,
    state_digest: str | None = None,
    device: str | torch.device | None = None,
    batch_size: int | None = None,
) -> LpipsScorer:
    """Load an LPIPS (AlexNet, v0.1) scorer from weights addressed by digest in ``store``.

    Both files are verified (size and digest), then statically scanned
    (:func:`scan_state_dict`: key sets, dtypes and shapes must be exactly those of
    torchvision's AlexNet and lpips's ``alex.pth``), before they are deserialised with
    ``torch.load(weights_only=True)`` from memory and checked again. With
    ``state_digest``, a scorer whose state digest differs is refused. ``device``
    defaults to CUDA when available, else CPU; ``batch_size`` to :data:`CPU_BATCH_SIZE`
    or :data:`CUDA_BATCH_SIZE`. Raises :class:`ScorerError`.
    """
    torch = require_torch()
    target = _pick_device(torch, device)
    if batch_size is None:
        batch_size = CUDA_BATCH_SIZE if target.type == "cuda" else CPU_BATCH_SIZE
    if batch_size < 1:
        raise ScorerError(f"batch_size must be at least 1, got {batch_size}")
    backbone_bytes = _fetch(store, "backbone", backbone)
    linear_bytes = _fetch(store, "linear", linear)
    # Both files are statically checked before either is unpickled.
    _prescan("backbone", backbone, backbone_bytes, BACKBONE_SHAPES)
    _prescan("linear", linear, linear_bytes, LINEAR_SHAPES)
    trunk = _deserialise(torch, "backbone", backbone, backbone_bytes, BACKBONE_SHAPES)
    del backbone_bytes
    lins = _deserialise(torch, "linear", linear, linear_bytes, LINEAR_SHAPES)
    module = _build(torch, trunk, lins)
    del trunk
    digest = compute_state_digest(module.state_dict())
    if state_digest is not None and digest != state_digest:
        raise ScorerError(
            f"LPIPS scorer-state digest is {digest}, but {state_digest} is pinned: the "
            "weights or the installed lpips differ from those the pin was made with"
        )
    try:
        module.to(target)
    except Exception as exc:  # no such device, out of memory
        raise ScorerError(f"cannot move the LPIPS scorer to {target}: {exc}") from exc
    return LpipsScorer(
        module=module,
        backbone=backbone,
        linear=linear,
        state_digest=digest,
        device=str(target),
        batch_size=batch_size,
    )


def _pinned(root: str | os.PathLike[str] | None) -> tuple[Repository, Descriptor, Descriptor]:
    """The repository, and the backbone and linear descriptors pinned in its ``[lpips]``."""
    from ..config import CONFIG_NAME, as_repository

    repo = as_repository(root)
    config = repo.config.lpips
    if config is None or config.backbone is None or config.linear is None:
        raise ScorerError(
            f"no LPIPS weights are configured in {repo / CONFIG_NAME}: " + import_hint()
        )
    return repo, config.backbone, config.linear


def load_configured_scorer(root: str | os.PathLike[str] | None = None) -> LpipsScorer:
    """Load the scorer pinned in ``evstore.toml`` ``[lpips]``, through the repository store.

    Raises :class:`ScorerError` saying how to import the weights when none are configured.
    """
    from ..remotes import repository_store

    repo, backbone, linear = _pinned(root)
    pinned = repo.config.lpips
    state_digest = pinned.state_digest if pinned is not None else None
    return load_scorer(repository_store(repo), backbone, linear, state_digest=state_digest)


def pinned_provenance(root: str | os.PathLike[str] | None = None) -> dict[str, str | int | None]:
    """Return the scorer provenance pinned in ``evstore.toml`` ``[lpips]``, without loading it.

    The weight descriptors and the pinned scorer-state digest (``None`` when not pinned),
    the installed torch, torchvision and lpips distributions' versions (read from their
    metadata: nothing is imported), and ``backbone_local_size`` / ``linear_local_size``:
    the size of the blob the local store holds under each pinned digest, ``None`` when it
    holds none (loading then fetches it from the remotes). Neither weight file is read:
    :func:`load_configured_scorer` re-verifies and loads them. Raises :class:`ScorerError`
    when no weights are configured.
    """
    repo, backbone, linear = _pinned(root)
    pinned = repo.config.lpips
    store = repo.local_store()
    shown: dict[str, str | int | None] = {
        "scorer": "lpips",
        "net": "alex",
        "model_version": "0.1",
        "backbone_digest": backbone.digest,
        "backbone_size": str(backbone.size),
        "linear_digest": linear.digest,
        "linear_size": str(linear.size),
        "state_digest": pinned.state_digest if pinned is not None else None,
        "torch": installed_version("torch"),
        "torchvision": installed_version("torchvision"),
        "lpips": installed_version("lpips"),
        "backbone_local_size": store.size(backbone.digest),
        "linear_local_size": store.size(linear.digest),
    }
    for role, descriptor in (("backbone", backbone), ("linear", linear)):
        for key, annotation in (("file", TITLE_ANNOTATION), ("sha256", SHA256_ANNOTATION)):
            value = descriptor.annotations.get(annotation)
            if value is not None:
                shown[f"{role}_{key}"] = value
    return shown
