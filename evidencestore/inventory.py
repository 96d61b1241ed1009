"""The inventory: every ``evidence/<name>/bundle.json`` found, strictly decoded.

Nothing pins a global count: totals are computed from the registrations present, so
pull requests that each add one bundle directory merge without touching shared files.

A registration is read only when it is what git tracks: one that is a symlink leaving
the repository is a ``registration-symlink-escape`` finding (like an entry's
``symlink-escape``), a symlink loop is a ``symlink-loop`` finding, and bundle
directories whose names fold together on case-insensitive systems are a
``name-collision``. Directories whose names start with ``.`` are not bundles (a
``bundle create`` stages in ``.<name>.tmp-<hex>``; see ``staging.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ._canonical import decode
from .errors import ManifestError
from .models import Finding, Registration, Severity
from .paths import REGISTRATION_NAME, name_collisions, resolve, shown, within

__all__ = [
    "EVIDENCE_DIR",
    "REGISTRATION_NAME",
    "Inventory",
    "decode_registration",
    "load_inventory",
    "load_registration",
    "registration_path",
]

EVIDENCE_DIR = "evidence"


def registration_path(root: str | os.PathLike[str], name: str) -> Path:
    """Return ``<root>/evidence/<name>/bundle.json``."""
    return Path(root) / EVIDENCE_DIR / name / REGISTRATION_NAME


def decode_registration(data: bytes, source: str) -> Registration:
    """Strictly decode a registration; errors name ``source`` and the JSON path."""
    try:
        return decode(data, Registration)
    except msgspec.ValidationError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{source}: malformed JSON: {exc}") from None


def load_registration(path: str | os.PathLike[str]) -> Registration:
    """Read and decode one registration file."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ManifestError(f"{os.fspath(path)}: no such registration") from None
    except OSError as exc:
        raise ManifestError(f"{os.fspath(path)}: cannot read: {exc.strerror}") from exc
    return decode_registration(data, os.fspath(path))


@dataclass
class Inventory:
    """Registrations by bundle name, and findings about ones that could not be read."""

    root: Path
    registrations: dict[str, Registration] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.registrations)

    @property
    def names(self) -> list[str]:
        """Bundle names, sorted."""
        return sorted(self.registrations)


def load_inventory(root: str | os.PathLike[str]) -> Inventory:
    """Assemble the inventory of the evidence repository at ``root``.

    Unreadable or invalid registrations, and directories without one, become error
    findings rather than exceptions, so a verifier can list every problem.
    """
    root = Path(root)
    inventory = Inventory(root=root)

    def error(
        code: str,
        message: str,
        bundle: str | None = None,
        path: str | None = None,
        severity: Severity = "error",
    ) -> None:
        inventory.findings.append(
            Finding(
                severity=severity,
                code=code,
                message=shown(message),  # a name on disk need not be UTF-8
                bundle=None if bundle is None else shown(bundle),
                path=None if path is None else shown(path),
            )
        )

    evidence = root / EVIDENCE_DIR
    if not evidence.is_dir():
        # A freshly initialised repository (evstore.toml, no bundle yet: git keeps no
        # empty directory) holds zero bundles, which verify; anything else is not one.
        initialised = (root / "evstore.toml").is_file()
        error(
            "no-evidence-dir",
            f"{evidence}: no evidence directory yet: no bundle is registered"
            if initialised
            else f"{evidence}: no evidence directory (expected evidence/<bundle>/bundle.json)",
            severity="info" if initialised else "error",
        )
        return inventory
    dirs = sorted(p for p in evidence.iterdir() if not p.name.startswith("."))
    real_root = os.path.realpath(root)
    for entry in dirs:
        rel = f"{EVIDENCE_DIR}/{entry.name}"
        reg_rel = f"{rel}/{REGISTRATION_NAME}"
        if entry.is_symlink() and resolve(entry) is None:
            error(
                "symlink-loop",
                f"{rel}: a symlink loop ({rel} -> {os.readlink(entry)}): no bundle to read",
                entry.name,
                rel,
            )
            continue
        if not entry.is_dir():
            error(
                "stray-file",
                f"{rel}: a file directly under evidence/ (only bundle directories belong there)",
                path=rel,
            )
            continue
        reg_file = entry / REGISTRATION_NAME
        if reg_file.is_symlink():
            real = resolve(reg_file)
            if real is None:
                error(
                    "symlink-loop",
                    f"{reg_rel}: a symlink loop ({os.readlink(reg_file)}): no registration to read",
                    entry.name,
                    reg_rel,
                )
                continue
            if not within(real, real_root) and within(os.path.realpath(entry), real_root):
                error(
                    "registration-symlink-escape",
                    f"{reg_rel} is a symlink to {real}, outside the repository: it is not "
                    "read (a registration must be the file that git tracks)",
                    entry.name,
                    reg_rel,
                )
                continue
        if not reg_file.is_file():
            error(
                "missing-registration",
                f"{rel}: no {REGISTRATION_NAME} in this bundle directory",
                entry.name,
                reg_rel,
            )
            continue
        try:
            registration = load_registration(reg_file)
        except ManifestError as exc:
            error(
                "invalid-registration",
                str(exc).replace(str(root) + os.sep, ""),
                entry.name,
                reg_rel,
            )
            continue
        if registration.manifest.name != entry.name:
            error(
                "name-mismatch",
                f"{reg_rel}: manifest name {registration.manifest.name!r} "
                f"disagrees with its directory {entry.name!r}",
                entry.name,
                reg_rel,
            )
        inventory.registrations[entry.name] = registration
    for c in name_collisions(p.name for p in dirs):
        error(
            "name-collision",
            f"{EVIDENCE_DIR}/{c.first} and {EVIDENCE_DIR}/{c.second}: bundle directories {c.reason}",
            c.second,
            f"{EVIDENCE_DIR}/{c.second}",
        )
    if not dirs:
        error(
            "empty-evidence-dir",
            f"{evidence}: the evidence directory holds no bundle yet",
            path=EVIDENCE_DIR,
            severity="info",
        )
    return inventory
