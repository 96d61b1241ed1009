"""The OCI registry store against a real distribution 2.8 registry (Debian's
``docker-registry``) on 127.0.0.1: the conformance suite, and what only a registry
does (sha256 blobs found by BLAKE3 tags, both digests checked on every read)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import pytest
from helpers.oci_registry import Registry, running_registry

from evidencestore.digest import hash_bytes
from evidencestore.errors import IntegrityError
from evidencestore.storage import BlobStore, OciBlobStore
from evidencestore.storage._oci import (
    BLAKE3_ANNOTATION,
    BLOB_ARTIFACT_TYPE,
    EMPTY_DESCRIPTOR,
    blob_tag,
)
from evidencestore.storage.conformance import BlobStoreSuite

pytest.importorskip("requests")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


class TestOciStore(BlobStoreSuite):
    @pytest.fixture
    def store(self, registry: Registry, request: pytest.FixtureRequest) -> BlobStore:
        repo = f"suite/{uuid.uuid4().hex}"
        return OciBlobStore(registry.url(repo), attempts=2, backoff=0.001, timeout=10)


def _store(registry: Registry, **kwargs: object) -> OciBlobStore:
    return OciBlobStore(
        registry.url(f"t/{uuid.uuid4().hex}"), attempts=2, backoff=0.001, timeout=10, **kwargs
    )


def test_blob_is_sha256_addressed_with_blake3_annotation(registry: Registry) -> None:
    store = _store(registry)
    data = b"raw log line\n" * 500
    digest = store.put(data).digest
    got = store.get_manifest(blob_tag(digest))
    assert got is not None
    descriptor, manifest = got
    assert manifest["artifactType"] == BLOB_ARTIFACT_TYPE
    assert manifest["config"] == EMPTY_DESCRIPTOR
    (layer,) = manifest["layers"]
    assert layer["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert layer["size"] == len(data)
    assert layer["annotations"] == {BLAKE3_ANNOTATION: digest}
    # the blob itself is on the registry's disk under its sha256
    assert registry.blob_file(layer["digest"]).read_bytes() == data
    # the manifest is a function of the blob: a second clone writes the same bytes
    other = _store(registry)
    other_digest = other.put(data).digest
    again = other.get_manifest(blob_tag(other_digest))
    assert again is not None and again[0].digest == descriptor.digest


def test_blob_corrupted_in_registry_storage_is_refused(registry: Registry) -> None:
    store = _store(registry)
    data = bytes(range(256)) * 40
    digest = store.put(data).digest
    sha = "sha256:" + hashlib.sha256(data).hexdigest()
    path = registry.blob_file(sha)
    path.write_bytes(bytes([data[0] ^ 1]) + data[1:])  # same size, one bit
    with pytest.raises(IntegrityError) as caught:
        store.get(digest)
    message = str(caught.value)
    assert sha in message and blob_tag(digest) in message
    assert "refused" in message
    # negative control: restoring the bytes makes the same read pass
    path.write_bytes(data)
    assert store.get(digest) == data


def test_blob_swapped_under_its_tag_is_refused(registry: Registry) -> None:
    store = _store(registry)
    data, other = b"a" * 1000, b"b" * 1000
    digest = store.put(data).digest
    # a writer publishes other bytes (same size) under the tag, annotated as `digest`
    sha_other = "sha256:" + hashlib.sha256(other).hexdigest()
    store.push_oci_blob(other, sha_other, len(other))
    layer = {
        "mediaType": "application/octet-stream",
        "digest": sha_other,
        "size": len(other),
        "annotations": {BLAKE3_ANNOTATION: digest},
    }
    store.put_artifact(BLOB_ARTIFACT_TYPE, [layer], tag=blob_tag(digest))
    with pytest.raises(IntegrityError) as caught:
        store.get(digest)
    assert digest in str(caught.value)
    # a manifest naming another BLAKE3 digest under the tag is refused before any byte
    layer["annotations"] = {BLAKE3_ANNOTATION: hash_bytes(other).digest}
    store.put_artifact(BLOB_ARTIFACT_TYPE, [layer], tag=blob_tag(digest))
    with pytest.raises(IntegrityError, match=f"names '{hash_bytes(other).digest}', not {digest}"):
        store.get(digest)
    # put replaces the bad tag with the right manifest (create-only, corrupt replaced)
    store.put(data)
    assert store.get(digest) == data
