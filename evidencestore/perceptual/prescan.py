"""Static pre-scan of ``torch.save`` weight files: refuse before anything is unpickled.

Security-critical. Before torch's weights-only unpickler sees the bytes, the pickle inside
is decoded with ``pickletools.genops`` (which parses opcodes and executes nothing) and run
on a tiny emulated stack machine that knows only the opcodes and globals ``torch.save``
writes for a plain state dict of tensors. What it yields is each key's dtype and shape, so
a missing, extra, mis-shaped or mistyped tensor is refused before anything is unpickled;
any other opcode or global is refused by name. Nothing here imports torch.
"""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ScorerError

__all__ = ["scan_state_dict"]

_STORAGE_DTYPES: dict[str, tuple[str, int]] = {
    "DoubleStorage": ("float64", 8),
    "FloatStorage": ("float32", 4),
    "HalfStorage": ("float16", 2),
    "BFloat16Storage": ("bfloat16", 2),
    "LongStorage": ("int64", 8),
    "IntStorage": ("int32", 4),
    "ShortStorage": ("int16", 2),
    "CharStorage": ("int8", 1),
    "ByteStorage": ("uint8", 1),
    "BoolStorage": ("bool", 1),
    "ComplexFloatStorage": ("complex64", 8),
    "ComplexDoubleStorage": ("complex128", 16),
}
_ORDERED_DICT = ("collections", "OrderedDict")
_REBUILD_TENSOR = ("torch._utils", "_rebuild_tensor_v2")
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
_LEGACY_PROTOCOL = 1001  # torch.serialization.PROTOCOL_VERSION
_ZIP_MAGIC = b"PK\x03\x04"  # what torch.load tests to pick its zip reader
_PLAIN_OPCODES = frozenset(  # ints and str, pushed as they are
    [
        "BININT",
        "BININT1",
        "BININT2",
        "LONG1",
        "LONG4",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE8",
    ]
)


class _Refused(Exception):
    """Internal: the pre-scan met something a plain state dict of tensors never holds."""


@dataclass(frozen=True)
class _Global:
    module: str
    name: str


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: str
    itemsize: int
    numel: int


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    shape: tuple[int, ...]


class _OrderedDict(dict[Any, Any]):
    """An emulated ``collections.OrderedDict`` (insertion-ordered like any dict)."""


def _kind(value: object) -> str:
    names = {_OrderedDict: "OrderedDict", _Tensor: "Tensor", _Storage: "storage"}
    if isinstance(value, _Global):
        return f"global {value.module}.{value.name}"
    return names.get(type(value), type(value).__name__)


def _allowed_global(module: object, name: object, pos: int) -> _Global:
    if not isinstance(module, str) or not isinstance(name, str):
        raise _Refused(f"a global named by non-strings at byte {pos}")
    if (module, name) in (_ORDERED_DICT, _REBUILD_TENSOR) or (
        module == "torch" and name in _STORAGE_DTYPES
    ):
        return _Global(module, name)
    raise _Refused(f"unexpected global '{module} {name}' at byte {pos}")


def _key(value: object, pos: int) -> str | int:
    """A dict key as torch writes them. Only str and int: hashing an emulated tuple
    could take exponential time (a tuple of memoised tuples of memoised tuples...)."""
    if type(value) is str or type(value) is int:
        return value
    raise _Refused(f"dict key ({_kind(value)}) at byte {pos} is not a string or int")


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(type(v) is int and v >= 0 for v in value):
        raise _Refused(f"{what} is not a tuple of non-negative ints")
    return value


