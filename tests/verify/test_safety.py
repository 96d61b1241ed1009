"""verify: symlink loops, symlinked registrations and directories, misleading names.

Each case is a real evidence repository altered on disk; the library must return
findings (never raise anything but EvidenceStoreError) and the CLI must exit 1 with a
JSON report that lists them.
"""

from __future__ import annotations

import json
import os
import shutil
import unicodedata
from pathlib import Path

import msgspec
import pytest
from helpers.repos import add_bundle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidencestore._canonical import pretty
from evidencestore.bundle import make_manifest, seal
from evidencestore.cli import main
from evidencestore.digest import hash_bytes
from evidencestore.errors import BundleError
from evidencestore.models import BundleManifest, Descriptor, Entry, Metadata, VerifyReport
from evidencestore.paths import all_plain, path_problem
from evidencestore.remotes import local_store
from evidencestore.verify import verify_registration, verify_repository


def _errors(report: VerifyReport) -> list[tuple[str, str | None, str | None]]:
    found = [f for b in report.bundles for f in b.findings] + list(report.findings)
    return sorted(((f.code, f.bundle, f.path) for f in found if f.severity == "error"), key=str)


def _verify(root: Path) -> VerifyReport:
    return verify_repository(root, store=local_store(root))


def _cli_json(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = main(["verify", "--json", "--root", str(root)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, json.loads(out)


def _codes_in(report: dict[str, object]) -> set[str]:
    bundles = report["bundles"]
    assert isinstance(bundles, list)
    findings = [f for b in bundles for f in b["findings"]] + list(report["findings"])  # type: ignore[arg-type]
    return {f["code"] for f in findings}


@pytest.fixture
def two_bundle_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    add_bundle(root, "alpha", {"log.txt": b"hello\n", "sub/x.txt": b"x\n"})
    add_bundle(root, "beta", {"b.txt": b"b\n"})
    return root


def test_entry_symlink_loop_is_a_finding(
    two_bundle_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = two_bundle_repo / "evidence/alpha/log.txt"
    target.unlink()
    target.symlink_to("log.txt")
    report = _verify(two_bundle_repo)
    assert _errors(report) == [("symlink-loop", "alpha", "log.txt")]
    alpha = next(b for b in report.bundles if b.name == "alpha")
    assert "symlink loop" in alpha.findings[0].message and alpha.checked == 1
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1 and js["ok"] is False and _codes_in(js) == {"symlink-loop"}


def test_subdirectory_symlink_loop_is_a_finding(
    two_bundle_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = two_bundle_repo / "evidence/alpha/sub"
    shutil.rmtree(sub)
    sub.symlink_to("sub", target_is_directory=True)
    assert _errors(_verify(two_bundle_repo)) == [("symlink-loop", "alpha", "sub/x.txt")]
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1 and _codes_in(js) == {"symlink-loop"}


def test_bundle_directory_symlink_loop_is_a_finding(
    two_bundle_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(two_bundle_repo / "evidence/beta")
    (two_bundle_repo / "evidence/beta").symlink_to("beta", target_is_directory=True)
    assert _errors(_verify(two_bundle_repo)) == [("symlink-loop", "beta", "evidence/beta")]
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1 and _codes_in(js) == {"symlink-loop"}


def test_unnamed_symlink_loop_and_escaping_directory_in_a_bundle(
    two_bundle_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (two_bundle_repo / "evidence/beta/loop").symlink_to("loop")
    (two_bundle_repo / "evidence/beta/self").symlink_to(".", target_is_directory=True)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (two_bundle_repo / "evidence/beta/etc").symlink_to(elsewhere, target_is_directory=True)
    assert _errors(_verify(two_bundle_repo)) == [
        ("symlink-escape", "beta", "etc"),
        ("symlink-loop", "beta", "loop"),
        ("symlink-loop", "beta", "self"),
    ]


def test_directory_symlink_inside_the_repository_verifies(two_bundle_repo: Path) -> None:
    sub = two_bundle_repo / "evidence/alpha/sub"
    kept = two_bundle_repo / "kept-sub"
    shutil.move(str(sub), kept)
    sub.symlink_to(kept, target_is_directory=True)
    report = _verify(two_bundle_repo)
    assert report.ok, _errors(report)  # no misleading 'unregistered-file' for 'sub'
    assert report.totals.checked == 3
    (kept / "extra.txt").write_bytes(b"sneaked")
    assert _errors(_verify(two_bundle_repo)) == [("unregistered-file", "alpha", "sub/extra.txt")]


def test_registration_symlinked_outside_is_refused(
    two_bundle_repo: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reg = two_bundle_repo / "evidence/beta/bundle.json"
    outside = tmp_path_factory.mktemp("outside") / "bundle.json"
    shutil.move(str(reg), outside)
    reg.symlink_to(outside)
    report = _verify(two_bundle_repo)
    assert _errors(report) == [("registration-symlink-escape", "beta", "evidence/beta/bundle.json")]
    assert "outside the repository" in report.findings[0].message
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1 and _codes_in(js) == {"registration-symlink-escape"}


def test_registration_symlink_inside_the_repository_is_read(two_bundle_repo: Path) -> None:
    reg = two_bundle_repo / "evidence/beta/bundle.json"
    kept = two_bundle_repo / "kept.json"
    shutil.move(str(reg), kept)
    reg.symlink_to(kept)
    assert _verify(two_bundle_repo).ok


def test_registration_symlink_loop_is_a_finding(two_bundle_repo: Path) -> None:
    reg = two_bundle_repo / "evidence/beta/bundle.json"
    reg.unlink()
    reg.symlink_to("bundle.json")
    assert _errors(_verify(two_bundle_repo)) == [
        ("symlink-loop", "beta", "evidence/beta/bundle.json")
    ]


def _register_raw(root: Path, name: str, files: dict[str, bytes]) -> None:
    """Register a bundle without the creation checks, as a foreign tool might."""
    bdir = root / "evidence" / name
    entries = []
    for path, data in sorted(files.items()):
        (bdir / path).parent.mkdir(parents=True, exist_ok=True)
        (bdir / path).write_bytes(data)
        h = hash_bytes(data)
        entries.append(
            Entry(path=path, descriptor=Descriptor(digest=h.digest, size=h.size), location="repo")
        )
    manifest = BundleManifest(
        name=name,
        metadata=Metadata(created="2026-01-01T00:00:00Z", producer="foreign"),
        entries=tuple(entries),
    )
    (bdir / "bundle.json").write_bytes(pretty(seal(manifest)))


NFC = unicodedata.normalize("NFC", "caf\u00e9.txt")
NFD = unicodedata.normalize("NFD", "caf\u00e9.txt")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"Readme.TXT": b"1", "readme.txt": b"2"}, [("name-collision", "readme.txt")]),
        ({NFC: b"1", NFD: b"2"}, [("name-collision", max(NFC, NFD))]),
        ({"BUNDLE.JSON": b"1"}, [("name-collision", "bundle.json")]),
        ({"invoice\u202etxt.exe": b"1"}, [("misleading-name", "invoice\u202etxt.exe")]),
        ({"\uff0e\uff0e/x": b"1"}, [("misleading-name", "\uff0e\uff0e/x")]),
        ({"..\u2215x": b"1"}, [("misleading-name", "..\u2215x")]),
        ({"del\x7f.txt": b"1"}, [("bad-path", "del\x7f.txt")]),
    ],
)
def test_misleading_and_colliding_names_are_reported(
    two_bundle_repo: Path,
    files: dict[str, bytes],
    expected: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _register_raw(two_bundle_repo, "foreign", files)
    report = _verify(two_bundle_repo)
    assert [(c, p) for c, b, p in _errors(report) if b == "foreign"] == expected
    assert [b for c, b, p in _errors(report)] == ["foreign"] * len(expected)
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1 and _codes_in(js) == {c for c, _ in expected}


def test_bundle_directories_differing_only_in_case(two_bundle_repo: Path) -> None:
    _register_raw(two_bundle_repo, "Beta", {"b.txt": b"B"})
    assert _errors(_verify(two_bundle_repo)) == [("name-collision", "beta", "evidence/beta")]


def test_every_problem_listed_in_one_run(
    two_bundle_repo: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (two_bundle_repo / "evidence/alpha/log.txt").unlink()
    (two_bundle_repo / "evidence/alpha/log.txt").symlink_to("log.txt")
    reg = two_bundle_repo / "evidence/beta/bundle.json"
    outside = tmp_path_factory.mktemp("o") / "bundle.json"
    shutil.move(str(reg), outside)
    reg.symlink_to(outside)
    _register_raw(two_bundle_repo, "foreign", {"a\u202eb": b"1"})
    os.makedirs(two_bundle_repo / "evidence/.alpha.tmp-00ff00ff/x")
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1
    assert _codes_in(js) == {
        "symlink-loop",
        "registration-symlink-escape",
        "misleading-name",
        "stale-staging",
    }
    assert set(js) == {"ok", "root", "bundles", "findings", "totals"}
    assert js["totals"] == {
        "bundles": 2,
        "entries": 3,
        "checked": 2,
        "unavailable": 0,
        "errors": 3,
        "warnings": 1,
    }


def test_names_that_are_not_utf8_are_reported_not_crashed_on(
    two_bundle_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.close(
        os.open(
            os.fsencode(two_bundle_repo / "evidence/alpha") + b"/\xff.txt", os.O_CREAT | os.O_WRONLY
        )
    )
    os.mkdir(os.fsencode(two_bundle_repo / "evidence") + b"/b\xfe")
    code, js = _cli_json(two_bundle_repo, capsys)
    assert code == 1
    alpha = next(b for b in js["bundles"] if b["name"] == "alpha")  # type: ignore[union-attr]
    assert [(f["code"], f["path"]) for f in alpha["findings"]] == [
        ("unregistered-file", "\\xff.txt")
    ]
    assert [(f["code"], f["bundle"]) for f in js["findings"]] == [  # type: ignore[union-attr]
        ("missing-registration", "b\\xfe")
    ]


# Characters that make names bad, misleading or colliding (plus a few plain ones), joined
# into names; "\u0301" is a combining accent, so "e\u0301" and "\u00e9" meet.
_NAME_CHARS = st.sampled_from(
    "aBbS./\\:\x00\x7f\x85 \u202e\u200b\uff0e\u2215\u00e9e\u0301\u0130\u00df\udcff\ud800"
)
_NAMES = st.lists(st.text(_NAME_CHARS, min_size=0, max_size=8) | st.text(max_size=6), max_size=6)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=_NAMES)
def test_fuzzed_entry_names_give_findings_never_exceptions(
    two_bundle_repo: Path, names: list[str]
) -> None:
    """Whatever the entry names, verification reports; creation refuses what verify flags."""
    desc = Descriptor(digest=hash_bytes(b"").digest, size=0)
    entries = [Entry(path=n, descriptor=desc, location="repo") for n in sorted(set(names))]
    try:
        make_manifest("fuzz", entries, created="2026-01-01T00:00:00Z", producer="fuzz")
        refused = False
    except BundleError:
        refused = True
    if any(n.encode("utf-8", "surrogatepass") != n.encode("utf-8", "replace") for n in names):
        assert refused  # a registration (UTF-8 JSON) cannot even carry such a name
        return
    manifest = BundleManifest(
        name="fuzz",
        metadata=Metadata(created="2026-01-01T00:00:00Z", producer="fuzz"),
        entries=tuple(entries),
    )
    report = verify_registration(
        two_bundle_repo, seal(manifest), store=local_store(two_bundle_repo)
    )
    flagged = {
        f.code
        for f in report.findings
        if f.code in ("bad-path", "misleading-name", "name-collision")
    }
    assert bool(flagged) == refused, (names, flagged)  # creation refuses what verify flags
    msgspec.json.encode(report)  # every finding can be written as JSON


# Plain characters and every separator or mark that all_plain must notice, joined freely.
_PLAIN_EDGE = st.sampled_from("ab.Z~ /\\:\n\x00é")


@settings(max_examples=3000, deadline=None)
@given(paths=st.lists(st.text(_PLAIN_EDGE, max_size=7) | st.sampled_from(["bundle.json", "C:x"])))
def test_all_plain_is_true_only_when_no_path_has_a_problem(paths: list[str]) -> None:
    if all_plain(paths):
        assert [path_problem(p) for p in paths] == [None] * len(paths), paths


def test_all_plain_takes_the_common_case() -> None:
    assert all_plain([]) and all_plain(["a", "a b/c.d", "x/y/z~"])
    for bad in (
        "",
        "/a",
        "a/",
        "a//b",
        "./a",
        "a/.",
        "a/./b",
        ".a",
        "a.",
        "C:a",
        "bundle.json",
        "a\nb",
    ):
        assert not all_plain(["ok", bad]), bad
        assert path_problem(bad) is not None or bad in (".a", "a."), bad  # fine names


def test_plain_but_unsorted_or_repeated_paths_are_still_reported(two_bundle_repo: Path) -> None:
    desc = Descriptor(digest=hash_bytes(b"").digest, size=0)
    for paths, code in ((["b", "a"], "unsorted-entries"), (["a", "a"], "duplicate-path")):
        manifest = BundleManifest(
            name="order",
            metadata=Metadata(created="2026-01-01T00:00:00Z", producer="t"),
            entries=tuple(Entry(path=p, descriptor=desc, location="repo") for p in paths),
        )
        report = verify_registration(
            two_bundle_repo, seal(manifest), store=local_store(two_bundle_repo)
        )
        assert [(f.code, f.path) for f in report.findings if f.code == code] == [(code, paths[1])]


def test_a_bundle_directory_that_is_a_symlink_is_resolved(
    two_bundle_repo: Path, tmp_path: Path
) -> None:
    # The listing saw it as a symlink, so it is resolved: inside, it verifies; outside,
    # its files are not checked.
    inside = two_bundle_repo / "kept-alpha"
    shutil.move(str(two_bundle_repo / "evidence/alpha"), inside)
    (two_bundle_repo / "evidence/alpha").symlink_to(inside, target_is_directory=True)
    assert _verify(two_bundle_repo).ok
    outside = tmp_path / "elsewhere-alpha"
    shutil.move(str(inside), outside)
    (two_bundle_repo / "evidence/alpha").unlink()
    (two_bundle_repo / "evidence/alpha").symlink_to(outside, target_is_directory=True)
    report = _verify(two_bundle_repo)
    [alpha] = [b for b in report.bundles if b.name == "alpha"]
    assert [(f.code, f.path) for f in alpha.findings] == [("symlink-escape", None)]
    assert f"resolves to {outside}, outside the repository" in alpha.findings[0].message
    assert alpha.checked == 0
