"""Workloads: strict loading, input files, expectations from the request.

The exact bytes of each request are built by its endpoint (``endpoints.py``) as a pure
function of the workload, so a rerun sends byte-identical requests with the same
payload digests.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .._canonical import loads_toml
from ..confined import MAX_CONTROL_FILE, MAX_INPUT_FILE, read_file
from ..digest import hash_bytes
from ..errors import ConfigError
from ..models import Descriptor
from ..paths import path_problem
from .models import Workload

if TYPE_CHECKING:
    from ..media.records import Expectations
    from ..storage import BlobStore

__all__ = [
    "LoadedWorkload",
    "expectations_for",
    "input_files",
    "load_workload",
    "parse_workload",
]


@dataclass(frozen=True)
class LoadedWorkload:
    """A workload with the bytes and descriptor of the file it came from, and the
    directories its input files may be read from (its own, and the repository)."""

    path: Path
    data: bytes
    descriptor: Descriptor
    workload: Workload
    roots: tuple[Path, ...] = ()


def load_workload(
    path: str | os.PathLike[str], *, roots: Sequence[str | os.PathLike[str]] = ()
) -> LoadedWorkload:
    """Read and strictly validate ``workload.toml``; errors name the file and the field.

    The file and the input files it names are read by the one file-reading rule
    (``confined.py``): inside the workload's directory or one of ``roots`` (the
    repository), regular files, bounded. Every value is checked here (finite, in
    range), so nothing in a workload can fail a run after its first request is sent.
    """
    p = Path(path)
    allowed = (Path(os.path.dirname(os.path.abspath(p))), *(Path(r) for r in roots))
    data = read_file(p, allowed, limit=MAX_CONTROL_FILE, where=f"workload {p}")
    workload = parse_workload(data, p)
    return LoadedWorkload(
        p,
        data,
        Descriptor(**hash_bytes(data)._asdict(), media_type="application/toml"),
        workload,
        allowed,
    )


def parse_workload(data: bytes, path: str | os.PathLike[str]) -> Workload:
    """Decode and strictly validate the bytes of ``workload.toml`` (from ``path``, which
    errors name with the field)."""
    p = path
    raw = loads_toml(data, f"workload {p}")
    try:
        workload = msgspec.convert(raw, Workload)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"workload {p}: {exc}") from exc
    endpoint = workload.endpoint
    for field in ("health_path", "models_path"):
        entry = "server/" + (getattr(endpoint, field).strip("/") or "index")
        problem = path_problem(entry)
        if problem is not None:
            raise ConfigError(
                f"workload {p}: endpoint.{field} = {getattr(endpoint, field)!r}: "
                f"its answer would be kept as {entry!r}: {problem.reason}"
            )
    for i, req in enumerate(workload.request):
        where = f"workload {p}: request[{i}]"
        for key, value in sorted(req.fields.items()):
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{where}.fields.{key} = {value}: expected a finite number")
        if workload.endpoint.kind != "json" and req.size is None:
            raise ConfigError(f"{where}: `size` (WxH) is required for {workload.endpoint.kind}")
        if req.seconds is None and req.num_frames is None and workload.endpoint.kind != "json":
            raise ConfigError(f"{where}: give `seconds` or `num_frames` (with `fps`)")
        if req.num_frames is not None and req.fps is None:
            raise ConfigError(f"{where}: `num_frames` needs `fps`")
        if req.seconds is not None and req.num_frames is not None and req.fps is not None:
            implied = round(Fraction(str(req.seconds)) * req.fps)
            if implied != req.num_frames:
                raise ConfigError(
                    f"{where}: seconds = {req.seconds} at fps = {req.fps} is {implied} frames, "
                    f"but num_frames = {req.num_frames}; give one or make them agree"
                )
        for j, inp in enumerate(req.inputs):
            if (inp.path is None) == (inp.digest is None):
                raise ConfigError(f"{where}.inputs[{j}]: give exactly one of `path` or `digest`")
    return workload


def input_files(
    workload: LoadedWorkload, index: int, store: BlobStore | None
) -> list[tuple[str, str, str, bytes]]:
    """The input files of request ``index``: (field, file name, media type, bytes), read
    by the one file-reading rule (a path) or verified from the store (a digest)."""
    req = workload.workload.request[index]
    out = []
    for j, inp in enumerate(req.inputs):
        where = f"workload {workload.path}: request[{index}].inputs[{j}]"
        if inp.path is not None:
            src = workload.path.parent / inp.path
            roots = workload.roots or (workload.path.parent,)
            data = read_file(
                src, roots, limit=MAX_INPUT_FILE, where=f"{where}.path = {inp.path!r} ({src})"
            )
            name = inp.filename or src.name
        else:
            assert inp.digest is not None
            if store is None:
                raise ConfigError(f"{where}: input {inp.digest} needs a store")
            from ..errors import EvidenceStoreError

            try:
                data = store.get(inp.digest)
            except EvidenceStoreError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            name = inp.filename or inp.digest.split(":")[1][:16]
        out.append((inp.field, name, inp.media_type, data))
    return out


def expectations_for(workload: Workload, index: int) -> Expectations | None:
    """Return what request ``index`` asked for: size, frame count and rate, duration, and
    the workload's audio format; None when the request asks for no media."""
    from ..media.records import AudioExpectation, Expectations, VideoExpectation

    req = workload.request[index]
    if req.size is None:
        return None
    width, height = (int(v) for v in req.size.split("x"))
    video_section = workload.video
    frames = req.num_frames
    if frames is None and req.seconds is not None and req.fps is not None:
        frames = round(Fraction(str(req.seconds)) * req.fps)
    duration = req.seconds
    if duration is None and frames is not None and req.fps is not None:
        duration = float(Fraction(frames, req.fps))
    video = VideoExpectation(
        width=width,
        height=height,
        frame_rate=req.fps,
        frames=frames,
        duration=None if frames is not None else duration,
        pix_fmt=video_section.pix_fmt if video_section else None,
        codec=video_section.codec if video_section else None,
    )
    audio = None
    if workload.audio is not None:
        samples = None
        if duration is not None:
            exact = (
                Fraction(str(req.seconds))
                if req.seconds is not None
                else Fraction(frames or 0, req.fps or 1)
            )
            samples = round(exact * workload.audio.sample_rate)
        audio = AudioExpectation(
            sample_rate=workload.audio.sample_rate,
            channels=workload.audio.channels,
            samples=samples or None,
            codec=workload.audio.codec,
        )
    return Expectations(video=video, audio=audio)