def _reduce(func: object, args: object, pos: int) -> object:
    if not isinstance(func, _Global) or not isinstance(args, tuple):
        raise _Refused(f"REDUCE of {_kind(func)} with {_kind(args)} at byte {pos}")
    target = (func.module, func.name)
    if target == _ORDERED_DICT:
        if args == ():
            return _OrderedDict()
        if len(args) == 1 and isinstance(args[0], list):
            result = _OrderedDict()
            for pair in args[0]:
                if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                    raise _Refused(f"OrderedDict item {_kind(pair)} at byte {pos}")
                result[_key(pair[0], pos)] = pair[1]
            return result
    elif target == _REBUILD_TENSOR and len(args) in (6, 7):
        storage, offset, shape, stride, requires_grad, hooks = args[:6]
        if not isinstance(storage, _Storage) or type(offset) is not int or offset < 0:
            raise _Refused(f"tensor at byte {pos} is not rebuilt from a storage and offset")
        shape, stride = _ints(shape, "tensor shape"), _ints(stride, "tensor stride")
        if len(shape) != len(stride) or type(requires_grad) is not bool:
            raise _Refused(f"tensor at byte {pos} has malformed shape, stride or flags")
        if hooks is not None and hooks != _OrderedDict():
            raise _Refused(f"tensor at byte {pos} carries backward hooks")
        if len(args) == 7 and args[6] is not None and args[6] != {}:
            raise _Refused(f"tensor at byte {pos} carries metadata ({_kind(args[6])})")
        if 0 not in shape:
            last = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
            if last >= storage.numel:
                raise _Refused(
                    f"tensor at byte {pos} ({list(shape)}, stride {list(stride)}, offset "
                    f"{offset}) reaches past its storage of {storage.numel} elements"
                )
        return _Tensor(storage, shape)
    raise _Refused(f"REDUCE of {func.module}.{func.name} with {_kind(args)} at byte {pos}")


