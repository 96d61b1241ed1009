"""OCI distribution registries as blob stores: ``oci://HOST/REPO`` (``oci+http://`` for a
registry served over plain HTTP, such as one on 127.0.0.1).

Layout on the registry (one repository):

- Every blob is an OCI blob, addressed by its sha256 as registries require.
- A blob is found by its BLAKE3 digest through the tag ``blake3-<64 hex>``, which names a
  small image manifest (``artifactType`` :data:`BLOB_ARTIFACT_TYPE`, config the empty
  descriptor, one layer: the blob, annotated with :data:`BLAKE3_ANNOTATION` =
  ``blake3:<hex>``). A tag is the only index a distribution registry keeps for us (it
  addresses by sha256 and, before image-spec's ``blake3`` registration is implemented,
  hashes nothing else).
- Artifacts (bundles, attestations) are image manifests with their own ``artifactType``
  and config the empty descriptor (OCI 1.1 guidance); attestations carry a ``subject``
  and are listed by the referrers API or, where the registry has none (distribution
  2.8), by the fallback tag ``sha256-<hex of the subject>`` naming an image index.

Every read checks the size and sha256 of the bytes the registry sends (here) and their
size and BLAKE3 (the :class:`~.VerifyingReader` or ``transfer.py``), and the tag's
manifest must name the BLAKE3 digest it is read for: a blob swapped under a tag, a
blob file corrupted in the registry's storage, or a manifest naming another digest is
refused with the digest and what was observed.

Concurrency: a blob's manifest is a pure function of (BLAKE3, sha256, size), written in
canonical JSON, and its blob is uploaded before the manifest that names it. Tags are
last-writer-wins, but two clones pushing the same BLAKE3 digest write byte-identical
manifests under the same tag, so whichever lands last, the tag names the same content
and nothing is lost; blobs are content-addressed and uploads are idempotent. A
different manifest under a ``blake3-`` tag (a hostile or buggy writer) is refused on
read and replaced by ``push --repair``. The referrers fallback index is read, extended
and written back, then read again until it lists the new referrer; two attachers
racing on a registry without the referrers API can still drop each other's entry from
the index (never the referrer manifest itself, which is stored by digest): running
``attest --oci`` again restores it.

Distribution keeps the first copy of a sha256 blob: a blob file corrupted in the
registry's own storage is not replaced by uploading it again (the registry skips the
move), so ``push --repair`` reports it still corrupt; the registry's garbage collection
after deleting it is the cure. Leases and quarantine are not offered (gc does not
delete from registries).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO

from .. import _steps
from ..digest import digest_from_hex, digest_hex, parse_digest
from ..errors import BlobNotFoundError, IntegrityError, StorageError, TransferDeadlineError
from ._base import BlobStore, OciDescriptor, Upkeep

if TYPE_CHECKING:
    import requests

__all__ = [
    "BLAKE3_ANNOTATION",
    "BLOB_ARTIFACT_TYPE",
    "EMPTY_DESCRIPTOR",
    "MANIFEST_MEDIA_TYPE",
    "OciBlobStore",
    "OciDescriptor",
    "blob_tag",
    "parse_oci_url",
]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
BLOB_ARTIFACT_TYPE = "application/vnd.evidencestore.blob.v1"
BLAKE3_ANNOTATION = "org.evidencestore.blake3"
_EMPTY = b"{}"
_EMPTY_SHA256 = "sha256:" + hashlib.sha256(_EMPTY).hexdigest()
EMPTY_DESCRIPTOR: dict[str, Any] = {
    "mediaType": "application/vnd.oci.empty.v1+json",
    "digest": _EMPTY_SHA256,
    "size": 2,
    "data": base64.b64encode(_EMPTY).decode(),
}
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_MANIFEST = 4 << 20  # the size distribution itself accepts
_ACCEPT = f"{MANIFEST_MEDIA_TYPE}, {INDEX_MEDIA_TYPE}"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def blob_tag(digest: str) -> str:
    """The tag that finds a blob by its BLAKE3 digest: ``blake3-<64 hex>``."""
    return f"blake3-{digest_hex(parse_digest(digest))}"


def parse_oci_url(url: str) -> tuple[str, str]:
    """Split ``oci://HOST[:PORT]/REPO`` (``oci+http://`` for plain HTTP) into the
    registry's base URL and the repository name."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("oci", "oci+http", "oci+https"):
        raise StorageError(f"{url}: not an OCI registry URL (oci://HOST/REPO)")
    host, _, repo = rest.partition("/")
    repo = repo.strip("/")
    if not host or not repo:
        raise StorageError(f"{url}: an OCI remote needs a host and a repository (oci://HOST/REPO)")
    if not re.fullmatch(
        r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*", repo
    ):
        raise StorageError(
            f"{url}: repository {repo!r} is not a valid OCI repository name "
            "(lowercase letters, digits, '.', '_', '-' and '/')"
        )
    http = "http" if scheme == "oci+http" else "https"
    return f"{http}://{host}", repo


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON (sorted keys, no whitespace): equal content, equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class _CheckedStream:
    """A registry blob's body that checks its size and sha256 once fully read."""

    def __init__(
        self,
        response: requests.Response,
        sha256: str,
        size: int,
        where: str,
        budget: float | None = None,
    ) -> None:
        self._response = response
        self._budget = budget
        self._deadline = None if budget is None else time.monotonic() + budget
        self._buffer = b""
        self._hash = hashlib.sha256()
        self._count = 0
        self._sha256 = sha256
        self._size = size
        self._where = where
        self._eof = False

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buffer) < n) and not self._eof:
            try:
                # read1: whatever has arrived, so a trickle meets the deadline check
                chunk = self._response.raw.read1(1 << 20)
            except Exception as exc:  # urllib3's errors: a broken or stalled connection
                self._eof = True
                raise StorageError(f"{self._where}: {type(exc).__name__}: {exc}") from exc
            if not chunk:
                self._eof = True
                self._check()
                break
            if self._deadline is not None and time.monotonic() > self._deadline:
                self._eof = True
                raise TransferDeadlineError(
                    f"{self._where}: not complete within its deadline of {self._budget:.1f} s "
                    f"({self._count} of {self._size} bytes); the partial copy was discarded "
                    "(min_rate and deadline_floor of the remote in evstore.toml set the deadline)"
                )
            self._hash.update(chunk)
            self._count += len(chunk)
            self._buffer += chunk
            if self._count > self._size:
                self._eof = True  # more than the manifest said: stop reading now
                self._check()
        if n < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def _check(self) -> None:
        observed = "sha256:" + self._hash.hexdigest()
        if self._count != self._size or observed != self._sha256:
            raise IntegrityError(
                f"{self._where}: the registry sent {self._count} bytes hashing to {observed}, "
                f"expected {self._size} bytes hashing to {self._sha256}; refused",
                where=self._where,
                expected_size=self._size,
                observed_size=self._count,
                reason="sha256 or size mismatch",
            )

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> _CheckedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Client:
    """The distribution API over HTTP: retries, and basic or bearer-token auth.

    Credentials are read from the environment, never from ``evstore.toml`` (whose
    options only name the variables): a user name and password from the variables
    named by options ``username_env`` and ``password_env`` (default
    ``EVSTORE_OCI_USERNAME``, ``EVSTORE_OCI_PASSWORD``), or a ready bearer token from
    the one named by ``token_env`` (default ``EVSTORE_OCI_TOKEN``). A ``Bearer``
    challenge is answered by the registry's token service, with the basic credentials
    when there are any (the flow docker and oras use).
    """

    def __init__(
        self,
        base: str,
        repo: str,
        options: Mapping[str, Any],
        *,
        attempts: int,
        backoff: float,
        max_backoff: float,
        timeout: float,
    ) -> None:
        import requests

        self.base = base
        self.repo = repo
        self._session = requests.Session()
        self._session.headers["User-Agent"] = "evidencestore"
        self._attempts = attempts
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._timeout = timeout
        user = os.environ.get(str(options.get("username_env", "EVSTORE_OCI_USERNAME")))
        password = os.environ.get(str(options.get("password_env", "EVSTORE_OCI_PASSWORD")))
        self._basic = (str(user), password) if user and password else None
        token = os.environ.get(str(options.get("token_env", "EVSTORE_OCI_TOKEN")))
        self._token: str | None = token or None
        self._lock = threading.Lock()

    def url(self, path: str) -> str:
        return f"{self.base}/v2/{self.repo}/{path}"

    def request(
        self,
        method: str,
        url: str,
        *,
        ok: Iterable[int] = (200,),
        stream: bool = False,
        headers: Mapping[str, str] | None = None,
        data: bytes | BinaryIO | None = None,
    ) -> requests.Response:
        """Send a request (retried on connection errors and 429/5xx); return the
        response when its status is in ``ok``, else raise StorageError naming it."""
        import requests

        ok = tuple(ok)
        delay = self._backoff
        last = ""
        attempt, answered = 0, 0
        while attempt < self._attempts:
            sent = dict(headers or {})
            auth = None
            token = self._token
            if token:
                sent["Authorization"] = f"Bearer {token}"
            elif self._basic:
                auth = self._basic
            if data is not None and not isinstance(data, bytes):
                data.seek(0)
            try:
                response = self._session.request(
                    method,
                    url,
                    headers=sent,
                    auth=auth,
                    data=data,
                    stream=stream,
                    timeout=self._timeout,
                )
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if (
                    response.status_code == 401
                    and answered < 2
                    and self._authenticate(response, token)
                ):
                    answered += 1  # a challenge answered is not a failed attempt
                    response.close()
                    continue
                if response.status_code in ok:
                    return response
                last = f"HTTP {response.status_code}{_errors_of(response)}"
                if response.status_code in (401, 403):
                    last += (
                        "; credentials come from EVSTORE_OCI_USERNAME and EVSTORE_OCI_PASSWORD "
                        "(or EVSTORE_OCI_TOKEN), or the variables the remote's username_env, "
                        "password_env and token_env options name"
                    )
                response.close()
                if response.status_code not in _RETRY_STATUS:
                    raise StorageError(f"{method} {url}: {last}")
            attempt += 1
            if attempt < self._attempts:
                time.sleep(min(delay, self._max_backoff))
                delay *= 2
        raise StorageError(f"{method} {url}: {last} (after {self._attempts} attempts)")

    def _authenticate(self, response: requests.Response, used: str | None) -> bool:
        """Answer a 401's challenge to a request sent with token ``used``; return
        whether to try again (another thread may have fetched a new token meanwhile)."""
        challenge = response.headers.get("WWW-Authenticate", "")
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            return False  # basic credentials, if any, were already sent
        if scheme.lower() != "bearer":
            return False
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        realm = fields.pop("realm", None)
        if not realm:
            return False
        with self._lock:
            if self._token != used:
                return True
            got = self._session.get(realm, params=fields, auth=self._basic, timeout=self._timeout)
            if got.status_code != 200:
                raise StorageError(
                    f"{self.base}: the token service {realm} answered HTTP {got.status_code}; "
                    "set EVSTORE_OCI_USERNAME and EVSTORE_OCI_PASSWORD (or the variables "
                    "the remote's username_env and password_env options name)"
                )
            try:
                body = got.json()
                token = body.get("token") or body.get("access_token")
            except (ValueError, AttributeError) as exc:
                raise StorageError(
                    f"{self.base}: the token service {realm} sent no token: {exc}"
                ) from exc
            if not token or token == used:
                return False
            self._token = str(token)
        return True


