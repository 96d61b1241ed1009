"""bundle create: symlink escapes, special files, misleading names, killed creations.

Every case uses real files, symlinks and FIFOs, through the library and the real CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from helpers.repos import add_bundle, make_files

from evidencestore.bundle import (
    SkippedSource,
    create_bundle,
    make_manifest,
    remove_stale_staging,
    scan_sources,
    stale_staging_dirs,
)
from evidencestore.cli import main
from evidencestore.errors import BundleError
from evidencestore.models import Descriptor, Entry
from evidencestore.remotes import local_store
from evidencestore.staging import staging_dir

SECRET = b"root:x:0:0:secret-from-outside:/root:/bin/sh\n"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _all_bytes_under(path: Path) -> list[bytes]:
    out = []
    for dirpath, _, files in os.walk(path):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink():
                out.append(p.read_bytes())
    return out


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    secret = tmp_path_factory.mktemp("outside") / "passwd"
    secret.write_bytes(SECRET)
    return secret


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def _src(repo_dir: Path, files: dict[str, bytes]) -> Path:
    base = repo_dir.parent / "src"
    make_files(base, files)
    return base / "d"


def test_symlink_leaving_the_source_is_refused(
    repo_dir: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _src(repo_dir, {"d/ok.txt": b"fine\n"})
    (d / "leak").symlink_to(outside)
    with pytest.raises(BundleError, match=r"leak is a symlink to .*passwd, outside the source"):
        create_bundle(repo_dir, "b", [d], store=local_store(repo_dir))
    with pytest.raises(BundleError, match=r"\(pass follow_symlinks to copy what it points to\)$"):
        create_bundle(repo_dir, "b", [d], store=local_store(repo_dir))  # the library's words
    code, _, err = _run(capsys, "bundle", "create", "b", str(d), "--root", str(repo_dir))
    assert code == 2
    assert "outside the source" in err and "(pass --follow-symlinks to copy" in err
    assert "Traceback" not in err
    assert not (repo_dir / "evidence/b").exists()
    assert all(SECRET not in data for data in _all_bytes_under(repo_dir))
    assert stale_staging_dirs(repo_dir) == []


def test_symlinked_directory_leaving_the_source_is_refused(
    repo_dir: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _src(repo_dir, {"d/ok.txt": b"fine\n"})
    (d / "etc").symlink_to(outside.parent, target_is_directory=True)
    code, _, err = _run(capsys, "bundle", "create", "b", str(d), "--root", str(repo_dir))
    assert code == 2 and "etc is a symlink to" in err and "outside the source" in err
    assert all(SECRET not in data for data in _all_bytes_under(repo_dir))


def test_follow_symlinks_copies_the_target_content(
    repo_dir: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _src(repo_dir, {"d/ok.txt": b"fine\n"})
    (d / "leak").symlink_to(outside)
    code, _, err = _run(
        capsys, "bundle", "create", "b", str(d), "--root", str(repo_dir), "--follow-symlinks"
    )
    assert code == 0, err
    copied = repo_dir / "evidence/b/d/leak"
    assert not copied.is_symlink() and copied.read_bytes() == SECRET
    reg = json.loads((repo_dir / "evidence/b/bundle.json").read_text())
    assert [e["path"] for e in reg["manifest"]["entries"]] == ["d/leak", "d/ok.txt"]
    assert main(["verify", "--root", str(repo_dir)]) == 0


def test_symlink_inside_the_source_is_copied(repo_dir: Path) -> None:
    d = _src(repo_dir, {"d/real.txt": b"real\n"})
    (d / "alias.txt").symlink_to("real.txt")
    reg = create_bundle(repo_dir, "b", [d], store=local_store(repo_dir))
    assert [e.path for e in reg.manifest.entries] == ["d/alias.txt", "d/real.txt"]
    alias = repo_dir / "evidence/b/d/alias.txt"
    assert not alias.is_symlink() and alias.read_bytes() == b"real\n"


def test_symlink_arguments(
    repo_dir: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo_dir.parent
    (base / "leak").symlink_to(outside)
    (base / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    for arg in ("leak", "linked-dir"):
        code, _, err = _run(
            capsys, "bundle", "create", "b", str(base / arg), "--root", str(repo_dir)
        )
        assert code == 2 and f"{arg} is a symlink to" in err and "refusing" in err
    assert all(SECRET not in data for data in _all_bytes_under(repo_dir))
    # followed on request, entries are named after the argument, not the target
    reg = create_bundle(
        repo_dir,
        "b",
        [base / "leak", base / "linked-dir"],
        store=local_store(repo_dir),
        follow_symlinks=True,
    )
    assert [e.path for e in reg.manifest.entries] == ["leak", "linked-dir/passwd"]


def test_looping_and_dangling_symlink_arguments(
    repo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo_dir.parent
    (base / "loop").symlink_to("loop")
    (base / "gone").symlink_to("nowhere")
    code, _, err = _run(
        capsys, "bundle", "create", "b", str(base / "loop"), "--root", str(repo_dir)
    )
    assert code == 2 and "symlink loop" in err and "no such file" not in err
    code, _, err = _run(
        capsys, "bundle", "create", "b", str(base / "gone"), "--root", str(repo_dir)
    )
    assert code == 2 and "a symlink to nowhere, which does not exist" in err


def test_special_files_are_skipped_and_said(
    repo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _src(repo_dir, {"d/ok.txt": b"fine\n", "d/sub/x.txt": b"x\n"})
    os.mkfifo(d / "pipe")
    (d / "loop").symlink_to("loop")
    (d / "gone").symlink_to("nowhere")
    (d / "sub-link").symlink_to("sub", target_is_directory=True)
    skipped: list[SkippedSource] = []
    reg = create_bundle(repo_dir, "lib", [d], store=local_store(repo_dir), on_skip=skipped.append)
    assert [e.path for e in reg.manifest.entries] == ["d/ok.txt", "d/sub/x.txt"]
    reasons = {s.source.name: s.reason for s in skipped}
    assert set(reasons) == {"pipe", "loop", "gone", "sub-link"}
    assert reasons["pipe"] == "a FIFO, not a regular file"
    assert reasons["loop"].startswith("a symlink loop")
    assert reasons["gone"] == "a dangling symlink to nowhere"
    assert (
        reasons["sub-link"].startswith("a symlink to directory")
        and "not followed" in reasons["sub-link"]
    )
    [link] = [s for s in skipped if s.source.name == "sub-link"]
    assert str(link).endswith("not followed (pass follow_symlinks to copy what it points to)")
    code, out, err = _run(capsys, "bundle", "create", "cli", str(d), "--root", str(repo_dir))
    assert code == 0 and "2 entries" in out
    assert "not followed (pass --follow-symlinks to copy what it points to)" in err
    for name in ("pipe: skipped: a FIFO", "loop: skipped: a symlink loop", "sub-link: skipped"):
        assert name in err
    assert main(["verify", "--root", str(repo_dir)]) == 0


def test_follow_symlinks_walks_directories_and_cuts_cycles(repo_dir: Path) -> None:
    d = _src(repo_dir, {"d/sub/x.txt": b"x\n"})
    (d / "sub-link").symlink_to("sub", target_is_directory=True)
    (d / "sub" / "up").symlink_to("..", target_is_directory=True)  # a cycle
    skipped: list[SkippedSource] = []
    reg = create_bundle(
        repo_dir,
        "b",
        [d],
        store=local_store(repo_dir),
        follow_symlinks=True,
        on_skip=skipped.append,
    )
    assert [e.path for e in reg.manifest.entries] == ["d/sub-link/x.txt", "d/sub/x.txt"]
    assert sorted(str(s.source.relative_to(d)) for s in skipped) == ["sub-link/up", "sub/up"]
    assert all("symlink loop" in s.reason for s in skipped)


def test_scan_sources_reports_without_writing(repo_dir: Path) -> None:
    d = _src(repo_dir, {"d/ok.txt": b"1"})
    os.mkfifo(d / "pipe")
    scanned = scan_sources([d])
    assert [s.path for s in scanned.files] == ["d/ok.txt"]
    assert [str(s) for s in scanned.skipped] == [
        f"{d / 'pipe'}: skipped: a FIFO, not a regular file"
    ]
    assert not (repo_dir / "evidence").exists()


NFC = unicodedata.normalize("NFC", "caf\u00e9.txt")
NFD = unicodedata.normalize("NFD", "caf\u00e9.txt")


@pytest.mark.parametrize(
    ("names", "why"),
    [
        (["Readme.TXT", "readme.txt"], "differ only in letter case"),
        ([NFC, NFD], r"differ only in Unicode normalisation \(NFC/NFD\)"),
        (["BUNDLE.JSON"], r"'BUNDLE.JSON' and 'bundle.json' differ only in letter case"),
        (["Res/a.txt", "res/b.txt"], "'Res' and 'res' differ only in letter case"),
        (["invoice\u202etxt.exe"], r"U\+202E RIGHT-TO-LEFT OVERRIDE"),
        (["zero\u200bwidth.txt"], r"U\+200B ZERO WIDTH SPACE"),
        (["\uff0e\uff0e/x"], r"U\+FF0E FULLWIDTH FULL STOP"),
        (["..\u2215x"], r"U\+2215 DIVISION SLASH"),
        (["del\x7f.txt"], r"control character \(U\+007F"),
        (["c1\x85.txt"], r"control character \(U\+0085"),
    ],
)
def test_misleading_and_colliding_names_are_refused(
    repo_dir: Path, names: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo_dir.parent / "src"
    make_files(base, {n: n.encode() for n in names})
    args = [base / top for top in dict.fromkeys(n.split("/")[0] for n in names)]
    with pytest.raises(BundleError, match=why):
        create_bundle(repo_dir, "b", args, store=local_store(repo_dir))
    code, _, err = _run(capsys, "bundle", "create", "b", *map(str, args), "--root", str(repo_dir))
    assert code == 2 and "Traceback" not in err
    assert not (repo_dir / "evidence/b").exists()
    # the manifest builder applies the same rule to entries made by other tools
    desc = Descriptor(digest="blake3:" + "0" * 64, size=0)
    entries = [Entry(path=n, descriptor=desc, location="repo") for n in names]
    with pytest.raises(BundleError, match=why):
        make_manifest("b", entries, created="2026-01-01T00:00:00Z", producer="t")


def test_plain_unicode_names_are_fine(repo_dir: Path) -> None:
    d = _src(
        repo_dir,
        {f"d/{NFC}": b"1", "d/\u65e5\u672c\u3002txt": b"2", "d/R\u00e9sum\u00e9 v2.pdf": b"3"},
    )
    reg = create_bundle(repo_dir, "b", [d], store=local_store(repo_dir))
    assert len(reg.manifest.entries) == 3
    assert main(["verify", "--root", str(repo_dir)]) == 0


def test_bundle_name_differing_only_in_case_is_refused(repo_dir: Path) -> None:
    add_bundle(repo_dir, "Alpha", {"a.txt": b"a"})
    with pytest.raises(BundleError, match="evidence/Alpha differs only in letter case"):
        add_bundle(repo_dir, "alpha", {"a.txt": b"a"})


# -- a killed bundle create -------------------------------------------------------

# Runs the real CLI in a child process that pauses at a known step, says "paused" on
# stdout and blocks reading stdin (which the test never feeds) until it is killed:
# "chunk:N" when the N-th 4 MiB chunk of a file is hashed (N-1 chunks were written),
# "rename" when the finished staging directory is about to be renamed into place.
_WRAPPER = """
import os, sys
import evidencestore.bundle as bundle
import evidencestore.digest as digest
from evidencestore.cli import main

