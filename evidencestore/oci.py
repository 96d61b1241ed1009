"""Bundles as OCI artifacts, and attestations as their referrers, on a registry remote.

A bundle pushed to an OCI remote (``oci://HOST/REPO``) becomes an image manifest with
``artifactType`` :data:`BUNDLE_ARTIFACT_TYPE`, config the empty descriptor (OCI 1.1
guidance for artifacts), and one layer per file: ``bundle.json`` (the registration)
first, then every entry in path order, each annotated with its path
(``org.opencontainers.image.title``), its BLAKE3 digest and where evstore keeps it
(``repo`` or ``store``). The manifest is tagged ``bundle-<hex of the bundle digest>``
and is a pure function of the registration and its files (canonical JSON, no time in
it), so two clones pushing the same bundle write the same bytes under the same tag:
last-writer-wins loses nothing; different bundles have different tags, and every blob
a manifest names is uploaded before it. Every layer's sha256 is computed here from the
local copy while its BLAKE3 is checked; for a store entry this clone lacks it is the one
the blob's ``blake3-`` tag names (checked to name its digest and size), and ``verify
--remote --deep`` checks each layer against it (:func:`bundle_problems`). A manifest
already under the tag that names the bundle's digest and files is kept unless a repair
asks for it to be written again.

``attach`` stores a signed attestation (a DSSE envelope) as an artifact whose
``subject`` is that bundle manifest: the registry's referrers API lists it, and on a
registry without one (distribution 2.8) it is added to the referrers fallback tag
``sha256-<hex>`` as OCI 1.1 describes (``oras discover`` reads either).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from blake3 import blake3

from . import _steps
from .config import Repository, as_repository
from .digest import digest_from_hex, digest_hex
from .errors import ConfigError, IntegrityError, RemoteConfigError, StorageError
from .inventory import load_inventory, registration_path
from .models import Registration
from .storage import BlobStore, LocalBlobStore, OciDescriptor, SupportsArtifacts

__all__ = [
    "ATTESTATION_ARTIFACT_TYPE",
    "BUNDLE_ARTIFACT_TYPE",
    "REGISTRATION_MEDIA_TYPE",
    "attach",
    "bundle_problems",
    "bundle_tag",
    "bundles_about",
    "push_bundles",
    "referrers",
]

BUNDLE_ARTIFACT_TYPE = "application/vnd.evidencestore.bundle.v1+json"
REGISTRATION_MEDIA_TYPE = "application/vnd.evidencestore.registration.v1+json"
ATTESTATION_ARTIFACT_TYPE = "application/vnd.dsse.envelope.v1+json"
TITLE = "org.opencontainers.image.title"
BLAKE3 = "org.evidencestore.blake3"
LOCATION = "org.evidencestore.location"
BUNDLE_NAME = "org.evidencestore.bundle.name"
BUNDLE_DIGEST = "org.evidencestore.bundle.digest"
PREDICATE_TYPE = "in-toto.io/predicate-type"


def bundle_tag(registration: Registration) -> str:
    """The tag of a bundle's manifest: ``bundle-<hex of its digest>``."""
    return f"bundle-{digest_hex(registration.digest)}"


def _registry(store: BlobStore, remote: str) -> SupportsArtifacts:
    """The store as a registry, or a RemoteConfigError."""
    if not isinstance(store, SupportsArtifacts):
        raise RemoteConfigError(
            f"remote {remote!r} ({store.location}) is not an OCI registry: artifacts and "
            "referrers need an oci:// remote"
        )
    return store


def _hashes(path: Path, digest: str, size: int, where: str) -> str:
    """Read a file once: check its size and BLAKE3, return its ``sha256:`` digest."""
    b3, sha = blake3(), hashlib.sha256()
    count = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(8 << 20):
                b3.update(chunk)
                sha.update(chunk)
                count += len(chunk)
    except OSError as exc:
        raise StorageError(f"{where}: cannot read {path}: {exc.strerror or exc}") from exc
    observed = digest_from_hex(b3.hexdigest())
    if count != size or observed != digest:
        raise IntegrityError(
            f"{where}: {path} is {count} bytes hashing to {observed}, expected {size} bytes "
            f"hashing to {digest}; not pushed",
            digest=digest,
            expected_size=size,
            observed_digest=observed,
            observed_size=count,
        )
    return "sha256:" + sha.hexdigest()


