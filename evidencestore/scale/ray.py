"""A campaign's tasks on a Ray cluster (the ``ray`` extra).

``RayExecutor`` is a ``campaign.tasks.Executor``: the tasks are grouped into chunks that
share decoding (``local.chunks``), each chunk runs as one Ray task on a worker that sees
the repository at the same path (a shared filesystem, or a clone at the same commit with
the same remotes) and reads outputs through its local store and remotes, verified. A worker
computes into a scratch memo of its own and returns each record's stored bytes; the driver
keeps a record only when it decodes under its task's key (its binding to its inputs), so a
worker can fail a task, never change a verdict. Records do not depend on where they were
computed: a status through Ray is byte-identical to a local one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..campaign.memo import Memo, kept_record, open_memo
from ..campaign.tasks import Task, compute, task_types
from ..errors import ConfigError
from ..storage import MemoryBlobStore
from .local import chunks

if TYPE_CHECKING:
    from ..config import Repository

__all__ = ["RayExecutor"]


def _chunk(root: str, encoded: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    """On a Ray worker: compute one chunk in the repository the driver resolved
    (``root``, taken as given); (failed, key -> stored bytes). A task holds one of Ray's
    CPUs, so it decodes on one thread."""
    from ..config import Repository
    from ..media.decode import set_decode_threads

    set_decode_threads(False)
    tasks = msgspec.json.decode(encoded, type=list[Task])
    with tempfile.TemporaryDirectory(prefix="evstore-ray-") as tmp:
        scratch = Memo(MemoryBlobStore(), tmp)
        failed = compute(Repository(root), tasks, memo=scratch)
        out = {}
        for t in tasks:
            data = scratch.stored(t.key)
            if data is not None:
                out[t.key] = data
    return failed, out


class RayExecutor:
    """Run tasks on the Ray cluster at ``address`` (``ray.init(address=...)``; None: the
    one this process is connected to, else a local one); ``init`` adds keyword arguments
    to ``ray.init``."""

    def __init__(self, address: str | None = None, **init: Any) -> None:
        self.address = address
        self.init = init

    def __call__(
        self, root: Repository, tasks: Sequence[Task], *, fresh: bool = False
    ) -> dict[str, str]:
        """Run ``tasks`` on the cluster (always ``fresh``: workers compute into scratch
        memos of their own)."""
        try:
            import ray
        except ImportError as exc:
            raise ConfigError(
                "the Ray executor needs Ray: pip install 'evidencestore[ray]'"
            ) from exc
        if not tasks:
            return {}
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init)
        run = ray.remote(_chunk)
        kinds = {t.key: t.kind for t in tasks}
        refs = [run.remote(os.fspath(root.root), msgspec.json.encode(c)) for c in chunks(tasks)]
        memo = open_memo(root.local_store())
        failed: dict[str, str] = {}
        for ref in refs:
            lost, records = ray.get(ref)
            failed.update(lost)
            for key, data in records.items():
                kind = kinds.get(key)
                if kind is None or kept_record(data, key, task_types(kind)) is None:
                    failed[key] = "a Ray worker returned a record not bound to this task's key"
                    continue
                memo.put_bytes(key, data)
        for key in kinds:
            if key not in failed and not memo.has(key):
                failed[key] = "no record came back from the Ray cluster"
        return failed
