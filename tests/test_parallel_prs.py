"""The census problem: three PRs each add a bundle on the same base and merge cleanly."""

from pathlib import Path

import pytest
from helpers.repos import add_bundle, git, init_repo

from evidencestore.cli import main
from evidencestore.remotes import local_store
from evidencestore.testing import assert_bundle
from evidencestore.verify import verify_repository


def _files(i: int) -> dict[str, bytes]:
    # bundle i holds (i % 4) + 1 result files plus one external log
    files = {f"results/r{k}.json": f'{{"run": {i}, "k": {k}}}'.encode() for k in range(i % 4 + 1)}
    files["logs/host.log"] = f"log of run {i}\n".encode() * 50
    return files


def test_three_prs_on_same_base_merge_without_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = init_repo(tmp_path / "repo")
    expected_entries = 0
    for i in range(20):
        add_bundle(repo, f"campaign-{i:02d}", _files(i), external=("logs/*",))
        expected_entries += len(_files(i))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base: 20 bundles")

    new = {"pr-a": 21, "pr-b": 22, "pr-c": 23}
    digests = {}
    for branch, i in new.items():
        git(repo, "checkout", "-q", "-b", branch, "main")
        reg = add_bundle(repo, f"campaign-{i:02d}", _files(i), external=("logs/*",))
        digests[branch] = reg.digest
        assert_bundle(repo, f"campaign-{i:02d}", entries=len(_files(i)), digest=reg.digest)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"add bundle {i}")
        expected_entries += len(_files(i))

    git(repo, "checkout", "-q", "main")
    for branch in new:
        git(repo, "merge", "-q", "--no-edit", branch)  # check=True: a conflict would raise
    assert git(repo, "status", "--porcelain") == ""

    report = verify_repository(repo, store=local_store(repo), base="HEAD~3")
    assert report.ok
    assert report.totals.bundles == 23
    assert report.totals.entries == expected_entries
    assert report.totals.checked == expected_entries
    for branch, i in new.items():
        assert_bundle(repo, f"campaign-{i:02d}", entries=len(_files(i)), digest=digests[branch])

    capsys.readouterr()
    assert main(["verify", "--root", str(repo), "--base", "main~3"]) == 0
    out = capsys.readouterr().out
    assert f"23 bundles, {expected_entries} entries, {expected_entries} hashes checked" in out


def test_assert_bundle_failures(tmp_path: Path) -> None:
    reg = add_bundle(tmp_path, "one", {"a.txt": b"a"})
    add_bundle(tmp_path, "two", {"b.txt": b"b"})
    assert_bundle(tmp_path, "one", entries=1, digest=reg.digest)
    with pytest.raises(AssertionError, match="not registered"):
        assert_bundle(tmp_path, "three")
    with pytest.raises(AssertionError, match="has 1 entries, expected 2"):
        assert_bundle(tmp_path, "one", entries=2)
    with pytest.raises(AssertionError, match="has digest"):
        assert_bundle(tmp_path, "one", digest="blake3:" + "0" * 64)
    (tmp_path / "evidence/two/b.txt").write_bytes(b"c")
    with pytest.raises(
        AssertionError, match=r"(?s)verifies, but the inventory does not.*two/b.txt"
    ):
        assert_bundle(tmp_path, "one")
    with pytest.raises(AssertionError, match="bundle 'two' does not verify"):
        assert_bundle(tmp_path, "two")
