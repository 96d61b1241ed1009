"""What every ``evstore`` command group shares: exit codes, ``--root``, verbosity,
and the hint that names the extra to install for a missing optional dependency."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_root(p: argparse.ArgumentParser) -> None:
    """Add ``--root DIR`` to a subcommand."""
    p.add_argument(
        "--root", metavar="DIR", help="evidence repository root (default: found from here)"
    )


def repo_root(args: argparse.Namespace) -> Path:
    """Return ``--root`` (checked) or the evidence repository found from the current
    directory; outside one, refuse (``not an evidence repository``) rather than take the
    current directory, so nothing lands in a plain git repository by mistake."""
    from ..config import require_root

    if getattr(args, "root", None):
        root = Path(args.root)
        if not root.is_dir():
            raise ConfigError(f"--root {args.root}: not a directory")
        return root.absolute()  # named explicitly: taken as the repository root
    return require_root()


def verbosity(args: argparse.Namespace) -> int:
    """The global ``-q`` (-1) / ``-v`` (+1) level; 0 by default."""
    return int(getattr(args, "verbosity", 0) or 0)


def missing_extra_hint(exc: BaseException) -> str | None:
    """``pip install 'evidencestore[s3]'`` when ``exc`` (or what it was raised from) is
    a missing optional dependency, whatever way its package words it."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ImportError):
            names = [(cur.name or "").split(".")[0], *str(cur).replace("'", " ").split()]
            for name in names:
                extra = _EXTRAS.get(name)
                if extra:
                    return f"pip install 'evidencestore[{extra}]'"
        cur = cur.__cause__ or cur.__context__
    return None


# Optional dependencies and the extra that installs each.
_EXTRAS = {
    "av": "media",
    "numpy": "media",
    "torch": "lpips",
    "torchvision": "lpips",
    "lpips": "lpips",
    "s3fs": "s3",
    "aiohttp": "http",
    "yaml": "run",
    "jinja2": "report",
    "matplotlib": "report",
    "cryptography": "attest",
}
