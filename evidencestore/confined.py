"""The one rule for a file that a run, a workload or a protocol reads from disk.

A workload's input files, the files a protocol names, the workload and protocol files
themselves, configuration files and server logs are read by one rule, so nothing from
outside the places a user meant (``/etc/passwd``, ``/proc/self/environ``, a symlink to
either) reaches a payload, a server or a bundle:

- the path, with every symlink resolved, lies inside one of the allowed directories
  (the evidence repository, the workload's or protocol's directory); a symlink that
  leaves them is refused, naming where it points;
- it is a regular file: never a FIFO (which would block for ever), a socket, a device
  (``/dev/zero`` never ends) or a file under ``/proc``, ``/sys`` or ``/dev`` (whose sizes
  lie);
- it is at most ``limit`` bytes, checked on the open descriptor and again while reading,
  so a file that grows is cut off, not read until memory runs out.

The file is opened once, through its resolved path, non-blocking and without following a
final symlink, and the checks are made on that descriptor (a swap between check and read
is refused, not followed). ``bundle create``'s scan uses :func:`kind_of` and
:func:`pseudo_file` from here too, and ``paths.within`` for "inside". Errors are
:class:`~evidencestore.errors.ConfigError` naming what was being read (``where``) and
what was expected; a ``where`` that names a caller's parameter as a placeholder
(``{configs} FILE``) lists it in ``parameters``, as every library message does
(:class:`~evidencestore.errors.EvidenceStoreError`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from .errors import ConfigError
from .paths import within

__all__ = [
    "MAX_CONTROL_FILE",
    "MAX_INPUT_FILE",
    "MAX_LOG_FILE",
    "ConfinedFile",
    "check_file",
    "kind_of",
    "open_file",
    "pseudo_file",
    "read_file",
    "within",
]

#: Workloads, protocols and configuration files.
MAX_CONTROL_FILE = 64 << 20
#: A workload's input file (sent inside a request, held in memory while the run lasts).
MAX_INPUT_FILE = 1 << 30
#: A server log kept with a run (streamed into the store, never held whole).
MAX_LOG_FILE = 64 << 30

_PSEUDO = ("/proc", "/sys", "/dev")


def pseudo_file(real: str) -> str | None:
    """The pseudo file system (``/proc``, ``/sys``, ``/dev``) real path ``real`` is in,
    or None: their files' kinds and sizes lie, so none is ever read as evidence."""
    return next((p for p in _PSEUDO if within(real, p)), None)


def kind_of(mode: int) -> str:
    """What a file of mode ``mode`` is, for a message (``a FIFO``, ``a device``, ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


class ConfinedFile:
    """A file that passed the rule, open for reading: ``real`` path, ``size``, ``fh``."""

    def __init__(
        self,
        real: str,
        size: int,
        fh: BinaryIO,
        limit: int,
        where: str,
        parameters: Iterable[str] = (),
    ) -> None:
        self.real = real
        self.size = size
        self.fh = fh
        self._limit = limit
        self._where = where
        self._parameters = tuple(parameters)
        self._read = 0

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The file's bytes in chunks; refuses a file that grows past the limit."""
        while chunk := self.fh.read(size):
            self._read += len(chunk)
            if self._read > self._limit:
                raise ConfigError(
                    f"{self._where}: {self.real} grew past {self._limit} bytes while read",
                    parameters=self._parameters,
                )
            yield chunk


def _named(path: Path, where: str) -> str:
    return "" if str(path) in where else f" ({path})"


def _real(
    path: Path, roots: Sequence[str | os.PathLike[str]], where: str, parameters: Iterable[str]
) -> str:
    real = os.path.realpath(path)
    pseudo = pseudo_file(real)
    if pseudo is not None:
        raise ConfigError(
            f"{where}: {path} is {real}, a {pseudo} file: expected a regular file in the repository",
            parameters=parameters,
        )
    allowed = [os.path.realpath(r) for r in roots]
    if not any(within(real, r) for r in allowed):
        shown = " or ".join(str(r) for r in roots)
        via = f" (a symlink to {real})" if os.path.abspath(path) != real else ""
        raise ConfigError(
            f"{where}: {path}{via} is outside {shown}: files are read only from inside "
            "the repository or the workload's (protocol's) directory",
            parameters=parameters,
        )
    return real


@contextlib.contextmanager
def open_file(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    limit: int,
    where: str,
    parameters: Iterable[str] = (),
) -> Iterator[ConfinedFile]:
    """Open ``path`` under the rule (see the module): inside one of ``roots`` once every
    symlink is resolved, a regular file, at most ``limit`` bytes."""
    p = Path(path)
    real = _real(p, roots, where, parameters)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read: {exc.strerror}{_named(p, where)}", parameters=parameters
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(
                f"{where}: {p} is {kind_of(st.st_mode)}: expected a regular file",
                parameters=parameters,
            )
        if st.st_size > limit:
            raise ConfigError(
                f"{where}: {p} is {st.st_size} bytes, more than the {limit} allowed",
                parameters=parameters,
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield ConfinedFile(real, st.st_size, fh, limit, where, parameters)


def read_file(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    limit: int = MAX_CONTROL_FILE,
    where: str,
    parameters: Iterable[str] = (),
) -> bytes:
    """Read a whole file under the rule; :class:`ConfigError` naming ``where`` otherwise."""
    with open_file(path, roots, limit=limit, where=where, parameters=parameters) as f:
        try:
            return b"".join(f.chunks())
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read: {exc.strerror}{_named(Path(path), where)}",
                parameters=parameters,
            ) from exc


def check_file(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    limit: int,
    where: str,
    parameters: Iterable[str] = (),
) -> str:
    """Check ``path`` under the rule without reading it; return its real path."""
    with open_file(path, roots, limit=limit, where=where, parameters=parameters) as f:
        return f.real
