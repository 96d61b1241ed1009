"""The open-loop schedule: when each request of a phase is due, fixed before it starts.

The same process as ``vllm bench serve --request-rate R --burstiness B --seed S``: the
first request at once, then gaps drawn from a gamma distribution with shape ``B`` and
scale ``1 / (R * B)`` (mean ``1 / R``; ``B = 1`` is a Poisson process), seeded, so the
schedule is a pure function of the workload. ``R = inf`` sends every request at once.
"""

from __future__ import annotations

import math
import random
from typing import Literal

__all__ = ["arrival_offsets"]


def arrival_offsets(
    count: int, rate: float | Literal["inf"], burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """Each of ``count`` requests' due time, in seconds after the phase starts."""
    if rate == "inf" or math.isinf(float(rate)):
        return [0.0] * count
    rng = random.Random(seed)
    scale = 1.0 / (float(rate) * burstiness)
    out: list[float] = []
    at = 0.0
    for _ in range(count):
        out.append(at)
        at += rng.gammavariate(burstiness, scale)
    return out