where = os.environ["PAUSE_AT"]

def pause():
    print("paused", flush=True)
    sys.stdin.read()

real_hasher = digest.blake3
class PausingHasher:
    def __init__(self):
        self.h, self.calls = real_hasher(), 0
    def update(self, data):
        self.calls += 1
        if where == f"chunk:{self.calls}":
            pause()
        self.h.update(data)
    def hexdigest(self):
        return self.h.hexdigest()
real_copy = bundle.copy_hashing
def copy_hashing(src, dst, **kw):
    digest.blake3 = PausingHasher  # only while bundle create copies a file
    try:
        return real_copy(src, dst, **kw)
    finally:
        digest.blake3 = real_hasher
bundle.copy_hashing = copy_hashing

real_rename = os.rename
def rename(src, dst):
    if where == "rename" and ".tmp-" in os.fspath(src):
        pause()
    real_rename(src, dst)
os.rename = rename
sys.exit(main(sys.argv[1:]))
"""


def _kill_at(repo_dir: Path, name: str, src: Path, where: str) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WRAPPER,
            "bundle",
            "create",
            name,
            str(src),
            "--root",
            str(repo_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PAUSE_AT": where},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # EOF ("") if the child died before the pause point
    assert line == b"paused\n", proc.communicate()[1]
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    ("where", "partial_size"),
    [("chunk:2", 4 << 20), ("chunk:3", 8 << 20), ("rename", 3 * (4 << 20) + 123)],
)
def test_killed_create_leaves_staging_that_verify_names_and_the_next_create_removes(
    repo_dir: Path, where: str, partial_size: int, capsys: pytest.CaptureFixture[str]
) -> None:
    add_bundle(repo_dir, "other", {"o.txt": b"o"})
    big = repo_dir.parent / "src" / "big"
    big.mkdir(parents=True)
    payload = os.urandom(3 * (4 << 20) + 123)
    (big / "weights.bin").write_bytes(payload)
    _kill_at(repo_dir, "big", big, where)

    [stale] = stale_staging_dirs(repo_dir)
    assert stale.name.startswith(".big.tmp-")
    partial = stale / "big" / "weights.bin"
    assert partial.stat().st_size == partial_size  # exactly what was written by then
    assert (stale / "bundle.json").exists() == (where == "rename")
    assert not (repo_dir / "evidence/big").exists()

    code, out, _ = _run(capsys, "verify", "--json", "--root", str(repo_dir))
    report = json.loads(out)
    assert code == 0 and report["ok"] is True  # a warning, not a failure
    assert [b["name"] for b in report["bundles"]] == ["other"]  # never taken for a bundle
    [finding] = [f for f in report["findings"] if f["code"] == "stale-staging"]
    assert finding["severity"] == "warning" and finding["path"] == f"evidence/{stale.name}"
    assert "bundle create big" in finding["message"]
    if where != "rename":
        assert f"1 partial file(s), {partial_size} bytes" in finding["message"]
    assert report["totals"]["warnings"] == 1

    code, out, err = _run(capsys, "bundle", "create", "big", str(big), "--root", str(repo_dir))
    assert code == 0, err
    assert not stale.exists() and stale_staging_dirs(repo_dir) == []
    assert sorted(p.name for p in (repo_dir / "evidence").iterdir()) == ["big", "other"]
    assert (repo_dir / "evidence/big/big/weights.bin").read_bytes() == payload
    code, out, _ = _run(capsys, "verify", "--json", "--root", str(repo_dir))
    assert code == 0 and json.loads(out)["totals"]["warnings"] == 0


def test_remove_stale_staging_honours_age_and_live_creations(repo_dir: Path) -> None:
    evidence = repo_dir / "evidence"
    evidence.mkdir()
    dead = evidence / ".gone.tmp-0123abcd"
    (dead / "part").mkdir(parents=True)
    (dead / "part" / "f").write_bytes(b"partial")
    (evidence / ".notes").mkdir()  # not a staging directory: never touched
    with staging_dir(evidence, "live") as live:
        (live / "f").write_bytes(b"being copied")
        assert stale_staging_dirs(repo_dir) == [dead]  # the live one is locked
        assert remove_stale_staging(repo_dir, older_than=3600) == []  # too young
        old = time.time() - 7200
        os.utime(dead, (old, old))
        os.utime(live, (old, old))
        assert remove_stale_staging(repo_dir, older_than=3600) == [dead]
        assert not dead.exists() and live.exists() and (evidence / ".notes").exists()
    assert not live.exists()  # the context removes what was not renamed into place


def test_next_create_leaves_a_live_creation_of_the_same_name_alone(repo_dir: Path) -> None:
    d = _src(repo_dir, {"d/a.txt": b"a"})
    evidence = repo_dir / "evidence"
    evidence.mkdir()
    with staging_dir(evidence, "b") as live:
        (live / "partial").write_bytes(b"still being copied")
        create_bundle(repo_dir, "b", [d], store=local_store(repo_dir))
        assert (live / "partial").read_bytes() == b"still being copied"
    assert sorted(p.name for p in evidence.iterdir()) == ["b"]


def test_a_cleaner_between_mkdir_and_lock_makes_the_creator_start_again(
    repo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the staging docstring argues about, forced: a cleaner takes the lock of a
    just-made staging directory before its creator and removes it; the creator sees the
    directory gone once it holds the lock, and uses a new one."""
    import fcntl

    import evidencestore.staging as staging

    evidence = repo_dir / "evidence"
    evidence.mkdir()
    removed: list[Path] = []

    class CleanerFirst:
        LOCK_EX, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_NB

        @staticmethod
        def flock(fd: int, op: int) -> None:
            if op == fcntl.LOCK_EX and not removed:  # the creator, about to lock
                removed.extend(remove_stale_staging(repo_dir))
            fcntl.flock(fd, op)

    monkeypatch.setattr(staging, "fcntl", CleanerFirst)
    with staging_dir(evidence, "b") as path:
        assert path.is_dir() and len(removed) == 1 and removed[0] != path
        assert not removed[0].exists()
        (path / "f").write_bytes(b"kept")
        assert stale_staging_dirs(repo_dir) == []