def _emulate(file: io.BytesIO, persistent: Any) -> object:
    """Run one pickle from ``file`` on the emulated machine and return its value."""
    stack: list[Any] = []
    marks: list[list[Any]] = []
    memo: dict[int, Any] = {}

    def pop_mark() -> list[Any]:
        nonlocal stack
        if not marks:
            raise _Refused("no MARK to pop")
        items, stack = stack, marks.pop()
        return items

    def top(n: int = 1) -> list[Any]:
        if len(stack) < n:
            raise _Refused("stack underflow")
        return stack[-n:]

    try:
        for opcode, raw_arg, raw_pos in pickletools.genops(file):
            name, arg, pos = opcode.name, cast(Any, raw_arg), raw_pos or 0
            if name == "PROTO":
                if not 2 <= arg <= 5:
                    raise _Refused(f"pickle protocol {arg}")
            elif name == "FRAME":
                pass
            elif name == "STOP":
                if marks or len(stack) != 1:
                    raise _Refused(f"unbalanced pickle at byte {pos}")
                return stack[0]
            elif name == "MARK":
                marks.append(stack)
                stack = []
            elif name in _PLAIN_OPCODES:
                stack.append(arg)
            elif name in ("SHORT_BINSTRING", "BINSTRING"):
                # Python 2 strings: torch.load decodes them as UTF-8.
                stack.append(arg.encode("latin-1").decode("utf-8"))
            elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
                stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "TUPLE":
                values = tuple(pop_mark())  # before reading ``stack``: pop_mark rebinds it
                stack.append(values)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                values = tuple(top(n))
                del stack[-n:]
                stack.append(values)
            elif name in ("GLOBAL", "STACK_GLOBAL"):
                if name == "GLOBAL":
                    module, _, attr = str(arg).partition(" ")
                    stack.append(_allowed_global(module, attr, pos))
                else:
                    module, attr = top(2)
                    del stack[-2:]
                    stack.append(_allowed_global(module, attr, pos))
            elif name in ("BINPUT", "LONG_BINPUT"):
                memo[arg] = top()[0]
            elif name == "MEMOIZE":
                memo[len(memo)] = top()[0]
            elif name in ("BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise _Refused(f"memo {arg} read before it is written at byte {pos}")
                stack.append(memo[arg])
            elif name == "BINPERSID":
                stack[-1] = persistent(top()[0], pos)
            elif name == "REDUCE":
                func, args = top(2)
                del stack[-2:]
                stack.append(_reduce(func, args, pos))
            elif name in ("APPEND", "APPENDS"):
                if name == "APPEND":
                    items = top()
                    del stack[-1]
                else:
                    items = pop_mark()
                target = top()[0]
                if not isinstance(target, list):
                    raise _Refused(f"{name} to {_kind(target)} at byte {pos}")
                target.extend(items)
            elif name in ("SETITEM", "SETITEMS"):
                if name == "SETITEM":
                    items = top(2)
                    del stack[-2:]
                else:
                    items = pop_mark()
                target = top()[0]
                if not isinstance(target, dict) or len(items) % 2:
                    raise _Refused(f"{name} on {_kind(target)} at byte {pos}")
                for i in range(0, len(items), 2):
                    target[_key(items[i], pos)] = items[i + 1]
            elif name == "BUILD":
                inst, state = top(2)
                del stack[-1]
                # torch.save keeps a state dict's ``_metadata`` (module versions) this way.
                if not isinstance(inst, _OrderedDict) or not (
                    isinstance(state, dict) and set(state) <= {"_metadata"}
                ):
                    raise _Refused(f"BUILD of {_kind(inst)} with {_kind(state)} at byte {pos}")
            else:
                raise _Refused(f"unexpected opcode {name} at byte {pos}")
    except (ValueError, UnicodeError, EOFError) as exc:  # genops: malformed or truncated
        raise _Refused(f"malformed pickle: {exc}") from None
    except TypeError as exc:  # an unhashable dict key
        raise _Refused(f"malformed pickle: {exc}") from None
    raise _Refused("pickle ends without STOP")


def _storage_ref(pid: object, pos: int, storages: dict[str, _Storage], legacy: bool) -> _Storage:
    """Resolve a ``BINPERSID`` as torch's loaders would: ``('storage', type, key, ...)``."""
    size = 6 if legacy else 5
    if not isinstance(pid, tuple) or len(pid) != size or pid[0] != "storage":
        raise _Refused(f"persistent id ({_kind(pid)}) at byte {pos} is not a storage")
    storage_type, key, location, numel = pid[1:5]
    if not (
        isinstance(storage_type, _Global)
        and storage_type.module == "torch"
        and storage_type.name in _STORAGE_DTYPES
    ):
        raise _Refused(f"storage of {_kind(storage_type)} at byte {pos}")
    if not isinstance(key, str) or not isinstance(location, str):
        raise _Refused(f"storage key or location at byte {pos} is not a string")
    if type(numel) is not int or numel < 0:
        raise _Refused(f"storage {key!r:.100} size is a {_kind(numel)} at byte {pos}")
    if legacy and pid[5] is not None:
        raise _Refused(f"storage {key!r} at byte {pos} is a legacy storage view")
    dtype, itemsize = _STORAGE_DTYPES[storage_type.name]
    storage = _Storage(key, dtype, itemsize, numel)
    if storages.setdefault(key, storage) != storage:
        raise _Refused(f"storage {key!r} is described twice, differently")
    return storage


def _scan_zip(data: bytes) -> tuple[object, dict[str, _Storage]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise _Refused("zip archive has duplicate record names")
        prefixes = {name.split("/", 1)[0] for name in names}
        if len(prefixes) != 1 or any("/" not in name for name in names):
            raise _Refused(f"zip records are not under one directory: {sorted(prefixes)[:5]}")
        prefix = prefixes.pop()
        records = {info.filename: info for info in infos}
        pkl = records.get(f"{prefix}/data.pkl")
        if pkl is None:
            raise _Refused(f"zip archive has no {prefix}/data.pkl")
        if any(info.compress_type != zipfile.ZIP_STORED for info in infos):
            raise _Refused("zip archive has compressed records (torch.save stores them)")
        pickled = archive.read(pkl)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise _Refused(f"unreadable zip archive: {exc}") from None
    storages: dict[str, _Storage] = {}
    result = _emulate(
        io.BytesIO(pickled), lambda pid, pos: _storage_ref(pid, pos, storages, legacy=False)
    )
    for key, storage in storages.items():
        info = records.get(f"{prefix}/data/{key}")
        if info is None or info.file_size != storage.numel * storage.itemsize:
            found = "absent" if info is None else f"{info.file_size} bytes"
            raise _Refused(
                f"storage record {prefix}/data/{key} is {found}, expected "
                f"{storage.numel * storage.itemsize} bytes"
            )
    return result, storages


def _scan_legacy(data: bytes) -> tuple[object, dict[str, _Storage]]:
    if not data.startswith(b"\x80"):  # every legacy pickle starts with PROTO
        raise _Refused("not a torch file: neither a zip archive nor a legacy torch file")
    file = io.BytesIO(data)

    def plain(pid: object, pos: int) -> object:
        raise _Refused(f"persistent id at byte {pos} outside the state dict pickle")

    if _emulate(file, plain) != _LEGACY_MAGIC:
        raise _Refused("not a torch file: no zip header and no legacy magic number")
    if _emulate(file, plain) != _LEGACY_PROTOCOL:
        raise _Refused("unknown legacy torch protocol version")
    if not isinstance(_emulate(file, plain), dict):  # sys_info: byte order, type sizes
        raise _Refused("legacy torch file without its system information")
    storages: dict[str, _Storage] = {}
    result = _emulate(file, lambda pid, pos: _storage_ref(pid, pos, storages, legacy=True))
    keys = _emulate(file, plain)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)) or sorted(
        keys
    ) != sorted(storages):
        raise _Refused("legacy storage key list does not match the storages used")
    offset = file.tell()
    for key in keys:
        storage = storages[key]
        header = data[offset : offset + 8]
        if len(header) != 8 or struct.unpack("<q", header)[0] != storage.numel:
            raise _Refused(f"legacy storage {key!r} does not hold {storage.numel} elements")
        offset += 8 + storage.numel * storage.itemsize
    if offset != len(data):
        raise _Refused(f"legacy torch file is {len(data)} bytes, its storages end at {offset}")
    return result, storages


