"""Attestations: in-toto Statement v1 in a DSSE envelope, signed with a local ed25519 key.

A statement names its subjects by repository-relative path with two digests each:
``sha256`` (one of in-toto's named algorithms, for generic verifiers) and ``blake3`` (the
store's address, so a verifier can find the bytes). A bundle's subjects are its
registration file and every entry, and its predicate names the kind of every record
among them (``records``: entry path -> kind); a claim, campaign status or any other
record is one blob (by digest, from the store) or one file, its kind named in the
predicate. Kinds come from the decoded type (``evidencestore.records``), comparison
records included, never from sniffing keys. The envelope's signature covers the DSSE
pre-authentication encoding ``PAE(payloadType, payload)`` (DSSE v1), never the bare
payload, so a payload cannot be replayed under another type.

Everything is offline: keys are PEM files (PKCS#8 private, SubjectPublicKeyInfo public),
envelopes are signed and verified by securesystemslib (``dsse.py``) with ed25519. Verification re-reads every subject
(from the working tree, else the repository store with its remotes, verified) and
recomputes both digests; it lists every problem, it does not stop at the first.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from ._canonical import decode
from .config import Repository, as_repository
from .digest import digest_from_hex, is_digest, new_hasher
from .dsse import (
    PAYLOAD_TYPE,
    PREDICATE_RUN,
    STATEMENT_TYPE,
    Envelope,
    RunSignature,
    Signature,
    Statement,
    Subject,
    decode_envelope,
    generate_key,
    key_id,
    load_private_key,
    load_public_key,
    pae,
    sign_run,
    sign_statement,
    signed_payload,
    verify_run_signature,
)
from .errors import AttestationError, EvidenceStoreError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME, load_registration, registration_path
from .models import Entry, entry_path_problem
from .testresult import PREDICATE_TEST_RESULT

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PublicKey,
    )

    from .testresult import Verdict

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATES",
    "PREDICATE_BUNDLE",
    "PREDICATE_RECORD",
    "PREDICATE_RUN",
    "PREDICATE_TEST_RESULT",
    "STATEMENT_TYPE",
    "AttestationError",
    "AttestationResult",
    "Envelope",
    "RunSignature",
    "Signature",
    "Statement",
    "Subject",
    "attest",
    "check_attestation",
    "generate_key",
    "key_id",
    "load_private_key",
    "load_public_key",
    "pae",
    "sign_run",
    "sign_statement",
    "statement_for",
    "verify_attestation",
    "verify_run_signature",
]

PREDICATE_BUNDLE = "https://evidencestore.dev/attestation/bundle/v1"
PREDICATE_RECORD = "https://evidencestore.dev/attestation/record/v1"
_CHUNK = 1 << 20


class AttestationResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of checking an envelope: the statement (when it could be read), the
    subjects that matched, and every problem found."""

    ok: bool
    statement: Statement | None
    verified: tuple[str, ...]
    problems: tuple[str, ...]
    keyid: str | None = None
    expected: str | None = None


# -- subjects -------------------------------------------------------------------------
def _digests(stream: BinaryIO | Any) -> dict[str, str]:
    sha = hashlib.sha256()
    b3 = new_hasher()
    while chunk := stream.read(_CHUNK):
        sha.update(chunk)
        b3.update(chunk)
    return {"blake3": b3.hexdigest(), "sha256": sha.hexdigest()}


def _file_digests(path: Path) -> dict[str, str]:
    with open(path, "rb") as fh:
        return _digests(fh)


def _blob_digests(root: Repository, digest: str, size: int | None = None) -> dict[str, str]:
    from .remotes import repository_store

    with repository_store(root).open(digest, size) as reader:
        got = _digests(reader)
    return got


