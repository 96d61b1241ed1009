"""Shared pytest configuration: the S3 fixtures, fixtures several test files use, and
``tests/`` on ``sys.path`` for the ``helpers`` package (whatever pytest's import mode).

A fixture is defined once, here or in the ``conftest.py`` of the one directory that uses
it, and its name says what it gives: ``repo`` is always an empty evidence repository;
a repository holding something has a name that says what (``victim_repo``)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

pytest_plugins = ["evidencestore.testing.s3"]

if TYPE_CHECKING:
    from evidencestore.testing.llm_server import LlmServer
    from evidencestore.testing.video_server import VideoServer


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty evidence repository: ``tmp_path/repo`` holding ``evidence/`` only (no
    git, no store yet)."""
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    return root


@pytest.fixture
def victim_repo(tmp_path: Path) -> Path:
    """An evidence repository at ``tmp_path`` with two bundles: ``good`` (``a.txt``,
    ``b.txt``) and ``victim`` (``x.txt``, ``y.txt``), the one a test damages."""
    from helpers.repos import add_bundle

    add_bundle(tmp_path, "good", {"a.txt": b"a", "b.txt": b"b"})
    add_bundle(tmp_path, "victim", {"x.txt": b"x", "y.txt": b"yy"})
    return tmp_path


@pytest.fixture(scope="module")
def video_server() -> Iterator[VideoServer]:
    """The reference video server, one per test module (its runs are what the module's
    campaigns are made of); a test that sets a knob (``latency``, ``render``) sets it
    back."""
    from evidencestore.testing.video_server import serve_video

    with serve_video() as server:
        yield server


@pytest.fixture
def fresh_video_server(tmp_path: Path) -> Iterator[VideoServer]:
    """A reference video server of the test's own, logging to ``tmp_path/server.log``:
    the test may set any knob."""
    from evidencestore.testing.video_server import serve_video

    with serve_video(log_path=tmp_path / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def llm_server() -> Iterator[LlmServer]:
    """The reference LLM server, one per test module; a test that sets a knob (``ttft``,
    ``cache``, ...) sets it back."""
    from evidencestore.testing.llm_server import serve_llm

    with serve_llm() as server:
        yield server


@pytest.fixture
def fresh_llm_server() -> Iterator[LlmServer]:
    """A reference LLM server of the test's own: the test may set any knob."""
    from evidencestore.testing.llm_server import serve_llm

    with serve_llm() as server:
        yield server


@pytest.fixture(scope="module")
def scale_author(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scale campaign's author repository (``helpers.scale_campaign.build_author``:
    every run committed and pushed to ``remote/`` beside it), one per test module."""
    from helpers.scale_campaign import build_author

    return build_author(tmp_path_factory)


@pytest.fixture
def memory_base() -> Iterator[str]:
    """A fresh path in fsspec's process-wide memory filesystem, removed afterwards."""
    base = f"/evstore-test-{uuid.uuid4().hex}"
    yield base
    fs = fsspec.filesystem("memory")
    if fs.exists(base):
        fs.rm(base, recursive=True)


@pytest.fixture
def memory_url(memory_base: str) -> str:
    """``memory://`` URL of :func:`memory_base`, for a remote's ``url``."""
    return f"memory://{memory_base}"


@pytest.fixture(autouse=True)
def _no_memo_gives_the_same_status(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Issue 36: every campaign a test evaluates is evaluated again when the test ends,
    once reusing what is kept and once with nothing kept (``--no-memo``): the status and
    every record behind it must be byte-identical."""
    try:
        from evidencestore.campaign import status
    except ImportError:  # an install without the campaign's dependencies
        yield
        return
    seen: dict[tuple[str, str, str | None], Any] = {}
    real = status.campaign_runs

    def spy(root, campaign, *, history=True, base=None):  # type: ignore[no-untyped-def]
        # the root as handed over (a resolved Repository is evaluated again as it is,
        # never walked up: a test may forbid resolving a root twice)
        seen.setdefault((str(root), campaign.name, base), root)
        return real(root, campaign, history=history, base=base)

    monkeypatch.setattr(status, "campaign_runs", spy)
    yield
    monkeypatch.setattr(status, "campaign_runs", real)
    for (path, name, base), root in seen.items():
        if not Path(path).is_dir():
            continue
        _same_without_memo(root, name, base)


def _same_without_memo(root: Any, name: str, base: str | None) -> None:
    import msgspec

    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate
    from evidencestore.errors import EvidenceStoreError

    def outcome(memo: bool) -> bytes:
        try:
            ev = evaluate(root, load_campaign(root, name), base_rev=base, memo=memo)
        except EvidenceStoreError as exc:
            return f"{type(exc).__name__}: {exc}".encode()
        # where remote results came from is said in notes beside the core's
        # (campaign/results.py): not a function of the commit, so left out here
        status = ev.status
        if ev.core is not None:
            status = msgspec.structs.replace(status, notes=ev.core.notes)
        return msgspec.json.encode([status, ev.repeatability, ev.adjudications, ev.claims])

    fresh = outcome(False)
    assert outcome(True) == fresh, f"campaign {name!r} at {root}: --no-memo differs"
