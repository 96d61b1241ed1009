"""The one deterministic encoder, and cached strict decoders.

Canonical bytes are UTF-8 JSON with object keys sorted, no insignificant whitespace,
fields at their default value omitted, and no floats in hashed structures (see
``schemas/CANONICAL.md``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder(order="sorted")
_pretty_encoder = msgspec.json.Encoder(order="deterministic")


def canonical(obj: Any) -> bytes:
    """Return the canonical JSON bytes of ``obj``."""
    return _encoder.encode(obj)


def canonical_lines(items: Any) -> bytes:
    """Return the canonical bytes of each item of an iterable, newline-terminated."""
    return _encoder.encode_lines(items)


def pretty(obj: Any) -> bytes:
    """Return indented JSON for files people read (key order as declared)."""
    return msgspec.json.format(_pretty_encoder.encode(obj), indent=2) + b"\n"


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def decoder(type_: type[T]) -> msgspec.json.Decoder[T]:
    """Return a cached strict JSON decoder for ``type_``."""
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    return dec


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode ``data`` strictly as ``type_`` (raises ``msgspec.DecodeError``)."""
    return decoder(type_).decode(data)
