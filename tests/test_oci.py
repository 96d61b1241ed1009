"""OCI registries as remotes, end to end against a real distribution 2.8 registry
(Debian's ``docker-registry``) on 127.0.0.1, started and stopped here: push, pull into
a fresh clone, ``verify --remote --deep``, corrupt blobs refused, ``push --repair``,
bundles as artifact manifests, and attestations as referrers read back by the ``oras``
client (outside evstore). The OCI 1.1 referrers API, which distribution 2.8 lacks, is
tested against a stand-in (``helpers/oci_referrers.py``)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.oci_registry import Registry, oci_registry, token_auth_proxy  # noqa: F401
from helpers.remotes import blobs, digest_of, make_repo, run
from helpers.repos import git, init_repo

from evidencestore.errors import TransferDeadlineError
from evidencestore.inventory import load_inventory
from evidencestore.oci import (
    ATTESTATION_ARTIFACT_TYPE,
    BUNDLE_ARTIFACT_TYPE,
    bundle_tag,
)

pytest.importorskip("requests")

REPO = "evidence/campaigns"


@pytest.fixture
def pushed(tmp_path: Path, oci_registry: Registry) -> tuple[Path, dict[str, bytes]]:  # noqa: F811
    root = init_repo(tmp_path / "repo")
    files = blobs(5, size=3000)
    make_repo(root, files)
    code, out, err = run("remote", "add", "reg", oci_registry.url(REPO), "--root", str(root))
    assert code == 0, err
    assert "oci+http://" in out
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "5 of 5 blobs transferred" in out and "1 bundle manifest(s) written" in out
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "evidence")
    return root, files


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _oras(registry: Registry) -> Any:
    oras_provider = pytest.importorskip("oras.provider")
    return oras_provider.Registry(hostname=registry.host, insecure=True)


def test_push_pull_fresh_clone_and_deep_verify(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    root, files = pushed
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    code, out, err = run("pull", "--root", str(clone))
    assert code == 0, err
    assert "5 of 5 blobs transferred" in out
    for _rel, data in files.items():
        code, out, err = run("fetch", digest_of(data), "--root", str(clone))
        assert code == 0, err
        assert (clone / ".evstore").exists()
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(clone))
    assert code == 0, out + err
    # a second push finds everything present and writes the same manifest again
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "0 of 5 blobs transferred" in out and "5 already present" in out
    assert "manifest" not in out  # the bundle's manifest is there and says the same


def test_a_clone_that_never_pulled_pushes_its_new_bundle(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A new bundle sharing a blob the clone does not hold: the layer's sha256 comes
    from the registry's tag for it; the old bundle's manifest is left as it is, and a
    manifest tampered with under its tag is written again by a plain push."""
    from evidencestore.storage import OciBlobStore

    root, files = pushed
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    make_repo(clone, {"ext/new.bin": b"new evidence" * 100}, name="run2")
    store = OciBlobStore(oci_registry.url(REPO))
    run1 = load_inventory(root).registrations["run1"]
    before = store.get_manifest(bundle_tag(run1))
    code, out, err = run("push", "--root", str(clone))
    assert code == 0, err
    assert "1 bundle manifest(s) written" in out  # run2 only
    assert store.get_manifest(bundle_tag(run1)) == before
    run2 = load_inventory(clone).registrations["run2"]
    assert store.get_manifest(bundle_tag(run2)) is not None
    # run1's blobs are not in this clone: rewriting its manifest takes their sha256
    # from the registry's tags
    local = clone / ".evstore"
    assert not [d for d in files.values() if list(local.rglob(digest_of(d)[7:]))]
    # a manifest under run1's tag that says something else is replaced by a plain push
    assert before is not None
    tampered = json.loads(json.dumps(before[1]))
    tampered["layers"] = tampered["layers"][:-1]
    store.put_manifest(tampered, bundle_tag(run1))
    code, out, err = run("push", "--root", str(clone))
    assert code == 0, err
    assert "1 bundle manifest(s) written" in out
    assert store.get_manifest(bundle_tag(run1)) == before


