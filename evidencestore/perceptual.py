"""Authenticated LPIPS scoring: weights by digest from the store, no download fallback.

lpips 0.1.4 builds its AlexNet trunk through torchvision, which downloads
``alexnet-owt-7be5be79.pth`` at run time (and loads any cached file of that name without
re-checking it); its linear layers come from ``weights/v0.1/alex.pth`` inside the
package. Here both files are resolved by BLAKE3 digest through the repository's store,
their size and digest are re-checked against the pinned descriptors, then their pickles
are statically scanned (decoded opcode by opcode, nothing executed) so that a wrong key
set, dtype or shape, or anything but a plain state dict of tensors, is refused before any
unpickling; only then are they deserialised, from memory, by torch's weights-only
unpickler (still the guard against code execution) and checked again. The lpips module is
built with ``pretrained=False, pnet_rand=True`` so nothing is fetched or read from disk,
and the verified tensors are loaded into it with exact key and shape checks.

Scorer-state digest
-------------------
After loading, the scorer's complete state is hashed so that a comparison record can
name exactly the scorer that produced it. The digest is ``blake3:<64 hex>`` of::

    b"evidencestore/lpips-state/v1\\x00"
    u64be(number of entries)
    for each (name, tensor) of module.state_dict(), in its order:
        u64be(len(header)) header
        tensor bytes
    where header = canonical JSON (UTF-8, keys sorted, no whitespace) of
        {"dtype": "<torch dtype without 'torch.'>", "name": "<state key>",
         "nbytes": <byte count>, "shape": [<dims>]}
    and tensor bytes = the tensor on CPU, C-contiguous, elements little-endian.

``module.state_dict()`` of ``lpips.LPIPS(net="alex")`` has 22 entries: the scaling
layer's ``shift`` and ``scale`` buffers, ``net.slice1.0`` … ``net.slice5.10`` weights and
biases, ``lin0`` … ``lin4`` weights and their ``lins.0`` … ``lins.4`` aliases (the same
tensors, listed twice by torch). The digest is computed on CPU before the module is moved
to its device, so it does not depend on the device.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import math
import os
import pickletools
import re
import struct
import sys
import warnings
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ._canonical import canonical
from .digest import hash_bytes, new_hasher
from .errors import BlobNotFoundError, EvidenceStoreError, ScorerError
from .models import Descriptor

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .storage import BlobStore

__all__ = [
    "BACKBONE_SHAPES",
    "CPU_BATCH_SIZE",
    "CUDA_BATCH_SIZE",
    "LINEAR_SHAPES",
    "MIN_TORCH",
    "SHA256_ANNOTATION",
    "TITLE_ANNOTATION",
    "TORCHVISION_BACKBONE_NAME",
    "LpipsScorer",
    "check_backbone_file",
    "compute_state_digest",
    "default_backbone_path",
    "default_linear_path",
    "load_configured_scorer",
    "load_scorer",
    "scan_state_dict",
    "sha256_file",
    "torchvision_hash_prefix",
]

MIN_TORCH = (2, 10)
"""Oldest torch accepted: earlier weights-only unpicklers had security advisories."""

TORCHVISION_BACKBONE_NAME = "alexnet-owt-7be5be79.pth"
"""The file name torchvision downloads for ``AlexNet_Weights.IMAGENET1K_V1``."""

TITLE_ANNOTATION = "org.opencontainers.image.title"
"""Descriptor annotation holding the imported file's name."""

SHA256_ANNOTATION = "evidencestore.sha256"
"""Descriptor annotation holding the imported file's SHA-256 (hex)."""

CPU_BATCH_SIZE = 1
"""Default frames per batch on CPU, measured by ``benches/bench_lpips.py`` at 1280x720 on
2 cores: batches of 2 ran at 0.87-1.22x the per-frame rate of single frames across runs
(no faster on the median), 4 and 8 at 0.73-0.90x; at this size one frame already keeps
the cores busy, so larger CPU batches only add memory traffic."""

CUDA_BATCH_SIZE = 8
"""Default frames per batch on CUDA (not measured here; batching amortises kernel launches)."""

