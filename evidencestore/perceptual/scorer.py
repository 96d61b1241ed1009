"""The LPIPS frame scorer, and the torch version it requires.

:class:`LpipsScorer` wraps an ``lpips.LPIPS(net="alex")`` module built by
:mod:`.loader` from authenticated weights; it implements the media comparison's
``FrameScorer`` protocol. torch is imported only when a scorer is used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ScorerError
from ..models import Descriptor
from .provenance import installed_version

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CPU_BATCH_SIZE",
    "CUDA_BATCH_SIZE",
    "MIN_TORCH",
    "LpipsScorer",
    "require_torch",
]

MIN_TORCH = (2, 10)
"""Oldest torch accepted: earlier weights-only unpicklers had security advisories."""

CPU_BATCH_SIZE = 1
"""Default frames per batch on CPU, measured by ``benches/bench_lpips.py`` at 1280x720 on
2 cores: batches of 2 ran at 0.87-1.22x the per-frame rate of single frames across runs
(no faster on the median), 4 and 8 at 0.73-0.90x; at this size one frame already keeps
the cores busy, so larger CPU batches only add memory traffic."""

CUDA_BATCH_SIZE = 8
"""Default frames per batch on CUDA (not measured here; batching amortises kernel launches)."""


def require_torch() -> Any:
    """Import torch, refusing versions older than :data:`MIN_TORCH`."""
    try:
        import torch
    except ImportError as exc:
        raise ScorerError(
            "LPIPS needs torch, torchvision and lpips: install evidencestore[lpips]"
        ) from exc
    version = str(torch.__version__)
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < MIN_TORCH:
        raise ScorerError(
            f"torch {version} is too old: LPIPS weights are only deserialised with torch >= "
            f"{MIN_TORCH[0]}.{MIN_TORCH[1]} (earlier weights-only unpicklers had "
            "code-execution and memory-corruption advisories)"
        )
    return torch


@dataclass(eq=False)
class LpipsScorer:
    """LPIPS (AlexNet, v0.1) per frame, from authenticated weights.

    Implements the media comparison's ``FrameScorer`` protocol: ``score`` takes two
    ``uint8`` arrays ``(N, H, W, 3)`` (RGB) and returns N distances; identical frames
    score exactly 0.0.
    """

    module: Any
    backbone: Descriptor
    linear: Descriptor
    state_digest: str
    device: str
    batch_size: int = CPU_BATCH_SIZE
    name: str = field(default="lpips", init=False)

    def _tensor(self, torch: Any, frames: np.ndarray) -> Any:
        # [0, 255] -> [-1, 1] computed in float64 then rounded, as lpips.im2tensor does.
        t = torch.from_numpy(frames).to(self.device)
        # Contiguous NCHW like lpips's own tensors: channels-last kernels round differently.
        t = t.permute(0, 3, 1, 2).to(torch.float64).div_(127.5).sub_(1.0)
        return t.to(torch.float32, memory_format=torch.contiguous_format)

    def score(self, reference: np.ndarray, candidate: np.ndarray) -> list[float]:
        """Return the LPIPS distance of each frame pair, batched by ``batch_size``."""
        import numpy as np

        torch = require_torch()
        for label, frames in (("reference", reference), ("candidate", candidate)):
            if not isinstance(frames, np.ndarray) or frames.dtype != np.uint8:
                kind = getattr(frames, "dtype", type(frames).__name__)
                raise ScorerError(f"LPIPS {label} frames must be a uint8 numpy array, got {kind}")
            if frames.ndim != 4 or frames.shape[3] != 3:
                raise ScorerError(
                    f"LPIPS {label} frames have shape {frames.shape}, expected (N, H, W, 3) RGB"
                )
        if reference.shape != candidate.shape:
            raise ScorerError(
                f"LPIPS frames differ in shape: reference {reference.shape}, "
                f"candidate {candidate.shape}"
            )
        scores: list[float] = []
        count = reference.shape[0]
        with torch.inference_mode():
            for start in range(0, count, self.batch_size):
                ref = np.ascontiguousarray(reference[start : start + self.batch_size])
                cand = np.ascontiguousarray(candidate[start : start + self.batch_size])
                try:
                    out = self.module(self._tensor(torch, ref), self._tensor(torch, cand))
                except RuntimeError as exc:
                    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    raise ScorerError(
                        f"LPIPS cannot score {ref.shape[2]}x{ref.shape[1]} frames on "
                        f"{self.device}: {first}"
                    ) from exc
                values = out.reshape(-1).to("cpu", torch.float64).tolist()
                for offset, value in enumerate(values):
                    if np.array_equal(ref[offset], cand[offset]):
                        value = 0.0  # what LPIPS computes; made exact whatever the kernels
                    elif not math.isfinite(value):
                        raise ScorerError(f"LPIPS of frame {start + offset} is {value}")
                    scores.append(float(value))
        return scores

    def provenance(self) -> dict[str, str]:
        """Return what a comparison record must carry to name this scorer exactly."""
        import torch
        import torchvision

        return {
            "scorer": "lpips",
            "net": "alex",
            "model_version": "0.1",
            "backbone_digest": self.backbone.digest,
            "backbone_size": str(self.backbone.size),
            "linear_digest": self.linear.digest,
            "linear_size": str(self.linear.size),
            "state_digest": self.state_digest,
            "torch": str(torch.__version__),
            "torchvision": str(torchvision.__version__),
            "lpips": installed_version("lpips"),
            "device": self.device,
        }
