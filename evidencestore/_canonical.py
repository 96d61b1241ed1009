"""The one deterministic encoder, and cached strict decoders.

Canonical bytes are UTF-8 JSON with object keys sorted, no insignificant whitespace,
fields at their default value omitted, and no floats in hashed structures (see
``schemas/CANONICAL.md``).

Canonical bytes are a function of values. msgspec's ``omit_defaults`` drops a field
only when it holds the very object that is its default (or an empty list, dict or
set where the default is one): a ``media_type`` equal to the default but built at run
time, decoded from a file, unpickled or converted was written, so two equal values
could hash differently. Every struct whose default msgspec cannot recognise by
identity declares :func:`canonical_defaults` as its ``__post_init__`` (msgspec calls it
after the constructor, decoding, ``convert``, ``structs.replace`` and unpickling): a
field equal to its default is set to the default object itself, so it is omitted by
value. ``tests/test_canonical.py`` fails for any struct of the package that needs the
hook and lacks it.

Documents written before that (by 0c7be23 and earlier) can hold a default written
explicitly, and their digests were computed over it. Hashes are therefore defined on
the document as it stands (the spec's rule); :func:`decode_exact` tells a caller
whether a document is exactly its decoded value's encoding, in which case hashing the
value gives the same bytes, and otherwise the caller hashes the document's own JSON
value (``merkle.stored_*``).

Strict decoding also refuses what msgspec would silently accept: an object with a
duplicated key (msgspec keeps the last value; another reader may keep the first and
see a different manifest) and nesting deeper than the interpreter's recursion limit
(a ``RecursionError`` becomes a ``msgspec.DecodeError``). The duplicate check is
always made, at C speed for the files this package writes: after the typed decode,
the input with its whitespace removed (``msgspec.json.format``) is compared with the
re-encoding of the decoded value, in declared and in sorted key order. Equal bytes
cannot hold a duplicated key, since an encoder never writes one. Any other input (hand
edited, other key order, explicit defaults) is re-parsed by the stdlib scanner with a
pairs hook that refuses duplicates; that is slower (about 2.5x the decode) and exact.
The error names the JSON path of the object holding the duplicate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec

__all__ = [
    "MAX_DEPTH",
    "canonical",
    "canonical_defaults",
    "canonical_lines",
    "decode",
    "decode_exact",
    "decoder",
    "identity_defaults",
    "loads_json",
    "nesting_depth",
    "pretty",
]

T = TypeVar("T")

#: Deepest nesting accepted in configuration-like documents (expectations,
#: ``evstore.toml``, thresholds): far above any real file, far below the recursion limit.
MAX_DEPTH = 64

_encoder = msgspec.json.Encoder(order="sorted")
_pretty_encoder = msgspec.json.Encoder(order="deterministic")


_Factory: type = msgspec._core.Factory
_SAFE_BY_IDENTITY = (None, True, False, (), msgspec.UNSET, msgspec.NODEFAULT)
_plans: dict[type, tuple[tuple[str, Any], ...]] = {}


def identity_defaults(cls: type[msgspec.Struct]) -> tuple[tuple[str, Any], ...]:
    """The fields of ``cls`` whose default msgspec's ``omit_defaults`` would miss for an
    equal value that is another object, with those defaults; empty when the struct
    does not omit defaults (every field is written, whatever object holds it).

    Safe by identity: None, True, False, the empty tuple (CPython's singleton, the only
    empty tuple), UNSET, small integers (CPython caches -5 to 256, and so does every
    decoder) and the empty list, dict and set (msgspec compares those by type and
    length). Anything else (strings, floats, other integers, structs, tuples) is not.
    """
    plan = _plans.get(cls)
    if plan is None:
        if not cls.__struct_config__.omit_defaults:
            plan = ()
        else:
            fields = cls.__struct_fields__
            defaults = cls.__struct_defaults__
            named = zip(fields[len(fields) - len(defaults) :], defaults, strict=True)
            plan = tuple((name, d) for name, d in named if not _safe_by_identity(d))
        _plans[cls] = plan
    return plan


def _safe_by_identity(default: Any) -> bool:
    if any(default is safe for safe in _SAFE_BY_IDENTITY):
        return True
    if type(default) is int:
        return -5 <= default <= 256
    # msgspec keeps a mutable default ([], {}, set()) as a factory it compares by length
    return isinstance(default, _Factory)


def canonical_defaults(self: msgspec.Struct) -> None:
    """``__post_init__`` of a struct with defaults msgspec compares by identity: set each
    field equal to its default to the default object itself, so that encoding omits it
    whatever built the value. Equal means of the same type (an int in a float field,
    which msgspec's decoders turn into a float, counts as one) and ``==``."""
    for name, default in identity_defaults(type(self)):
        value = getattr(self, name)
        if value is default:
            continue
        kind = type(value)
        if (kind is type(default) or (kind is int and type(default) is float)) and (
            value == default
        ):
            msgspec.structs.force_setattr(self, name, default)


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
    """Return a cached JSON decoder for ``type_`` (no duplicate-key check: use ``decode``)."""
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    return dec


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode ``data`` strictly as ``type_``.

    Raises ``msgspec.ValidationError`` for a value of the wrong shape and
    ``msgspec.DecodeError`` for malformed JSON, a duplicated key or too deep nesting.
    """
    try:
        value = decoder(type_).decode(data)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
    _refuse_duplicates(data, value)
    return value


def decode_exact(data: bytes | str, type_: type[T]) -> tuple[T, bool]:
    """Decode ``data`` strictly as ``type_`` (as :func:`decode`), and tell whether the
    document is exactly its value's encoding (whitespace aside, keys in declared or
    sorted order): then hashing the value hashes the document's own JSON value. False
    for anything else (a default written explicitly, other key order, escapes the
    encoder does not write, a document written before canonical bytes were a function
    of values): the caller hashes the document's JSON value itself."""
    try:
        value = decoder(type_).decode(data)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
    return value, _refuse_duplicates(data, value)