_STATE_DOMAIN = b"evidencestore/lpips-state/v1\x00"
_HASH_NAME_RE = re.compile(r"-([0-9a-f]{8,64})\.pth$")

_TRUNK = {  # torchvision features index -> lpips slice
    0: 1,
    3: 2,
    6: 3,
    8: 4,
    10: 5,
}
_CONV: dict[int, tuple[int, ...]] = {
    0: (64, 3, 11, 11),
    3: (192, 64, 5, 5),
    6: (384, 192, 3, 3),
    8: (256, 384, 3, 3),
    10: (256, 256, 3, 3),
}

_LINEAR_LAYERS: dict[int, tuple[int, ...]] = {1: (4096, 9216), 4: (4096, 4096), 6: (1000, 4096)}


def _backbone_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for group, layers in (("features", _CONV), ("classifier", _LINEAR_LAYERS)):
        for index, shape in layers.items():
            shapes[f"{group}.{index}.weight"] = shape
            shapes[f"{group}.{index}.bias"] = (shape[0],)
    return shapes


BACKBONE_SHAPES: dict[str, tuple[int, ...]] = _backbone_shapes()
"""Every key of torchvision's AlexNet state dict, in its order, with its shape (float32)."""

_CHANNELS = (64, 192, 384, 256, 256)
LINEAR_SHAPES: dict[str, tuple[int, ...]] = {
    f"lin{k}.model.1.weight": (1, c, 1, 1) for k, c in enumerate(_CHANNELS)
}
"""Every key of lpips's ``weights/v0.1/alex.pth``, with its shape (all float32)."""

# What ``LPIPS.load_state_dict(linear, strict=False)`` must report missing: the
# scaling buffers (constants of lpips's code), the trunk (loaded strictly before) and
# the ``lins.k`` aliases of ``link``.
_EXPECTED_MISSING = frozenset(
    ["scaling_layer.shift", "scaling_layer.scale"]
    + [f"net.slice{s}.{i}.{p}" for i, s in _TRUNK.items() for p in ("weight", "bias")]
    + [f"lins.{k}.model.1.weight" for k in range(len(_CHANNELS))]
)


# -- files -------------------------------------------------------------------------


def torchvision_hash_prefix(name: str) -> str | None:
    """Return the SHA-256 prefix in a torchvision-style file name (``<stem>-<hex>.pth``)."""
    match = _HASH_NAME_RE.search(name)
    return match.group(1) if match else None


