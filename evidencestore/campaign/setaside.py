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

In a campaign whose protocol pins signing keys (``[signing]``), a record takes effect
only when one of those keys signed it (``set-aside.dsse.json``: an in-toto statement
about the record file, ``--sign KEY``); otherwise it is the finding
``unsigned-set-aside``, and the runs it names count as if it did not exist: a committer
who cannot sign a run cannot remove one either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from .._canonical import decode, pretty
from ..digest import hash_bytes
from ..errors import AttestationError, ConfigError, EvidenceStoreError, ManifestError
from ..inventory import EVIDENCE_DIR, load_registration, read_entry, registration_path
from ..models import Registration
from .models import RunVoid, Withdrawal
from .protocol import Campaign

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..config import Repository
    from ..dsse import Envelope

__all__ = [
    "PREDICATE_SET_ASIDE",
    "SIGNATURE_ENTRY",
    "VOID_ENTRY",
    "VOID_KIND",
    "WITHDRAWAL_ENTRY",
    "WITHDRAWAL_KIND",
    "SetAside",
    "read_set_aside",
    "set_aside_signature_problem",
    "sign_set_aside",
    "void_run",
    "withdraw_arm",
]

VOID_KIND = "campaign-void"
WITHDRAWAL_KIND = "campaign-withdrawal"
VOID_ENTRY = "void.json"
WITHDRAWAL_ENTRY = "withdrawal.json"
SIGNATURE_ENTRY = "set-aside.dsse.json"
PREDICATE_SET_ASIDE = "https://evidencestore.dev/attestation/set-aside/v1"
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
_ENTRIES = {VOID_KIND: (VOID_ENTRY,), WITHDRAWAL_KIND: (WITHDRAWAL_ENTRY,)}


@dataclass(frozen=True)
class SetAside:
    """A void or withdrawal record as registered: its bundle name and the record."""

    bundle: str
    record: RunVoid | Withdrawal


