import subprocess
import sys

import evidencestore


def test_every_public_name_resolves() -> None:
    for name in evidencestore.__all__:
        assert getattr(evidencestore, name) is not None, name
    assert evidencestore.hash_bytes(b"abc").size == 3
    assert issubclass(evidencestore.IntegrityError, evidencestore.EvidenceStoreError)


def test_import_is_light() -> None:
    code = (
        "import sys, evidencestore, evidencestore._cli; evidencestore._cli.build_parser();"
        "heavy = [m for m in ('msgspec', 'fsspec', 'av', 'numpy', 'torch', 'asyncio') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