def test_bundle_is_an_artifact_manifest_readable_by_oras(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    root, files = pushed
    registration = load_inventory(root).registrations["run1"]
    oras = _oras(oci_registry)
    manifest = oras.get_manifest(f"{oci_registry.host}/{REPO}:{bundle_tag(registration)}")
    assert manifest["artifactType"] == BUNDLE_ARTIFACT_TYPE
    assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    assert manifest["annotations"]["org.evidencestore.bundle.digest"] == registration.digest
    layers = {
        layer["annotations"]["org.opencontainers.image.title"]: layer
        for layer in manifest["layers"]
    }
    assert set(layers) == {"bundle.json", "results.json", *files}
    bundle_json = (root / "evidence/run1/bundle.json").read_bytes()
    assert layers["bundle.json"]["digest"] == _sha(bundle_json)
    for rel, data in files.items():
        assert layers[rel]["digest"] == _sha(data)
        assert layers[rel]["size"] == len(data)
        assert layers[rel]["annotations"]["org.evidencestore.blake3"] == digest_of(data)
        assert layers[rel]["annotations"]["org.evidencestore.location"] == "store"
    # oras pulls every file of the bundle by its sha256, outside evstore
    out = tmp_path / "oras-out"
    out.mkdir()
    got = oras.pull(
        target=f"{oci_registry.host}/{REPO}:{bundle_tag(registration)}", outdir=str(out)
    )
    pulled = {Path(p).relative_to(out).as_posix(): Path(p).read_bytes() for p in got}
    assert pulled["bundle.json"] == bundle_json
    for rel, data in files.items():
        assert pulled[rel] == data


def test_blob_corrupted_in_registry_is_refused_everywhere(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    root, files = pushed
    rel, data = next(iter(files.items()))
    digest = digest_of(data)
    blob_file = oci_registry.blob_file(_sha(data))
    blob_file.write_bytes(bytes([data[0] ^ 1]) + data[1:])  # same size, one bit
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
    assert code == 1
    assert "remote-corrupt" in out and digest in out and rel in out
    # negative control: without --deep the size check cannot see it
    code, out, err = run("verify", "--remote", "reg", "--root", str(root))
    assert code == 0, out + err
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    code, out, err = run("pull", "--root", str(clone))
    assert code != 0
    assert digest in err and _sha(data) in err and "refused" in err
    assert not (clone / ".evstore").exists() or run("fetch", digest, "--root", str(clone))[0] != 0


def test_push_repair_replaces_a_blob_swapped_under_its_tag(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
) -> None:
    from evidencestore.storage import OciBlobStore

    root, files = pushed
    (_rel, data), (_, other) = list(files.items())[:2]
    digest = digest_of(data)
    store = OciBlobStore(oci_registry.url(REPO))
    tag = f"blake3-{digest.removeprefix('blake3:')}"
    got = store.get_manifest(tag)
    assert got is not None
    swapped = json.loads(json.dumps(got[1]))
    swapped["layers"][0]["digest"] = _sha(other)  # another blob of the same size
    store.put_manifest(swapped, tag)
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
    assert code == 1 and "remote-corrupt" in out and digest in out
    assert "push --repair --remote reg" in out
    code, out, err = run("push", "--root", str(root))  # a plain push trusts the size
    assert code == 0 and "0 of 5 blobs transferred" in out
    code, out, err = run("push", "--repair", "--root", str(root))
    assert code == 0, err
    assert "1 of 5 blobs transferred (1 replacing a corrupt copy)" in out
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
    assert code == 0, out + err
    assert store.get(digest) == data


def test_push_repair_reports_a_blob_the_registry_keeps_corrupt(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
) -> None:
    """Distribution keeps the first copy of a sha256 blob: corrupted in its storage, a
    re-upload does not replace it, and repair says so instead of claiming success."""
    root, files = pushed
    data = next(iter(files.values()))
    oci_registry.blob_file(_sha(data)).write_bytes(b"\0" * len(data))
    code, _out, err = run("push", "--repair", "--root", str(root))
    assert code != 0
    assert digest_of(data) in err and "still corrupt after re-upload" in err


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    private = tmp_path / "keys" / "signer"
    private.parent.mkdir()
    code, _, err = run("attest", "keygen", str(private))
    assert code == 0, err
    return private, Path(f"{private}.pub")


def test_attestation_attached_as_referrer_listed_by_oras(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    root, _ = pushed
    private, public = _keys(tmp_path)
    envelope = tmp_path / "run1.att.json"
    code, out, err = run(
        "attest", "run1", "--key", str(private), "-o", str(envelope), "--oci", "reg",
        "--root", str(root),
    )  # fmt: skip
    assert code == 0, err
    assert "attached to bundle 'run1'" in err
    registration = load_inventory(root).registrations["run1"]
    oras = _oras(oci_registry)
    container = f"{oci_registry.host}/{REPO}"
    bundle = oras.get_manifest(f"{container}:{bundle_tag(registration)}")
    subject = _sha(json.dumps(bundle, sort_keys=True, separators=(",", ":")).encode())
    # distribution 2.8 has no referrers API: the OCI 1.1 fallback tag lists the referrer
    api = oras.do_request(f"http://{container.split('/', 1)[0]}/v2/{REPO}/referrers/{subject}")
    assert api.status_code == 404
    index = oras.get_manifest(
        f"{container}:{subject.replace(':', '-')}",
        allowed_media_type=["application/vnd.oci.image.index.v1+json"],
    )
    (referrer,) = index["manifests"]
    assert referrer["artifactType"] == ATTESTATION_ARTIFACT_TYPE
    manifest = oras.get_manifest(f"{container}@{referrer['digest']}")
    assert manifest["subject"]["digest"] == subject
    assert manifest["artifactType"] == ATTESTATION_ARTIFACT_TYPE
    (layer,) = manifest["layers"]
    stored = oras.get_blob(container, layer["digest"]).content
    assert stored == envelope.read_bytes()
    statement = json.loads(base64.b64decode(json.loads(stored)["payload"]))
    assert layer["annotations"]["in-toto.io/predicate-type"] == statement["predicateType"]
    # attaching again is idempotent: the same envelope, no second index entry
    code, _, err = run(
        "attest", "run1", "--key", str(private), "-o", str(envelope), "--oci", "reg",
        "--root", str(root),
    )  # fmt: skip
    assert code == 0, err
    index = oras.get_manifest(
        f"{container}:{subject.replace(':', '-')}",
        allowed_media_type=["application/vnd.oci.image.index.v1+json"],
    )
    assert len(index["manifests"]) == 1
    # and it verifies from what the registry holds
    verified = tmp_path / "from-registry.json"
    verified.write_bytes(stored)
    code, out, err = run(
        "attest", "verify", str(verified), "--key", str(public), "--subject", "run1",
        "--root", str(root),
    )  # fmt: skip
    assert code == 0, out + err


def test_attest_oci_needs_the_bundle_on_the_registry(
    tmp_path: Path,
    oci_registry: Registry,  # noqa: F811
) -> None:
    root = init_repo(tmp_path / "repo")
    make_repo(root, blobs(1))
    assert run("remote", "add", "reg", oci_registry.url(REPO), "--root", str(root))[0] == 0
    private, _ = _keys(tmp_path)
    code, _out, err = run(
        "attest", "run1", "--key", str(private), "-o", str(tmp_path / "e.json"), "--oci", "reg",
        "--root", str(root),
    )  # fmt: skip
    assert code == 2
    assert "bundle 'run1' is not on remote 'reg'" in err and "evstore push --remote reg run1" in err


def test_two_clones_pushing_at_once_lose_nothing(
    tmp_path: Path,
    oci_registry: Registry,  # noqa: F811
) -> None:
    """Clone A decides what the registry lacks and pauses; clone B pushes another bundle
    sharing a blob (tags, blobs, its manifest); A goes on and rewrites the shared tag.
    The shared tag's manifest is byte-identical whoever wrote it, and every bundle of both
    clones verifies deep against the registry."""
    from evidencestore.remotes import push
    from evidencestore.storage import OciBlobStore
    from evidencestore.testing.interleave import Interleaving

    shared = blobs(1, size=2000, seed="shared")
    a_root, b_root = init_repo(tmp_path / "a"), init_repo(tmp_path / "b")
    make_repo(a_root, {**shared, **blobs(2, size=2000, seed="a")}, name="run-a")
    make_repo(b_root, {**shared, **blobs(2, size=2000, seed="b")}, name="run-b")
    for root in (a_root, b_root):
        assert run("remote", "add", "reg", oci_registry.url(REPO), "--root", str(root))[0] == 0
    store = OciBlobStore(oci_registry.url(REPO))
    tag = f"blake3-{digest_of(next(iter(shared.values()))).removeprefix('blake3:')}"
    with Interleaving() as il:
        il.start("a", lambda: push(a_root, jobs=1), pause_at="push:checked")
        assert il.wait_paused("a") is not None
        il.start("b", lambda: push(b_root, jobs=1))
        il.join("b")
        written_by_b = store.get_manifest(tag)
        il.resume("a")
        il.join("a")
    assert written_by_b is not None
    after = store.get_manifest(tag)
    assert after is not None and after[0] == written_by_b[0]  # the same bytes again
    for root in (a_root, b_root):
        code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
        assert code == 0, out + err
    registrations = {
        **load_inventory(a_root).registrations,
        **load_inventory(b_root).registrations,
    }
    for registration in registrations.values():
        assert store.get_manifest(bundle_tag(registration)) is not None


def test_racing_attachers_on_the_fallback_index_and_attaching_again(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The documented limit of the referrers tag fallback: attacher A reads the index,
    B attaches, A writes its index without B's entry. The attestation manifest of B is
    still on the registry (by digest) and attaching it again lists both."""
    from evidencestore import oci
    from evidencestore.remotes import open_remote
    from evidencestore.testing.interleave import Interleaving

    root, files = pushed
    private, _ = _keys(tmp_path)
    envelopes = []
    for target in ("run1", digest_of(next(iter(files.values())))):
        out = tmp_path / f"{len(envelopes)}.json"
        assert (
            run("attest", target, "--key", str(private), "-o", str(out), "--root", str(root))[0]
            == 0
        )
        envelopes.append(out.read_bytes())
    remote = open_remote(root, "reg")

    def attach(envelope: bytes) -> list[str]:
        return oci.attach(root, remote.store, "reg", envelope, ["run1"])

    with Interleaving() as il:
        il.start("a", lambda: attach(envelopes[0]), pause_at="oci:referrers-read")
        assert il.wait_paused("a") is not None
        il.start("b", lambda: attach(envelopes[1]))
        il.join("b")
        il.resume("a")
        (a_digest,) = il.join("a")
    listed = {r["digest"] for r in oci.referrers(root, remote.store, "reg", "run1")}
    assert a_digest in listed and len(listed) == 1  # B's entry was dropped by A's write
    (b_digest,) = attach(envelopes[1])  # attaching again puts it back
    listed = {r["digest"] for r in oci.referrers(root, remote.store, "reg", "run1")}
    assert listed == {a_digest, b_digest}


def test_registry_behind_token_auth_with_credentials_from_the_environment(
    tmp_path: Path,
    oci_registry: Registry,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import requests

    with token_auth_proxy(oci_registry.host, "ci-bot", "s3cret") as front:
        # the front really refuses anonymous requests
        assert requests.get(f"http://{front}/v2/", timeout=5).status_code == 401
        root = init_repo(tmp_path / "repo")
        files = blobs(2)
        make_repo(root, files)
        url = f"oci+http://{front}/{REPO}"
        code, _, err = run(
            "remote", "add", "reg", url, "--option", "password_env=REG_PW", "--root", str(root)
        )
        assert code == 0, err
        assert "s3cret" not in (root / "evstore.toml").read_text()
        monkeypatch.setenv("EVSTORE_OCI_USERNAME", "ci-bot")
        monkeypatch.setenv("REG_PW", "wrong")
        code, _, err = run("push", "--root", str(root))
        assert code != 0
        assert "token service" in err and "HTTP 401" in err
        monkeypatch.setenv("REG_PW", "s3cret")
        code, out, err = run("push", "--root", str(root))
        assert code == 0, err
        assert "2 of 2 blobs transferred" in out
        code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
        assert code == 0, out + err
    # and the registry behind it holds the blobs, found by their tags
    from evidencestore.storage import OciBlobStore

    direct = OciBlobStore(oci_registry.url(REPO))
    for data in files.values():
        assert direct.get(digest_of(data)) == data


def test_verify_checks_the_bundle_manifest_and_repair_rewrites_it(
    pushed: tuple[Path, dict[str, bytes]],
    oci_registry: Registry,  # noqa: F811
) -> None:
    from evidencestore.storage import OciBlobStore

    root, files = pushed
    store = OciBlobStore(oci_registry.url(REPO))
    tag = bundle_tag(load_inventory(root).registrations["run1"])
    good = store.get_manifest(tag)
    assert good is not None
    # a layer naming another blob's sha256: same paths, digests and sizes otherwise
    (rel, _), (_, other) = list(files.items())[:2]
    bad = json.loads(json.dumps(good[1]))
    for layer in bad["layers"]:
        if layer["annotations"]["org.opencontainers.image.title"] == rel:
            layer["digest"] = _sha(other)
    store.put_manifest(bad, tag)
    code, out, err = run("verify", "--remote", "reg", "--root", str(root))
    assert code == 0, out + err  # the manifest's shape is right: only --deep can tell
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
    assert code == 1
    assert "remote-bundle-manifest" in out and repr(rel) in out and _sha(other) in out
    code, out, err = run("push", "--repair", "--root", str(root))
    assert code == 0, err
    assert "1 bundle manifest(s) written" in out
    assert store.get_manifest(tag) == good
    code, out, err = run("verify", "--remote", "reg", "--deep", "--root", str(root))
    assert code == 0, out + err
    # a manifest missing a file is seen without --deep
    short = json.loads(json.dumps(good[1]))
    short["layers"] = short["layers"][:-1]
    store.put_manifest(short, tag)
    code, out, err = run("verify", "--remote", "reg", "--root", str(root))
    assert code == 1 and "does not describe bundle 'run1'" in out


def test_a_trickling_registry_meets_the_download_deadline(
    tmp_path: Path,
    oci_registry: Registry,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """min_rate and deadline_floor bound a download from a registry as from any remote:
    a body trickled far below min_rate is cut, nothing partial is kept."""
    from evidencestore.storage import OciBlobStore

    data = b"x" * 3000
    digest = OciBlobStore(oci_registry.url(REPO)).put(data).digest
    monkeypatch.setenv("EVSTORE_OCI_USERNAME", "u")
    monkeypatch.setenv("EVSTORE_OCI_PASSWORD", "p")
    with token_auth_proxy(oci_registry.host, "u", "p", trickle=0.05) as front:
        slow = OciBlobStore(
            f"oci+http://{front}/{REPO}", attempts=1, min_rate=1e9, deadline_floor=0.0
        )
        with pytest.raises(TransferDeadlineError, match="not complete within its deadline"):
            slow.get(digest)
        # negative control: the same trickle within a generous deadline is delivered
        patient = OciBlobStore(
            f"oci+http://{front}/{REPO}", attempts=1, min_rate=1e9, deadline_floor=60.0
        )
        assert patient.get(digest) == data


def test_remote_add_refuses_an_oci_url_without_a_valid_repository(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    code, _, err = run(
        "remote", "add", "r", "oci+http://127.0.0.1:5000/Bad_Repo", "--root", str(root)
    )
    assert code == 2
    assert "'Bad_Repo' is not a valid OCI repository name" in err
    code, _, err = run("remote", "add", "r", "oci://ghcr.io", "--root", str(root))
    assert code == 2 and "needs a host and a repository" in err
    # negative control: a valid one is added
    code, _, err = run("remote", "add", "r", "oci://ghcr.io/my-org/evidence", "--root", str(root))
    assert code == 0, err


def test_a_registry_with_the_referrers_api_indexes_the_attestation_itself(
    tmp_path: Path,
) -> None:
    """OCI 1.1's branch, against a stand-in (Debian has no 1.1 registry): the registry
    answers the attestation manifest with ``OCI-Subject``, so ``attest --oci`` writes no
    fallback tag index, and the referrer is listed by ``GET .../referrers/<digest>``."""
    pytest.importorskip("aiohttp")
    from helpers.oci_referrers import referrers_registry

    from evidencestore import oci
    from evidencestore.remotes import open_remote

    with referrers_registry() as stub:
        root = init_repo(tmp_path / "repo")
        make_repo(root, blobs(2, size=300))
        assert run("remote", "add", "reg", stub.url(REPO), "--root", str(root))[0] == 0
        code, out, err = run("push", "--root", str(root))
        assert code == 0 and "1 bundle manifest(s) written" in out, out + err
        private, public = _keys(tmp_path)
        envelope = tmp_path / "run1.att.json"
        code, _, err = run(
            "attest", "run1", "--key", str(private), "-o", str(envelope), "--oci", "reg",
            "--root", str(root),
        )  # fmt: skip
        assert code == 0 and "attached to bundle 'run1'" in err, err
        attached = err.rsplit(" as ", 1)[1].strip()
        subject = stub.tags[bundle_tag(load_inventory(root).registrations["run1"])]
        media_type, data = stub.manifests[attached]
        manifest = json.loads(data)
        assert manifest["subject"]["digest"] == subject  # attached through `subject`
        assert manifest["artifactType"] == ATTESTATION_ARTIFACT_TYPE
        assert media_type == "application/vnd.oci.image.manifest.v1+json"
        assert stub.blobs[manifest["layers"][0]["digest"]] == envelope.read_bytes()
        # No fallback: nothing written, nor read, under the sha256-<hex> tag.
        fallback = subject.replace(":", "-")
        assert fallback not in stub.tags and not any(t.startswith("sha256-") for t in stub.tags)
        assert not [r for r in stub.requests if r[1].endswith(f"/manifests/{fallback}")]
        # Listed through the referrers endpoint.
        stub.requests.clear()
        remote = open_remote(root, "reg")
        listed = oci.referrers(root, remote.store, "reg", "run1")
        assert [r["digest"] for r in listed] == [attached]
        assert listed[0]["artifactType"] == ATTESTATION_ARTIFACT_TYPE
        assert ("GET", f"/v2/{REPO}/referrers/{subject}") in stub.requests
        assert not [r for r in stub.requests if r[1].endswith(f"/manifests/{fallback}")]
        # What the registry holds verifies.
        held = tmp_path / "held.json"
        held.write_bytes(stub.blobs[manifest["layers"][0]["digest"]])
        code, out, err = run(
            "attest", "verify", str(held), "--key", str(public), "--subject", "run1",
            "--root", str(root),
        )  # fmt: skip
        assert code == 0, out + err
