"""DSSE envelopes of in-toto statements, ed25519 keys, and signed run records.

The primitives ``attest.py`` builds attestations from, kept apart so that runs (which
sign their record when sealed) and campaigns (which check those signatures against the
keys a protocol pins) use them without importing attestations of bundles and records.
DSSE and keys are securesystemslib's: ``securesystemslib.dsse.Envelope`` signs and
verifies over the pre-authentication encoding ``PAE(payloadType, payload)`` (DSSE v1),
never the bare payload; ``CryptoSigner`` generates and signs, ``SSlibKey`` verifies.
What is ours: the key id (SHA-256 of the raw 32-byte public key, as every envelope and
protocol since the first has it, handed to securesystemslib as the key's id), reading
PEM key files with our errors (securesystemslib reads a private key only beside its
public key), the statement and envelope models (the file format, decoded strictly), and
run statements (set-aside statements are ``campaign/setaside.py``'s). ``cryptography``
and ``securesystemslib`` are imported inside the functions that need them.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ._canonical import canonical, decode
from .digest import hash_bytes
from .errors import AttestationError
from .inventory import EVIDENCE_DIR
from .models import Entry, Model

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )
    from securesystemslib.signer import SSlibKey

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_RUN",
    "STATEMENT_TYPE",
    "Envelope",
    "RunSignature",
    "Signature",
    "Statement",
    "Subject",
    "decode_envelope",
    "first_signer",
    "generate_key",
    "key_id",
    "load_private_key",
    "load_public_key",
    "pae",
    "sign_run",
    "sign_statement",
    "signed_payload",
    "subject_of",
    "verify_run_signature",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"

PREDICATE_RUN = "https://evidencestore.dev/attestation/run/v1"


class Subject(Model, frozen=True, kw_only=True, omit_defaults=False):
    """An artifact the statement is about: a name and its digests (hex, by algorithm)."""

    name: str
    digest: dict[str, str]


class Statement(Model, frozen=True, kw_only=True, omit_defaults=False):
    """An in-toto Statement v1."""

    type: str = msgspec.field(default=STATEMENT_TYPE, name="_type")
    subject: tuple[Subject, ...]
    predicate_type: str = msgspec.field(name="predicateType")
    predicate: dict[str, Any] = msgspec.field(default_factory=dict)


class Signature(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One DSSE signature: the signing key's id and the base64 signature."""

    keyid: str = ""
    sig: str


