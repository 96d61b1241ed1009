"""BLAKE3 digests (``blake3:<64 lowercase hex>``) paired with sizes.

Hashing of bytes, streams and files. A file's size is checked against the expected
size before any byte is hashed, so truncation costs nothing to catch. Large files are
memory-mapped and hashed on every core; many small files go through a lean
``os.open``/``os.read`` loop, batched across threads when they are large enough for
hashing to dominate.

:func:`start_hash_files` hashes in the background (forked workers for many small files,
threads for large ones) while the caller goes on; every slice's outcomes go to their own
slots of one list, so no order in which workers finish can lose or misplace an outcome.
``os.cpu_count()`` is asked once per process.
"""

from __future__ import annotations

import errno
import functools
import marshal
import mmap
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import Any, BinaryIO, NamedTuple

from blake3 import blake3

from ._fork import Child, can_fork, cpu_count
from .errors import IntegrityError, InvalidDigestError, NotRegularFileError

__all__ = [
    "ALGORITHM",
    "DIGEST_PATTERN",
    "Hashed",
    "NotRegularFileError",
    "PendingHashes",
    "digest_from_hex",
    "digest_hex",
    "format_sum_line",
    "hash_bytes",
    "hash_file",
    "hash_files",
    "hash_stream",
    "is_digest",
    "new_hasher",
    "parse_digest",
    "parse_sum_line",
    "shown_name",
    "start_hash_files",
    "would_fork",
]

ALGORITHM = "blake3"
DIGEST_PATTERN = r"^blake3:[0-9a-f]{64}$"
_DIGEST_RE = re.compile(r"blake3:[0-9a-f]{64}")
_PREFIX = "blake3:"

# Files at least this large are memory-mapped and hashed with every core.
MMAP_THRESHOLD = 16 << 20
# Whole-file single reads up to this size; larger files are read in chunks.
_WHOLE_READ_MAX = 8 << 20
_CHUNK = 1 << 20
# Batches of files averaging less than this are hashed on one thread: below it the
# GIL hand-offs cost more than the hashing they would overlap.
_THREADED_MIN_AVERAGE = 64 << 10


class Hashed(NamedTuple):
    """A digest and the number of bytes it was computed over."""

    digest: str
    size: int


HashOutcome = Hashed | OSError | IntegrityError


def is_digest(text: object) -> bool:
    """Return whether ``text`` is a well-formed digest string."""
    return isinstance(text, str) and _DIGEST_RE.fullmatch(text) is not None


def parse_digest(text: str) -> str:
    """Return ``text`` if it is a well-formed digest, else raise :class:`InvalidDigestError`."""
    if is_digest(text):
        return text
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise InvalidDigestError(
        f"invalid digest {shown!r}: expected 'blake3:' followed by 64 lowercase hex digits"
    )


def digest_from_hex(hex_digits: str) -> str:
    """Return the digest string ``blake3:<hex_digits>``: the one place the prefix is added.

    ``hex_digits`` is a BLAKE3 ``hexdigest()`` (or hex read from a name that was
    matched against the 64-hex pattern); it is not re-validated here.
    """
    return _PREFIX + hex_digits


def digest_hex(digest: str) -> str:
    """Return the 64 hex digits of a digest (validated)."""
    return parse_digest(digest)[len(_PREFIX) :]


def new_hasher(*, threads: bool = False) -> blake3:
    """Return a fresh BLAKE3 hasher; ``threads`` lets large updates use every core."""
    return blake3(max_threads=blake3.AUTO) if threads else blake3()


def _format(hasher: blake3) -> str:
    return digest_from_hex(hasher.hexdigest())


def hash_bytes(data: bytes | bytearray | memoryview) -> Hashed:
    """Hash an in-memory buffer."""
    return Hashed(digest_from_hex(blake3(data).hexdigest()), len(data))


def hash_stream(stream: BinaryIO, *, chunk_size: int = _CHUNK) -> Hashed:
    """Hash a binary stream from its current position to EOF."""
    hasher = blake3()
    size = 0
    while chunk := stream.read(chunk_size):
        hasher.update(chunk)
        size += len(chunk)
    return Hashed(_format(hasher), size)