def loads_json(data: bytes | str) -> Any:
    """Decode JSON to built-in values, strictly (as ``decode`` with no type)."""
    return decode(data, Any)


def loads_toml(data: bytes, where: str) -> dict[str, Any]:
    """Decode a TOML document (workloads, protocols) to plain values, refusing nesting
    bombs; a :class:`~evidencestore.errors.ConfigError` names ``where``."""
    import tomllib

    from .errors import ConfigError

    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except RecursionError:
        raise ConfigError(f"{where}: not valid TOML: nested too deeply") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    if nesting_depth(raw) > MAX_DEPTH:
        raise ConfigError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    return raw


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Return how deeply ``value`` nests dicts and lists, counting at most ``limit + 1``.

    Iterative, so a nesting bomb cannot exhaust the stack while it is measured.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return deepest


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return obj


def _refuse_duplicates(data: bytes | str, value: Any) -> bool:
    """Raise on a duplicated key; return whether ``data`` is exactly ``value``'s
    encoding (the fast comparison held)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    compact = msgspec.json.format(raw, indent=-1)
    try:
        if compact == _pretty_encoder.encode(value) or compact == _encoder.encode(value):
            return True
    except (TypeError, ValueError, msgspec.EncodeError, RecursionError):
        pass  # not re-encodable as decoded: take the exact path
    import json  # the exact path, taken only when the fast comparison differs

    try:
        json.loads(raw, object_pairs_hook=_no_duplicates, parse_int=str, parse_float=str)
    except _Duplicate as dup:
        where = f"{_duplicate_path(raw, dup.key)}.{dup.key}"
        raise msgspec.DecodeError(f"duplicate key {dup.key!r} at {where}") from None
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
    except ValueError as exc:  # msgspec accepted it: cannot happen, but never pass it
        raise msgspec.DecodeError(f"malformed JSON: {exc}") from None
    return False


class _Pairs(list[tuple[str, Any]]):
    """An object kept as its key/value pairs, duplicates included."""


def _duplicate_path(raw: bytes, key: str) -> str:
    import json

    tree = json.loads(raw, object_pairs_hook=_Pairs, parse_int=str, parse_float=str)
    for path, node in _walk(tree):
        keys = [k for k, _ in node]
        if keys.count(key) > 1:
            return path
    return "$"  # pragma: no cover - the hook saw it


def _walk(tree: Any) -> Iterator[tuple[str, _Pairs]]:
    """Objects of ``tree`` with their JSON paths, in document order (iterative)."""
    stack: list[tuple[str, Any]] = [("$", tree)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _Pairs):
            yield path, node
            stack.extend((f"{path}.{k}", v) for k, v in reversed(node))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
