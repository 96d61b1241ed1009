"""`evstore verify` and `campaign verify` re-derive every imported run.json from its
sealed harness files: an edited record, re-sealed before its first commit (so every
digest agrees), is reported as ``import-mismatch``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.bundle import RepoFile, register_bundle
from evidencestore.cli import main
from evidencestore.config import as_repository
from evidencestore.inventory import load_registration, registration_path
from tests.helpers.repos import git

FIXTURES = paths.FIXTURES / "aiperf"
VLLM = paths.DATA / "vllm_bench"


def _reseal(root: Path, name: str, edit: object) -> None:
    """Edit run.json and register the bundle again under its name: every digest agrees."""
    reg = load_registration(registration_path(root, name))
    run = root / "evidence" / name / "run.json"
    record = json.loads(run.read_text())
    edit(record)  # type: ignore[operator]
    stored = [e for e in reg.manifest.entries if e.location == "store"]
    shutil.rmtree(root / "evidence" / name)
    register_bundle(
        as_repository(root),
        name,
        files={"run.json": RepoFile(json.dumps(record, indent=2).encode(), role="run")},
        stored=stored,
        annotations=reg.manifest.metadata.annotations,
        max_git_file_size=None,
    )


def _tenth(record: dict[str, object]) -> None:
    for r in record["requests"]:  # type: ignore[attr-defined]
        if r["e2e_s"] is not None:
            r["e2e_s"] *= 0.1


@pytest.mark.parametrize(
    ("harness", "source"),
    [("aiperf", FIXTURES / "baseline-1"), ("vllm-bench", next(VLLM.glob("base-*.json")))],
)
def test_edited_imported_run_is_an_import_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], harness: str, source: Path
) -> None:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    git(root, "init", "-q")
    assert main(["import", harness, str(source), "--name", "r", "--root", str(root)]) == 0
    assert main(["import", harness, str(source), "--name", "r", "--root", str(root)]) == 0
    capsys.readouterr()
    assert main(["verify", "--root", str(root)]) == 0  # the honest import re-derives equal
    _reseal(root, "r", _tenth)
    capsys.readouterr()
    code = main(["verify", "--json", "-", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    found = [f for f in report["findings"] if f["code"] == "import-mismatch"]
    assert len(found) == 1 and found[0]["bundle"] == "r"
    assert "first difference at requests[" in found[0]["message"]
    assert ".e2e_s" in found[0]["message"]


def test_campaign_verify_reports_import_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    git(root, "init", "-q")
    proto = tmp_path / "proto"
    proto.mkdir()
    shutil.copy(FIXTURES / "baseline-1" / "inputs.json", proto / "inputs.json")
    (proto / "protocol.toml").write_text(
        'name = "ai"\nretrospective = true\n[timing]\nmin_runs = 2\n'
        '[[condition]]\nname = "chat"\nworkload = "inputs.json"\nharness = "aiperf"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
        '[[arm]]\nname = "candidate"\nruns = 1\n'
    )
    assert main(["campaign", "init", "ai", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    assert main(["import", "aiperf", str(FIXTURES / "baseline-1"), "--name", "b1", "--arm",
                 "baseline", "--campaign", "ai", "--condition", "chat",
                 "--root", str(root)]) == 0  # fmt: skip
    _reseal(root, "b1", _tenth)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "runs")
    capsys.readouterr()
    assert main(["campaign", "verify", "ai", "--root", str(root)]) == 1
    out = capsys.readouterr()
    assert "import-mismatch" in out.out + out.err


def test_loadgen_invalid_edited_to_complete_is_an_import_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An INVALID LoadGen run whose run.json says complete, re-sealed: caught."""
    import subprocess
    import sys

    pytest.importorskip("mlperf_loadgen")
    logs = tmp_path / "lg"
    sut = paths.HELPERS / "loadgen_sut.py"
    subprocess.run([sys.executable, str(sut), "offline", "perf", str(logs), "0", "1000", "1",
                    "100"], check=True)  # fmt: skip
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    assert main(["import", "loadgen", str(logs), "--name", "lg", "--root", str(root)]) == 0
    _reseal(root, "lg", lambda r: r.update(outcome="complete"))
    capsys.readouterr()
    assert main(["verify", "--json", "-", "--root", str(root)]) == 1
    report = json.loads(capsys.readouterr().out)
    found = [f for f in report["findings"] if f["code"] == "import-mismatch"]
    assert len(found) == 1 and "outcome ('complete', re-derived 'invalid')" in found[0]["message"]


def test_a_harness_no_importer_knows_is_named_not_misrouted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose record names a harness this version has no importer for is an
    ``import-mismatch`` saying so, never re-derived by another harness's importer."""
    import msgspec

    from evidencestore.config import local_store
    from evidencestore.runs import load_run
    from evidencestore.runs.rederive import import_mismatch, rederive

    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    source = next(VLLM.glob("base-*.json"))
    assert main(["import", "vllm-bench", str(source), "--name", "r", "--root", str(root)]) == 0
    store = local_store(root)
    reg = load_registration(registration_path(root, "r"))
    record = load_run(root, "r")
    assert record.harness is not None and rederive(reg, record, store) is None  # the control
    unknown = msgspec.structs.replace(
        record, harness=msgspec.structs.replace(record.harness, name="nope")
    )
    found = import_mismatch(reg, unknown, store)
    assert found is not None and found.code == "import-mismatch" and found.bundle == "r"
    assert "harness 'nope': no importer of this version reads its files (known: aiperf, " in (
        found.message
    )
    assert "vllm-bench imports one file" not in found.message and "re-derived" not in found.message


def test_verify_rederives_in_the_repository_it_resolved_without_walking_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`verify --root` resolves the repository once and hands the `Repository` down:
    the re-derivation reads its runs there, never resolving a root again."""
    from evidencestore import config
    from evidencestore.config import Repository, local_store
    from evidencestore.runs.rederive import import_mismatches

    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    source = next(VLLM.glob("base-*.json"))
    assert main(["import", "vllm-bench", str(source), "--name", "r", "--root", str(root)]) == 0
    _reseal(root, "r", _tenth)

    def walked(start: object = None) -> Path:
        raise AssertionError(f"a root resolved again below the entry point: {start!r}")

    monkeypatch.setattr(config, "find_root", walked)
    capsys.readouterr()
    assert main(["verify", "--json", "-", "--root", str(root)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["bundle"] for f in report["findings"] if f["code"] == "import-mismatch"] == ["r"]
    [found] = import_mismatches(Repository(root), local_store(Repository(root)))
    assert found.bundle == "r" and ".e2e_s" in found.message