def scan_state_dict(data: bytes, where: str = "weights") -> dict[str, tuple[str, tuple[int, ...]]]:
    """Read a ``torch.save`` state dict's keys, dtypes and shapes without unpickling it.

    Handles torch's zip format (one ``<dir>/data.pkl`` record) and its legacy format
    (consecutive pickles, as lpips's ``weights/v0.1/alex.pth``). The pickle is decoded
    with :func:`pickletools.genops` and emulated for the opcodes and globals that
    ``torch.save`` writes for a dict of tensors (``collections.OrderedDict``,
    ``torch._utils._rebuild_tensor_v2``, ``torch.<Type>Storage``); nothing is imported,
    called or executed. Returns ``{key: (dtype name, shape)}`` in the file's order, e.g.
    ``("float32", (64, 3, 11, 11))``. Raises :class:`ScorerError` naming ``where`` and
    the unexpected opcode, global or structure.
    """
    try:
        if data.startswith(_ZIP_MAGIC):
            result, _ = _scan_zip(data)
        else:
            result, _ = _scan_legacy(data)
        if not isinstance(result, dict):
            raise _Refused(f"expected a state dict, found {_kind(result)}")
        entries: dict[str, tuple[str, tuple[int, ...]]] = {}
        for key, value in result.items():
            if not isinstance(key, str):
                raise _Refused(f"state dict key ({_kind(key)}) is not a string")
            if not isinstance(value, _Tensor):
                raise _Refused(f"{key} is a {_kind(value)}, expected a tensor")
            entries[key] = (value.storage.dtype, value.shape)
    except _Refused as exc:
        raise ScorerError(
            f"{where}: refused before unpickling: {exc} (nothing was unpickled or executed)"
        ) from None
    return entries