def _layers(
    root: Path,
    cache: LocalBlobStore,
    registry: SupportsArtifacts,
    name: str,
    registration: Registration,
) -> list[tuple[dict[str, Any], Path | None]]:
    """Each file of a bundle as a layer descriptor, with where its bytes are here (None
    for a store entry this clone lacks: its sha256 is then the one the registry's
    ``blake3-`` tag names for it, checked to name its digest and size)."""
    reg_path = registration_path(root, name)
    data = reg_path.read_bytes()
    reg_digest = digest_from_hex(blake3(data).hexdigest())
    out: list[tuple[dict[str, Any], Path | None]] = [
        (
            {
                "mediaType": REGISTRATION_MEDIA_TYPE,
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "annotations": {TITLE: "bundle.json", BLAKE3: reg_digest, LOCATION: "repo"},
            },
            reg_path,
        )
    ]
    for entry in sorted(registration.manifest.entries, key=lambda e: e.path):
        d = entry.descriptor
        where = f"bundle {name!r} entry {entry.path!r}"
        path: Path | None = (
            reg_path.parent / entry.path if entry.location == "repo" else cache.path_of(d.digest)
        )
        if entry.location == "store" and not cache.has(d.digest):
            path = None
            found = registry.blob_layer(d.digest)
            if found is None or found[1] != d.size:
                raise StorageError(
                    f"{where}: {d.digest} is neither in the local store nor on the registry "
                    f"({registry.location}) at {d.size} bytes: pull or push it first"
                )
            sha = found[0]
        else:
            assert path is not None
            sha = _hashes(path, d.digest, d.size, where)
        out.append(
            (
                {
                    "mediaType": d.media_type,
                    "digest": sha,
                    "size": d.size,
                    "annotations": {TITLE: entry.path, BLAKE3: d.digest, LOCATION: entry.location},
                },
                path,
            )
        )
    return out


def _shape(layers: Any) -> list[tuple[Any, ...]]:
    """What a bundle manifest's layers say apart from their sha256: title, BLAKE3,
    size, location, media type."""
    if not isinstance(layers, list):
        return []
    out = []
    for layer in layers:
        notes = layer.get("annotations") if isinstance(layer, dict) else None
        if not isinstance(notes, dict):
            return []
        out.append(
            (
                notes.get(TITLE),
                notes.get(BLAKE3),
                layer.get("size"),
                notes.get(LOCATION),
                layer.get("mediaType"),
            )
        )
    return out


def _expected_shape(root: Path, name: str, registration: Registration) -> list[tuple[Any, ...]]:
    data = registration_path(root, name).read_bytes()
    out: list[tuple[Any, ...]] = [
        (
            "bundle.json",
            digest_from_hex(blake3(data).hexdigest()),
            len(data),
            "repo",
            REGISTRATION_MEDIA_TYPE,
        )
    ]
    for entry in sorted(registration.manifest.entries, key=lambda e: e.path):
        d = entry.descriptor
        out.append((entry.path, d.digest, d.size, entry.location, d.media_type))
    return out


