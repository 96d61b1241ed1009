"""Raw output arrays (``.npy``, ``.npz``, safetensors): exact comparison, distances otherwise.

A pinned producer may keep the model's output arrays before lossy encoding, as entries
``requests/<index>/arrays/<name>`` of its run bundle. Two arrays are equal only when
dtype, shape and every byte agree; otherwise the record gives the maximum absolute
difference, the RMS difference (both in float64) and the number of differing elements
(``NaN`` equals ``NaN`` bitwise, so only bytes decide). Arrays of different dtype or
shape are not measured. ``.npy`` and ``.npz`` are read with ``allow_pickle=False``;
safetensors needs the ``safetensors`` package (the ``campaign`` extra installs it); its
absence is said, not guessed around. numpy is imported lazily.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any

from ..errors import MediaError
from .models import ArrayComparison

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ARRAY_SUFFIXES", "compare_array_files", "compare_arrays", "load_arrays"]

ARRAY_SUFFIXES = (".npy", ".npz", ".safetensors")


def load_arrays(name: str, data: bytes) -> dict[str, np.ndarray]:
    """The arrays in one file, by member name (``name`` itself for ``.npy``)."""
    import numpy as np

    try:
        if name.endswith(".npy"):
            return {name: np.load(io.BytesIO(data), allow_pickle=False)}
        if name.endswith(".npz"):
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                return {f"{name}:{k}": z[k] for k in sorted(z.files)}
        if name.endswith(".safetensors"):
            try:
                from safetensors.numpy import load  # type: ignore[import-not-found,unused-ignore]
            except ImportError as exc:
                raise MediaError(
                    f"{name}: comparing safetensors needs the 'safetensors' package"
                ) from exc
            return {f"{name}:{k}": v for k, v in sorted(load(data).items())}
    except MediaError:
        raise
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError, zipfile errors
        raise MediaError(f"{name}: not a readable array file: {exc}") from exc
    raise MediaError(f"{name}: not an array file (expected {', '.join(ARRAY_SUFFIXES)})")


def compare_arrays(name: str, a: np.ndarray, b: np.ndarray) -> ArrayComparison:
    """Compare two arrays exactly (see module doc)."""
    import numpy as np

    dtypes = (str(a.dtype), str(b.dtype))
    shapes = (tuple(int(s) for s in a.shape), tuple(int(s) for s in b.shape))
    if dtypes[0] != dtypes[1] or shapes[0] != shapes[1]:
        return ArrayComparison(
            name=name,
            equal=False,
            dtype=dtypes,
            shape=shapes,
            message=f"{name}: dtype/shape {dtypes[0]}{list(shapes[0])} vs "
            f"{dtypes[1]}{list(shapes[1])}: not comparable, no distance computed",
        )
    ab = np.ascontiguousarray(a)
    bb = np.ascontiguousarray(b)
    if ab.tobytes() == bb.tobytes():
        return ArrayComparison(
            name=name, equal=True, dtype=dtypes, shape=shapes, differing=0,
            max_abs_diff=0.0, rms_diff=0.0, message=f"{name}: exactly equal",
        )  # fmt: skip
    if a.dtype.kind in "biufc":
        flat_a = ab.reshape(-1).view(np.uint8).reshape(ab.size, -1) if ab.size else ab
        flat_b = bb.reshape(-1).view(np.uint8).reshape(bb.size, -1) if bb.size else bb
        differing = int(np.any(flat_a != flat_b, axis=1).sum()) if ab.size else 0
        diff = np.abs(ab.astype(np.complex128 if a.dtype.kind == "c" else np.float64) - bb)
        finite = diff[np.isfinite(diff)]
        max_abs = float(finite.max()) if finite.size else math.nan
        rms = float(np.sqrt(np.mean(np.square(finite)))) if finite.size else math.nan
        return ArrayComparison(
            name=name, equal=False, dtype=dtypes, shape=shapes, differing=differing,
            max_abs_diff=max_abs if math.isfinite(max_abs) else None,
            rms_diff=rms if math.isfinite(rms) else None,
            message=f"{name}: {differing} of {ab.size} elements differ, max |Δ| {max_abs:.6g}, "
            f"RMS {rms:.6g}",
        )  # fmt: skip
    return ArrayComparison(
        name=name, equal=False, dtype=dtypes, shape=shapes,
        message=f"{name}: bytes differ (dtype {dtypes[0]} has no numeric distance)",
    )  # fmt: skip


def compare_array_files(name: str, a: bytes, b: bytes) -> list[ArrayComparison]:
    """Compare two array files member by member; a member in one file only is unequal."""
    left, right = load_arrays(name, a), load_arrays(name, b)
    out: list[ArrayComparison] = []
    for key in sorted(set(left) | set(right)):
        if key in left and key in right:
            out.append(compare_arrays(key, left[key], right[key]))
        else:
            have: Any = left.get(key, right.get(key))
            out.append(
                ArrayComparison(
                    name=key,
                    equal=False,
                    dtype=(str(have.dtype), "<absent>")
                    if key in left
                    else ("<absent>", str(have.dtype)),
                    shape=(tuple(have.shape), ()) if key in left else ((), tuple(have.shape)),
                    message=f"{key}: present in {'the reference' if key in left else 'the candidate'} only",
                )
            )
    return out
