"""Protocols: strict loading, and registration as a bundle of their own.

``evstore campaign init NAME --protocol FILE`` registers bundle ``NAME`` holding
``protocol.toml`` (the exact bytes given, a repo entry) and every workload and
configuration file it names, at the relative paths it names them by (repo entries too),
with metadata ``kind = campaign-protocol``. The protocol digest, which names the
campaign in every run, is the BLAKE3 digest of the ``protocol.toml`` entry. A workload
is bound to it when its condition pins ``workload_digest`` (checked at init); otherwise
the registration binds path to digest and runs are matched against that digest. A
changed protocol is a new bundle under a new name, never an edit: registrations are
immutable.

A condition with ``request_rate`` or ``concurrency`` is a point of a sweep: init
registers its workload with those ``[run]`` values set (``point_workload``) at the
condition's ``workload_path``, and its runs are matched against that file's digest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .._canonical import loads_toml
from ..digest import hash_bytes
from ..errors import CampaignFitError, ConfigError, ManifestError
from ..inventory import load_registration, read_entry, registration_path
from ..models import Descriptor, Registration
from .models import ArmSpec, Protocol

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "PROTOCOL_ENTRY",
    "PROTOCOL_KIND",
    "Campaign",
    "init_campaign",
    "load_campaign",
    "parse_protocol",
]

PROTOCOL_ENTRY = "protocol.toml"
PROTOCOL_KIND = "campaign-protocol"


@dataclass(frozen=True)
class Campaign:
    """A registered protocol: its bundle, digest, parsed rules and the files it binds."""

    name: str
    registration: Registration
    digest: str
    protocol: Protocol
    files: dict[str, Descriptor]

    @property
    def baseline(self) -> ArmSpec:
        """The baseline arm."""
        return next(a for a in self.protocol.arm if a.baseline)

    @property
    def candidates(self) -> list[ArmSpec]:
        """The candidate arms, in protocol order."""
        return [a for a in self.protocol.arm if not a.baseline]

    def arm(self, name: str) -> ArmSpec:
        """The arm called ``name``; :class:`ConfigError` naming the known ones otherwise."""
        for arm in self.protocol.arm:
            if arm.name == name:
                return arm
        known = ", ".join(a.name for a in self.protocol.arm)
        raise ConfigError(f"campaign {self.name!r}: no arm {name!r} (arms: {known})")

    def harness(self, condition: str) -> str | None:
        """The harness whose imported runs condition ``condition`` takes (None:
        ``evstore run``'s)."""
        return next((c.harness for c in self.protocol.condition if c.name == condition), None)

    def workload_digest(self, condition: str) -> str:
        """The digest of the workload condition ``condition`` names."""
        for cond in self.protocol.condition:
            if cond.name == condition:
                return cond.workload_digest or self.files[cond.workload_path].digest
        known = ", ".join(c.name for c in self.protocol.condition)
        raise ConfigError(
            f"campaign {self.name!r}: no condition {condition!r} (conditions: {known})"
        )

    def config_digests(self, arm: str) -> frozenset[str]:
        """Digests of the configuration files arm ``arm`` declares."""
        return frozenset(self.files[p].digest for p in self.arm(arm).configs)

    def signing_keys(self, root: str | os.PathLike[str]) -> dict[str, Ed25519PublicKey]:
        """The public keys allowed to sign runs, by key id (empty when the protocol does
        not ask for signatures), read, verified, from the protocol's bundle."""
        return self._keys(root, self.protocol.signing.keys if self.protocol.signing else ())

    def worker_keys(self, root: str | os.PathLike[str]) -> dict[str, Ed25519PublicKey]:
        """The public keys whose signature makes a result computed elsewhere count
        (``[signing] workers``), by key id; empty when the protocol pins none."""
        return self._keys(root, self.protocol.signing.workers if self.protocol.signing else ())

    def _keys(
        self, root: str | os.PathLike[str], paths: tuple[str, ...]
    ) -> dict[str, Ed25519PublicKey]:
        if not paths:
            return {}
        from ..dsse import key_id, load_public_key

        where = registration_path(root, self.name).parent
        entries = {e.path: e for e in self.registration.manifest.entries}
        keys = {}
        for rel in paths:
            read_entry(where, self.name, entries[rel], "a signing key", "")
            key = load_public_key(where / rel)
            keys[key_id(key)] = key
        return keys

    def signer_problem(
        self, root: str | os.PathLike[str], key: Ed25519PublicKey | None
    ) -> CampaignFitError | None:
        """Why a run signed with ``key`` (``None``: unsigned) would not count, before it
        is run, as the error to raise (it names the ``signing_key`` parameter); ``None``
        when it would count."""
        keys = self.signing_keys(root)
        if not keys:
            return None
        from ..dsse import key_id

        allowed = ", ".join(k[:16] for k in sorted(keys))
        if key is None:
            return CampaignFitError(
                f"campaign {self.name!r} counts only runs signed by one of its keys "
                f"({allowed}): give {{signing_key}}",
                parameters=("signing_key",),
            )
        if key_id(key) not in keys:
            return CampaignFitError(
                f"{{signing_key}}: key {key_id(key)[:16]} is not one campaign {self.name!r} "
                f"allows ({allowed}): its runs would not count",
                parameters=("signing_key",),
            )
        return None

    def name_problem(self) -> str | None:
        """A sentence when the protocol's ``name`` is not its campaign's bundle name."""
        if self.protocol.name == self.name:
            return None
        return (
            f"campaign {self.name!r}: its protocol.toml says name = {self.protocol.name!r}; a "
            "protocol is registered under its own name"
        )


def parse_protocol(data: bytes, source: str) -> Protocol:
    """Decode ``protocol.toml`` strictly; errors name ``source`` and the field."""
    raw = loads_toml(data, f"protocol {source}")
    try:
        protocol = msgspec.convert(raw, Protocol)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"protocol {source}: {exc}") from exc
    baselines = [a.name for a in protocol.arm if a.baseline]
    if len(baselines) != 1:
        raise ConfigError(
            f"protocol {source}: exactly one arm must have `baseline = true`, found "
            f"{len(baselines)}" + (f" ({', '.join(baselines)})" if baselines else "")
        )
    for kind, names in (
        ("condition", [c.name for c in protocol.condition]),
        ("arm", [a.name for a in protocol.arm]),
    ):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"protocol {source}: {kind} {dup[0]!r} is declared twice")
    timing = protocol.timing
    if timing.estimator == "paired-log-t" and timing.order != "interleaved":
        raise ConfigError(
            f"protocol {source}: timing.estimator = 'paired-log-t' pairs interleaved runs: "
            "it needs timing.order = 'interleaved'"
        )
    if (base := next(a for a in protocol.arm if a.baseline)).runs < 2:
        raise ConfigError(
            f"protocol {source}: arm[{base.name}].runs = {base.runs}: the baseline needs at "
            "least 2 runs per condition, so its repeatability can be qualified"
        )
    return protocol


