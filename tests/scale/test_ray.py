"""A campaign status through a local Ray cluster on 127.0.0.1 (started and stopped here)
gives records byte-identical to a local status; a task whose record does not come back
under its key is failed, and nothing is kept under it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("av")

import ray
from helpers.scale_campaign import NAME
from helpers.scale_campaign import clone as _clone
from helpers.scale_campaign import count as _count
from helpers.scale_campaign import records as _records

from evidencestore.campaign.memo import open_memo
from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
from evidencestore.campaign.tasks import plan
from evidencestore.config import as_repository
from evidencestore.scale.ray import RayExecutor


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(
        num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
        log_to_driver=False, configure_logging=False,
    )  # fmt: skip
    try:
        yield
    finally:
        ray.shutdown()


def _bare(author: Path, tmp_path: Path, name: str) -> Path:
    remote = tmp_path / f"{name}-remote"
    shutil.copytree(author.parent / "remote", remote, ignore=shutil.ignore_patterns("results"))
    return _clone(author, tmp_path / name, remote)


def test_a_status_through_ray_is_byte_identical(
    scale_author: Path,
    tmp_path: Path,
    cluster: None,
) -> None:
    local = _bare(scale_author, tmp_path, "local")
    through = _bare(scale_author, tmp_path, "ray")
    a = evaluate(local, load_campaign(local, NAME))
    b = evaluate(through, load_campaign(through, NAME), executor=RayExecutor())
    assert b.computed == a.computed == _count(scale_author)
    assert b.decoded == 0  # everything was decoded on the Ray workers
    assert _records(a) == _records(b)
    assert a.status == b.status


def test_a_record_not_under_its_key_is_not_kept(
    scale_author: Path,
    tmp_path: Path,
    cluster: None,
) -> None:
    clone = _bare(scale_author, tmp_path, "c")
    tasks = plan(clone, load_campaign(clone, NAME)).tasks
    one = tasks[0]
    swapped = [one.__class__(**{**{f: getattr(one, f) for f in one.__struct_fields__},
                                "key": tasks[-1].key})]  # fmt: skip
    failed = RayExecutor()(as_repository(clone), swapped)
    # the worker kept the analysis under its own key; nothing comes back under the
    # task's, and nothing is kept under it
    assert failed == {tasks[-1].key: "no record came back from the Ray cluster"}
    assert not open_memo(as_repository(clone).local_store()).has(tasks[-1].key)
