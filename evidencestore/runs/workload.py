"""Workloads: strict loading, input files, expectations from the request.

The exact bytes of each request are built by its endpoint (``endpoints/``) as a pure
function of the workload, so a rerun sends byte-identical requests with the same
payload digests.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from .._canonical import loads_toml
from ..confined import MAX_CONTROL_FILE, MAX_INPUT_FILE, read_file
from ..digest import hash_bytes
from ..errors import ConfigError, EvidenceStoreError, WorkloadError
from ..models import Descriptor
from ..paths import path_problem
from .models import MAX_OUTPUT_SIZE, Message, OutputSize, RequestSpec, TokenizerRef, Workload
from .tokenizer import TokenCounter, load_tokenizer

if TYPE_CHECKING:
    from ..media.records import Expectations
    from ..storage import BlobStore

__all__ = [
    "LoadedWorkload",
    "expectations_for",
    "input_files",
    "load_workload",
    "max_output_size",
    "parse_workload",
    "pinned_tokenizer",
    "prompt_requests",
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
    tokenizer: TokenCounter | None = None


def load_workload(
    path: str | os.PathLike[str],
    *,
    roots: Sequence[str | os.PathLike[str]] = (),
    store: BlobStore | None = None,
) -> LoadedWorkload:
    """Read and strictly validate ``workload.toml``; errors name the file and the field.

    The file and the input files it names are read by the one file-reading rule
    (``confined.py``): inside the workload's directory or one of ``roots`` (the
    repository), regular files, bounded. Every value is checked here (finite, in
    range), so nothing in a workload can fail a run after its first request is sent.
    ``[prompts]`` are expanded into requests here (a JSONL file by digest needs
    ``store``).
    """
    p = Path(path)
    allowed = (Path(os.path.dirname(os.path.abspath(p))), *(Path(r) for r in roots))
    data = read_file(p, allowed, limit=MAX_CONTROL_FILE, where=f"workload {p}")
    workload = parse_workload(data, p)
    if workload.prompts is not None:
        workload = msgspec.structs.replace(
            workload,
            request=workload.request + prompt_requests(workload, p, allowed, store),
        )
    return LoadedWorkload(
        p,
        data,
        Descriptor(**hash_bytes(data)._asdict(), media_type="application/toml"),
        workload,
        allowed,
        _tokenizer(workload, p, allowed, store),
    )


def _tokenizer(
    workload: Workload, p: Path, allowed: tuple[Path, ...], store: BlobStore | None
) -> TokenCounter | None:
    """The workload's pinned tokenizer, loaded (checked against its digest)."""
    ref = workload.endpoint.tokenizer
    if ref is None:
        return None
    where = f"workload {p}: endpoint.tokenizer"
    if ref.path is not None:
        data = read_file(p.parent / ref.path, allowed, where=f"{where}.path {ref.path}")
    elif store is None:
        raise WorkloadError(f"{where}: no path, and no store to read {ref.digest} from")
    else:
        try:
            data = store.get(ref.digest)
        except EvidenceStoreError as exc:
            raise WorkloadError(f"{where}: {ref.digest}: {exc}") from None
    return load_tokenizer(data, ref.digest, where)


class _LimitRun(msgspec.Struct, frozen=True):
    max_output_size: OutputSize = MAX_OUTPUT_SIZE


class _Limit(msgspec.Struct, frozen=True):
    """Only a workload's output size limit: its other fields are not read."""

    run: _LimitRun | None = None


_T = TypeVar("_T")


def _part(data: bytes, where: str, part: type[_T]) -> _T | None:
    """The fields of ``part`` read from the workload bytes ``data`` (the others are not
    read); None when they are not a TOML workload (a harness's own settings). A field
    out of range is a :class:`WorkloadError` naming ``where``."""
    try:
        raw = loads_toml(data, where)
    except ConfigError:
        return None
    try:
        return msgspec.convert(raw, part)
    except msgspec.ValidationError as exc:
        raise WorkloadError(f"{where}: {exc}") from None