def read_set_aside(repo: Repository, bundle: str, reg: Registration) -> SetAside:
    """The void or withdrawal record of bundle ``bundle``, checked against its
    registration; :class:`ManifestError` naming the bundle otherwise."""
    kind = reg.manifest.metadata.annotations.get("kind", "")
    entry_name = _ENTRIES[kind][0]
    type_: type[RunVoid] | type[Withdrawal] = RunVoid if kind == VOID_KIND else Withdrawal
    entry = next((e for e in reg.manifest.entries if e.path == entry_name), None)
    if entry is None:
        raise ManifestError(f"bundle {bundle!r} (kind {kind}) has no {entry_name} entry")
    bundle_dir = registration_path(repo, bundle).parent
    data = read_entry(bundle_dir, bundle, entry, f"the {kind} record")
    try:
        record: RunVoid | Withdrawal = decode(data, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ManifestError(f"bundle {bundle!r}: {entry_name}: not a valid record: {exc}") from None
    return SetAside(bundle, record)


def _register(
    repo: Repository,
    name: str,
    kind: str,
    record: RunVoid | Withdrawal,
    signing_key: Ed25519PrivateKey | None,
) -> Registration:
    from ..bundle import RepoFile, register_bundle

    entry, data = _ENTRIES[kind][0], pretty(record)
    files = {entry: RepoFile(data)}
    if signing_key is not None:
        envelope = pretty(sign_set_aside(name, entry, data, signing_key))
        files[SIGNATURE_ENTRY] = RepoFile(envelope, media_type=DSSE_MEDIA_TYPE, role="signature")
    return register_bundle(
        repo,
        name,
        files=files,
        annotations={"kind": kind, "campaign": record.campaign},
    )


def set_aside_signature_problem(
    repo: Repository, aside: SetAside, reg: Registration, keys: dict[str, Any]
) -> str | None:
    """Why the record of ``aside`` is not signed by one of ``keys`` (the protocol's
    pinned keys), or None when it is."""
    from ..dsse import Statement, decode_envelope, first_signer

    bundle = aside.bundle
    void = isinstance(aside.record, RunVoid)
    entry, verb = (VOID_ENTRY, "void") if void else (WITHDRAWAL_ENTRY, "withdraw")
    entries = {e.path: e for e in reg.manifest.entries}
    where = registration_path(repo, bundle).parent
    try:
        data = read_entry(where, bundle, entries[entry], f"the {entry} record")
        sig = entries.get(SIGNATURE_ENTRY)
        envelope = read_entry(where, bundle, sig, "its signature") if sig else None
    except EvidenceStoreError as exc:
        return str(exc)
    allowed = ", ".join(k[:16] for k in sorted(keys))
    if envelope is None:
        return (
            f"record {bundle!r} is not signed, and the protocol pins signing keys "
            f"({allowed}): register it with `evstore campaign {verb} --sign KEY`"
        )
    try:
        env = decode_envelope(envelope, f"record {bundle!r}: its signature")
    except AttestationError as exc:
        return str(exc)
    if (signed := first_signer(env, keys)) is None:
        return (
            f"record {bundle!r}: no signature of its envelope verifies with a key the "
            f"protocol pins ({allowed})"
        )
    try:
        statement = decode(signed[1], Statement)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"record {bundle!r}: its signature holds no statement: {exc}"
    want = hash_bytes(data).digest.removeprefix("blake3:")
    subjects = {s.name: s.digest.get("blake3") for s in statement.subject}
    if statement.predicate_type != PREDICATE_SET_ASIDE or subjects != {
        f"{EVIDENCE_DIR}/{bundle}/{entry}": want
    }:
        return (
            f"record {bundle!r}: its signed statement is not about its {entry} as it is "
            "(changed after signing, or another record's signature)"
        )
    return None


def sign_set_aside(bundle: str, entry: str, data: bytes, key: Ed25519PrivateKey) -> Envelope:
    """Sign a void or withdrawal record's bytes (``entry`` of bundle ``bundle``) as an
    in-toto statement of type :data:`PREDICATE_SET_ASIDE`, in a DSSE envelope."""
    from ..dsse import Statement, sign_statement, subject_of

    statement = Statement(
        subject=(subject_of(bundle, entry, data),), predicate_type=PREDICATE_SET_ASIDE
    )
    return sign_statement(statement, key)


def void_run(
    repo: Repository,
    campaign: Campaign,
    run: str,
    reason: str,
    name: str,
    *,
    signing_key: Ed25519PrivateKey | None = None,
) -> RunVoid:
    """Register void record ``name`` in ``repo``, setting its run ``run`` of ``campaign``
    aside (signed with ``signing_key`` when given: a campaign with ``[signing]`` needs
    it)."""
    if not reason.strip():
        raise ConfigError("{reason}: say why the run is set aside", parameters=("reason",))
    try:
        reg = load_registration(registration_path(repo, run))
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
    _register(repo, name, VOID_KIND, record, signing_key)
    return record


def withdraw_arm(
    repo: Repository,
    campaign: Campaign,
    arm: str,
    reason: str,
    name: str,
    *,
    signing_key: Ed25519PrivateKey | None = None,
) -> Withdrawal:
    """Register withdrawal record ``name`` in ``repo``, withdrawing candidate arm ``arm``
    (signed with ``signing_key`` when given)."""
    if not reason.strip():
        raise ConfigError("{reason}: say why the arm is withdrawn", parameters=("reason",))
    if campaign.arm(arm).baseline:
        raise ConfigError(f"arm {arm!r} is the baseline: only a candidate arm can be withdrawn")
    record = Withdrawal(
        campaign=campaign.name, protocol_digest=campaign.digest, arm=arm, reason=reason.strip()
    )
    _register(repo, name, WITHDRAWAL_KIND, record, signing_key)
    return record