def copy_hashing(src: BinaryIO, dst: BinaryIO, *, chunk_size: int = 4 << 20) -> Hashed:
    """Copy ``src`` to EOF into ``dst`` and hash what was copied, in one pass (so a file
    that changes after hashing cannot be stored under the old digest); ``dst`` is
    flushed and fsynced."""
    hasher = blake3()
    size = 0
    while chunk := src.read(chunk_size):
        hasher.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    dst.flush()
    os.fsync(dst.fileno())
    return Hashed(_format(hasher), size)


def _size_mismatch(path: str | os.PathLike[str], expected: int, observed: int) -> IntegrityError:
    where = os.fspath(path)
    reason = f"size is {observed} bytes, expected {expected}"
    return IntegrityError(
        f"{where}: {reason}",
        where=where,
        expected_size=expected,
        observed_size=observed,
        reason=reason,
    )


_local: Any = None  # a threading.local(), made when a buffer is first asked for


def _buffer() -> mmap.mmap:
    """This thread's read buffer: anonymous memory, so only the pages used are touched."""
    global _local
    if _local is None:
        import threading  # here: a verification that hashes no large file never needs it

        _local = threading.local()
    buf: mmap.mmap | None = getattr(_local, "buf", None)
    if buf is None:
        # MAP_PRIVATE: a forked worker must get its own copy, never share this one.
        buf = _local.buf = mmap.mmap(-1, _WHOLE_READ_MAX + 1, flags=mmap.MAP_PRIVATE)
    return buf


# O_NONBLOCK: opening a FIFO must not hang (it is then refused as not a regular file);
# it changes nothing for regular files.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


def _hash_batch(
    paths: Sequence[str | os.PathLike[str]],
    sizes: Sequence[int | None],
    flags: int = _OPEN_FLAGS,
) -> list[HashOutcome]:
    # The hot loop of verification: one open, fstat, read and close per file, into a
    # buffer reused across files (fresh large buffers would page-fault on every file).
    out: list[HashOutcome] = []
    append = out.append
    buf = _buffer()
    view = memoryview(buf)
    osopen, fstat, readv, close = os.open, os.fstat, os.readv, os.close
    is_reg = stat.S_ISREG
    for path, expected in zip(paths, sizes, strict=True):
        try:
            fd = osopen(path, flags)
        except OSError as exc:
            append(exc)
            continue
        try:
            st = fstat(fd)
            size = st.st_size
            if not is_reg(st.st_mode):
                append(NotRegularFileError(errno.EINVAL, "not a regular file", os.fspath(path)))
            elif expected is not None and size != expected:
                append(_size_mismatch(path, expected, size))
            elif size >= MMAP_THRESHOLD:
                hasher = blake3(max_threads=blake3.AUTO)
                hasher.update_mmap(path)
                append(Hashed(_format(hasher), size))
            elif size <= _WHOLE_READ_MAX:
                # Asking for one byte more than expected: a short read means EOF on a
                # regular file, so growth since fstat is caught without a second read.
                want = view[: size + 1]
                n = readv(fd, [want])
                while 0 < n < size and (m := readv(fd, [want[n:]])):
                    n += m  # interrupted read: continue
                if n != size:
                    append(_size_mismatch(path, size, n))
                else:
                    append(Hashed(digest_from_hex(blake3(view[:n]).hexdigest()), size))
            else:
                hasher = blake3()
                total = 0
                while n := readv(fd, [buf]):
                    hasher.update(view[:n])
                    total += n
                append(
                    _size_mismatch(path, size, total)
                    if total != size
                    else Hashed(_format(hasher), size)
                )
        except OSError as exc:
            append(exc)
        finally:
            close(fd)
    return out


# Files up to this size are checked by _odd_batch with one read into a fresh buffer.
_SMALL = 64 << 10