def push_bundles(
    repo: Repository,
    store: BlobStore,
    remote: str,
    bundles: Iterable[str],
    *,
    rewrite: bool = False,
) -> list[str]:
    """Push each bundle's manifest (and the blobs of its files in git, which the store's
    push does not send) to the registry ``store``; return the tags written.

    A bundle whose tag already holds a manifest naming its digest and its files (path,
    BLAKE3, size, location, media type) is left as it is unless ``rewrite`` (a repair):
    then every layer's sha256 is computed again and the manifest written again.
    """
    registry = _registry(store, remote)
    inventory = load_inventory(repo)
    cache = repo.local_store()
    tags = []
    for name in bundles:
        registration = inventory.registrations[name]
        tag = bundle_tag(registration)
        if not rewrite:
            got = registry.get_manifest(tag)
            if (
                got is not None
                and _is_bundle(got[1], registration)
                and _shape(got[1].get("layers")) == _expected_shape(repo.root, name, registration)
            ):
                continue
        layers = _layers(repo.root, cache, registry, name, registration)
        for layer, path in layers:
            if path is not None and not registry.has_oci_blob(layer["digest"]):
                with open(path, "rb") as fh:
                    registry.push_oci_blob(fh, layer["digest"], layer["size"])
        _steps.reached("oci:bundle-manifest")
        registry.put_artifact(
            BUNDLE_ARTIFACT_TYPE,
            [layer for layer, _ in layers],
            annotations={
                TITLE: name,
                BUNDLE_NAME: name,
                BUNDLE_DIGEST: registration.digest,
            },
            tag=tag,
        )
        tags.append(tag)
    return tags


def bundle_problems(
    repo: Repository,
    store: BlobStore,
    remote: str,
    name: str,
    registration: Registration,
    *,
    deep: bool = False,
) -> list[str]:
    """What is wrong with bundle ``name``'s manifest on the registry (nothing: an empty
    list): absent, or not naming the bundle's digest and files (path, BLAKE3, size,
    location, media type). ``deep`` also checks each layer's sha256: a store entry's
    against the blob its ``blake3-`` tag names, a file in git against the file here."""
    registry = _registry(store, remote)
    tag = bundle_tag(registration)
    where = f"{registry.location}:{tag}"
    fix = f"; write it again with `evstore push --remote {remote} {name}`"
    got = registry.get_manifest(tag)
    if got is None:
        return [f"bundle {name!r} has no manifest on remote {remote!r} ({where}){fix}"]
    manifest = got[1]
    if not _is_bundle(manifest, registration) or _shape(manifest.get("layers")) != _expected_shape(
        repo.root, name, registration
    ):
        return [
            f"the manifest at {where} does not describe bundle {name!r} "
            f"({registration.digest}): its digest or files differ{fix}"
        ]
    if not deep:
        return []
    problems = []
    reg_dir = registration_path(repo.root, name).parent
    for layer in manifest["layers"]:
        notes = layer["annotations"]
        title, digest, size = notes[TITLE], notes[BLAKE3], layer["size"]
        if notes[LOCATION] == "store":
            found = registry.blob_layer(digest)
            actual = found[0] if found is not None and found[1] == size else None
        else:
            try:
                actual = _hashes(reg_dir / title, digest, size, f"bundle {name!r} file {title!r}")
            except (StorageError, IntegrityError) as exc:
                problems.append(str(exc))
                continue
        if actual != layer["digest"]:
            problems.append(
                f"the manifest at {where} names {layer['digest']} for {title!r} ({digest}), "
                f"but that file is {actual or 'not on the registry'}{fix}"
            )
    return problems


def _is_bundle(manifest: dict[str, Any], registration: Registration) -> bool:
    named = (manifest.get("annotations") or {}).get(BUNDLE_DIGEST)
    return manifest.get("artifactType") == BUNDLE_ARTIFACT_TYPE and named == registration.digest


def _bundle_manifest(
    registry: SupportsArtifacts, remote: str, name: str, registration: Registration
) -> OciDescriptor:
    """The descriptor of a bundle's manifest on the registry, checked to be about it."""
    tag = bundle_tag(registration)
    got = registry.get_manifest(tag)
    if got is None:
        raise StorageError(
            f"bundle {name!r} is not on remote {remote!r} ({registry.location}:{tag}); "
            f"push it first: `evstore push --remote {remote} {name}`"
        )
    descriptor, manifest = got
    named = (manifest.get("annotations") or {}).get(BUNDLE_DIGEST)
    if not _is_bundle(manifest, registration):
        raise IntegrityError(
            f"{registry.location}:{tag}: the manifest there is not bundle {name!r} "
            f"({registration.digest}; it names {named!r}); replace it with "
            f"`evstore push --remote {remote} {name}`"
        )
    return descriptor


