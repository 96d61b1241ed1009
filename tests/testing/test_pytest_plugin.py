"""The pytest plugin (issue 12, item 12) and the boolean / raising forms of verify_inclusion."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.repos import add_bundle
from helpers.walks import walks_and_reads

import evidencestore.verify as verify_module
from evidencestore import VerificationError, check_inclusion, inclusion_holds, verify_inclusion
from evidencestore.inventory import load_registration, registration_path
from evidencestore.merkle import inclusion_proof

pytest_plugins = ["pytester"]

TESTS = """
def test_one(evidence):
    evidence.assert_bundle("alpha", entries=2)

def test_two(evidence):
    evidence.assert_bundle("alpha")

def test_three(evidence):
    assert evidence.names == ["alpha", "beta"]
    evidence.assert_bundle("beta", entries=1)
"""

INVENTORY = """
def test_all(evidence):
    evidence.assert_inventory()
"""


@pytest.fixture
def evidence_repo(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    (root / "evstore.toml").write_text("")
    add_bundle(root, "alpha", {"a.txt": b"a", "b.txt": b"b"})
    add_bundle(root, "beta", {"c.txt": b"c"})
    return root


def test_the_repository_is_verified_once_per_session(
    pytester: pytest.Pytester, evidence_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = verify_module.verify_repository

    def counting(root: object, **kwargs: object) -> object:
        calls.append(str(root))
        return real(root, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(verify_module, "verify_repository", counting)
    pytester.makepyfile(test_ev=TESTS)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3)
    assert calls == [str(evidence_repo)]


@pytest.mark.parametrize("given", [False, True])
def test_the_repository_is_resolved_once(
    pytester: pytest.Pytester, evidence_repo: Path, monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    """The plugin walks up to the repository once, from pytest's rootdir or
    ``--evidence-root`` (a subfolder: its repository), and hands that ``Repository``
    down: verifying, the store and every ``evidence`` fixture walk no more."""
    sub = evidence_repo / "tests" / "deep"
    sub.mkdir(parents=True)
    walks, reads = walks_and_reads(monkeypatch)
    pytester.makepyfile(
        test_ev=TESTS + "\ndef test_root(evidence):\n    assert evidence.root == "
        f"evidence.repository.root == __import__('pathlib').Path({str(evidence_repo)!r})\n"
    )
    args = ("--evidence-root", str(sub)) if given else ()
    result = pytester.runpytest_inprocess(*args)
    assert walks == [sub if given else evidence_repo]
    assert reads == [evidence_repo]
    result.assert_outcomes(passed=4)


def test_a_failure_shows_the_finding_not_the_helper(
    pytester: pytest.Pytester, evidence_repo: Path
) -> None:
    (evidence_repo / "evidence/alpha/a.txt").write_bytes(b"A")
    pytester.makepyfile(test_ev=TESTS)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=2)  # beta's test does not fail for alpha
    text = result.stdout.str()
    assert "bundle 'alpha' does not verify:" in text
    assert "  error: hash-mismatch: evidence/alpha/a.txt: content hashes to" in text
    assert "__tracebackhide__" not in text and "def assert_bundle" not in text
    assert 'evidence.assert_bundle("alpha", entries=2)' in text  # the test's own line
    pytester.makepyfile(test_ev=INVENTORY)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*does not verify:", "*alpha: hash-mismatch: evidence/alpha/a.txt*"]
    )


def test_a_misspelt_bundle_name_suggests_the_closest(
    pytester: pytest.Pytester, evidence_repo: Path
) -> None:
    pytester.makepyfile(test_ev='def test_x(evidence):\n    evidence.assert_bundle("alpah")\n')
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bundle 'alpah' is not registered*did you mean 'alpha'?*"])


def test_evidence_root_option_and_require_available(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere"
    add_bundle(other, "s", {"ext/x.bin": b"x", "r.txt": b"r"}, external=("ext/*",))
    import shutil

    shutil.rmtree(other / ".evstore")
    pytester.makepyfile(
        test_ev='def test_x(evidence):\n    evidence.assert_bundle("s", unavailable=1)\n'
    )
    args = ("--evidence-root", str(other))  # the plugin loads by its pytest11 entry point
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=1)
    result = pytester.runpytest_inprocess(*args, "--evidence-require-available")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*error: unavailable*"])


def test_outside_a_repository_the_fixture_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ev="def test_x(evidence):\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*not an evidence repository (run `evstore init`)*"])


def test_inclusion_holds_and_check_inclusion(tmp_path: Path) -> None:
    reg = add_bundle(tmp_path, "p", {f"f{i}.txt": str(i).encode() for i in range(5)})
    proof = inclusion_proof(reg.manifest, "f2.txt")
    assert inclusion_holds(proof, reg.digest) is True
    check_inclusion(proof, reg.digest)
    other = add_bundle(tmp_path, "q", {"f2.txt": b"2"})
    assert inclusion_holds(proof, other.digest) is False
    with pytest.raises(VerificationError, match=r"'f2.txt' in bundle 'p' does not hold"):
        check_inclusion(proof, other.digest)
    # the old list-returning form keeps its behaviour
    assert verify_inclusion(proof) == []
    assert verify_inclusion(proof, other.digest) == [
        f"proof is for bundle digest {reg.digest}, expected {other.digest}"
    ]
    assert load_registration(registration_path(tmp_path, "p")).digest == reg.digest