def _odd_batch(
    paths: Sequence[str | os.PathLike[str]],
    sizes: Sequence[int | None],
    digests: Sequence[str | None],
    flags: int = _OPEN_FLAGS,
) -> tuple[list[int], list[HashOutcome]]:
    """The indices, and outcomes, of the files whose outcome is not ``digests[i]`` with
    size ``sizes[i]`` (see :func:`_odd_indices`): what :func:`_hash_batch` would give
    for them, found with the least work per file where a file is as expected.

    A small regular file of the expected size is read whole and its hex digest
    compared, with no outcome built; anything else (another size, a large file, not a
    regular file, a short read, a digest that differs, no expected size or digest) is
    hashed again by :func:`_hash_batch` for its exact outcome, and kept if that outcome
    is not the expected one.
    """
    odd: list[int] = []
    osopen, fstat, read, close = os.open, os.fstat, os.read, os.close
    is_reg = stat.S_ISREG
    for i, path in enumerate(paths):
        expected, want = sizes[i], digests[i]
        try:
            fd = osopen(path, flags)
        except OSError:
            odd.append(i)
            continue
        try:
            st = fstat(fd)
            size = st.st_size
            if (
                size != expected
                or size > _SMALL
                or want is None
                or not is_reg(st.st_mode)
                # one byte more than expected: a short read means EOF, a long one growth
                or len(data := read(fd, size + 1)) != size
                or _PREFIX + blake3(data).hexdigest() != want
            ):
                odd.append(i)
        except OSError:
            odd.append(i)
        finally:
            close(fd)
    if not odd:
        return odd, []
    outcomes = _hash_batch([paths[i] for i in odd], [sizes[i] for i in odd], flags)
    # a large file (or one that changed meanwhile) may hash as expected after all
    kept = _odd_indices(outcomes, [digests[i] for i in odd], [sizes[i] for i in odd])
    return [odd[k] for k in kept], [outcomes[k] for k in kept]


def hash_file(path: str | os.PathLike[str], expected_size: int | None = None) -> Hashed:
    """Hash a file; if ``expected_size`` is given it is checked before hashing.

    Large files are memory-mapped and hashed on every core. Raises
    :class:`IntegrityError` on a size mismatch and ``OSError`` when the file cannot be
    read.
    """
    [outcome] = _hash_batch([path], [expected_size])
    if isinstance(outcome, Hashed):
        return outcome
    raise outcome


def _odd_indices(
    outcomes: Sequence[HashOutcome],
    digests: Sequence[str | None],
    sizes: Sequence[int | None],
) -> list[int]:
    """Indices of the outcomes that are not the expected digest with a size given."""
    return [
        i
        for i, (o, d, s) in enumerate(zip(outcomes, digests, sizes, strict=True))
        if not (type(o) is Hashed and o[0] == d and s is not None)
    ]


class PendingHashes:
    """Hashing started by :func:`start_hash_files`; :meth:`result` waits for it.

    Workers (forked processes for many small files, threads for large ones) hash while
    the caller does other work; each outcome lands in its own slot of one list, so no
    interleaving of workers can lose or reorder one. :meth:`unexpected` gives only the
    outcomes that are not the expected digest and size, which is all a verifier needs
    to look at one by one.
    """

    def __init__(
        self,
        finish: Callable[[], list[HashOutcome]],
        odd: Callable[[], dict[int, HashOutcome]] | None = None,
        expected: Sequence[str | None] | None = None,
        sizes: Sequence[int | None] | None = None,
        stop: Callable[[], None] | None = None,
    ) -> None:
        self._finish: Callable[[], list[HashOutcome]] | None = finish
        self._odd_of: Callable[[], dict[int, HashOutcome]] | None = odd
        self._stop = stop
        self._expected, self._sizes = expected, sizes
        self._out: list[HashOutcome] | None = None
        self._odd: dict[int, HashOutcome] | None = None

    def result(self) -> list[HashOutcome]:
        """Return one outcome per path, in order (waiting for the workers once)."""
        if self._out is None:
            if self._odd_of is not None:
                self.unexpected()
            assert self._finish is not None
            finish, self._finish = self._finish, None
            self._out = finish()
        return self._out

    def cancel(self) -> None:
        """Give up on the outcomes: workers stop at their next file or chunk and are
        waited for; nothing more is hashed here (once collected, nothing happens).
        :meth:`result` and :meth:`unexpected` must not be asked for afterwards."""
        if self._odd is not None or self._out is not None:
            return  # collected already: nothing runs any more
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()
        self._finish = self._odd_of = None

    def unexpected(self) -> dict[int, HashOutcome]:
        """The outcomes that are not :class:`Hashed` to the expected digest with the
        size given, by index in ascending order (every outcome, where no digest or no
        size was expected); waits for the workers once."""
        if self._odd is None:
            if self._odd_of is not None:
                odd_of, self._odd_of = self._odd_of, None
                self._odd = odd_of()
            else:
                out = self.result()
                exp = self._expected if self._expected is not None else [None] * len(out)
                sizes = self._sizes if self._sizes is not None else [None] * len(out)
                self._odd = {i: out[i] for i in _odd_indices(out, exp, sizes)}
        return self._odd


