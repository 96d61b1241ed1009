"""Setting a mistaken run or an arm aside, by committed records.

Registrations are immutable, so a run launched by mistake (wrong configuration, wrong
server) cannot be removed; a *void record* sets it aside instead: bundle ``NAME`` with
``void.json`` (:class:`~.models.RunVoid`: the run, its bundle digest, a reason) and
metadata ``kind = campaign-void``. A *withdrawal record* (``withdrawal.json``,
:class:`~.models.Withdrawal`, ``kind = campaign-withdrawal``) withdraws a candidate arm.
Either takes effect once committed (``members.py`` reads them with the history): the
voided run or the withdrawn arm's runs then count for nothing and make no finding, and
stay listed as voided or withdrawn with the reason. A void names the run's digest, so
it never applies to another registration under the same name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import msgspec

from .._canonical import decode, pretty
from ..errors import ConfigError, ManifestError
from ..inventory import load_registration, read_entry, registration_path
from ..models import Registration
from .models import RunVoid, Withdrawal
from .protocol import Campaign

__all__ = [
    "VOID_ENTRY",
    "VOID_KIND",
    "WITHDRAWAL_ENTRY",
    "WITHDRAWAL_KIND",
    "SetAside",
    "read_set_aside",
    "void_run",
    "withdraw_arm",
]

VOID_KIND = "campaign-void"
WITHDRAWAL_KIND = "campaign-withdrawal"
VOID_ENTRY = "void.json"
WITHDRAWAL_ENTRY = "withdrawal.json"
_ENTRIES = {VOID_KIND: (VOID_ENTRY,), WITHDRAWAL_KIND: (WITHDRAWAL_ENTRY,)}


@dataclass(frozen=True)
class SetAside:
    """A void or withdrawal record as registered: its bundle name and the record."""

    bundle: str
    record: RunVoid | Withdrawal


def read_set_aside(root: str | os.PathLike[str], bundle: str, reg: Registration) -> SetAside:
    """The void or withdrawal record of bundle ``bundle``, checked against its
    registration; :class:`ManifestError` naming the bundle otherwise."""
    kind = reg.manifest.metadata.annotations.get("kind", "")
    entry_name = _ENTRIES[kind][0]
    type_: type[RunVoid] | type[Withdrawal] = RunVoid if kind == VOID_KIND else Withdrawal
    entry = next((e for e in reg.manifest.entries if e.path == entry_name), None)
    if entry is None:
        raise ManifestError(f"bundle {bundle!r} (kind {kind}) has no {entry_name} entry")
    bundle_dir = registration_path(root, bundle).parent
    data = read_entry(bundle_dir, bundle, entry, f"the {kind} record")
    try:
        record: RunVoid | Withdrawal = decode(data, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ManifestError(f"bundle {bundle!r}: {entry_name}: not a valid record: {exc}") from None
    return SetAside(bundle, record)


def _register(
    root: str | os.PathLike[str], name: str, kind: str, record: RunVoid | Withdrawal
) -> Registration:
    from ..bundle import RepoFile, register_bundle
    from ..config import as_repository

    return register_bundle(
        as_repository(root),
        name,
        files={_ENTRIES[kind][0]: RepoFile(pretty(record))},
        annotations={"kind": kind, "campaign": record.campaign},
    )


def void_run(
    root: str | os.PathLike[str], campaign: Campaign, run: str, reason: str, name: str
) -> RunVoid:
    """Register void record ``name`` setting run ``run`` of ``campaign`` aside."""
    if not reason.strip():
        raise ConfigError("{reason}: say why the run is set aside", parameters=("reason",))
    try:
        reg = load_registration(registration_path(root, run))
    except ManifestError as exc:
        raise ConfigError(f"run {run!r}: {exc}") from None
    notes = reg.manifest.metadata.annotations
    if notes.get("kind") != "run" or notes.get("campaign") != campaign.name:
        raise ConfigError(f"bundle {run!r} is not a run of campaign {campaign.name!r}")
    record = RunVoid(
        campaign=campaign.name,
        protocol_digest=campaign.digest,
        run=run,
        run_digest=reg.digest,
        reason=reason.strip(),
    )
    _register(root, name, VOID_KIND, record)
    return record


def withdraw_arm(
    root: str | os.PathLike[str], campaign: Campaign, arm: str, reason: str, name: str
) -> Withdrawal:
    """Register withdrawal record ``name`` withdrawing candidate arm ``arm``."""
    if not reason.strip():
        raise ConfigError("{reason}: say why the arm is withdrawn", parameters=("reason",))
    if campaign.arm(arm).baseline:
        raise ConfigError(f"arm {arm!r} is the baseline: only a candidate arm can be withdrawn")
    record = Withdrawal(
        campaign=campaign.name, protocol_digest=campaign.digest, arm=arm, reason=reason.strip()
    )
    _register(root, name, WITHDRAWAL_KIND, record)
    return record
