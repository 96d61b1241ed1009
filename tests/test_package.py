"""The package as a user installs it: ``setuptools.build_meta`` (what ``python -m build``
runs) builds an sdist and a wheel from a copy of the source with no setuptools deprecation
warning and clean metadata (an SPDX license expression), and the wheel, installed into a
fresh virtual environment beside only its core dependencies (no extra), gives a working
``evstore`` that verifies a repository and fails a tampered one. Offline: the core
dependencies are copied from this environment's installed distributions."""

from __future__ import annotations

import email
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import paths

TOP = paths.ROOT
BUILD = """
import sys, warnings
from setuptools.warnings import SetuptoolsDeprecationWarning
warnings.simplefilter("error", SetuptoolsDeprecationWarning)
from setuptools import build_meta
out = sys.argv[1]
sdist = build_meta.build_sdist(out)
wheel = build_meta.build_wheel(out)
print("BUILT", sdist, wheel)
"""


def _source_copy(dest: Path) -> Path:
    """The tracked source (no build outputs, no .git), as an sdist would see it."""
    listed = subprocess.run(
        ["git", "-C", str(TOP), "ls-files", "-co", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    for name in filter(None, listed):
        src = TOP / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _core_requirements(metadata: email.message.Message) -> list[str]:
    """Distribution names required without any extra, with what they require in turn."""
    todo = [r for r in metadata.get_all("Requires-Dist") or () if "extra ==" not in r]
    names: list[str] = []
    while todo:
        req = todo.pop()
        if ";" in req:
            continue  # an environment-marked requirement of a dependency: not needed here
        name = req.split(";")[0].split("[")[0]
        for sep in "<>=!~ (":
            name = name.split(sep)[0]
        if name.lower() in (n.lower() for n in names):
            continue
        names.append(name)
        todo += [r for r in md.requires(name) or () if "extra ==" not in r]
    return names


def _copy_distribution(name: str, dest: Path) -> None:
    dist = md.distribution(name)
    for f in dist.files or ():
        src = Path(str(dist.locate_file(f)))
        if ".." in f.parts or not src.is_file():
            continue  # scripts installed outside site-packages
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / f)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("setuptools")
    work = tmp_path_factory.mktemp("build")
    src = _source_copy(work / "src")
    out = work / "dist"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)], cwd=src, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "SetuptoolsDeprecationWarning" not in done.stderr, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("BUILT "))
    sdist, wheel = (out / name for name in line.split()[1:])
    return sdist, wheel


def test_the_wheel_and_sdist_have_clean_metadata(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    assert sdist.name.endswith(".tar.gz") and wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(meta_name))
        entry_points = zf.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Name"] == "evidencestore"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License"] is None  # the deprecated free-text field is gone
    assert "evidencestore/py.typed" in names
    assert "evstore = evidencestore.cli:console" in entry_points
    assert {"s3", "gcs", "azure", "run", "campaign"} <= set(meta.get_all("Provides-Extra") or ())
    assert "pip install" in (meta.get_payload() or "")  # the README is the long description
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "evidencestore/cli/__init__.py"} <= members


def test_the_wheel_alone_verifies_a_repository(built: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = built
    with zipfile.ZipFile(wheel) as zf:
        meta = email.message_from_bytes(
            zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
        )
    core = _core_requirements(meta)
    assert {"blake3", "msgspec", "tomli-w", "fsspec"} <= set(core)
    deps = tmp_path / "core-deps"
    for name in core:
        _copy_distribution(name, deps)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "core-deps.pth").write_text(f"{deps}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    evstore = str(venv / "bin" / "evstore")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [evstore, *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=120
        )

    repo = tmp_path / "repo"
    repo.mkdir()
    # Nothing beyond the core: an extra's package is not importable in this venv.
    probe = subprocess.run(
        [str(py), "-c", "import importlib.util as u, evidencestore; "
         "print(evidencestore.__file__); print(u.find_spec('aiohttp'), u.find_spec('numpy'))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(venv) in probe.stdout and "None None" in probe.stdout, probe.stdout
    assert run("init").returncode == 0
    (repo / "out").mkdir()
    (repo / "out" / "timing.json").write_text('{"e2e_s": 400.9}\n')
    (repo / "out" / "trace.bin").write_bytes(os.urandom(4096))
    made = run("bundle", "create", "first", "out", "--external", "*.bin")
    assert made.returncode == 0, made.stderr
    ok = run("verify")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "2 hashes checked" in ok.stdout and ok.stdout.rstrip().endswith("verified")
    (repo / "evidence" / "first" / "out" / "timing.json").write_text('{"e2e_s": 4.9}\n')
    bad = run("verify")
    assert bad.returncode == 1 and "first" in bad.stdout
