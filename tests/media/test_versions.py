import subprocess
import sys


def test_numpy_version_is_read_without_importing_numpy() -> None:
    code = (
        "import sys; from evidencestore.media.versions import tool_versions;"
        "v = tool_versions(); print(v['numpy'], 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import numpy

    assert out.stdout.split() == [numpy.__version__, "False"]
