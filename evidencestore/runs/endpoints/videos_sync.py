"""``videos-sync``: a multipart POST whose response body is the video."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...digest import hash_bytes
from ...models import Descriptor
from ..transport import Payload
from ..workload import input_files
from .base import Endpoint

if TYPE_CHECKING:
    from ...storage import BlobStore
    from ..models import RequestSpec
    from ..workload import LoadedWorkload

__all__ = ["ENDPOINT", "VideosSync", "multipart_payload"]


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


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "%0D").replace("\n", "%0A")


def multipart_payload(workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
    """Request ``index`` as ``multipart/form-data``: its fields, then its input files.
    The boundary is derived from the fields' digest, never random."""
    req = workload.workload.request[index]
    fields = _form_fields(req)
    files = input_files(workload, index, store)
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
    for field_name, filename, media_type, content in files:
        parts.append(
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(field_name)}"; '
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


class VideosSync(Endpoint):
    """A multipart POST whose response body is the video."""

    kind = "videos-sync"

    def payload(self, workload: LoadedWorkload, index: int, store: BlobStore | None) -> Payload:
        return multipart_payload(workload, index, store)


ENDPOINT = VideosSync()