def _bundle_subjects(root: Repository, name: str) -> tuple[list[Subject], dict[str, Any]]:
    reg_path = registration_path(root, name)
    reg = load_registration(reg_path)
    base = f"{EVIDENCE_DIR}/{name}"
    subjects = [Subject(name=f"{base}/{REGISTRATION_NAME}", digest=_file_digests(reg_path))]
    problems: list[str] = []
    records: dict[str, str] = {}
    for entry in reg.manifest.entries:
        try:
            if _may_be_record(entry):
                data = _entry_data(root, name, entry)
                got = _digests(io.BytesIO(data))
                kind = _record_kind(data)
                if kind is not None and digest_from_hex(got["blake3"]) == entry.descriptor.digest:
                    records[entry.path] = kind
            elif entry.location == "repo":
                got = _file_digests(root.root / EVIDENCE_DIR / name / entry.path)
            else:
                got = _blob_digests(root, entry.descriptor.digest, entry.descriptor.size)
        except (OSError, EvidenceStoreError) as exc:
            problems.append(f"entry {entry.path!r} ({entry.descriptor.digest}): {exc}")
            continue
        if digest_from_hex(got["blake3"]) != entry.descriptor.digest:
            problems.append(
                f"entry {entry.path!r}: content hashes to blake3:{got['blake3']}, the "
                f"registration says {entry.descriptor.digest}"
            )
            continue
        subjects.append(Subject(name=f"{base}/{entry.path}", digest=got))
    if problems:
        raise AttestationError(
            f"bundle {name!r}: cannot attest: {len(problems)} entr"
            f"{'y' if len(problems) == 1 else 'ies'} unreadable or wrong: " + "; ".join(problems),
            tuple(problems),
        )
    predicate = {
        "bundle": name,
        "bundle_digest": reg.digest,
        "root": reg.root,
        "entries": len(reg.manifest.entries),
    }
    if records:
        predicate["records"] = records
    return subjects, predicate


_RECORD_MAX = 64 << 20


def _may_be_record(entry: Entry) -> bool:
    """A JSON entry small enough to be read whole and decoded as a record."""
    d = entry.descriptor
    is_json = d.media_type.endswith(("/json", "+json")) or entry.path.endswith(".json")
    return is_json and d.size <= _RECORD_MAX


def _entry_data(root: Repository, name: str, entry: Entry) -> bytes:
    if entry.location == "repo":
        return (root.root / EVIDENCE_DIR / name / entry.path).read_bytes()
    from .remotes import repository_store

    return repository_store(root).get(entry.descriptor.digest, entry.descriptor.size)


def _record_kind(data: bytes) -> str | None:
    """The kind of a record by its decoded type (``evidencestore.records``), or None."""
    from .records import record_kind

    kind = record_kind(data)
    return kind.tag if kind is not None else None


def _verdict_line(data: bytes) -> str | None:
    """A campaign status record's verdict with its qualifier (``ACCEPTED with 4 arms
    withdrawn after their results``)."""
    from .campaign.models import StatusRecord

    try:
        status = decode(data, StatusRecord)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return f"{status.verdict} {status.qualifier}" if status.qualifier else status.verdict


#: The predicates ``attest`` can state: ``evidencestore`` (a bundle, run or record
#: statement, the default) and ``test-result`` (a verdict, :mod:`evidencestore.testresult`).
PREDICATES: tuple[str, ...] = ("evidencestore", "test-result")


def statement_for(
    root: str | os.PathLike[str], target: str, *, predicate: str = "evidencestore"
) -> Statement:
    """The statement about ``target``: a registered bundle's name, a digest in the store
    (a claim, status or any record), or a file inside the repository. With
    ``predicate="test-result"``, the in-toto test-result statement of the verdict about
    it: a bundle's verification, a run's validity, a media comparison or check, a
    campaign status (:mod:`evidencestore.testresult`)."""
    if predicate not in PREDICATES:
        raise AttestationError(f"predicate {predicate!r}: expected one of {', '.join(PREDICATES)}")
    repo = as_repository(root)
    if predicate == "test-result":
        return _test_result(repo, target)[0]
    if registration_path(repo.root, target).is_file():
        subjects, bundle = _bundle_subjects(repo, target)
        return Statement(subject=tuple(subjects), predicate_type=PREDICATE_BUNDLE, predicate=bundle)
    subject, data = _record_subject(repo, target)
    kind = _record_kind(data)
    about: dict[str, Any] = {"size": len(data)}
    if kind:
        about["kind"] = kind
    if kind is not None and kind.endswith(
        "campaign-status"
    ):  # the verdict line, set-asides after results included
        about["verdict"] = _verdict_line(data)
    return Statement(subject=(subject,), predicate_type=PREDICATE_RECORD, predicate=about)


