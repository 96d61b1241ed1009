import json
import os
from pathlib import Path

import pytest
from helpers.repos import add_bundle, git, init_repo

from evidencestore._canonical import pretty
from evidencestore.errors import VerificationError
from evidencestore.inventory import registration_path
from evidencestore.models import VerifyReport
from evidencestore.remotes import local_store
from evidencestore.verify import check_repository, verify_repository


def _codes(report: VerifyReport) -> list[tuple[str, str | None, str | None]]:
    out = [
        (f.code, f.bundle, f.path)
        for b in report.bundles
        for f in b.findings
        if f.severity == "error"
    ]
    out += [(f.code, f.bundle, f.path) for f in report.findings if f.severity == "error"]
    return sorted(out, key=str)


def _verify(root: Path, **kw: object) -> VerifyReport:
    return verify_repository(root, store=local_store(root), **kw)  # type: ignore[arg-type]


@pytest.fixture
def external_blob_repo(tmp_path: Path) -> Path:
    add_bundle(
        tmp_path,
        "alpha",
        {"res/a.csv": b"1,2\n", "res/b.csv": b"3,4\n" * 100, "raw.bin": b"R" * 4096},
        external=("*.bin",),
    )
    add_bundle(tmp_path, "beta", {"log.txt": b"hello\n"})
    return tmp_path


def test_clean_repository_verifies(external_blob_repo: Path) -> None:
    report = _verify(external_blob_repo)
    assert report.ok, _codes(report)
    assert report.totals.bundles == 2
    assert report.totals.entries == 4
    assert report.totals.checked == 4
    assert report.totals.unavailable == 0
    assert [b.name for b in report.bundles] == ["alpha", "beta"]


def _flip_bit(path: Path, offset: int = 0) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_every_tampering_is_listed(external_blob_repo: Path) -> None:
    store = local_store(external_blob_repo)
    alpha = json.loads(registration_path(external_blob_repo, "alpha").read_text())
    raw = next(e for e in alpha["manifest"]["entries"] if e["path"] == "raw.bin")
    _flip_bit(external_blob_repo / "evidence/alpha/res/a.csv")  # same size, one bit
    _flip_bit(store.path_of(raw["descriptor"]["digest"]), 100)  # stored blob, one bit
    (external_blob_repo / "evidence/alpha/res/b.csv").unlink()  # deleted entry file
    (external_blob_repo / "evidence/alpha/notes.txt").write_text("sneaked in")  # unregistered
    beta = registration_path(external_blob_repo, "beta")
    doc = json.loads(beta.read_text())
    doc["manifest"]["metadata"]["producer"] = "someone else"  # edited manifest field
    beta.write_text(json.dumps(doc))
    report = _verify(external_blob_repo)
    assert not report.ok
    assert _codes(report) == sorted(
        [
            ("hash-mismatch", "alpha", "res/a.csv"),
            ("blob-corrupt", "alpha", "raw.bin"),
            ("missing-file", "alpha", "res/b.csv"),
            ("unregistered-file", "alpha", "notes.txt"),
            ("digest-mismatch", "beta", "bundle.json"),
        ],
        key=str,
    )
    msgs = {f.code: f.message for b in report.bundles for f in b.findings}
    assert "evidence/alpha/res/a.csv: content hashes to blake3:" in msgs["hash-mismatch"]
    assert raw["descriptor"]["digest"] in msgs["blob-corrupt"]
    assert report.totals.errors == 5
    with pytest.raises(VerificationError, match="failed with 5 error"):
        check_repository(external_blob_repo, store=store)


def test_edited_entry_digest_breaks_root(external_blob_repo: Path) -> None:
    path = registration_path(external_blob_repo, "beta")
    doc = json.loads(path.read_text())
    doc["manifest"]["entries"][0]["descriptor"]["size"] = 7
    path.write_text(json.dumps(doc))
    codes = _codes(_verify(external_blob_repo))
    assert ("root-mismatch", "beta", "bundle.json") in codes
    assert ("digest-mismatch", "beta", "bundle.json") in codes
    assert ("size-mismatch", "beta", "log.txt") in codes


def test_unavailable_store_entries(external_blob_repo: Path) -> None:
    store = local_store(external_blob_repo)
    for d in list(store.iter_digests()):
        store.delete(d)
    report = _verify(external_blob_repo)
    assert report.ok
    assert report.totals.unavailable == 1
    warn = [f for b in report.bundles for f in b.findings if f.code == "unavailable"]
    assert warn[0].severity == "warning" and warn[0].path == "raw.bin"
    strict = _verify(external_blob_repo, require_available=True)
    assert not strict.ok and _codes(strict) == [("unavailable", "alpha", "raw.bin")]