class Envelope(Model, frozen=True, kw_only=True, omit_defaults=False):
    """A DSSE envelope: base64 payload, its type, and signatures over PAE."""

    payload: str
    payload_type: str = msgspec.field(name="payloadType")
    signatures: tuple[Signature, ...]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding (securesystemslib's)."""
    from securesystemslib.dsse import Envelope as SSlibEnvelope

    return SSlibEnvelope(payload, payload_type, {}).pae()


# -- keys ---------------------------------------------------------------------------
def _sslib_key(key: Ed25519PublicKey) -> SSlibKey:
    """``key`` as securesystemslib's, under our key id (its ed25519 ``keyval`` is the raw
    public key in hex)."""
    from securesystemslib.signer import SSlibKey

    k = SSlibKey.from_crypto(key)
    kid = hashlib.sha256(bytes.fromhex(k.keyval["public"])).hexdigest()
    return SSlibKey(kid, k.keytype, k.scheme, k.keyval)


def key_id(key: Ed25519PublicKey) -> str:
    """The key's id: SHA-256 of its raw 32-byte public key, hex."""
    return _sslib_key(key).keyid


def generate_key(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Create an ed25519 key pair (securesystemslib's ``CryptoSigner``): ``path``
    (PKCS#8 PEM, mode 0600) and ``path.pub`` (SubjectPublicKeyInfo PEM).

    Existing files are never overwritten.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    from securesystemslib.signer import CryptoSigner

    private = Path(path)
    public = private.with_name(private.name + ".pub")
    for target in (private, public):
        if target.exists():
            raise AttestationError(f"{target}: already exists; refusing to overwrite a key")
    signer = CryptoSigner.generate_ed25519()
    raw = bytes.fromhex(signer.public_key.keyval["public"])
    pub = Ed25519PublicKey.from_public_bytes(raw).public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo
    )
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(signer.private_bytes)
        public.write_bytes(pub)
    except OSError as exc:
        raise AttestationError(f"{exc.filename}: cannot write key: {exc.strerror}") from exc
    return private, public


def _load_key(path: str | os.PathLike[str], kind: str) -> Any:
    """The ed25519 key (``kind``: private or public) in PEM file ``path``; a public key
    is also read from a private key file."""
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import (
        load_pem_private_key,
        load_pem_public_key,
    )

    where = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AttestationError(f"{where}: cannot read {kind} key: {exc.strerror}") from exc
    if kind == "public" and b"PRIVATE KEY" in data:
        return _load_key(path, "private").public_key()
    try:
        key = load_pem_private_key(data, None) if kind == "private" else load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        what = "an unencrypted PEM private" if kind == "private" else "a PEM public"
        raise AttestationError(f"{where}: not {what} key ({exc})") from None
    want = ed25519.Ed25519PrivateKey if kind == "private" else ed25519.Ed25519PublicKey
    if not isinstance(key, want):
        raise AttestationError(f"{where}: expected an ed25519 {kind} key")
    return key


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load an unencrypted PEM (PKCS#8) ed25519 private key."""
    key: Ed25519PrivateKey = _load_key(path, "private")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load a PEM ed25519 public key (a private key file is accepted, its public half used)."""
    key: Ed25519PublicKey = _load_key(path, "public")
    return key


def sign_statement(statement: Statement, key: Ed25519PrivateKey) -> Envelope:
    """Sign ``statement`` (canonical JSON) into a DSSE envelope."""
    from securesystemslib.dsse import Envelope as SSlibEnvelope
    from securesystemslib.signer import CryptoSigner

    envelope = SSlibEnvelope(canonical(statement), PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(key, _sslib_key(key.public_key())))
    return msgspec.convert(envelope.to_dict(), Envelope)


def decode_envelope(data: bytes, source: str) -> Envelope:
    """The envelope in ``data`` (``source`` names it in the error), decoded strictly."""
    try:
        return decode(data, Envelope)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AttestationError(f"{source}: not a DSSE envelope: {exc}") from None


def signed_payload(env: Envelope, public_key: Ed25519PublicKey) -> tuple[bytes | None, str | None]:
    """The payload when one of the envelope's signatures verifies with ``public_key``
    (securesystemslib, over PAE), else ``None``; and a problem when the payload is not
    base64. A signature without a key id (DSSE makes it optional) is tried with the key."""
    from securesystemslib.dsse import Envelope as SSlibEnvelope
    from securesystemslib.exceptions import UnverifiedSignatureError
    from securesystemslib.signer import Signature as SSlibSignature

    try:
        payload = base64.b64decode(env.payload, validate=True)
    except ValueError:
        return None, "payload is not valid base64"
    key = _sslib_key(public_key)
    for s in env.signatures:
        if s.keyid not in ("", key.keyid):
            continue
        try:
            sig = SSlibSignature(key.keyid, base64.b64decode(s.sig, validate=True).hex())
            SSlibEnvelope(payload, env.payload_type, {key.keyid: sig}).verify([key], 1)
        except (ValueError, UnverifiedSignatureError):
            continue
        return payload, None
    return None, None


def first_signer(env: Envelope, keys: dict[str, Ed25519PublicKey]) -> tuple[str, bytes] | None:
    """The first of ``keys`` (by id) that signed the envelope's in-toto payload, and the
    payload; ``None`` when none did or the payload is of another type."""
    if env.payload_type == PAYLOAD_TYPE:
        for kid, key in sorted(keys.items()):
            if (payload := signed_payload(env, key)[0]) is not None:
                return kid, payload
    return None


# -- signed runs ----------------------------------------------------------------------
class RunSignature(msgspec.Struct, frozen=True, kw_only=True):
    """A run's signature as a campaign judges it: ``code`` is ``None`` when a key of
    ``keys`` signed exactly these ``run.json`` bytes and every other entry of the bundle,
    else one of ``unsigned-run``, ``other-signer``, ``bad-signature`` or
    ``changed-after-signing``. ``scope`` says what the signature binds: ``manifest``
    (every entry), or ``run.json`` for a run signed before signatures bound the
    manifest (its other entries, raw arrays among them, are not bound)."""

    keyid: str | None
    code: str | None
    message: str
    scope: str = "manifest"


#: The predicate field of a run statement that says its subjects are every entry.
BINDS_MANIFEST = {"binds": "manifest"}


def subject_of(bundle: str, entry: str, data: bytes) -> Subject:
    """The subject naming ``entry`` of bundle ``bundle`` by its bytes' BLAKE3 and SHA-256."""
    return Subject(
        name=f"{EVIDENCE_DIR}/{bundle}/{entry}",
        digest={
            "blake3": hash_bytes(data).digest.removeprefix("blake3:"),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )


def _entry_subjects(
    bundle: str, entries: Iterable[Entry], sha256: Callable[[Entry], str] | None = None
) -> tuple[Subject, ...]:
    """One subject per entry, sorted by path: its BLAKE3 (the store address) and, given
    ``sha256`` (signing), its SHA-256; verifying compares BLAKE3 alone."""
    return tuple(
        Subject(
            name=f"{EVIDENCE_DIR}/{bundle}/{e.path}",
            digest={
                "blake3": e.descriptor.digest.removeprefix("blake3:"),
                **({"sha256": sha256(e)} if sha256 is not None else {}),
            },
        )
        for e in sorted(entries, key=lambda e: e.path)
    )


def sign_run(
    bundle: str,
    data: bytes,
    predicate: dict[str, Any],
    key: Ed25519PrivateKey,
    entries: Iterable[Entry] = (),
    sha256: Callable[[Entry], str] | None = None,
) -> Envelope:
    """Sign a run record's bytes (``run.json`` of bundle ``bundle``) and every other entry
    of its bundle (``entries``: raw arrays, outputs, configurations; all but the signature
    itself) as an in-toto statement of type :data:`PREDICATE_RUN`, one subject each, in a
    DSSE envelope; ``sha256`` gives an entry's SHA-256 (hex), which in-toto verifiers
    (``evstore attest verify``, GitHub's ``gh attestation verify``) check beside BLAKE3:
    every subject carries both, so entries need it."""
    entries = tuple(entries)
    if entries and sha256 is None:
        raise AttestationError(
            f"run {bundle!r}: signing {len(entries)} entries needs their SHA-256 (sha256=)"
        )
    statement = Statement(
        subject=(
            subject_of(bundle, "run.json", data),
            *_entry_subjects(bundle, entries, sha256),
        ),
        predicate_type=PREDICATE_RUN,
        predicate={**predicate, **BINDS_MANIFEST},
    )
    return sign_statement(statement, key)


def verify_run_signature(
    envelope: bytes | None,
    data: bytes,
    bundle: str,
    keys: dict[str, Ed25519PublicKey],
    entries: Iterable[Entry] = (),
) -> RunSignature:
    """Judge a run's envelope (``None`` when the run has none) against its ``run.json``
    bytes, the bundle's other ``entries`` (all but ``run.json`` and the signature) and the
    public keys allowed to sign (by key id). A statement of the earlier form (one subject,
    ``run.json``) still verifies, with ``scope = "run.json"``: what it binds is checked,
    and the campaign says the rest is not bound."""
    allowed = ", ".join(k[:16] for k in sorted(keys))
    if envelope is None:
        return RunSignature(
            keyid=None,
            code="unsigned-run",
            message=f"run {bundle!r} is not signed, and the protocol requires a signature by "
            f"one of its keys ({allowed}); record it with `evstore run --sign KEY`",
        )
    try:
        env = decode_envelope(envelope, f"run {bundle!r}: its signature")
    except AttestationError as exc:
        return RunSignature(keyid=None, code="bad-signature", message=str(exc))
    signed = first_signer(env, keys)
    if signed is None:
        others = sorted({s.keyid for s in env.signatures if s.keyid and s.keyid not in keys})
        if others:
            return RunSignature(
                keyid=others[0],
                code="other-signer",
                message=f"run {bundle!r} is signed by key {others[0][:16]}, which the protocol "
                f"does not allow (allowed: {allowed})",
            )
        return RunSignature(
            keyid=None,
            code="bad-signature",
            message=f"run {bundle!r}: no signature of its envelope verifies with an allowed "
            f"key ({allowed}): the envelope was altered",
        )
    signer, payload = signed
    try:
        statement = decode(payload, Statement)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return RunSignature(
            keyid=signer, code="bad-signature", message=f"run {bundle!r}: not a statement: {exc}"
        )
    want = subject_of(bundle, "run.json", data).digest
    digests = [s.digest for s in statement.subject]
    full = isinstance(statement.predicate, dict) and all(
        statement.predicate.get(k) == v for k, v in BINDS_MANIFEST.items()
    )
    if statement.predicate_type != PREDICATE_RUN or not digests or (not full and len(digests) != 1):
        return RunSignature(
            keyid=signer,
            code="bad-signature",
            message=f"run {bundle!r}: its signed statement is not a run statement "
            f"({statement.predicate_type!r}, {len(digests)} subject(s))",
        )
    if any(digests[0].get(alg) != want[alg] for alg in ("blake3", "sha256")):
        return RunSignature(
            keyid=signer,
            code="changed-after-signing",
            message=f"run {bundle!r}: its run.json hashes to blake3:{want['blake3']}, but key "
            f"{signer[:16]} signed blake3:{digests[0].get('blake3')}: the run record changed "
            "after it was signed",
        )
    if not full:
        return RunSignature(
            keyid=signer, code=None, scope="run.json",
            message=f"signed by key {signer[:16]} (run.json only: signed before signatures "
            "bound every entry)",
        )  # fmt: skip
    bound = {s.name: s.digest.get("blake3") for s in statement.subject[1:]}
    have = {s.name: s.digest["blake3"] for s in _entry_subjects(bundle, entries)}
    for name in sorted(set(bound) | set(have)):
        if bound.get(name) != have.get(name):
            now = f"blake3:{have[name]}" if name in have else "absent"
            then = f"blake3:{bound[name]}" if name in bound else "not signed"
            return RunSignature(
                keyid=signer,
                code="changed-after-signing",
                message=f"run {bundle!r}: entry {name.rpartition(f'{bundle}/')[2]!r} is "
                f"{now}, but key {signer[:16]} signed {then}: the bundle changed after it "
                "was signed",
            )
    return RunSignature(keyid=signer, code=None, message=f"signed by key {signer[:16]}")
