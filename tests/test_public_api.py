import subprocess
import sys
from pathlib import Path

import evidencestore


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


def test_all_is_the_lazy_table() -> None:
    import ast
    import importlib
    import inspect

    table = evidencestore._LAZY
    assert evidencestore.__all__ == sorted(["__version__", *table])
    for name, module in table.items():
        value = getattr(importlib.import_module(f"evidencestore.{module}"), name)
        assert getattr(evidencestore, name) is value, name
    # The TYPE_CHECKING re-exports that type checkers read name the same objects.
    tree = ast.parse(inspect.getsource(evidencestore))
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    imported = {
        alias.asname: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names
    }
    assert imported == table
    assert all(
        alias.asname == alias.name
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    )


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
