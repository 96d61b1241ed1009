"""The exception hierarchy: one root, each error carrying a human diagnostic."""

from __future__ import annotations


class EvidenceStoreError(Exception):
    """Root of every error raised by evidencestore.

    ``str(error)`` is the one-line diagnostic: it names the file, bundle, entry or
    digest concerned and what was expected.
    """

    def diagnostics(self) -> str:
        """Return the diagnostic, with the chained cause if there is one."""
        cause = self.__cause__
        if cause is None or isinstance(cause, EvidenceStoreError):
            return str(self)
        if isinstance(cause, OSError) and cause.strerror and cause.strerror in str(self):
            return str(self)  # the message already says what the OS said
        return f"{self} (caused by {type(cause).__name__}: {cause})"


class InvalidDigestError(EvidenceStoreError, ValueError):
    """A string is not a well-formed ``blake3:<64 lowercase hex>`` digest."""


class IntegrityError(EvidenceStoreError):
    """Bytes do not match the digest or size they were addressed by.

    Besides the message, the structured fields say where the bytes were (``where``),
    what was expected (``digest``, ``expected_size``), what was observed
    (``observed_digest``, ``observed_size``; None when not measured) and the message
    without its place (``reason``), so callers never re-parse the text.
    """

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        digest: str | None = None,
        expected_size: int | None = None,
        observed_digest: str | None = None,
        observed_size: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.where = where
        self.digest = digest
        self.expected_size = expected_size
        self.observed_digest = observed_digest
        self.observed_size = observed_size
        self.reason = message if reason is None else reason


class NotFoundError(EvidenceStoreError, KeyError):
    """What was asked for does not exist: a blob absent from every place looked
    (:class:`BlobNotFoundError`), a bundle with no registration
    (:class:`BundleNotFoundError`). The one type to catch for "not there", whichever
    store or repository answered; content that is there but wrong is
    :class:`IntegrityError`, never this."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class BlobNotFoundError(NotFoundError):
    """A digest is absent from a store (or from every place looked)."""


class ReadOnlyStoreError(EvidenceStoreError):
    """A write or delete was attempted on a read-only store."""


class StorageError(EvidenceStoreError):
    """A backend failed (I/O error, unreachable remote, denied access)."""


class ManifestError(EvidenceStoreError):
    """A manifest or registration is malformed or inconsistent."""


class BundleNotFoundError(NotFoundError, ManifestError):
    """No bundle of that name is registered (no ``evidence/<name>/bundle.json``)."""


class BundleError(EvidenceStoreError):
    """A bundle cannot be created as asked."""


class BundleNameTaken(BundleError):
    """The bundle name is registered already (or another bundle directory holds it, or
    one differing only in letter case); raised again at the rename when another process
    registered the name meanwhile."""


class ConfigError(EvidenceStoreError):
    """``evstore.toml`` or a command's options are unusable."""


class VerificationError(EvidenceStoreError):
    """Verification found errors; ``report`` holds every finding."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class MediaError(EvidenceStoreError):
    """A media file cannot be probed or decoded, or an expectation file is unusable."""


class MediaNotFoundError(MediaError, BlobNotFoundError):
    """Media named by a digest that no store holds: ``except NotFoundError`` and ``except
    MediaError`` both catch it."""


class NotMediaError(MediaError):
    """The content is readable but is not a media container FFmpeg can demux."""


class ScorerError(EvidenceStoreError):
    """A perceptual scorer cannot be loaded from authenticated weights."""


class TransferError(StorageError):
    """A push, pull or fetch left some blobs untransferred; ``summary`` says which."""

    def __init__(self, message: str, summary: object = None) -> None:
        super().__init__(message)
        self.summary = summary


class AttestationError(EvidenceStoreError):
    """An attestation cannot be made, or does not verify; ``problems`` lists every one."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class ReportError(EvidenceStoreError):
    """A report target cannot be found, read or rendered."""


# -- Runs: a workload, a server's answer (issue 33) ----------------------------------
class WorkloadError(ConfigError):
    """A workload is unusable (``workload.toml``, its ``[prompts]``, its input files, its
    ``[server]``): the message names the file and the field. Raised before any request
    is sent; a :class:`ConfigError` still, so callers catching that keep working."""


class BodyTooLarge(EvidenceStoreError):
    """A response body went past its sink's limit; nothing past the limit was written."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than the limit of {limit} bytes")
        self.limit = limit


class BadAnswer(EvidenceStoreError):
    """A server answered, but not as the exchange requires: ``failure`` (a request
    failure class, such as ``invalid-response``), the message, and ``status`` (the HTTP
    status, when one was received). It never leaves the transport: it becomes the
    request's failure."""

    def __init__(self, failure: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message
        self.status = status
