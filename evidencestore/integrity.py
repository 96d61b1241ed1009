"""The one content check: bytes against the digest and size they are addressed by.

Size first (a truncated or oversized copy is caught without hashing), then the hash.
Every place that receives bytes by digest (store reads, transfers, remote
verification, weights, response bodies) goes through :func:`check_content`, which
raises :class:`~evidencestore.errors.IntegrityError` with where, expected and observed
as attributes (python-tuf's ``verify_length_and_hashes`` is the model).
"""

from __future__ import annotations

from .errors import IntegrityError

__all__ = ["check_content", "content_problem"]


def content_problem(
    digest: str, size: int | None, observed_digest: str | None, observed_size: int
) -> str | None:
    """Why observed content does not match ``digest`` and ``size`` (None when it does).

    ``observed_digest`` may be None when only the size was measured so far.
    """
    if size is not None and observed_size > size:
        return f"{digest}: holds more than the expected {size} bytes"
    if size is not None and observed_size != size:
        return f"{digest}: got {observed_size} bytes, expected {size}"
    if observed_digest is not None and observed_digest != digest:
        return (
            f"{digest}: content hashes to {observed_digest} ({observed_size} bytes), "
            f"expected {digest}"
        )
    return None


def check_content(
    where: str,
    digest: str,
    size: int | None,
    observed_digest: str | None,
    observed_size: int,
    *,
    suffix: str = "",
) -> None:
    """Raise :class:`IntegrityError` naming ``where`` unless the content matches."""
    reason = content_problem(digest, size, observed_digest, observed_size)
    if reason is not None:
        raise IntegrityError(
            f"{where}: {reason}{suffix}",
            where=where,
            digest=digest,
            expected_size=size,
            observed_digest=observed_digest,
            observed_size=observed_size,
            reason=reason + suffix,
        )