def point_workload(data: bytes, point: dict[str, float | int | str], where: str) -> bytes:
    """A workload's bytes with ``[run]`` values set (a point of a sweep): the TOML
    decoded, the values set, written again (``tomli_w``), so the same base and point
    give the same bytes on every clone."""
    import tomli_w

    raw = loads_toml(data, where)
    run = raw.setdefault("run", {})
    if not isinstance(run, dict):
        raise ConfigError(f"{where}: [run] is not a table")
    run.update(point)
    return tomli_w.dumps(raw).encode()


def _referenced(protocol: Protocol) -> list[str]:
    paths = [c.workload for c in protocol.condition]
    paths += [c.workload_path for c in protocol.condition if c.point]
    paths += [p for a in protocol.arm for p in a.configs]
    if protocol.signing:
        paths += [*protocol.signing.keys, *protocol.signing.workers]
    return list(dict.fromkeys(paths))


def init_campaign(
    root: str | os.PathLike[str], name: str, protocol_path: str | os.PathLike[str]
) -> Campaign:
    """Register bundle ``name`` holding ``protocol.toml`` and the files it names.

    Atomic: the protocol, every file it names (read once, by the one file-reading rule
    of ``confined.py``: inside the protocol's directory or the repository, regular
    files, bounded), every workload and every entry name are checked first; only then
    is the bundle registered, from the bytes that were checked. An error registers
    nothing, so the name stays free.
    """
    from ..bundle import RepoFile, check_bundle_name, register_bundle
    from ..config import as_repository
    from ..confined import read_file
    from ..paths import name_collisions, path_problem
    from ..runs.workload import parse_workload

    check_bundle_name(name)
    src = Path(protocol_path)
    roots = (src.absolute().parent, Path(root))
    data = read_file(src, roots, where=f"protocol {src}")
    protocol = parse_protocol(data, str(src))
    base = src.parent
    referenced = _referenced(protocol)
    for rel in referenced:
        if rel == PROTOCOL_ENTRY:
            raise ConfigError(f"protocol {src}: {rel} cannot name the protocol itself")
        problem = path_problem(rel)
        if problem is not None:
            raise ConfigError(
                f"protocol {src}: {rel!r} cannot be an entry of the protocol bundle: "
                f"{problem.reason} (name files by plain relative paths below the protocol)"
            )
    for collision in name_collisions([PROTOCOL_ENTRY, *referenced]):
        raise ConfigError(f"protocol {src}: {collision.reason}")
    contents: dict[str, bytes] = {PROTOCOL_ENTRY: data}
    for cond in protocol.condition:
        where = f"protocol {src}: condition {cond.name!r}: workload {cond.workload}"
        wdata = contents.get(cond.workload)
        if wdata is None:
            if not os.path.lexists(base / cond.workload):
                raise ConfigError(f"{where}: no such file (paths are relative to the protocol)")
            wdata = read_file(base / cond.workload, roots, where=where)
            contents[cond.workload] = wdata
        if cond.harness is None:  # a harness's input file is the harness's to read
            parse_workload(wdata, base / cond.workload)  # valid before any run uses it
        if cond.point:
            if cond.harness is not None:
                raise ConfigError(f"{where}: a point of a sweep needs an evstore workload")
            wdata = point_workload(wdata, cond.point, where)
            parse_workload(wdata, f"{base / cond.workload} at {cond.point}")
            contents[cond.workload_path] = wdata
        if cond.workload_digest is not None:
            got = hash_bytes(wdata).digest
            if got != cond.workload_digest:
                raise ConfigError(
                    f"{where}: hashes to {got}, but the protocol pins {cond.workload_digest}"
                )
    for arm in protocol.arm:
        for cfg in arm.configs:
            if cfg not in contents:
                if not os.path.lexists(base / cfg):
                    raise ConfigError(
                        f"protocol {src}: arm {arm.name!r}: config {cfg}: no such file"
                    )
                contents[cfg] = read_file(
                    base / cfg, roots, where=f"protocol {src}: arm {arm.name!r}: config {cfg}"
                )
    if protocol.signing is not None:
        from ..dsse import load_public_key

        for rel in (*protocol.signing.keys, *protocol.signing.workers):
            where = f"protocol {src}: signing key {rel}"
            if rel not in contents:
                if not os.path.lexists(base / rel):
                    raise ConfigError(f"{where}: no such file")
                contents[rel] = read_file(base / rel, roots, where=where)
            if b"PRIVATE KEY" in contents[rel]:
                raise ConfigError(f"{where} is a private key; name the public one")
            load_public_key(base / rel)
    if protocol.name != name:
        raise ConfigError(
            f"protocol {src}: name = {protocol.name!r}, but the campaign is {name!r}: register "
            "a protocol under its own name"
        )
    register_bundle(
        as_repository(root),
        name,
        files={
            rel: RepoFile(content, role="protocol" if rel == PROTOCOL_ENTRY else None)
            for rel, content in sorted(contents.items())
        },
        annotations={"kind": PROTOCOL_KIND, "campaign": protocol.name},
    )
    return load_campaign(root, name)


def load_campaign(root: str | os.PathLike[str], name: str) -> Campaign:
    """Read a registered protocol, its bytes checked against the registration."""
    reg_path = registration_path(root, name)
    registration = load_registration(reg_path)
    manifest = registration.manifest
    entry = next((e for e in manifest.entries if e.path == PROTOCOL_ENTRY), None)
    if entry is None or manifest.metadata.annotations.get("kind") != PROTOCOL_KIND:
        raise ManifestError(
            f"bundle {name!r} is not a campaign protocol (no {PROTOCOL_ENTRY} entry with "
            f"kind = {PROTOCOL_KIND}); register one with `evstore campaign init`"
        )
    path = reg_path.parent / PROTOCOL_ENTRY
    hint = ": a protocol is never edited, register a new one"
    data = read_entry(reg_path.parent, name, entry, "the protocol", hint)
    protocol = parse_protocol(data, str(path))
    files = {e.path: e.descriptor for e in manifest.entries}
    for rel in _referenced(protocol):
        if rel not in files:
            raise ManifestError(f"bundle {name!r}: the protocol names {rel}, which it lacks")
    return Campaign(name, registration, entry.descriptor.digest, protocol, files)