def max_output_size(data: bytes, where: str) -> int:
    """The ``[run] max_output_size`` the workload bytes ``data`` set, by the same field
    and default as a loaded workload's (``RunSection``); the default when they are not a
    TOML workload (a harness's own settings). A value out of range is a
    :class:`WorkloadError` naming ``where``."""
    limit = _part(data, where, _Limit)
    run = limit.run if limit is not None else None
    return run.max_output_size if run is not None else MAX_OUTPUT_SIZE


class _PinEndpoint(msgspec.Struct, frozen=True):
    tokenizer: TokenizerRef | None = None


class _Pin(msgspec.Struct, frozen=True):
    """Only a workload's tokenizer pin: its other fields are not read."""

    endpoint: _PinEndpoint | None = None


def pinned_tokenizer(data: bytes, store: BlobStore, where: str) -> TokenCounter | None:
    """The tokenizer the workload bytes ``data`` pin (``[endpoint.tokenizer]``), read by
    its digest from ``store`` (there is no workload file its ``path`` is relative to);
    None when they pin none or are not a TOML workload (a harness's own settings). A pin
    the store does not hold is a :class:`WorkloadError` naming ``where``."""
    pin = _part(data, where, _Pin)
    ref = pin.endpoint.tokenizer if pin is not None and pin.endpoint is not None else None
    if ref is None:
        return None
    if not store.has(ref.digest):
        raise WorkloadError(
            f"{where}: endpoint.tokenizer: {ref.digest} is not in the store: put it there, "
            "or give the loaded tokenizer as {tokenizer}",
            parameters=("tokenizer",),
        )
    return load_tokenizer(store.get(ref.digest), ref.digest, f"{where}: endpoint.tokenizer")


def parse_workload(data: bytes, path: str | os.PathLike[str]) -> Workload:
    """Decode and strictly validate the bytes of ``workload.toml`` (from ``path``, which
    errors name with the field)."""
    p = path
    try:
        raw = loads_toml(data, f"workload {p}")
    except ConfigError as exc:
        raise WorkloadError(str(exc)) from exc.__cause__
    try:
        workload = msgspec.convert(raw, Workload)
    except msgspec.ValidationError as exc:
        raise WorkloadError(f"workload {p}: {exc}") from exc
    endpoint = workload.endpoint
    if not workload.request and workload.prompts is None:
        raise WorkloadError(
            f"workload {p}: missing required field `request`: give at least one "
            "[[request]] (or, for chat and completions, [prompts])"
        )
    if workload.prompts is not None:
        ps = workload.prompts
        if endpoint.kind not in ("chat", "completions"):
            raise WorkloadError(f"workload {p}: [prompts] is for chat and completions endpoints")
        if ps.path is not None and ps.digest is not None:
            raise WorkloadError(f"workload {p}: [prompts]: give `path` or `digest`, not both")
        if ps.path is None and ps.digest is None and (ps.count is None or ps.input_tokens is None):
            raise WorkloadError(
                f"workload {p}: [prompts]: give a JSONL `path` or `digest`, or `count` "
                "synthetic prompts of `input_tokens` words"
            )
        for low, high in (("input_tokens", "input_tokens_max"), ("max_tokens", "max_tokens_max")):
            lo, hi = getattr(ps, low), getattr(ps, high)
            if hi is not None and (lo is None or hi < lo):
                raise WorkloadError(f"workload {p}: [prompts]: `{high}` needs `{low}` <= it")
    for field in ("health_path", "models_path"):
        entry = "server/" + (getattr(endpoint, field).strip("/") or "index")
        problem = path_problem(entry)
        if problem is not None:
            raise WorkloadError(
                f"workload {p}: endpoint.{field} = {getattr(endpoint, field)!r}: "
                f"its answer would be kept as {entry!r}: {problem.reason}"
            )
    for i, req in enumerate(workload.request):
        where = f"workload {p}: request[{i}]"
        for key, value in sorted(req.fields.items()):
            if isinstance(value, float) and not math.isfinite(value):
                raise WorkloadError(f"{where}.fields.{key} = {value}: expected a finite number")
        kind = workload.endpoint.kind
        video = kind in ("videos-sync", "videos-job")
        if video and req.size is None:
            raise WorkloadError(f"{where}: `size` (WxH) is required for {kind}")
        if req.seconds is None and req.num_frames is None and video:
            raise WorkloadError(f"{where}: give `seconds` or `num_frames` (with `fps`)")
        if kind == "chat" and (req.prompt is None) == (req.messages is None):
            raise WorkloadError(f"{where}: give exactly one of `prompt` or `messages` for chat")
        if kind == "completions" and (req.prompt is None or req.messages is not None):
            raise WorkloadError(f"{where}: completions needs `prompt` (and no `messages`)")
        if kind in ("chat", "completions") and req.inputs:
            raise WorkloadError(f"{where}: input files are not sent by {kind}")
        if req.num_frames is not None and req.fps is None:
            raise WorkloadError(f"{where}: `num_frames` needs `fps`")
        if req.seconds is not None and req.num_frames is not None and req.fps is not None:
            implied = round(Fraction(str(req.seconds)) * req.fps)
            if implied != req.num_frames:
                raise WorkloadError(
                    f"{where}: seconds = {req.seconds} at fps = {req.fps} is {implied} frames, "
                    f"but num_frames = {req.num_frames}; give one or make them agree"
                )
        for j, inp in enumerate(req.inputs):
            if (inp.path is None) == (inp.digest is None):
                raise WorkloadError(f"{where}.inputs[{j}]: give exactly one of `path` or `digest`")
    return workload


