"""Verdicts as in-toto test-result predicates (``https://in-toto.io/attestation/test-result/v0.1``).

Policy engines and verifiers that know nothing of evidencestore read ``result``
(``PASSED``, ``WARNED``, ``FAILED``), ``configuration`` (resource descriptors: here the
protocol, workload, configuration files, compared inputs or bundle a verdict was
computed under, by digest) and the names of the passed, warned and failed tests (here
the checks, requests, audits or cells the verdict read). Four verdicts are stated:

- a bundle's verification (``verify``, as ``evstore verify`` judges it: ``FAIL`` on an
  error, ``UNAVAILABLE`` when a store entry could not be checked, else ``PASS``); one
  test per entry, and one per finding that names no entry;
- a run's validity (``run``, a run record or a bundle holding one as ``run.json``:
  ``PASS`` for a ``complete`` run, else ``FAIL``); one test for the outcome, one per
  request (``measured/3``), one per audit (warned when it examined nothing);
- a media comparison or check report (``comparison``, ``media-check``: the record's
  verdict); one test per check of each input, compatibility, equality and threshold check;
- a campaign verdict (``campaign``, a status record or a bundle holding one as
  ``status.json``: ``ACCEPTED``, ``NOT_ACCEPTED`` or ``UNAVAILABLE``); one test per cell
  (``5s/fast``): qualified passed, rejected failed, withdrawn or open warned.

Verdicts map onto results as ``RESULTS`` says; nothing else is guessed. Every verdict
is recomputed from the evidence it is about (the record's bytes, the bundle as it is),
so ``evstore attest verify`` compares a statement with what the evidence gives now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ._canonical import decode
from .digest import is_digest

if TYPE_CHECKING:
    from .campaign.models import StatusRecord
    from .config import Repository
    from .media.records import CheckReport, ComparisonRecord
    from .models import Descriptor
    from .runs.models import RunRecord

__all__ = [
    "PREDICATE_TEST_RESULT",
    "RESULTS",
    "Verdict",
    "bundle_verdict",
    "record_verdict",
    "result_of",
]

PREDICATE_TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"

#: Each verdict evidencestore gives, as a test-result ``result``.
RESULTS: dict[str, str] = {
    "PASS": "PASSED",
    "ACCEPTED": "PASSED",
    "INCONCLUSIVE": "WARNED",
    "UNAVAILABLE": "WARNED",
    "FAIL": "FAILED",
    "NOT_ACCEPTED": "FAILED",
}


def result_of(verdict: str) -> str:
    """The test-result ``result`` of an evidencestore verdict (``KeyError`` if unknown)."""
    return RESULTS[verdict]


@dataclass
class Verdict:
    """A verdict with what it read: ``about`` says which kind (``verify``, ``run``,
    ``comparison``, ``media-check``, ``campaign``)."""

    about: str
    verdict: str
    configuration: list[dict[str, Any]] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def test(self, name: str, outcome: bool | None) -> None:
        """Record test ``name``: passed (True), failed (False) or warned (None)."""
        {True: self.passed, False: self.failed, None: self.warned}[outcome].append(name)

    def predicate(self) -> dict[str, Any]:
        """The test-result predicate (empty lists left out, as protobuf's JSON does)."""
        out: dict[str, Any] = {"result": result_of(self.verdict)}
        if self.configuration:
            out["configuration"] = self.configuration
        for key, names in (
            ("passedTests", self.passed),
            ("warnedTests", self.warned),
            ("failedTests", self.failed),
        ):
            if names:
                out[key] = names
        return out


def _resource(name: str, digest: str, media_type: str | None = None) -> dict[str, Any]:
    """A resource descriptor naming ``digest`` (``blake3:<hex>``) under ``name``."""
    algorithm, _, hexd = digest.partition(":")
    out: dict[str, Any] = {"name": name, "digest": {algorithm: hexd}}
    if media_type:
        out["mediaType"] = media_type
    return out


def _descriptor(name: str, d: Descriptor) -> dict[str, Any]:
    return _resource(name, d.digest, d.media_type)


# -- records ----------------------------------------------------------------------------
def record_verdict(repo: Repository, data: bytes) -> Verdict | None:
    """The verdict a record's bytes state (a run, a media comparison or check report, a
    campaign status), or None for any other bytes."""
    from .campaign.models import StatusRecord
    from .media.records import CheckReport, ComparisonRecord
    from .records import record_kind
    from .runs.models import RunRecord

    kind = record_kind(data)
    if kind is None or kind.type not in (RunRecord, ComparisonRecord, CheckReport, StatusRecord):
        return None
    try:
        record = decode(data, kind.type)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(record, RunRecord):
        return run_verdict(record)
    if isinstance(record, ComparisonRecord):
        return _comparison(record)
    if isinstance(record, CheckReport):
        return _check_report(record)
    assert isinstance(record, StatusRecord)
    return _campaign(repo, record)


def run_verdict(run: RunRecord) -> Verdict:
    """A run's validity: ``PASS`` only for a complete run."""
    v = Verdict("run", "PASS" if run.outcome == "complete" else "FAIL")
    v.configuration.append(_resource("workload", run.workload_digest, run.workload.media_type))
    if run.protocol_digest is not None:
        v.configuration.append(
            _resource(f"protocol of campaign {run.campaign}", run.protocol_digest)
        )
    for name, d in sorted(run.configs.items()):
        v.configuration.append(_descriptor(f"config {name}", d))
    v.test(f"outcome {run.outcome}", run.outcome == "complete")
    for r in run.requests:
        v.test(f"{r.phase}/{r.index}", r.failure is None)
    for a in run.audits:
        v.test(f"audit/{a.name}", None if a.examined == 0 else not a.findings)
    return v


def _checks(v: Verdict, prefix: str, checks: Any) -> None:
    for c in checks:
        stream = "" if c.stream is None else f"/stream {c.stream}"
        v.test(f"{prefix}{stream}/{c.name}", c.ok)


def _comparison(record: ComparisonRecord) -> Verdict:
    v = Verdict("comparison", record.verdict)
    for label, side in (("reference", record.reference), ("candidate", record.candidate)):
        v.configuration.append(_descriptor(f"{label} {side.name}", side.source))
        _checks(v, label, side.checks)
    for scorer, provenance in sorted(record.scorers.items()):
        for key, value in sorted(provenance.items()):
            if is_digest(value):
                v.configuration.append(_resource(f"scorer {scorer} {key}", value))
    _checks(v, "compatibility", record.compatibility)
    for e in record.equality:
        # unequal streams are what INCONCLUSIVE is made of: warned, not failed
        v.test(f"equality/{e.type} {e.pair}", True if e.equal else None)
    _checks(v, "threshold", record.threshold_checks)
    return v


def _check_report(record: CheckReport) -> Verdict:
    v = Verdict("media-check", record.verdict)
    probe = record.report.probe
    v.configuration.append(_descriptor(f"media {probe.name}", probe.source))
    _checks(v, "check", record.checks)
    return v


def _campaign(repo: Repository, status: StatusRecord) -> Verdict:
    v = Verdict("campaign", status.verdict)
    v.configuration.append(
        _resource(f"protocol of campaign {status.campaign}", status.protocol_digest)
    )
    for condition, digest in _workloads(repo, status):
        v.configuration.append(_resource(f"workload {condition}", digest))
    for cell in status.cells:
        outcome = {"qualified": True, "rejected": False}.get(cell.conclusion or "")
        v.test(f"{cell.condition}/{cell.arm}", outcome)
    return v


def _workloads(repo: Repository, status: StatusRecord) -> list[tuple[str, str]]:
    """Each condition's workload digest, when the protocol the status names is
    registered in the repository under its campaign's name; else none."""
    from .campaign.protocol import load_campaign
    from .errors import EvidenceStoreError

    try:
        campaign = load_campaign(repo, status.campaign)
    except (EvidenceStoreError, OSError):
        return []
    if campaign.digest != status.protocol_digest:
        return []
    return [(c.name, campaign.workload_digest(c.name)) for c in campaign.protocol.condition]


# -- bundles ----------------------------------------------------------------------------
#: The record of a bundle whose verdict it states: a run's, a campaign status bundle's.
VERDICT_RECORDS: dict[str, str] = {"run.json": "run", "status.json": "campaign"}


def bundle_verdict(repo: Repository, name: str) -> tuple[Verdict, str | None]:
    """The verdict about registered bundle ``name`` and the entry it was read from: a
    run's validity (``run.json``) or a campaign verdict (``status.json``) when the
    bundle holds that record, else its verification against the working tree and the
    local store (as ``evstore verify --bundle``; entry None)."""
    from .inventory import load_registration, registration_path
    from .verify import verify_repository

    reg_path = registration_path(repo, name)
    reg = load_registration(reg_path)
    for entry in reg.manifest.entries:
        about = VERDICT_RECORDS.get(entry.path)
        if about is None or entry.location != "repo":
            continue
        try:
            found = record_verdict(repo, (reg_path.parent / entry.path).read_bytes())
        except OSError:
            found = None  # unreadable: its verification says why
        if found is not None and found.about == about:
            return found, entry.path
    report = verify_repository(repo, bundles=[name])
    [bundle] = report.bundles
    errors = {f.path for f in bundle.findings if f.severity == "error" and f.path}
    warnings = {f.path for f in bundle.findings if f.severity == "warning" and f.path}
    verdict = "FAIL" if not bundle.ok else "UNAVAILABLE" if bundle.unavailable else "PASS"
    v = Verdict("verify", verdict)
    v.configuration.append(_resource(f"bundle {name}", reg.digest))
    for e in sorted(reg.manifest.entries, key=lambda e: e.path):
        v.test(e.path, False if e.path in errors else None if e.path in warnings else True)
    known = {e.path for e in reg.manifest.entries}
    for f in bundle.findings:
        if not f.path or f.path not in known:
            v.test(f"{f.code}: {f.path or name}", None if f.severity != "error" else False)
    return v, None