def _record_subject(repo: Repository, target: str) -> tuple[Subject, bytes]:
    """A record by digest (from the store) or a file inside the repository: its subject
    (both digests) and its bytes."""
    if is_digest(target):
        from .remotes import repository_store

        try:
            data = repository_store(repo).get(target)
        except EvidenceStoreError as exc:
            raise AttestationError(f"{target}: cannot read from the store: {exc}") from exc
        digests = {
            "blake3": target.removeprefix("blake3:"),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        return Subject(name=target, digest=digests), data
    path = Path(target)
    full = path if path.is_absolute() else Path.cwd() / path
    if not full.is_file():
        raise AttestationError(
            f"{target}: not a registered bundle, a digest in the store, or a file"
        )
    try:
        rel = full.resolve().relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        raise AttestationError(
            f"{target}: outside the repository {repo.root}; attest a file inside it, or store "
            "it and attest its digest"
        ) from None
    try:
        data = full.read_bytes()
    except OSError as exc:
        raise AttestationError(f"{target}: cannot read: {exc.strerror}") from exc
    return Subject(name=rel, digest=_digests(io.BytesIO(data))), data


def _test_result(repo: Repository, target: str) -> tuple[Statement, Verdict]:
    """The test-result statement about ``target`` and the verdict it states: a bundle's
    registration (and the record whose verdict it states, ``run.json`` or
    ``status.json``) as subjects, or the record itself."""
    from .testresult import bundle_verdict, record_verdict

    if registration_path(repo.root, target).is_file():
        verdict, record = bundle_verdict(repo, target)
        base = f"{EVIDENCE_DIR}/{target}"
        subjects = []
        for rel in [REGISTRATION_NAME, *([record] if record else [])]:
            try:
                digests = _file_digests(repo.root / base / rel)
            except OSError as exc:
                raise AttestationError(f"{base}/{rel}: cannot read: {exc.strerror}") from exc
            subjects.append(Subject(name=f"{base}/{rel}", digest=digests))
    else:
        subject, data = _record_subject(repo, target)
        found = record_verdict(repo, data)
        if found is None:
            raise AttestationError(
                f"{target}: states no verdict ({_record_kind(data) or 'not a record'}): a "
                "test-result statement is about a bundle (its verification, or a run's "
                "validity), a run record, a media comparison or check report, or a campaign "
                "status"
            )
        verdict, subjects = found, [subject]
    statement = Statement(
        subject=tuple(subjects),
        predicate_type=PREDICATE_TEST_RESULT,
        predicate=verdict.predicate(),
    )
    return statement, verdict


def _test_result_problems(repo: Repository, statement: Statement, expected: str) -> list[str]:
    """How a test-result statement differs from the verdict the evidence about
    ``expected`` gives now (recomputed), field by field."""
    try:
        now, verdict = _test_result(repo, expected)
    except EvidenceStoreError as exc:
        return [f"the verdict about {expected} cannot be recomputed: {exc}"]
    problems: list[str] = []
    said, want = statement.predicate, now.predicate
    if said.get("result") != want["result"]:
        problems.append(
            f"result {said.get('result')!r}: the evidence gives {want['result']!r} "
            f"({verdict.about} verdict {verdict.verdict})"
        )
    for key in ("passedTests", "warnedTests", "failedTests", "configuration"):
        a, b = said.get(key, []), want.get(key, [])
        if a == b:
            continue
        extra = [x for x in a if x not in b] if isinstance(a, list) else [a]
        missing = [x for x in b if not isinstance(a, list) or x not in a]
        problems.append(
            f"{key} differ from what the evidence gives: stated but not given "
            f"{_short(extra)}, given but not stated {_short(missing)}"
            + (" (order differs)" if not extra and not missing else "")
        )
    if stray := sorted(set(said) - set(want)):
        problems.append(f"predicate fields {', '.join(stray)} are not in the recomputed verdict")
    names, want_names = [x.name for x in statement.subject], [x.name for x in now.subject]
    if sorted(names) != sorted(want_names):
        problems.append(f"subjects {names}, the verdict is about {want_names}")
    return problems


def _short(items: list[Any], most: int = 5) -> str:
    shown = ", ".join(repr(x) for x in items[:most])
    return f"[{shown}{f', … {len(items) - most} more' if len(items) > most else ''}]"


def attest(
    root: str | os.PathLike[str],
    target: str,
    key: str | os.PathLike[str],
    *,
    predicate: str = "evidencestore",
) -> Envelope:
    """Make and sign the statement about ``target`` (see :func:`statement_for`)."""
    private = load_private_key(key)
    return sign_statement(statement_for(root, target, predicate=predicate), private)


# -- verification ---------------------------------------------------------------------
def _subject_problems(repo: Repository, subject: Subject) -> Iterator[str]:
    want = subject.digest
    if set(want) < {"sha256", "blake3"}:
        yield f"subject {subject.name!r}: needs both sha256 and blake3 digests, has {sorted(want)}"
        return
    where = "the working tree"
    got: dict[str, str] | None = None
    problem = entry_path_problem(subject.name)
    path = repo.root / subject.name
    if problem is None and path.is_file():
        try:
            got = _file_digests(path)
        except OSError as exc:
            yield f"subject {subject.name!r}: cannot read {path}: {exc.strerror}"
            return
    else:
        where = "the store"
        digest = digest_from_hex(want["blake3"])
        if not is_digest(digest):
            yield f"subject {subject.name!r}: malformed blake3 digest {want['blake3']!r}"
            return
        try:
            got = _blob_digests(repo, digest)
        except EvidenceStoreError as exc:
            yield (
                f"subject {subject.name!r} ({digest}): missing: not in the working tree and "
                f"not available from the store ({exc})"
            )
            return
    differ = [
        f"{alg} {got[alg]} (the statement says {want[alg]})"
        for alg in ("sha256", "blake3")
        if got[alg] != want[alg]
    ]
    if differ:
        yield f"subject {subject.name!r}: the bytes in {where} hash to " + ", ".join(differ)


def _expected_problems(repo: Repository, statement: Statement, expected: str) -> list[str]:
    """Whether ``statement`` is about ``expected`` (a bundle name or a record digest): the
    decisive problem (what the statement is about instead) first, then each subject that
    is not part of it."""
    ptype = statement.predicate_type
    names = [s.name for s in statement.subject]
    if registration_path(repo.root, expected).is_file():
        reg = load_registration(registration_path(repo.root, expected))
        prefix = f"{EVIDENCE_DIR}/{expected}/"
        stray = [n for n in names if not n.startswith(prefix)]
        problems: list[str] = []
        others = sorted(
            {
                n.split("/")[1]
                for n in stray
                if n.startswith(f"{EVIDENCE_DIR}/") and n.count("/") > 1
            }
        )
        if ptype == PREDICATE_RUN and others:
            problems.append(
                f"the statement is about the files of {', '.join(map(repr, others))}, "
                f"not of {expected!r}"
            )
        if ptype == PREDICATE_BUNDLE:
            about = statement.predicate.get("bundle")
            if about != expected:
                problems.append(f"the statement is about bundle {about!r}, not {expected!r}")
            elif statement.predicate.get("bundle_digest") != reg.digest:
                problems.append(
                    f"the statement is about bundle {expected!r} as "
                    f"{statement.predicate.get('bundle_digest')}, but it is registered as "
                    f"{reg.digest} now: it changed after signing"
                )
            if prefix + REGISTRATION_NAME not in names:
                problems.append(f"the statement does not name {prefix}{REGISTRATION_NAME}")
        elif ptype == PREDICATE_RUN:
            if prefix + "run.json" not in names:
                problems.append(f"the statement does not name {prefix}run.json")
        elif ptype == PREDICATE_TEST_RESULT:
            if prefix + REGISTRATION_NAME not in names:
                problems.append(f"the statement does not name {prefix}{REGISTRATION_NAME}")
        else:
            problems.append(
                f"predicate type {ptype!r} is not a bundle, run or test-result attestation, "
                f"which bundle {expected!r} needs"
            )
        return [*problems, *(f"subject {n!r} is not part of bundle {expected!r}" for n in stray)]
    if is_digest(expected):
        problems = []
        if ptype not in (PREDICATE_RECORD, PREDICATE_TEST_RESULT):
            problems.append(
                f"predicate type {ptype!r}, expected {PREDICATE_RECORD!r} for a record digest"
            )
        hexd = expected.removeprefix("blake3:")
        if not any(s.digest.get("blake3") == hexd for s in statement.subject):
            problems.append(
                f"no subject has digest {expected} (subjects: {', '.join(names) or 'none'})"
            )
        return problems
    rel = _repository_file(repo, expected)
    problems = []
    if ptype not in (PREDICATE_RECORD, PREDICATE_TEST_RESULT):
        problems.append(f"predicate type {ptype!r}, expected {PREDICATE_RECORD!r} for a file")
    if rel not in names:
        problems.append(f"no subject is the file {rel!r} (subjects: {', '.join(names) or 'none'})")
    return problems


def _repository_file(repo: Repository, target: str) -> str:
    """``target``, a file inside the repository, as a repository-relative POSIX path."""
    path = Path(target)
    full = path if path.is_absolute() else Path.cwd() / path
    try:
        rel = full.resolve().relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        rel = None
    if rel is None or not full.is_file():
        raise AttestationError(
            f"expected subject {target!r}: not a registered bundle, a blake3 digest, or a "
            "file inside the repository"
        )
    return rel


def verify_attestation(
    root: str | os.PathLike[str],
    envelope: bytes,
    public_key: Ed25519PublicKey,
    *,
    source: str = "envelope",
    expected: str | None = None,
) -> AttestationResult:
    """Check an envelope's signature with ``public_key``, its statement, and every subject
    against the repository at ``root``; with ``expected`` (a bundle name or a record
    digest, or a file inside the repository), also that the statement is about it, with
    the matching predicate type.
    Return the result with every problem found (:func:`check_attestation` raises)."""
    repo = as_repository(root)
    if expected is not None and not (
        registration_path(repo.root, expected).is_file() or is_digest(expected)
    ):
        _repository_file(repo, expected)  # raises for anything else
    try:
        env = decode_envelope(envelope, source)
    except AttestationError as exc:
        return _result(None, (), [str(exc)], expected=expected)
    problems: list[str] = []
    if env.payload_type != PAYLOAD_TYPE:
        problems.append(f"{source}: payloadType {env.payload_type!r}, expected {PAYLOAD_TYPE!r}")
    kid = key_id(public_key)
    payload, bad = signed_payload(env, public_key)
    if bad:
        return _result(None, (), [*problems, f"{source}: {bad}"], expected=expected)
    if payload is None:
        problems.append(
            f"{source}: no valid signature by key {kid} (wrong key, or the envelope was altered)"
        )
        return _result(None, (), problems, expected=expected)
    try:
        statement = decode(payload, Statement)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _result(
            None, (), [*problems, f"{source}: payload is not an in-toto statement: {exc}"]
        )
    if statement.type != STATEMENT_TYPE:
        problems.append(
            f"{source}: statement _type {statement.type!r}, expected {STATEMENT_TYPE!r}"
        )
    if not statement.subject:
        problems.append(f"{source}: the statement has no subject")
    if expected is not None:
        problems += [f"{source}: {p}" for p in _expected_problems(repo, statement, expected)]
        if statement.predicate_type == PREDICATE_TEST_RESULT:
            problems += [f"{source}: {p}" for p in _test_result_problems(repo, statement, expected)]
    verified: list[str] = []
    for subject in statement.subject:
        found = list(_subject_problems(repo, subject))
        problems += found
        if not found:
            verified.append(subject.name)
    return _result(statement, verified, problems, keyid=kid, expected=expected)


def _result(
    statement: Statement | None,
    verified: Iterable[str],
    problems: list[str],
    *,
    keyid: str | None = None,
    expected: str | None = None,
) -> AttestationResult:
    return AttestationResult(
        ok=not problems,
        statement=statement,
        verified=tuple(verified),
        problems=tuple(problems),
        keyid=keyid if not problems else None,
        expected=expected,
    )


def check_attestation(
    root: str | os.PathLike[str],
    envelope_path: str | os.PathLike[str],
    public_key_path: str | os.PathLike[str],
    *,
    expected: str | None = None,
) -> AttestationResult:
    """Check the envelope file against the key file and the repository (and, with
    ``expected``, that it is about that bundle or digest): the raising twin of
    :func:`verify_attestation`, an :class:`AttestationError` listing every problem when
    it does not verify."""
    source = os.fspath(envelope_path)
    try:
        data = Path(envelope_path).read_bytes()
    except OSError as exc:
        raise AttestationError(f"{source}: cannot read envelope: {exc.strerror}") from exc
    result = verify_attestation(
        root, data, load_public_key(public_key_path), source=source, expected=expected
    )
    if not result.ok:
        raise AttestationError(
            f"{source}: attestation refused: " + "; ".join(result.problems), result.problems
        )
    return result