class _PromptLine(msgspec.Struct, forbid_unknown_fields=False):
    prompt: str | None = None
    messages: list[Message] | None = None
    max_tokens: int | None = None


def _sample(rng: random.Random, low: int | None, high: int | None) -> int | None:
    if low is None:
        return None
    return low if high is None else rng.randint(low, high)


def prompt_requests(
    workload: Workload,
    path: str | os.PathLike[str],
    roots: Sequence[Path],
    store: BlobStore | None,
) -> tuple[RequestSpec, ...]:
    """The requests ``[prompts]`` gives (see :class:`~.models.PromptSet`), in order."""
    ps = workload.prompts
    assert ps is not None
    where = f"workload {path}: [prompts]"
    rng = random.Random(ps.seed)
    lines: list[_PromptLine] = []
    if ps.path is not None or ps.digest is not None:
        if ps.path is not None:
            src = Path(path).parent / ps.path
            data = read_file(src, roots, limit=MAX_INPUT_FILE, where=f"{where} path = {src}")
        else:
            assert ps.digest is not None
            if store is None:
                from ..config import local_store

                store = local_store(roots[-1])
            from ..errors import EvidenceStoreError

            try:
                data = store.get(ps.digest)
            except EvidenceStoreError as exc:
                raise WorkloadError(f"{where} digest: {exc}") from exc
        for n, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = msgspec.json.decode(raw, type=_PromptLine)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise WorkloadError(f"{where}: line {n}: {exc}") from None
            if (line.prompt is None) == (line.messages is None):
                raise WorkloadError(
                    f"{where}: line {n}: give exactly one of `prompt` or `messages`"
                )
            if workload.endpoint.kind == "completions" and line.prompt is None:
                raise WorkloadError(f"{where}: line {n}: completions needs `prompt`")
            lines.append(line)
            if ps.count is not None and len(lines) == ps.count:
                break
        if not lines:
            raise WorkloadError(f"{where}: the file holds no prompt")
    else:
        for _ in range(ps.count or 0):
            words = _sample(rng, ps.input_tokens, ps.input_tokens_max) or 1
            lines.append(
                _PromptLine(prompt=" ".join(f"w{rng.randrange(32000)}" for _ in range(words)))
            )
    out = []
    for line in lines:
        out.append(
            RequestSpec(
                prompt=line.prompt,
                messages=tuple(line.messages) if line.messages is not None else None,
                max_tokens=line.max_tokens or _sample(rng, ps.max_tokens, ps.max_tokens_max),
                seed=ps.request_seed,
                temperature=ps.temperature,
                logprobs=ps.logprobs,
                ignore_eos=ps.ignore_eos,
            )
        )
    return tuple(out)


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
                raise WorkloadError(f"{where}: input {inp.digest} needs a store")
            from ..errors import EvidenceStoreError

            try:
                data = store.get(inp.digest)
            except EvidenceStoreError as exc:
                raise WorkloadError(f"{where}: {exc}") from exc
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