def sha256_file(path: Path) -> str:
    """Return the hex SHA-256 of a file (as torchvision checks its downloads)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


def check_backbone_file(path: str | os.PathLike[str]) -> str:
    """Check a backbone file's SHA-256 against the prefix in its torchvision name.

    Returns the full SHA-256 hex. Raises :class:`ScorerError` when the name carries no
    ``-<8+ hex>.pth`` suffix or the content does not hash to it, as torchvision checks
    on download (and does not re-check for a file already in its cache).
    """
    p = Path(path)
    prefix = torchvision_hash_prefix(p.name)
    if prefix is None:
        raise ScorerError(
            f"{p}: not a torchvision weight file name: expected '<name>-<sha256 prefix>.pth' "
            f"(the AlexNet backbone is {TORCHVISION_BACKBONE_NAME})"
        )
    try:
        sha = sha256_file(p)
    except OSError as exc:
        raise ScorerError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    if not sha.startswith(prefix):
        raise ScorerError(
            f"{p}: SHA-256 is {sha}, which does not start with {prefix} as its file name "
            "says; refusing it (torchvision would refuse it on download)"
        )
    return sha


def default_linear_path() -> Path:
    """Return ``weights/v0.1/alex.pth`` of the installed lpips package, without importing it."""
    try:
        spec = importlib.util.find_spec("lpips")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ScorerError(
            "the lpips package is not installed, so its linear weights cannot be located: "
            "install evidencestore[lpips] or pass --linear PATH"
        )
    for location in locations:
        candidate = Path(location) / "weights" / "v0.1" / "alex.pth"
        if candidate.is_file():
            return candidate
    raise ScorerError(
        f"the lpips package at {locations[0]} has no weights/v0.1/alex.pth: pass --linear PATH"
    )


def default_backbone_path() -> Path:
    """Return where torch hub caches the AlexNet backbone (it may not exist).

    ``$TORCH_HOME/hub/checkpoints/alexnet-owt-7be5be79.pth``, ``$TORCH_HOME`` defaulting
    to ``$XDG_CACHE_HOME/torch`` (``~/.cache/torch``), computed without importing torch.
    """
    home = os.environ.get("TORCH_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(cache, "torch")
    return Path(os.path.expanduser(home)) / "hub" / "checkpoints" / TORCHVISION_BACKBONE_NAME


def _import_hint() -> str:
    return (
        "import the weights with `evstore lpips import --backbone "
        f".../{TORCHVISION_BACKBONE_NAME}` (torchvision's AlexNet file, e.g. "
        f"{default_backbone_path()}; --linear defaults to lpips's weights/v0.1/alex.pth)"
    )


# -- torch ---------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ScorerError(
            "LPIPS needs torch, torchvision and lpips: install evidencestore[lpips]"
        ) from exc
    version = str(torch.__version__)
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < MIN_TORCH:
        raise ScorerError(
            f"torch {version} is too old: LPIPS weights are only deserialised with torch >= "
            f"{MIN_TORCH[0]}.{MIN_TORCH[1]} (earlier weights-only unpicklers had "
            "code-execution and memory-corruption advisories)"
        )
    return torch


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def compute_state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """Return the scorer-state digest of a state dict (format in the module docstring)."""
    import numpy as np

    hasher = new_hasher()
    hasher.update(_STATE_DOMAIN)
    hasher.update(struct.pack(">Q", len(state)))
    for name, tensor in state.items():
        t = tensor.detach().to("cpu").contiguous()
        array = t.numpy()
        if array.dtype.byteorder == ">" or (
            array.dtype.byteorder == "=" and sys.byteorder == "big"
        ):
            array = array.astype(array.dtype.newbyteorder("<"))
        data = np.ascontiguousarray(array).tobytes()
        header = canonical(
            {
                "dtype": str(t.dtype).removeprefix("torch."),
                "name": name,
                "nbytes": len(data),
                "shape": list(t.shape),
            }
        )
        hasher.update(struct.pack(">Q", len(header)))
        hasher.update(header)
        hasher.update(data)
    return "blake3:" + hasher.hexdigest()


# -- static pre-scan -------------------------------------------------------------------
#
# Before torch's weights-only unpickler sees the bytes, the pickle inside is decoded
# with ``pickletools.genops`` (which parses opcodes and executes nothing) and run on a
# tiny emulated stack machine that knows only the opcodes and globals ``torch.save``
# writes for a plain state dict of tensors. What it yields is each key's dtype and
# shape, so a missing, extra, mis-shaped or mistyped tensor is refused before anything
# is unpickled; any other opcode or global is refused by name.

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


# -- loading -------------------------------------------------------------------------


def _fetch(store: BlobStore, role: str, descriptor: Descriptor) -> bytes:
    """Return a weight file's bytes, verified against its descriptor (never unpickled)."""
    where = f"LPIPS {role} weights {descriptor.digest}"
    try:
        data = store.get(descriptor.digest, descriptor.size)
    except BlobNotFoundError as exc:
        raise ScorerError(
            f"{where} ({descriptor.size} bytes) not found: {exc}; " + _import_hint()
        ) from exc
    except EvidenceStoreError as exc:
        raise ScorerError(f"{where}: {exc}") from exc
    # The store verified them; check again against the pinned descriptor.
    observed = hash_bytes(data)
    if observed.size != descriptor.size:
        raise ScorerError(f"{where}: read {observed.size} bytes, expected {descriptor.size}")
    if observed.digest != descriptor.digest:
        raise ScorerError(f"{where}: content hashes to {observed.digest}")
    title = descriptor.annotations.get(TITLE_ANNOTATION)
    pinned_sha = descriptor.annotations.get(SHA256_ANNOTATION)
    prefix = torchvision_hash_prefix(title) if title else None
    if prefix is not None or pinned_sha is not None:
        sha = hashlib.sha256(data).hexdigest()
        if prefix is not None and not sha.startswith(prefix):
            raise ScorerError(
                f"{where}: SHA-256 is {sha}, which does not start with {prefix} as its "
                f"file name {title!r} says"
            )
        if pinned_sha is not None and sha != pinned_sha:
            raise ScorerError(f"{where}: SHA-256 is {sha}, expected {pinned_sha}")
    return data


