"""What a server sends is untrusted data: the guards every answer passes before any of
it becomes part of a record or a registration.

- JSON is decoded into small typed structs with bounded nesting (a nesting bomb is an
  ``invalid-response``, never a ``RecursionError``): :func:`parse_json`;
- a header value that becomes a field of a registration (the ``Content-Type`` that
  becomes a descriptor's ``media_type``) is validated first and replaced by a safe
  default when it is not a media type (:func:`media_type_of`); the header itself is
  kept verbatim in the request record, whose schema allows any string
  (:func:`selected`, :func:`text_of`);
- a job id is used in a URL only when it is a plain token (:func:`plain_token`).

An answer that is not what the exchange requires raises
:class:`~evidencestore.errors.BadAnswer`, which the transport turns into the request's
failure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from ..errors import BadAnswer
from ..paths import shown

__all__ = [
    "is_json",
    "media_type_of",
    "model_ids",
    "parse_json",
    "plain_token",
    "quote_body",
    "selected",
    "text_of",
    "valid_media_type",
]

_KEPT_HEADERS = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "server",
    "date",
    "x-request-id",
    "openai-processing-ms",
)
# RFC 6838 restricted names, and what the registration's MediaType pattern accepts.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,126}/[A-Za-z0-9_.+-]{1,127}")
_TOKEN = re.compile(r"[A-Za-z0-9_~:-][A-Za-z0-9._~:-]{0,255}")

T = TypeVar("T")


def valid_media_type(value: str) -> bool:
    """Whether ``value`` is a media type a descriptor may hold (``type/subtype``)."""
    return _MEDIA_TYPE.fullmatch(value) is not None


def media_type_of(headers: Mapping[str, str], default: str) -> str:
    """The media type a ``Content-Type`` header names, if it is a valid one (parameters
    dropped); ``default`` otherwise. Never lets a header make a registration invalid."""
    value = headers.get("content-type")
    if value is None:
        return default
    kind = value.split(";")[0].strip()
    return kind if valid_media_type(kind) else default


def is_json(media_type: str) -> bool:
    """Whether a media type says its body is JSON (``application/json``, ``*+json``)."""
    kind = media_type.lower()
    return kind == "application/json" or kind.endswith("+json")


def plain_token(value: str) -> bool:
    """Whether ``value`` may be used as one segment of a URL path (a job id)."""
    return _TOKEN.fullmatch(value) is not None


def selected(headers: Mapping[str, str]) -> dict[str, str]:
    """The response headers kept in a record (verbatim: the schema allows any string;
    bytes that are not UTF-8 are shown escaped, so the record can always be encoded)."""
    return {k: text_of(headers[k]) for k in _KEPT_HEADERS if k in headers}


def text_of(value: str, limit: int = 8192) -> str:
    """A string from the network as a record may hold it: encodable (bytes that are not
    UTF-8 and lone surrogates escaped) and at most ``limit`` characters."""
    if len(value) <= limit and value.isascii():  # the usual header: nothing to escape
        return value
    value = shown(value)
    return value if len(value) <= limit else value[:limit] + "…"


def quote_body(data: bytes) -> str:
    """The start of an error answer's body, for a failure message."""
    text = data[:300].decode("utf-8", "replace").strip()
    return f": {text}" if text else ""


def parse_json(data: bytes, type_: type[T], what: str) -> T:
    """Decode server JSON into ``type_``; :class:`BadAnswer` (``invalid-response``) for
    malformed, mis-shaped or too deeply nested JSON."""
    try:
        return msgspec.json.decode(data, type=type_)
    except RecursionError:
        problem = "nested too deeply"
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        problem = str(exc)
    raise BadAnswer("invalid-response", f"{what} is not the JSON expected: {problem}")


class _Listing(msgspec.Struct, forbid_unknown_fields=False):
    data: list[Any] = msgspec.field(default_factory=list)


def model_ids(data: bytes) -> tuple[str, ...]:
    """The model ids of a ``/v1/models`` answer (none when it is not such a listing)."""
    try:
        listing = parse_json(data, _Listing, "the model listing")
    except BadAnswer:
        return ()
    return tuple(
        text_of(str(m["id"]), 256)
        for m in listing.data[:1000]
        if isinstance(m, dict) and isinstance(m.get("id"), str | int)
    )
