import subprocess
import sys
from pathlib import Path

import pytest

import evidencestore

SUBPACKAGES = [
    "evidencestore.campaign",
    "evidencestore.media",
    "evidencestore.runs",
    "evidencestore.verify",
]


def test_every_public_name_resolves() -> None:
    for name in evidencestore.__all__:
        assert getattr(evidencestore, name) is not None, name
    assert evidencestore.hash_bytes(b"abc").size == 3
    assert issubclass(evidencestore.IntegrityError, evidencestore.EvidenceStoreError)


def test_import_is_light() -> None:
    code = (
        "import sys, evidencestore, evidencestore.cli; evidencestore.cli.build_parser();"
        "heavy = [m for m in ('msgspec', 'fsspec', 'av', 'numpy', 'torch', 'asyncio') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_dir_and_help_show_the_lazy_names() -> None:
    import pydoc

    listed = dir(evidencestore)
    for name in ("hash_bytes", "verify_repository", "BlobStore", "TransferError", "NotMediaError"):
        assert name in listed, name
    assert set(evidencestore.__all__) <= set(listed)
    text = pydoc.render_doc(evidencestore, renderer=pydoc.plaintext)
    for name in ("create_bundle", "verify_repository", "IntegrityError", "TransferError"):
        assert name in text, name


@pytest.mark.parametrize("package", ["evidencestore", *SUBPACKAGES])
def test_all_is_the_guarded_imports(package: str) -> None:
    """Each lazy package's names come from its TYPE_CHECKING block (what type checkers
    read), each resolving to the object its submodule defines."""
    import importlib

    module = importlib.import_module(package)
    table = module._LAZY
    assert len(table) >= 5
    extra = ["__version__"] if package == "evidencestore" else []
    assert module.__all__ == sorted([*extra, *table])
    for name, sub in table.items():
        value = getattr(importlib.import_module(f"{package}.{sub}"), name)
        assert getattr(module, name) is value, name


def test_guarded_imports_reads_the_block_and_refuses_anything_else(tmp_path: Path) -> None:
    from evidencestore._lazy import guarded_imports

    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ._version import v\n"
        "if TYPE_CHECKING:\n"
        "    from .a import f as f\n"
        "    from .b.c import G, h\n"
    )
    assert guarded_imports(str(init)) == {"f": "a", "G": "b.c", "h": "b.c"}
    init.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n")
    with pytest.raises(ImportError, match=rf"{init}:3: the TYPE_CHECKING block may hold only"):
        guarded_imports(str(init))


def test_errors_export_transfer_and_not_media() -> None:
    from evidencestore import errors
    from evidencestore.media.probing import NotMediaError

    assert NotMediaError is errors.NotMediaError is evidencestore.NotMediaError
    assert issubclass(errors.NotMediaError, errors.MediaError)
    assert issubclass(errors.TransferError, errors.StorageError)
    assert evidencestore.TransferError is errors.TransferError
    exc = errors.TransferError("2 blobs not pushed", summary={"failed": 2})
    assert exc.summary == {"failed": 2} and str(exc) == "2 blobs not pushed"


def test_init_repository_is_public(tmp_path: Path) -> None:
    """A library user starts where `evstore init` does, from the top-level package."""
    root = tmp_path / "repo"
    done = evidencestore.init_repository(root)
    assert "init_repository" in evidencestore.__all__
    assert (root / "evstore.toml").is_file() and (root / "evidence").is_dir()
    assert evidencestore.verify_repository(root).ok
    assert done.wrote_config and done.repository.root == root
