"""The job flow's polling schedule: waits grow with the elapsed time, within limits."""

from __future__ import annotations

from evidencestore.runs.models import Endpoint
from evidencestore.runs.polling import PollSchedule, clock_resolution, schedule_of


def test_wait_grows_with_elapsed_time_within_limits() -> None:
    s = PollSchedule(relative=0.01, minimum=0.005, maximum=0.5)
    assert s.wait(0.0) == 0.005 and s.wait(0.3) == 0.005  # the floor
    assert s.wait(2.0) == 0.02 and s.wait(30.0) == 0.3  # 1 % of the elapsed time
    assert s.wait(600.0) == 0.5  # never more than poll_interval
    assert all(s.wait(t) <= max(0.005, 0.01 * t) for t in (0.1, 1.0, 10.0, 100.0, 1000.0))


def test_schedule_comes_from_the_endpoint() -> None:
    default = schedule_of(Endpoint(kind="videos-job", path="/v1/videos"))
    assert default == PollSchedule(relative=0.01, minimum=0.005, maximum=0.5)
    custom = schedule_of(
        Endpoint(kind="videos-job", path="/v1/videos", poll_interval=2.0, poll_min=0.1,
                 poll_relative=0.05)
    )  # fmt: skip
    assert custom.wait(1.0) == 0.1 and custom.wait(10.0) == 0.5 and custom.wait(100.0) == 2.0
    assert 0 < clock_resolution() < 0.01