def test_symlink_escaping_repository(
    external_blob_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "log.txt"
    outside.write_bytes(b"hello\n")
    target = external_blob_repo / "evidence/beta/log.txt"
    target.unlink()
    target.symlink_to(outside)
    assert _codes(_verify(external_blob_repo)) == [("symlink-escape", "beta", "log.txt")]


def test_symlink_inside_repository_is_followed(external_blob_repo: Path) -> None:
    target = external_blob_repo / "evidence/beta/log.txt"
    (external_blob_repo / "kept.txt").write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(external_blob_repo / "kept.txt")
    assert _verify(external_blob_repo).ok


def test_selected_bundles(external_blob_repo: Path) -> None:
    _flip_bit(external_blob_repo / "evidence/beta/log.txt")
    only_alpha = _verify(external_blob_repo, bundles=["alpha"])
    assert only_alpha.ok and [b.name for b in only_alpha.bundles] == ["alpha"]
    missing = _verify(external_blob_repo, bundles=["alpha", "nope"])
    assert _codes(missing) == [("unknown-bundle", "nope", None)]


def test_base_revision_immutability(external_blob_repo: Path) -> None:
    init_repo(external_blob_repo)
    git(external_blob_repo, "add", "-A")
    git(external_blob_repo, "commit", "-qm", "base")
    assert _verify(external_blob_repo, base="HEAD").ok
    add_bundle(external_blob_repo, "gamma", {"new.txt": b"new"})
    assert _verify(external_blob_repo, base="HEAD").ok  # adding is allowed
    # changing a registered bundle in place, consistently re-sealed, is caught
    from evidencestore.bundle import make_manifest, seal
    from evidencestore.inventory import load_registration

    old = load_registration(registration_path(external_blob_repo, "beta"))
    resealed = seal(
        make_manifest("beta", old.manifest.entries, created="2027-01-01T00:00:00Z", producer="x")
    )
    registration_path(external_blob_repo, "beta").write_bytes(pretty(resealed))
    report = _verify(external_blob_repo, base="HEAD")
    assert _codes(report) == [("bundle-changed", "beta", "bundle.json")]
    assert old.digest in report.findings[0].message
    # removing one is caught
    import shutil

    shutil.rmtree(external_blob_repo / "evidence/alpha")
    codes = _codes(_verify(external_blob_repo, base="HEAD"))
    assert ("bundle-removed", "alpha", "bundle.json") in codes


def test_base_registrations_are_read_in_one_git_batch(
    external_blob_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--base runs the same few git commands for 2 bundles as for 30 (a listing and one
    cat-file --batch), all through gitrefs, and reads every registration's bytes."""
    import evidencestore.gitrefs as gitrefs
    from evidencestore.verify import base_registrations

    init_repo(external_blob_repo)
    git(external_blob_repo, "add", "-A")
    git(external_blob_repo, "commit", "-qm", "base")
    calls: list[tuple[str, ...]] = []
    real = gitrefs._run

    def counting(root: Path, args: tuple[str, ...], stdin: bytes | None) -> object:
        calls.append(args[:2])
        return real(root, args, stdin)

    monkeypatch.setattr(gitrefs, "_run", counting)
    assert _verify(external_blob_repo, base="HEAD").ok
    few = list(calls)
    assert [c for c in few if c[0] == "cat-file"] == [("cat-file", "--batch")]
    for i in range(28):
        add_bundle(external_blob_repo, f"more{i:02d}", {"f.txt": bytes([i])})
    (external_blob_repo / "evidence/copy").mkdir()  # the same registration blob under a second name
    (external_blob_repo / "evidence/copy/bundle.json").write_bytes(
        registration_path(external_blob_repo, "more00").read_bytes()
    )
    git(external_blob_repo, "add", "-A")
    git(external_blob_repo, "commit", "-qm", "more")
    calls.clear()
    regs = base_registrations(external_blob_repo, "HEAD")
    assert sorted(regs) == sorted(["alpha", "beta", "copy", *(f"more{i:02d}" for i in range(28))])
    assert regs["beta"] == registration_path(external_blob_repo, "beta").read_bytes()
    assert regs["copy"] == regs["more00"]
    assert len(calls) == len([c for c in few if c[0] != "show"]) <= 4
    assert not any(c[0] == "show" for c in calls)


def test_base_of_a_repository_in_a_subdirectory_of_the_work_tree(tmp_path: Path) -> None:
    """The evidence repository is ``ml/`` inside the git work tree: the registrations
    at the base are found under ``ml/evidence/`` (not a top-level ``evidence/``)."""
    from evidencestore.config import init_repository
    from evidencestore.verify import base_registrations

    top = init_repo(tmp_path / "top")
    add_bundle(top, "outer", {"o.txt": b"o"})  # a top-level evidence/ that is not ml's
    ml = init_repository(top / "ml").repository.root  # a plain subfolder would be top's
    add_bundle(ml, "inner", {"i.txt": b"i"})
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    regs = base_registrations(ml, "HEAD")
    assert list(regs) == ["inner"]
    assert regs["inner"] == registration_path(ml, "inner").read_bytes()
    assert _verify(ml, base="HEAD").ok
    registration_path(ml, "inner").unlink()
    codes = _codes(_verify(ml, base="HEAD"))
    assert ("bundle-removed", "inner", "bundle.json") in codes


def test_base_revision_unknown(external_blob_repo: Path) -> None:
    from evidencestore.errors import ConfigError

    init_repo(external_blob_repo)
    with pytest.raises(ConfigError, match="git rev-parse"):
        _verify(external_blob_repo, base="no-such-rev")


def test_bundle_directory_symlinked_outside(
    external_blob_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import shutil

    outside = tmp_path_factory.mktemp("elsewhere") / "beta"
    shutil.move(str(external_blob_repo / "evidence/beta"), outside)
    (external_blob_repo / "evidence/beta").symlink_to(outside)
    report = _verify(external_blob_repo)
    assert _codes(report) == [("symlink-escape", "beta", None)]
    beta = next(b for b in report.bundles if b.name == "beta")
    assert beta.checked == 0 and "outside the repository" in beta.findings[0].message
