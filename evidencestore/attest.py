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

A test-result statement (``--predicate test-result``, :mod:`evidencestore.testresult`)
states a verdict; verifying it recomputes the verdict from its evidence and refuses any
difference. An attestation bundle (``*.intoto.jsonl``) holds one envelope a line; each
is appended in one ``O_APPEND`` write of the whole line, so envelopes appended at the
same time by several processes never interleave and none is lost, and verification
names every problem by its line.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from ._canonical import canonical, decode
from .config import Repository, as_repository
from .digest import digest_from_hex, is_digest, new_hasher
from .dsse import (
    PAYLOAD_TYPE,
    PREDICATE_RUN,
    STATEMENT_TYPE,
    Envelope,
    Statement,
    Subject,
    decode_envelope,
    key_id,
    load_private_key,
    load_public_key,
    sign_statement,
    signed_payload,
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

# The in-toto and DSSE vocabulary (keys, envelopes, statements) is ``dsse``'s public API.
__all__ = [
    "PREDICATES",
    "PREDICATE_BUNDLE",
    "PREDICATE_RECORD",
    "PREDICATE_TEST_RESULT",
    "AttestationBundleResult",
    "AttestationError",
    "AttestationResult",
    "BundleLine",
    "append_to_bundle",
    "attest",
    "check_attestation",
    "is_bundle_path",
    "statement_for",
    "verify_attestation",
    "verify_attestation_bundle",
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


# -- bundles of attestations (JSON lines) -------------------------------------------------
class BundleLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of an attestation bundle (1-based) and its result."""

    line: int
    result: AttestationResult


class AttestationBundleResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of checking an attestation bundle (``*.intoto.jsonl``, one DSSE
    envelope a line): every line's result, and the problems of the bundle as a whole
    (no line, a line that is not an envelope, an expected subject no line is about)."""

    ok: bool
    source: str
    lines: tuple[BundleLine, ...]
    problems: tuple[str, ...]


def append_to_bundle(path: str | os.PathLike[str], envelope: Envelope) -> int:
    """Append ``envelope`` as one line (canonical JSON) to the attestation bundle at
    ``path`` (created when absent); return its line number. The line goes in one
    ``O_APPEND`` write, so attestations appended at the same time by other processes
    are never interleaved with it on a local file system."""
    source = os.fspath(path)
    line = canonical(envelope) + b"\n"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise AttestationError(f"{source}: cannot open the bundle: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "r+b") as fh:
            existing = fh.read()
            if existing and not existing.endswith(b"\n"):
                raise AttestationError(
                    f"{source}: its last line is not terminated by a newline: not a JSON-lines "
                    "attestation bundle, nothing appended"
                )
            fh.write(line)
    except OSError as exc:
        raise AttestationError(f"{source}: cannot append: {exc.strerror}") from exc
    return existing.count(b"\n") + 1


def _about(repo: Repository, data: bytes, expected: Sequence[str]) -> str:
    """Which of ``expected`` the envelope in ``data`` is about (read before its signature
    is checked, only to choose; the check follows): the first without a problem, else
    the first."""
    try:
        payload = base64.b64decode(decode_envelope(data, "line").payload, validate=True)
        statement = decode(payload, Statement)
    except (AttestationError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return expected[0]
    for target in expected:
        try:
            if not _expected_problems(repo, statement, target):
                return target
        except EvidenceStoreError:
            continue
    return expected[0]


def verify_attestation_bundle(
    root: str | os.PathLike[str],
    data: bytes,
    public_key: Ed25519PublicKey,
    *,
    source: str = "bundle",
    expected: Sequence[str] = (),
) -> AttestationBundleResult:
    """Check every line of an attestation bundle (JSON lines, one DSSE envelope each) as
    :func:`verify_attestation` checks one envelope, each problem named by its line; with
    ``expected`` (bundle names, record digests or files), each line must be about one of
    them and each of them must be attested by a verified line."""
    repo = as_repository(root)
    for target in expected:
        if not (registration_path(repo.root, target).is_file() or is_digest(target)):
            _repository_file(repo, target)  # raises for anything else
    problems: list[str] = []
    lines: list[BundleLine] = []
    text = data.split(b"\n")
    if text and text[-1] == b"":
        text.pop()
    if not text:
        problems.append(f"{source}: no attestation (an empty bundle)")
    for number, raw in enumerate(text, 1):
        where = f"{source} line {number}"
        if not raw.strip():
            problems.append(f"{where}: empty line")
            continue
        if raw.lstrip().startswith(b"{") and b'"dsseEnvelope"' in raw:
            problems.append(
                f"{where}: a Sigstore bundle (GitHub's attestations): verify it with "
                "`gh attestation verify`; this checks DSSE envelopes signed with a local key"
            )
            continue
        about = _about(repo, raw, expected) if expected else None
        result = verify_attestation(repo, raw, public_key, source=where, expected=about)
        lines.append(BundleLine(line=number, result=result))
    covered = {x.result.expected for x in lines if x.result.ok}
    for target in expected:
        if target not in covered:
            problems.append(f"{source}: no verified line is about {target}")
    ok = not problems and all(x.result.ok for x in lines)
    return AttestationBundleResult(
        ok=ok, source=source, lines=tuple(lines), problems=tuple(problems)
    )


def is_bundle_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names an attestation bundle (``*.jsonl``: JSON lines) rather than
    one envelope."""
    return os.fspath(path).endswith(".jsonl")
