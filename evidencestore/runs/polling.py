"""The job flow's polling schedule, and the resolution it gives a measured latency.

A job's completion is seen only when a poll says so, so a job-flow end-to-end time
includes some waiting: the job completed after the last poll that said it had not been
sent, and before the answer of the poll that said it had. That span is the request's
*resolution* (``RequestRecord.resolution_s``): the true time lies within it below the
recorded one. To keep it a small, stated fraction of what is measured, the wait between
polls grows with the time elapsed since the request was sent::

    wait = min(poll_interval, max(poll_min, poll_relative * elapsed))

so the resolution stays under ``poll_relative`` of the elapsed time (1 % by default) plus
one poll's round trip, once ``elapsed`` exceeds ``poll_min / poll_relative``, and never
exceeds ``poll_interval`` plus a round trip. A synchronous request has no polling: its
resolution is the monotonic clock's.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from .models import Endpoint

__all__ = ["PollSchedule", "clock_resolution", "schedule_of"]


@functools.cache
def clock_resolution() -> float:
    """The resolution of ``time.monotonic_ns`` in seconds (a synchronous request's bound)."""
    return float(time.get_clock_info("monotonic").resolution)


@dataclass(frozen=True)
class PollSchedule:
    """Waits between job polls that grow with the elapsed time (module doc)."""

    relative: float = 0.01
    minimum: float = 0.005
    maximum: float = 0.5

    def wait(self, elapsed: float) -> float:
        """Seconds to wait before the next poll, ``elapsed`` seconds after sending."""
        return min(self.maximum, max(self.minimum, self.relative * elapsed))


def schedule_of(endpoint: Endpoint) -> PollSchedule:
    """The schedule a workload's endpoint declares."""
    return PollSchedule(
        relative=endpoint.poll_relative, minimum=endpoint.poll_min, maximum=endpoint.poll_interval
    )