def _key_problems(keys: Iterable[object], shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Name the missing and unexpected keys of a state dict (order does not matter)."""
    present = set(keys)
    problems: list[str] = []
    missing = [k for k in shapes if k not in present]
    extra = [repr(k)[:100] for k in keys if k not in shapes]
    if len(extra) > 10:
        extra[10:] = [f"and {len(extra) - 10} more"]
    if missing:
        problems.append("missing " + ", ".join(f"{k} {list(shapes[k])}" for k in missing))
    if extra:
        problems.append("unexpected " + ", ".join(extra))
    return problems


def _prescan(
    role: str, descriptor: Descriptor, data: bytes, shapes: Mapping[str, tuple[int, ...]]
) -> None:
    """Refuse verified bytes whose keys, dtypes or shapes are wrong, before unpickling."""
    where = f"LPIPS {role} weights {descriptor.digest}"
    entries = scan_state_dict(data, where)
    problems = _key_problems(list(entries), shapes)
    for key, expected in shapes.items():
        if key not in entries:
            continue
        dtype, shape = entries[key]
        if dtype != "float32":
            problems.append(f"{key} is torch.{dtype} (torch.strided), expected torch.float32")
        elif shape != expected:
            problems.append(f"{key} has shape {list(shape)}, expected {list(expected)}")
    if problems:
        raise ScorerError(
            f"{where}: not the expected state dict: "
            + "; ".join(problems)
            + " (refused before unpickling)"
        )


def _deserialise(
    torch: Any,
    role: str,
    descriptor: Descriptor,
    data: bytes,
    shapes: Mapping[str, tuple[int, ...]],
) -> dict[str, torch.Tensor]:
    """Unpickle pre-scanned bytes with the weights-only loader; check keys, dtypes, shapes.

    :func:`_prescan` has refused wrong keys, dtypes and shapes, and anything but a plain
    state dict of tensors, before any unpickling; the weights-only load remains the guard
    against code execution, and its result is checked again (defence in depth).
    """
    where = f"LPIPS {role} weights {descriptor.digest}"
    try:
        loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScorerError(
            f"{where}: refused by torch's weights-only loader: {type(exc).__name__}: {first}"
        ) from exc
    if not isinstance(loaded, Mapping):
        raise ScorerError(f"{where}: expected a state dict, found {type(loaded).__name__}")
    problems = _key_problems(list(loaded), shapes)
    state: dict[str, torch.Tensor] = {}
    for key, expected in shapes.items():
        if key not in loaded:
            continue
        value = loaded[key]
        if not isinstance(value, torch.Tensor):
            problems.append(f"{key} is a {type(value).__name__}, expected a tensor")
            continue
        if value.layout != torch.strided or value.dtype != torch.float32:
            problems.append(f"{key} is {value.dtype} ({value.layout}), expected torch.float32")
            continue
        if tuple(value.shape) != expected:
            problems.append(f"{key} has shape {list(value.shape)}, expected {list(expected)}")
            continue
        state[key] = value
    if problems:
        raise ScorerError(f"{where}: not the expected state dict: " + "; ".join(problems))
    return state


def _build(torch: Any, trunk: dict[str, torch.Tensor], linear: dict[str, torch.Tensor]) -> Any:
    """Build ``lpips.LPIPS(net="alex")`` without fetching anything and load the tensors."""
    try:
        import lpips
    except ImportError as exc:
        raise ScorerError("LPIPS needs the lpips package: install evidencestore[lpips]") from exc
    # Building draws random initial weights: keep the caller's RNG state untouched.
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision's `pretrained=` notice
        module = lpips.LPIPS(net="alex", pretrained=False, pnet_rand=True, verbose=False)
    mapped = {
        f"slice{_TRUNK[int(key.split('.')[1])]}.{key.split('.', 1)[1]}": value
        for key, value in trunk.items()
        if key.startswith("features.")
    }
    try:
        module.net.load_state_dict(mapped, strict=True)
        result = module.load_state_dict(linear, strict=False)
    except RuntimeError as exc:
        raise ScorerError(f"the installed lpips does not accept AlexNet weights: {exc}") from exc
    if set(result.missing_keys) != _EXPECTED_MISSING or result.unexpected_keys:
        raise ScorerError(
            "the installed lpips has an unexpected structure: loading the linear layers "
            f"left missing {sorted(result.missing_keys)}, unexpected "
            f"{sorted(result.unexpected_keys)}; expected missing {sorted(_EXPECTED_MISSING)}"
        )
    # The flags lpips.LPIPS(net="alex") ends with: eval mode, a frozen trunk
    # (requires_grad=pnet_tune=False), trainable linear layers.
    module.eval()
    for name, param in module.named_parameters():
        param.requires_grad_(not name.startswith("net."))
    return module


def _pick_device(torch: Any, device: str | torch.device | None) -> Any:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ScorerError(f"invalid device {device!r}: {exc}") from exc


def load_scorer(
    store: BlobStore,
    backbone: Descriptor,
    linear: Descriptor,
    *,
    state_digest: str | None = None,
    device: str | torch.device | None = None,
    batch_size: int | None = None,
) -> LpipsScorer:
    """Load an LPIPS (AlexNet, v0.1) scorer from weights addressed by digest in ``store``.

    Both files are verified (size and digest), then statically scanned
    (:func:`scan_state_dict`: key sets, dtypes and shapes must be exactly those of
    torchvision's AlexNet and lpips's ``alex.pth``), before they are deserialised with
    ``torch.load(weights_only=True)`` from memory and checked again. With
    ``state_digest``, a scorer whose state digest differs is refused. ``device``
    defaults to CUDA when available, else CPU; ``batch_size`` to :data:`CPU_BATCH_SIZE`
    or :data:`CUDA_BATCH_SIZE`. Raises :class:`ScorerError`.
    """
    torch = _torch()
    target = _pick_device(torch, device)
    if batch_size is None:
        batch_size = CUDA_BATCH_SIZE if target.type == "cuda" else CPU_BATCH_SIZE
    if batch_size < 1:
        raise ScorerError(f"batch_size must be at least 1, got {batch_size}")
    backbone_bytes = _fetch(store, "backbone", backbone)
    linear_bytes = _fetch(store, "linear", linear)
    # Both files are statically checked before either is unpickled.
    _prescan("backbone", backbone, backbone_bytes, BACKBONE_SHAPES)
    _prescan("linear", linear, linear_bytes, LINEAR_SHAPES)
    trunk = _deserialise(torch, "backbone", backbone, backbone_bytes, BACKBONE_SHAPES)
    del backbone_bytes
    lins = _deserialise(torch, "linear", linear, linear_bytes, LINEAR_SHAPES)
    module = _build(torch, trunk, lins)
    del trunk
    digest = compute_state_digest(module.state_dict())
    if state_digest is not None and digest != state_digest:
        raise ScorerError(
            f"LPIPS scorer-state digest is {digest}, but {state_digest} is pinned: the "
            "weights or the installed lpips differ from those the pin was made with"
        )
    try:
        module.to(target)
    except Exception as exc:  # no such device, out of memory
        raise ScorerError(f"cannot move the LPIPS scorer to {target}: {exc}") from exc
    return LpipsScorer(
        module=module,
        backbone=backbone,
        linear=linear,
        state_digest=digest,
        device=str(target),
        batch_size=batch_size,
    )


def load_configured_scorer(root: str | os.PathLike[str] | None = None) -> LpipsScorer:
    """Load the scorer pinned in ``evstore.toml`` ``[lpips]``, through the repository store.

    Raises :class:`ScorerError` saying how to import the weights when none are configured.
    """
    from .config import CONFIG_NAME, find_root, load_config
    from .remotes import repository_store

    base = find_root(root)
    config = load_config(base).lpips
    if config is None or config.backbone is None or config.linear is None:
        raise ScorerError(
            f"no LPIPS weights are configured in {base / CONFIG_NAME}: " + _import_hint()
        )
    return load_scorer(
        repository_store(base), config.backbone, config.linear, state_digest=config.state_digest
    )


# -- scoring -------------------------------------------------------------------------


@dataclass(eq=False)
class LpipsScorer:
    """LPIPS (AlexNet, v0.1) per frame, from authenticated weights.

    Implements the media comparison's ``FrameScorer`` protocol: ``score`` takes two
    ``uint8`` arrays ``(N, H, W, 3)`` (RGB) and returns N distances; identical frames
    score exactly 0.0.
    """

    module: Any
    backbone: Descriptor
    linear: Descriptor
    state_digest: str
    device: str
    batch_size: int = CPU_BATCH_SIZE
    name: str = field(default="lpips", init=False)

    def _tensor(self, torch: Any, frames: np.ndarray) -> Any:
        # [0, 255] -> [-1, 1] computed in float64 then rounded, as lpips.im2tensor does.
        t = torch.from_numpy(frames).to(self.device)
        # Contiguous NCHW like lpips's own tensors: channels-last kernels round differently.
        t = t.permute(0, 3, 1, 2).to(torch.float64).div_(127.5).sub_(1.0)
        return t.to(torch.float32, memory_format=torch.contiguous_format)

    def score(self, reference: np.ndarray, candidate: np.ndarray) -> list[float]:
        """Return the LPIPS distance of each frame pair, batched by ``batch_size``."""
        import numpy as np

        torch = _torch()
        for label, frames in (("reference", reference), ("candidate", candidate)):
            if not isinstance(frames, np.ndarray) or frames.dtype != np.uint8:
                kind = getattr(frames, "dtype", type(frames).__name__)
                raise ScorerError(f"LPIPS {label} frames must be a uint8 numpy array, got {kind}")
            if frames.ndim != 4 or frames.shape[3] != 3:
                raise ScorerError(
                    f"LPIPS {label} frames have shape {frames.shape}, expected (N, H, W, 3) RGB"
                )
        if reference.shape != candidate.shape:
            raise ScorerError(
                f"LPIPS frames differ in shape: reference {reference.shape}, "
                f"candidate {candidate.shape}"
            )
        scores: list[float] = []
        count = reference.shape[0]
        with torch.inference_mode():
            for start in range(0, count, self.batch_size):
                ref = np.ascontiguousarray(reference[start : start + self.batch_size])
                cand = np.ascontiguousarray(candidate[start : start + self.batch_size])
                try:
                    out = self.module(self._tensor(torch, ref), self._tensor(torch, cand))
                except RuntimeError as exc:
                    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    raise ScorerError(
                        f"LPIPS cannot score {ref.shape[2]}x{ref.shape[1]} frames on "
                        f"{self.device}: {first}"
                    ) from exc
                values = out.reshape(-1).to("cpu", torch.float64).tolist()
                for offset, value in enumerate(values):
                    if np.array_equal(ref[offset], cand[offset]):
                        value = 0.0  # what LPIPS computes; made exact whatever the kernels
                    elif not math.isfinite(value):
                        raise ScorerError(f"LPIPS of frame {start + offset} is {value}")
                    scores.append(float(value))
        return scores

    def provenance(self) -> dict[str, str]:
        """Return what a comparison record must carry to name this scorer exactly."""
        import torch
        import torchvision

        return {
            "scorer": "lpips",
            "net": "alex",
            "model_version": "0.1",
            "backbone_digest": self.backbone.digest,
            "backbone_size": str(self.backbone.size),
            "linear_digest": self.linear.digest,
            "linear_size": str(self.linear.size),
            "state_digest": self.state_digest,
            "torch": str(torch.__version__),
            "torchvision": str(torchvision.__version__),
            "lpips": _version("lpips"),
            "device": self.device,
        }