def would_fork(sizes: Sequence[int | None], threads: int | None = None) -> bool:
    """Whether :func:`start_hash_files` would hash files of these expected sizes in
    forked workers (many small files, from a process that may fork now)."""
    workers = threads or cpu_count()
    known = [s for s in sizes if s is not None]
    average = sum(known) / len(known) if known else _THREADED_MIN_AVERAGE
    return (
        workers > 1
        and average < _THREADED_MIN_AVERAGE
        and len(sizes) >= max(2 * workers, _FORK_MIN_FILES)
        and can_fork()
    )


def start_hash_files(
    paths: Sequence[str | os.PathLike[str]],
    expected_sizes: Iterable[int | None] | None = None,
    *,
    threads: int | None = None,
    follow_symlinks: bool = True,
    expected_digests: Sequence[str | None] | None = None,
) -> PendingHashes:
    """Start :func:`hash_files` in the background and return its pending result.

    ``expected_digests`` (one per path, or None) changes no outcome; it lets forked
    workers send back only the outcomes that differ from them, which is what makes
    many small files cheap to collect.
    """
    flags = _OPEN_FLAGS | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    sizes: list[int | None] = (
        list(expected_sizes) if expected_sizes is not None else [None] * len(paths)
    )
    if len(sizes) != len(paths):
        raise ValueError("expected_sizes must have one size per path")
    workers = threads or cpu_count()
    known = [s for s in sizes if s is not None]
    average = sum(known) / len(known) if known else _THREADED_MIN_AVERAGE
    if expected_digests is not None and len(expected_digests) != len(paths):
        raise ValueError("expected_digests must have one digest per path")
    if workers > 1 and len(paths) >= 2 * workers and average >= _THREADED_MIN_AVERAGE:
        return _start_threads(paths, sizes, flags, workers, expected_digests)
    if workers > 1 and len(paths) >= max(2 * workers, _FORK_MIN_FILES) and can_fork():
        return _start_forked(paths, sizes, flags, workers, expected_digests)
    if expected_digests is not None:  # here, when asked: only what differs is built
        digests = expected_digests
        return _pending_odd(
            lambda: dict(zip(*_odd_batch(paths, sizes, digests, flags), strict=True)),
            digests,
            sizes,
        )
    return PendingHashes(lambda: _hash_batch(paths, sizes, flags), sizes=sizes)


