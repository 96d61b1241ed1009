"""The exception hierarchy: one root, each error carrying a human diagnostic. Every
error type the package raises is defined here (python-tuf's ``exceptions.py``), in
families by source: git, a campaign's fit, a remote's configuration, a transfer, ..."""

from __future__ import annotations

from collections.abc import Callable, Iterable


class EvidenceStoreError(Exception):
    """Root of every error raised by evidencestore.

    ``str(error)`` is the one-line diagnostic: it names the file, bundle, entry or
    digest concerned and what was expected. A message about a caller's argument names
    it as a placeholder ``{name}`` listed in ``parameters``: ``str(error)`` shows the
    library's parameter name (``condition``), and the CLI its flag (``--condition``)
    through :meth:`worded`, so the library never speaks in command-line flags.
    """

    def __init__(self, *args: object, parameters: Iterable[str] = ()) -> None:
        super().__init__(*args)
        self.parameters = tuple(parameters)

    def worded(self, name: Callable[[str], str] | None = None) -> str:
        """The message with each parameter it names written by ``name`` (by default
        the library parameter's own name)."""
        text = Exception.__str__(self)
        for parameter in getattr(self, "parameters", ()):
            text = text.replace("{" + parameter + "}", name(parameter) if name else parameter)
        return text

    def __str__(self) -> str:
        return self.worded()

    def diagnostics(self, name: Callable[[str], str] | None = None) -> str:
        """Return the diagnostic (parameters written by ``name``, as in :meth:`worded`),
        with the chained cause if there is one."""
        text = self.worded(name)
        cause = self.__cause__
        if cause is None or isinstance(cause, EvidenceStoreError):
            return text
        if isinstance(cause, OSError) and cause.strerror and cause.strerror in text:
            return text  # the message already says what the OS said
        return f"{text} (caused by {type(cause).__name__}: {cause})"


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
        return self.worded()


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


# -- Errors by source (issue 33): each a ConfigError still, so ``except ConfigError``
# in a caller's code keeps working, while the package's own callers catch the family
# they mean ("git failed" is GitError, never any ConfigError).


class GitError(ConfigError):
    """git is not installed, or a git command failed (``command``: what was run, as
    ``git ARGS``; ``stderr``: git's last line, empty when git is missing)."""

    def __init__(
        self,
        message: str,
        *,
        command: str = "",
        stderr: str = "",
        parameters: Iterable[str] = (),
    ) -> None:
        super().__init__(message, parameters=parameters)
        self.command = command
        self.stderr = stderr

    def about(
        self, what: str, reason: str | None = None, *, parameters: Iterable[str] = ()
    ) -> GitError:
        """This failure said of ``what`` (``"{base} main"``): ``what: reason`` (by
        default git's own message), git's command and output kept."""
        return GitError(
            f"{what}: {self if reason is None else reason}",
            command=self.command,
            stderr=self.stderr,
            parameters=parameters,
        )


class CampaignFitError(ConfigError):
    """A run does not fit its campaign's protocol (condition, arm, workload, declared
    configuration files), or the campaign it names cannot be read; refused before any
    request is sent."""


class ResultsPredateProtocol(CampaignFitError):
    """Imported results made before their campaign's protocol was committed, which does
    not declare ``retrospective = true``: they cannot count (``evstore import`` exits 1)."""


class RemoteConfigError(ConfigError):
    """A remote is unknown, misconfigured (name, URL, options) or unusable for what was
    asked (a read-only target for a push, none configured)."""


class TransferDeadlineError(StorageError):
    """A download did not complete within its overall deadline (not retried)."""


class LocalWriteError(StorageError):
    """The local store could not be written while fetching: not the remote's fault, so
    no other remote is tried."""


class UnknownRecordKind(ManifestError):
    """A JSON object whose ``kind`` names no record kind this version knows."""

    def __init__(self, message: str, kind: object) -> None:
        super().__init__(message)
        self.kind = kind


class NotRegularFileError(OSError):
    """A path names a directory, device or other non-regular file (an :class:`OSError`
    with ``EINVAL``, as the hashing engines report any other unreadable path)."""


class InterleavingError(AssertionError):
    """A test's interleaving (``evidencestore.testing.interleave``) failed: an actor
    never reached its pause point, or failed."""