def _errors_of(response: requests.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        codes = ", ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3])
    except Exception:
        return ""
    return f" ({codes})" if codes else ""


class OciBlobStore(BlobStore):
    """Blobs (and artifacts) in one repository of an OCI distribution registry.

    Requests are tried ``attempts`` times (backoff from ``backoff`` to ``max_backoff``
    seconds), each connection and read bounded by ``timeout``; with ``min_rate`` a blob
    download must complete within ``deadline_floor + size / min_rate`` seconds."""

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        options: Mapping[str, Any] | None = None,
        attempts: int = 4,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        timeout: float = 60.0,
        min_rate: float | None = None,
        deadline_floor: float = 60.0,
    ) -> None:
        base, repo = parse_oci_url(url)
        self._min_rate = min_rate
        self._deadline_floor = deadline_floor
        self._url = url.rstrip("/")
        self._client = _Client(
            base,
            repo,
            options or {},
            attempts=attempts,
            backoff=backoff,
            max_backoff=max_backoff,
            timeout=timeout,
        )
        self._empty_pushed = False
        self._empty_lock = threading.Lock()
        super().__init__(read_only=read_only)

    @property
    def location(self) -> str:
        return self._url

    @property
    def supports_listing(self) -> bool:
        return True

    def location_of(self, digest: str) -> str:
        return f"{self._url}:{blob_tag(digest)}"

    # -- manifests ------------------------------------------------------------------
    def get_manifest(self, reference: str) -> tuple[OciDescriptor, dict[str, Any]] | None:
        """Return a manifest (by tag or ``sha256:`` digest) and its descriptor, or None
        when absent. A manifest fetched by digest must hash to it."""
        response = self._client.request(
            "GET",
            self._client.url(f"manifests/{reference}"),
            ok=(200, 404),
            headers={"Accept": _ACCEPT},
            stream=True,
        )
        with response:
            if response.status_code == 404:
                return None
            data = b""
            for chunk in response.iter_content(1 << 16):
                data += chunk
                if len(data) > _MAX_MANIFEST:  # a hostile registry cannot exhaust memory
                    break
        where = f"{self._url}@{reference}"
        if len(data) > _MAX_MANIFEST:
            raise IntegrityError(f"{where}: manifest larger than {_MAX_MANIFEST} bytes; refused")
        sha = "sha256:" + hashlib.sha256(data).hexdigest()
        if reference.startswith("sha256:") and sha != reference:
            raise IntegrityError(f"{where}: the registry sent a manifest hashing to {sha}; refused")
        try:
            manifest = json.loads(data)
        except ValueError as exc:
            raise IntegrityError(f"{where}: the manifest is not JSON ({exc}); refused") from exc
        if not isinstance(manifest, dict):
            raise IntegrityError(f"{where}: the manifest is not a JSON object; refused")
        media_type = str(manifest.get("mediaType") or response.headers.get("Content-Type", ""))
        return OciDescriptor(media_type, sha, len(data)), manifest

    def put_manifest(
        self, manifest: Mapping[str, Any], tag: str | None = None
    ) -> tuple[OciDescriptor, bool]:
        """Store a manifest (canonical JSON) under ``tag`` or its digest; return its
        descriptor and whether the registry said it indexed its subject (the
        ``OCI-Subject`` header of the referrers API)."""
        self._check_writable()
        data = canonical_json(manifest)
        sha = "sha256:" + hashlib.sha256(data).hexdigest()
        media_type = str(manifest["mediaType"])
        url = self._client.url(f"manifests/{tag or sha}")
        for attempt in range(4):
            response = self._client.request(
                "PUT", url, ok=(201, 400), data=data, headers={"Content-Type": media_type}
            )
            if response.status_code == 201:
                break
            problem = _errors_of(response)
            response.close()
            # Distribution 2.8 rewrites a blob's link file in place when the same blob
            # is uploaded twice at once; a manifest checked meanwhile finds it unreadable.
            if "BLOB_UNKNOWN" not in problem or attempt == 3:
                raise StorageError(f"PUT {url}: HTTP 400{problem}")
            time.sleep(0.05 * 2**attempt)
        with response:
            indexed = "OCI-Subject" in response.headers
            stored = response.headers.get("Docker-Content-Digest", sha)
        if stored != sha:
            raise IntegrityError(
                f"{self._url}: the registry stored the manifest as {stored}, expected {sha}"
            )
        return OciDescriptor(media_type, sha, len(data)), indexed

    def delete_manifest(self, digest: str) -> None:
        """Delete a manifest by its ``sha256:`` digest (absent ones are ignored)."""
        self._check_writable()
        self._client.request(
            "DELETE", self._client.url(f"manifests/{digest}"), ok=(202, 404)
        ).close()

    # -- blobs by sha256 -----------------------------------------------------------
    def has_oci_blob(self, sha256: str) -> bool:
        """Whether the repository holds the blob ``sha256:<hex>``."""
        response = self._client.request("HEAD", self._client.url(f"blobs/{sha256}"), ok=(200, 404))
        response.close()
        return response.status_code == 200

    def push_oci_blob(self, data: bytes | BinaryIO, sha256: str, size: int) -> None:
        """Upload a blob (bytes, or a file opened for reading) under its sha256
        (monolithic upload: nothing is visible until the registry checked it)."""
        self._check_writable()
        if self.has_oci_blob(sha256):
            return
        started = self._client.request("POST", self._client.url("blobs/uploads/"), ok=(202,))
        with started:
            location = started.headers.get("Location", "")
        if not location:
            raise StorageError(f"{self._url}: the registry gave no upload location")
        if location.startswith("/"):
            location = self._client.base + location
        sep = "&" if "?" in location else "?"
        self._client.request(
            "PUT",
            f"{location}{sep}digest={sha256}",
            ok=(201,),
            data=data,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
        ).close()

    def open_oci_blob(self, sha256: str, size: int, where: str) -> _CheckedStream:
        """Open a blob by sha256; the stream checks size and sha256 when fully read."""
        response = self._client.request(
            "GET", self._client.url(f"blobs/{sha256}"), ok=(200, 404), stream=True
        )
        if response.status_code == 404:
            response.close()
            raise BlobNotFoundError(f"{where}: blob {sha256} is not in the registry")
        budget = None if self._min_rate is None else self._deadline_floor + size / self._min_rate
        return _CheckedStream(response, sha256, size, where, budget)

    def _ensure_empty(self) -> None:
        with self._empty_lock:  # one upload of it per store, not one per thread
            if not self._empty_pushed:
                self.push_oci_blob(_EMPTY, _EMPTY_SHA256, len(_EMPTY))
                self._empty_pushed = True

    def put_artifact(
        self,
        artifact_type: str,
        layers: Sequence[Mapping[str, Any]],
        *,
        annotations: Mapping[str, str] | None = None,
        subject: OciDescriptor | None = None,
        tag: str | None = None,
    ) -> tuple[OciDescriptor, bool]:
        """Store an artifact manifest (its layers' blobs must be present): config the
        empty descriptor, ``subject`` when it refers to another manifest. Returns its
        descriptor and whether the registry indexed the subject itself."""
        self._ensure_empty()
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "config": EMPTY_DESCRIPTOR,
            "layers": list(layers),
        }
        if subject is not None:
            manifest["subject"] = _descriptor_json(subject)
        if annotations:
            manifest["annotations"] = dict(sorted(annotations.items()))
        return self.put_manifest(manifest, tag)

    # -- referrers ---------------------------------------------------------------------
    def referrers(self, subject: str) -> list[dict[str, Any]]:
        """The descriptors of the manifests that refer to ``subject`` (``sha256:``):
        the referrers API where the registry has it, else the fallback tag's index."""
        response = self._client.request(
            "GET",
            self._client.url(f"referrers/{subject}"),
            ok=(200, 404),
            headers={"Accept": INDEX_MEDIA_TYPE},
        )
        with response:
            api = response.status_code == 200 and response.headers.get(
                "Content-Type", ""
            ).startswith(INDEX_MEDIA_TYPE)
            body = response.content if api else b""
        if api:
            index = json.loads(body)
        else:
            got = self.get_manifest(_fallback_tag(subject))
            index = got[1] if got is not None else {"manifests": []}
        manifests = index.get("manifests") or []
        return [m for m in manifests if isinstance(m, dict)]

    def add_referrer(self, subject: str, referrer: dict[str, Any], *, tries: int = 5) -> None:
        """Add ``referrer`` to the fallback index of ``subject`` (for registries without
        the referrers API): read, extend, write, then read again until it is listed."""
        tag = _fallback_tag(subject)
        for _ in range(tries):
            got = self.get_manifest(tag)
            manifests = list(got[1].get("manifests") or []) if got else []
            if any(m.get("digest") == referrer["digest"] for m in manifests):
                return
            _steps.reached("oci:referrers-read")
            manifests.append(referrer)
            manifests.sort(key=lambda m: str(m.get("digest")))
            self.put_manifest(
                {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests}, tag
            )
        got = self.get_manifest(tag)
        if not got or not any(
            m.get("digest") == referrer["digest"] for m in got[1].get("manifests") or []
        ):
            raise StorageError(
                f"{self._url}:{tag}: {referrer['digest']} is still not in the referrers index "
                f"after {tries} writes (another writer keeps replacing it); try again"
            )

    def blob_layer(self, digest: str) -> tuple[str, int] | None:
        """The sha256 and size the ``blake3-`` tag names for ``digest`` (its manifest
        checked to name that digest), or None when absent. Nothing is hashed."""
        return self._layer(parse_digest(digest))

    # -- the BlobStore primitives ----------------------------------------------------
    def _layer(self, digest: str) -> tuple[str, int] | None:
        """The sha256 and size the ``blake3-`` tag names for ``digest``, checked."""
        got = self.get_manifest(blob_tag(digest))
        if got is None:
            return None
        where = self.location_of(digest)
        manifest = got[1]
        layers = manifest.get("layers")
        if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict):
            raise IntegrityError(f"{where}: the tag's manifest has no single layer; refused")
        layer = layers[0]
        named = (layer.get("annotations") or {}).get(BLAKE3_ANNOTATION)
        if named != digest:
            raise IntegrityError(
                f"{where}: the tag's manifest names {named!r}, not {digest}; refused",
                digest=digest,
            )
        sha, size = layer.get("digest"), layer.get("size")
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise IntegrityError(f"{where}: the layer's digest {sha!r} is not sha256; refused")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise IntegrityError(f"{where}: the layer's size {size!r} is not a size; refused")
        return sha, size

    def _exists(self, digest: str) -> bool:
        return self._size(digest) is not None

    def _size(self, digest: str) -> int | None:
        try:
            layer = self._layer(digest)
        except IntegrityError:
            return None  # a malformed tag: absent, so a push writes it again
        return None if layer is None else layer[1]

    def _open_raw(self, digest: str) -> BinaryIO:
        layer = self._layer(digest)
        if layer is None:
            raise BlobNotFoundError(f"{digest} is not in {self.location_of(digest)}")
        sha, size = layer
        where = f"{self._url}: {digest} (blob {sha}, tag {blob_tag(digest)})"
        stream = self.open_oci_blob(sha, size, where)
        return stream  # type: ignore[return-value]  # read/close/context: enough here

    def _blob_manifest(self, digest: str, sha256: str, size: int) -> dict[str, Any]:
        return {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": BLOB_ARTIFACT_TYPE,
            "config": EMPTY_DESCRIPTOR,
            "layers": [
                {
                    "mediaType": "application/octet-stream",
                    "digest": sha256,
                    "size": size,
                    "annotations": {BLAKE3_ANNOTATION: digest},
                }
            ],
        }

    def _publish(self, digest: str, sha256: str, size: int) -> None:
        self._ensure_empty()
        self.put_manifest(self._blob_manifest(digest, sha256, size), blob_tag(digest))

    def _write(self, digest: str, data: bytes) -> None:
        sha = "sha256:" + hashlib.sha256(data).hexdigest()
        self.push_oci_blob(data, sha, len(data))
        self._publish(digest, sha, len(data))

    def _write_file(self, digest: str, path: str, size: int) -> None:
        hasher = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(8 << 20):
                hasher.update(chunk)
            if fh.tell() != size:
                raise IntegrityError(f"{path}: changed while being stored ({fh.tell()} != {size})")
            sha = "sha256:" + hasher.hexdigest()
            self.push_oci_blob(fh, sha, size)
        self._publish(digest, sha, size)

    def _delete(self, digest: str) -> None:
        got = self.get_manifest(blob_tag(digest))
        if got is not None:
            self.delete_manifest(got[0].digest)

    def _iter(self) -> Iterator[str]:
        url: str | None = self._client.url("tags/list?n=1000")
        while url:
            response = self._client.request("GET", url, ok=(200, 404))
            with response:
                if response.status_code == 404:
                    return
                tags = response.json().get("tags") or []
                link = response.headers.get("Link", "")
            for tag in tags:
                if isinstance(tag, str) and re.fullmatch(r"blake3-[0-9a-f]{64}", tag):
                    yield digest_from_hex(tag.removeprefix("blake3-"))
            found = re.match(r"<([^>]+)>", link)
            url = self._client.base + found.group(1) if found else None

    def _make_upkeep(self) -> Upkeep:
        return OciUpkeep(self)


class OciUpkeep(Upkeep):
    """A registry's upkeep: sizes asked for many digests at once, on threads."""

    def sizes(self, digests: Iterable[str]) -> dict[str, int | None]:
        wanted = sorted({parse_digest(d) for d in digests})
        store = self._store
        with ThreadPoolExecutor(max_workers=16) as pool:
            return dict(zip(wanted, pool.map(store._size, wanted), strict=True))


def _fallback_tag(subject: str) -> str:
    if not _SHA256.fullmatch(subject):
        raise StorageError(f"{subject!r} is not a sha256 manifest digest")
    return subject.replace(":", "-")


def _descriptor_json(descriptor: OciDescriptor) -> dict[str, Any]:
    return {
        "mediaType": descriptor.media_type,
        "digest": descriptor.digest,
        "size": descriptor.size,
    }