def _start_threads(
    paths: Sequence[str | os.PathLike[str]],
    sizes: list[int | None],
    flags: int,
    workers: int,
    expected: Sequence[str | None] | None,
) -> PendingHashes:
    """Hash on ``workers`` threads (large files: hashing releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    # Interleaved slices balance the threads when sizes vary along the list.
    pool = ThreadPoolExecutor(max_workers=workers)
    futures = [
        pool.submit(_hash_batch, paths[k::workers], sizes[k::workers], flags)
        for k in range(workers)
    ]
    pool.shutdown(wait=False)

    def finish() -> list[HashOutcome]:
        out: list[HashOutcome] = [None] * len(paths)  # type: ignore[list-item]
        for k, future in enumerate(futures):
            out[k::workers] = future.result()
        return out

    return PendingHashes(finish, expected=expected, sizes=sizes)


def _pending_odd(
    odd: Callable[[], dict[int, HashOutcome]],
    expected: Sequence[str | None] | None,
    sizes: Sequence[int | None],
    stop: Callable[[], None] | None = None,
) -> PendingHashes:
    """Pending hashes known by the outcomes that differ from ``expected`` (``odd``,
    ascending); every other outcome is the expected digest and size."""
    pending: PendingHashes

    def finish() -> list[HashOutcome]:
        exp = expected if expected is not None else [None] * len(sizes)
        out: list[HashOutcome] = [Hashed(d, s) for d, s in zip(exp, sizes, strict=True)]  # type: ignore[arg-type]
        for i, o in pending.unexpected().items():
            out[i] = o
        return out

    pending = PendingHashes(finish, odd, stop=stop)
    return pending


def hash_files(
    paths: Sequence[str | os.PathLike[str]],
    expected_sizes: Iterable[int | None] | None = None,
    *,
    threads: int | None = None,
    follow_symlinks: bool = True,
) -> list[HashOutcome]:
    """Hash many files, returning one outcome per path, in order.

    Each outcome is a :class:`Hashed`, the ``OSError`` that prevented reading, or the
    :class:`IntegrityError` of a size that disagreed with ``expected_sizes`` (checked
    before hashing). Batches of large-enough files are split across ``threads``
    (default: the CPU count); small files stay on one thread. With
    ``follow_symlinks=False`` a symlink's outcome is an ``OSError`` with ``errno.ELOOP``.
    """
    return start_hash_files(
        paths, expected_sizes, threads=threads, follow_symlinks=follow_symlinks
    ).result()


# Small files: hashing is dominated by per-file interpreter work that holds the GIL, so
# threads cannot overlap it; forked workers can. Only from a single-threaded process
# (forking with live threads can deadlock), and never when disabled by the environment.
_FORK_MIN_FILES = 2000


def _encode(outcomes: list[HashOutcome]) -> bytes:
    items: list[object] = []
    for o in outcomes:
        if isinstance(o, Hashed):
            items.append(("H", o.digest, o.size))
        elif isinstance(o, IntegrityError):
            items.append(("I", str(o), o.where, o.expected_size, o.observed_size, o.reason))
        elif isinstance(o, NotRegularFileError):
            items.append(("N", o.errno, o.strerror, o.filename))
        else:
            items.append(("O", o.errno, o.strerror, o.filename))
    return marshal.dumps(items)


def _decode(data: bytes) -> list[HashOutcome]:
    out: list[HashOutcome] = []
    for tag, *fields in marshal.loads(data):
        if tag == "H":
            out.append(Hashed(*fields))
        elif tag == "I":
            message, where, expected, observed, reason = fields
            out.append(
                IntegrityError(
                    message,
                    where=where,
                    expected_size=expected,
                    observed_size=observed,
                    reason=reason,
                )
            )
        elif tag == "N":
            out.append(NotRegularFileError(*fields))
        else:
            out.append(OSError(*fields))  # OSError picks the errno subclass
    return out


# Files per claim of the forked check: small enough that the processes meet close to
# the middle, large enough that claiming costs nothing next to hashing.
_CHUNK_FILES = 64


def _start_forked(
    paths: Sequence[str | os.PathLike[str]],
    sizes: Sequence[int | None],
    flags: int,
    workers: int,
    expected: Sequence[str | None] | None = None,
) -> PendingHashes:
    """Fork ``workers - 1`` children now; the pending result has this process join in.

    The files are cut into chunks and the chunks into one contiguous region a child.
    Each child claims the chunks of its region from the front, one byte a chunk in
    memory shared with this process, and hashes each one it claimed; this process,
    once it asks for the outcomes (after its own work), claims chunks from the back of
    each region until it meets the child there. A chunk is claimed by setting its byte
    after seeing it clear, so two claimers can meet on one chunk (both hash it, with
    the same outcomes) but never leave one unclaimed: each walks its way in order and
    stops only at a chunk the other has claimed, beyond which the other has claimed
    everything. A child sends back the chunks it hashed and the outcomes that are not
    simply the expected digest and size; the parent rebuilds the rest only when asked
    for every outcome. A chunk that no answer covers (a child died) is hashed here.
    """
    n = len(paths)
    chunks = -(-n // _CHUNK_FILES)
    children_n = max(1, min(workers - 1, chunks))
    cuts = [chunks * k // children_n for k in range(children_n + 1)]
    claims = mmap.mmap(-1, max(1, chunks))  # shared with the children, zero-filled
    exp: Sequence[str | None] = expected if expected is not None else [None] * n

    def hash_chunk(c: int, odd: dict[int, HashOutcome]) -> None:
        lo = c * _CHUNK_FILES
        hi = min(n, lo + _CHUNK_FILES)
        found, outcomes = _odd_batch(paths[lo:hi], sizes[lo:hi], exp[lo:hi], flags)
        for i, o in zip(found, outcomes, strict=True):
            odd[lo + i] = o

    def claim(order: Iterable[int], odd: dict[int, HashOutcome]) -> list[int]:
        done: list[int] = []
        for c in order:
            if claims[c]:
                break  # the other end has come this far
            claims[c] = 1
            hash_chunk(c, odd)
            done.append(c)
        return done

    def work(k: int) -> bytes:
        odd: dict[int, HashOutcome] = {}
        done = claim(range(cuts[k], cuts[k + 1]), odd)
        return marshal.dumps((done, list(odd), _encode(list(odd.values()))))

    children = [Child(functools.partial(work, k)) for k in range(children_n)]

    def odd() -> dict[int, HashOutcome]:
        found: dict[int, HashOutcome] = {}
        covered = set()
        for k in reversed(range(children_n)):
            covered.update(claim(range(cuts[k + 1] - 1, cuts[k] - 1, -1), found))
        for child in children:
            data = child.result()
            if data is None:
                continue
            try:
                done, indices, encoded = marshal.loads(data)
                outcomes = _decode(encoded)
            except (EOFError, ValueError, TypeError):
                continue
            if len(indices) == len(outcomes) and all(0 <= i < n for i in indices):
                covered.update(done)
                found.update(zip(indices, outcomes, strict=True))
        for c in range(chunks):
            if c not in covered:
                hash_chunk(c, found)  # its child died: hashed here
        claims.close()
        return dict(sorted(found.items()))

    def stop() -> None:
        claims[:] = b"\x01" * len(claims)  # every chunk claimed: the children stop
        for child in children:
            child.result()  # waited for, its answer dropped
        claims.close()

    return _pending_odd(odd, expected, sizes, stop)


# -- digest lists (``evstore hash``, b3sum) --------------------------------------------
# b3sum's rules (b3sum/what_does_check_do.md): a name is shown as UTF-8 (what cannot be
# decoded becomes U+FFFD); a backslash becomes ``\\`` and a newline ``\n``, and a line
# holding an escape starts with one backslash. Reading: lines are split on newlines
# only; a leading backslash means the name is unescaped (any other escape is an
# error); a name holding U+FFFD or NUL cannot be checked.
_SUM_HEX = frozenset("0123456789abcdef")


def shown_name(name: str) -> tuple[str, bool]:
    """``name`` as a digest list writes it, and whether its line is escaped."""
    try:
        text = os.fsencode(name).decode("utf-8", "replace")
    except UnicodeEncodeError:  # not a name from the file system: a lone surrogate
        text = name.encode("utf-8", "replace").decode("utf-8")
    if "\\" not in text and "\n" not in text:
        return text, False
    return text.replace("\\", "\\\\").replace("\n", "\\n"), True


def format_sum_line(digest: str, size: int, name: str, *, b3sum: bool = False) -> str:
    """One line of a digest list (no newline): ``blake3:<hex>  SIZE  NAME``, or with
    ``b3sum`` b3sum's ``<hex>  NAME``; escaped as b3sum escapes, so that ``b3sum
    --check`` reads the b3sum form and :func:`parse_sum_line` reads both."""
    text, escaped = shown_name(name)
    body = f"{digest_hex(digest)}  {text}" if b3sum else f"{digest}  {size}  {text}"
    return "\\" + body if escaped else body


def parse_sum_line(line: str) -> tuple[str, int | None, str]:
    """``blake3:<hex>  SIZE  NAME`` or b3sum's ``<hex>  NAME`` (either escaped) ->
    (digest, size or None, name). Raises ``ValueError`` saying what is wrong."""
    escaped = line.startswith("\\")
    body = line[1:] if escaped else line
    head, sep, rest = body.partition("  ")
    hexd = head.removeprefix(_PREFIX)
    if not sep or not rest or len(hexd) != 64 or not set(hexd) <= _SUM_HEX:
        raise ValueError(
            "not a digest line (expected 'blake3:<hex>  SIZE  PATH' or b3sum's '<hex>  PATH')"
        )
    size: int | None = None
    name = rest
    if head.startswith(_PREFIX):
        size_text, sep, name = rest.partition("  ")
        if not sep or not size_text.isdigit() or not name:
            raise ValueError("not a digest line (expected 'blake3:<hex>  SIZE  PATH')")
        size = int(size_text)
    if escaped:
        name = _unescape(name)
    if "\ufffd" in name or "\0" in name:
        raise ValueError(f"name {name!r} holds U+FFFD or NUL: it cannot name a file exactly")
    return _PREFIX + hexd, size, name


def _unescape(name: str) -> str:
    out: list[str] = []
    parts = iter(name)
    for ch in parts:
        if ch != "\\":
            out.append(ch)
            continue
        nxt = next(parts, "")
        if nxt == "\\":
            out.append("\\")
        elif nxt == "n":
            out.append("\n")
        else:
            raise ValueError(f"escape '\\{nxt}' in {name!r}: only '\\\\' and '\\n' exist")
    return "".join(out)