def bundles_about(root: str | os.PathLike[str], envelope: bytes) -> list[str]:
    """The registered bundles an attestation is about: a bundle whose ``bundle.json``
    is a subject, else every bundle with an entry whose BLAKE3 digest is a subject's."""
    subjects = _subjects(envelope)
    inventory = load_inventory(as_repository(root))
    named = [
        n
        for n in sorted(inventory.registrations)
        if any(s.get("name") == f"evidence/{n}/bundle.json" for s in subjects)
    ]
    if named:
        return named
    wanted = {
        digest_from_hex(str(s["digest"]["blake3"]))
        for s in subjects
        if isinstance(s.get("digest"), dict) and "blake3" in s["digest"]
    }
    return [
        n
        for n, reg in sorted(inventory.registrations.items())
        if any(e.descriptor.digest in wanted for e in reg.manifest.entries)
    ]


def _statement(envelope: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(envelope)["payload"]
        statement = json.loads(base64.b64decode(payload))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"not a DSSE envelope with an in-toto statement: {exc}") from exc
    if not isinstance(statement, dict):
        raise ConfigError("the envelope's payload is not an in-toto statement")
    return statement


def _subjects(envelope: bytes) -> list[dict[str, Any]]:
    subjects = _statement(envelope).get("subject") or []
    return [s for s in subjects if isinstance(s, dict)]


def attach(
    root: str | os.PathLike[str],
    store: BlobStore,
    remote: str,
    envelope: bytes,
    bundles: Sequence[str],
) -> list[str]:
    """Store ``envelope`` on the registry as a referrer of each bundle's manifest (the
    OCI 1.1 ``subject``; the fallback tag index where the registry has no referrers
    API). Returns the referrers' ``sha256:`` digests, one per bundle."""
    registry = _registry(store, remote)
    if not bundles:
        raise ConfigError("the attestation is about no registered bundle: nothing to attach to")
    inventory = load_inventory(as_repository(root))
    predicate_type = str(_statement(envelope).get("predicateType", ""))
    subjects = [
        (name, _bundle_manifest(registry, remote, name, inventory.registrations[name]))
        for name in bundles
    ]  # every bundle is there before anything is stored
    sha = "sha256:" + hashlib.sha256(envelope).hexdigest()
    registry.push_oci_blob(envelope, sha, len(envelope))
    layer = {
        "mediaType": ATTESTATION_ARTIFACT_TYPE,
        "digest": sha,
        "size": len(envelope),
        "annotations": {PREDICATE_TYPE: predicate_type},
    }
    out = []
    for name, subject in subjects:
        annotations = {PREDICATE_TYPE: predicate_type, BUNDLE_NAME: name}
        descriptor, indexed = registry.put_artifact(
            ATTESTATION_ARTIFACT_TYPE, [layer], annotations=annotations, subject=subject
        )
        if not indexed:
            registry.add_referrer(
                subject.digest,
                {
                    "mediaType": descriptor.media_type,
                    "digest": descriptor.digest,
                    "size": descriptor.size,
                    "artifactType": ATTESTATION_ARTIFACT_TYPE,
                    "annotations": annotations,
                },
            )
        out.append(descriptor.digest)
    return out


def referrers(
    root: str | os.PathLike[str], store: BlobStore, remote: str, name: str
) -> list[dict[str, Any]]:
    """The referrers of bundle ``name``'s manifest on the registry (their descriptors)."""
    registry = _registry(store, remote)
    inventory = load_inventory(as_repository(root))
    if name not in inventory.registrations:
        raise ConfigError(f"no registered bundle named {name!r}")
    subject = _bundle_manifest(registry, remote, name, inventory.registrations[name])
    return list(registry.referrers(subject.digest))
