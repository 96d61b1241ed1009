"""Workloads: strict loading, the exact bytes of each request, expectations from the request.

Payload bytes are a pure function of the workload (multipart boundaries are derived from
the fields' digest, never random), so a rerun of the same workload sends byte-identical
requests with the same payload digests.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .._canonical import loads_toml
from ..digest import hash_bytes
from ..errors import ConfigError
from ..models import Descriptor
from .models import RequestSpec, Workload

if TYPE_CHECKING:
    from ..media.records import Expectations
    from ..storage import BlobStore

__all__ = ["LoadedWorkload", "Payload", "build_payload", "expectations_for", "load_workload"]


@dataclass(frozen=True)
class LoadedWorkload:
    """A workload with the bytes and descriptor of the file it came from."""

    path: Path
    data: bytes
    descriptor: Descriptor
    workload: Workload


@dataclass(frozen=True)
class Payload:
    """The exact bytes of one request and their content type."""

    data: bytes
    content_type: str
    descriptor: Descriptor


def load_workload(path: str | os.PathLike[str]) -> LoadedWorkload:
    """Read and strictly validate ``workload.toml``; errors name the file and the field."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"workload {p}: cannot read: {exc.strerror}") from exc
    raw = loads_toml(data, f"workload {p}")
    try:
        workload = msgspec.convert(raw, Workload)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"workload {p}: {exc}") from exc
    for i, req in enumerate(workload.request):
        where = f"workload {p}: request[{i}]"
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
    return LoadedWorkload(
        p, data, Descriptor(**hash_bytes(data)._asdict(), media_type="application/toml"), workload
    )


def _form_fields(req: RequestSpec) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name in ("prompt", "negative_prompt", "size", "seconds", "num_frames", "fps", "seed"):
        value = getattr(req, name)
        if value is not None:
            out.append((name, _text(value)))
    if req.num_inference_steps is not None:
        out.append(("num_inference_steps", str(req.num_inference_steps)))
    out.extend((k, _text(v)) for k, v in sorted(req.fields.items()))
    return out


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _input_bytes(
    workload: LoadedWorkload, index: int, store: BlobStore | None
) -> list[tuple[str, str, str, bytes]]:
    req = workload.workload.request[index]
    out = []
    for j, inp in enumerate(req.inputs):
        where = f"workload {workload.path}: request[{index}].inputs[{j}]"
        if inp.path is not None:
            src = workload.path.parent / inp.path
            try:
                data = src.read_bytes()
            except OSError as exc:
                raise ConfigError(f"{where}: cannot read {src}: {exc.strerror}") from exc
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


def build_payload(workload: LoadedWorkload, index: int, store: BlobStore | None = None) -> Payload:
    """Return the exact request body of request ``index`` (multipart, or JSON for ``json``)."""
    req = workload.workload.request[index]
    if workload.workload.endpoint.kind == "json":
        body: dict[str, object] = {
            k: getattr(req, k)
            for k in (
                "prompt",
                "negative_prompt",
                "size",
                "seconds",
                "num_frames",
                "fps",
                "seed",
                "num_inference_steps",
            )
            if getattr(req, k) is not None
        }
        body.update(req.fields)
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return Payload(
            data,
            "application/json",
            Descriptor(**hash_bytes(data)._asdict(), media_type="application/json"),
        )
    fields = _form_fields(req)
    files = _input_bytes(workload, index, store)
    seed = hash_bytes(
        json.dumps([fields, [(f, n, t, hash_bytes(d).digest) for f, n, t, d in files]]).encode()
    )
    boundary = "evstore-" + seed.digest.split(":")[1][:32]
    parts: list[bytes] = []
    for name, value in fields:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
        )
    for field, filename, media_type, content in files:
        parts.append(
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(field)}"; '
                f'filename="{_quote(filename)}"\r\nContent-Type: {media_type}\r\n\r\n'
            ).encode()
            + content
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    data = b"".join(parts)
    ctype = f"multipart/form-data; boundary={boundary}"
    return Payload(
        data, ctype, Descriptor(**hash_bytes(data)._asdict(), media_type="multipart/form-data")
    )


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "%0D").replace("\n", "%0A")


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
