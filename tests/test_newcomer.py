"""The frictions a new user hit (issue 38), each fixed and checked against the real thing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from evidencestore.cli import main


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("gs://bucket/p", "gcsfs", "gcs"), ("az://container/p", "adlfs", "azure")],
)
def test_a_cloud_remote_without_its_package_names_its_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, package: str, extra: str
) -> None:
    """fsspec's own ImportError, unpatched: the error names the extra (pyproject has it)."""
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    root = str(tmp_path)
    assert _cli(capsys, "init", "--root", root)[0] == 0
    assert _cli(capsys, "remote", "add", "cloud", url, "--root", root)[0] == 0
    (tmp_path / "f.bin").write_bytes(b"x" * 10)
    assert _cli(capsys, "bundle", "create", "b", str(tmp_path / "f.bin"), "--external",
                "*", "--root", root)[0] == 0  # fmt: skip
    code, _, err = _cli(capsys, "push", "--remote", "cloud", "--root", root)
    assert code == 2
    assert f"pip install 'evidencestore[{extra}]'" in err and package in err, err
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert any(dep.startswith(package) for dep in extras[extra])
