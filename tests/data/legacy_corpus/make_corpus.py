"""Build the legacy corpus: an evidence repository written by commit 0c7be23.

0c7be23 is the commit before canonical bytes became a function of values (issue 32):
its encoder omitted a default only when the field held the very same object, so every
``media_type`` built at run time (``bundle create`` of ``.log``, ``.toml``, ``.pth``,
``.safetensors`` or extension-less files, campaign protocols, library callers joining
strings) was written, and hashed, explicitly. This corpus keeps what such a repository
holds in git, so the tests can show those registrations still verify bit for bit.

Run it from an extracted copy of that commit, never from newer code:

    mkdir /tmp/c0 && git archive 0c7be23 | tar -x -C /tmp/c0
    cd /tmp/c0 && PYTHONPATH=$PWD python /path/to/make_corpus.py OUT

It writes ``OUT/repo`` (the repository's git-tracked files: ``evstore.toml``,
``evidence/**``; no blob store), ``OUT/proofs/<bundle>/<n>.json`` (``evstore prove``
of every entry of every bundle), ``OUT/attestations/`` (DSSE envelopes of a bundle and
of a record, and the public key) and ``OUT/MADE_WITH`` (the commit and the command).
:func:`build` alone (no commit check) builds the same repository with the code imported
now: ``tests/test_reference_verifier.py`` uses it for the repository the suite
generates. It uses every record kind that commit writes: bundles of many media types, with and
without an explicit ``media_type``, a campaign protocol, video runs, an LLM run,
AIPerf imports, void, withdrawal, claim and status records (with the repeatability and
adjudication records behind them), a media check report and a comparison record.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import evidencestore
from evidencestore.bundle import RepoFile, register_bundle
from evidencestore.cli import main

try:  # 0c7be23 (the corpus's commit) has repository_at; later code resolves by one rule
    from evidencestore.config import repository_at
except ImportError:
    from evidencestore.config import as_repository as repository_at
from evidencestore.models import Descriptor, Entry
from evidencestore.remotes import local_store
from evidencestore.testing.llm_server import chat_workload, serve_llm
from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip
from evidencestore.testing.video_server import sample_workload, serve_video

COMMIT = "0c7be23"
HERE = Path(__file__).resolve().parent
AIPERF = HERE.parent.parent / "fixtures" / "aiperf"
CREATED = "2026-12-05T09:00:00Z"
TINY = {"size": "64x48", "fps": 8, "warmup": 0, "measured": 2}


def cli(*argv: str, ok: tuple[int, ...] = (0,)) -> None:
    code = main(list(argv))
    assert code in ok, (argv, code)


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "corpus",
        "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
        "GIT_COMMITTER_NAME": "corpus",
        "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def files_bundle(root: Path, work: Path) -> None:
    """``bundle create`` of many media types: guessed ones are hashed as they are; the
    fallback ``application/octet-stream`` was written explicitly by 0c7be23."""
    src = work / "many"
    (src / "weights").mkdir(parents=True)
    (src / "logs").mkdir()
    (src / "misc").mkdir()
    (src / "weights/model.pth").write_bytes(b"PK\x03\x04 not really a pickle\x00\x01")
    (src / "weights/model.safetensors").write_bytes(b'\x08\x00\x00\x00\x00\x00\x00\x00{"a":1} ')
    (src / "logs/server.log").write_text("INFO ready\nINFO served 3 requests\n")
    (src / "logs/engine.toml").write_text('[engine]\nname = "reference"\n')
    (src / "misc/README").write_text("extension-less\n")
    (src / "misc/Makefile").write_text("all:\n\ttrue\n")
    (src / "misc/data.json").write_text('{"x": 1}\n')
    (src / "misc/notes.txt").write_text("plain text\n")
    (src / "misc/table.csv").write_text("a,b\n1,2\n")
    (src / "misc/page.html").write_text("<p>hi</p>\n")
    (src / "misc/r\u00e9sum\u00e9 \u00e0 \u65e5\u672c.md").write_text("non-ASCII name\n")
    (src / "misc/with space.bin").write_bytes(bytes(range(256)))
    (src / "misc/empty").write_bytes(b"")
    write_clip(src / "misc/clip.mp4", video=VideoSpec(frames=4, width=32, height=32))
    cli("bundle", "create", "many-types", str(src / "weights"), str(src / "logs"),
        str(src / "misc"), "--external", "weights/*", "--ref", "PR-1", "--meta", "gpu=H200",
        "--meta", "note=\u00e9t\u00e9 \"quoted\" \\ back", "--root", str(root))  # fmt: skip


def readme_bundle(root: Path, work: Path) -> None:
    """The README's example: results in git, video and logs in the store."""
    out = work / "out"
    for d in ("results", "logs", "video"):
        (out / d).mkdir(parents=True)
    (out / "results/timing.json").write_text('{"e2e_s": 400.9}\n')
    (out / "logs/run.log").write_text("step 1\nstep 2\n")
    (out / "logs/stderr").write_text("warning: nothing\n")
    write_clip(out / "video/clip.mp4", video=VideoSpec(frames=4, width=32, height=32),
               audio=AudioSpec(samples=4800))  # fmt: skip
    cli("bundle", "create", "ltx-5s-lossless", str(out / "results"), str(out / "logs"),
        str(out / "video"), "--external", "video/*", "--external", "logs/*", "--ref", "PR-118",
        "--meta", "gpu=H200", "--root", str(root))  # fmt: skip


def library_bundle(root: Path) -> None:
    """A library caller: media types, roles and entry annotations built at run time."""
    repo = repository_at(root)
    store = local_store(root)
    joined = "".join(["application/", "octet-stream"])
    blob = b"stored through the library\n"
    desc = store.put(blob, joined)
    stored = [
        Entry(path="store/explicit.bin", descriptor=desc, location="store",
              role="".join(["in", "put"]), annotations={"origin": "library", "n": "1"}),
        Entry(path="store/value.bin",
              descriptor=Descriptor(digest=desc.digest, size=desc.size), location="store"),
        Entry(path="store/typed.txt",
              descriptor=Descriptor(digest=desc.digest, size=desc.size, media_type="text/plain",
                                    annotations={"k": "v"}), location="store"),
    ]  # fmt: skip
    files = {
        "git/joined.dat": RepoFile(b"joined media type\n", media_type=joined),
        "git/guessed.dat": RepoFile(b"guessed media type\n"),
        "git/role.json": RepoFile(b'{"role": true}\n', role="config"),
        "git/nul\u00e9.txt": RepoFile(b"\x00\x01\x02"),
    }
    register_bundle(repo, "library", files=files, stored=stored, references=("lib", "x"),
                    annotations={"kind": "library", "empty": ""}, created=CREATED)  # fmt: skip
    register_bundle(repo, "single", files={"only.txt": RepoFile(b"one\n")}, created=CREATED)
    for n in (2, 3, 5, 8):
        entries = {f"f{i:02d}.log": RepoFile(f"line {i}\n".encode()) for i in range(n)}
        register_bundle(repo, f"leaves-{n}", files=entries, created=CREATED)
    try:
        register_bundle(repo, "empty", created=CREATED)
    except Exception as exc:  # an empty bundle may be refused; the corpus says so
        print(f"empty bundle refused: {exc}", file=sys.stderr)


def media_records(root: Path, work: Path) -> None:
    """A comparison record and a media check report, registered as a bundle."""
    a = write_clip(work / "a.mp4", video=VideoSpec(frames=8), audio=AudioSpec())
    b = write_clip(work / "b.mp4", video=VideoSpec(frames=8), audio=AudioSpec(frequency=445.0))
    rec = work / "records"
    rec.mkdir()
    expect = ["--frames", "8", "--samples", "24000"]
    cli("media", "compare", a, b, *expect, "--record", str(rec / "comparison.json"),
        ok=(0, 1, 3, 4))  # fmt: skip
    cli("media", "check", a, *expect, "--record", str(rec / "check.json"), ok=(0, 1))
    cli("bundle", "create", "media-records", str(rec), "--root", str(root))


def campaign(root: Path, work: Path) -> None:
    """A protocol, video runs of two arms, a void, a withdrawal, a claim and a status."""
    src = work / "protocol"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/5s.toml").write_text(sample_workload(seconds=(1,), **TINY))  # type: ignore[arg-type]
    (src / "protocol.toml").write_text(
        'name = "fox"\n[timing]\nmin_runs = 3\n'
        '[[condition]]\nname = "5s"\nworkload = "workloads/5s.toml"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 3\n'
        '[[arm]]\nname = "fast"\nruns = 3\n'
        '[[arm]]\nname = "abandoned"\nruns = 3\n'
    )
    cli("campaign", "init", "fox", "--protocol", str(src / "protocol.toml"), "--root", str(root))
    commit(root, "protocol")
    workload = str(root / "evidence/fox/workloads/5s.toml")
    runs = [("baseline", "b1", 0.06), ("baseline", "b2", 0.06), ("baseline", "b3", 0.06),
            ("baseline", "b4", 0.06), ("fast", "c1", 0.01), ("fast", "c2", 0.01),
            ("fast", "c3", 0.01)]  # fmt: skip
    with serve_video() as server:
        for arm, name, latency in runs:
            server.latency = latency
            cli("-q", "run", workload, "--arm", arm, "--server", server.url, "--name", name,
                "--campaign", "fox", "--condition", "5s", "--root", str(root))  # fmt: skip
    commit(root, "runs")
    cli("campaign", "void", "fox", "--run", "b4", "--reason", "launched twice by mistake",
        "--record", "void-b4", "--root", str(root))  # fmt: skip
    cli("campaign", "withdraw", "fox", "--arm", "abandoned", "--reason", "not pursued",
        "--record", "withdraw-abandoned", "--root", str(root))  # fmt: skip
    commit(root, "void and withdrawal")
    cli("campaign", "claim", "fox", "--condition", "5s", "--arm", "fast",
        "--register", "claim-fox-fast", "--root", str(root), ok=(0, 1))  # fmt: skip
    cli("campaign", "status", "fox", "--register", "status-fox", "--root", str(root), ok=(0, 1))
    commit(root, "claim and status")


def llm_run(root: Path, work: Path) -> None:
    """A chat run against the reference LLM server, outside any campaign."""
    wl = work / "chat.toml"
    wl.write_text(chat_workload(("Hello there", "Tell me a story"), max_tokens=8))
    with serve_llm() as llm:
        cli("-q", "run", str(wl), "--arm", "chat", "--server", llm.url, "--name", "llm-chat",
            "--root", str(root))  # fmt: skip


def imports(root: Path) -> None:
    for run in ("baseline-1", "candidate-1"):
        cli("-q", "import", "aiperf", str(AIPERF / run), "--name", f"aiperf-{run}",
            "--arm", run.split("-")[0], "--root", str(root))  # fmt: skip


def proofs(root: Path, out: Path) -> int:
    import contextlib
    import io

    count = 0
    for reg_path in sorted((root / "evidence").glob("*/bundle.json")):
        reg = json.loads(reg_path.read_bytes())
        name = reg["manifest"]["name"]
        entries = reg["manifest"]["entries"]
        n = len(entries)
        # every entry of a small bundle; of a large one, 12 spread over the tree
        chosen = range(n) if n <= 12 else sorted({i * (n - 1) // 11 for i in range(12)})
        for i in chosen:
            entry = entries[i]
            raw = io.BytesIO()
            text = io.TextIOWrapper(raw, encoding="utf-8")
            with contextlib.redirect_stdout(text):
                cli("prove", name, entry["path"], "--root", str(root))
            text.flush()
            target = out / name / f"{i}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(raw.getvalue())
            count += 1
    return count


def attestations(root: Path, work: Path, out: Path) -> None:
    out.mkdir(parents=True)
    key = work / "corpus.key"
    cli("attest", "keygen", str(key))
    shutil.copyfile(str(key) + ".pub", out / "corpus.key.pub")
    cli("attest", "ltx-5s-lossless", "--key", str(key), "-o", str(out / "ltx-5s-lossless.json"),
        "--root", str(root))  # fmt: skip
    status = json.loads((root / "evidence/status-fox/bundle.json").read_bytes())
    record = next(e for e in status["manifest"]["entries"] if e["path"].endswith("status.json"))
    cli("attest", str(root / "evidence/status-fox" / record["path"]), "--key", str(key),
        "-o", str(out / "status-record.json"), "--root", str(root))  # fmt: skip
    if importlib.util.find_spec("evidencestore.testresult"):  # verdicts as in-toto test-results
        cli("attest", "status-fox", "--key", str(key), "--predicate", "test-result",
            "-o", str(out / "status-verdict.json"), "--root", str(root))  # fmt: skip


def build(out: Path, *, with_store: bool = False) -> int:
    """Write the corpus into ``out`` (which must not exist) with the code imported now;
    return the number of proofs written. ``with_store``: keep the blob store too
    (``repo/.evstore/blobs``), so every store entry can be re-hashed."""
    if out.exists():
        raise SystemExit(f"{out} exists")
    out.mkdir(parents=True)
    work = out / "_work"
    work.mkdir()
    root = out / "_build"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    cli("init", "--root", str(root))
    (root / ".gitignore").write_text(".evstore/\n")
    commit(root, "init")
    files_bundle(root, work)
    readme_bundle(root, work)
    library_bundle(root)
    media_records(root, work)
    commit(root, "bundles")
    campaign(root, work)
    llm_run(root, work)
    imports(root)
    commit(root, "llm run and imports")
    n_proofs = proofs(root, out / "proofs")
    attestations(root, work, out / "attestations")
    repo = out / "repo"
    for rel in git(root, "ls-files", "-z").split("\0"):
        if rel and rel != ".gitignore":
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, repo / rel)
    if with_store:
        shutil.copytree(root / ".evstore" / "blobs", repo / ".evstore" / "blobs")
    shutil.rmtree(work)
    shutil.rmtree(root)
    return n_proofs


def generate(out: Path) -> None:
    """The legacy corpus: :func:`build`, from an extracted copy of 0c7be23 only."""
    assert os.environ.get("LEGACY_OK") or "/tmp/" in evidencestore.__file__, (
        f"run from an extracted copy of {COMMIT}, not {evidencestore.__file__}"
    )
    n_proofs = build(out)
    regs = len(list((out / "repo/evidence").glob("*/bundle.json")))
    (out / "MADE_WITH").write_text(
        f"commit {COMMIT} ({evidencestore.__version__})\n"
        f"command: PYTHONPATH=<extracted {COMMIT}> python tests/data/legacy_corpus/"
        f"make_corpus.py OUT\n"
        f"{regs} registrations, {n_proofs} proofs\n"
    )


if __name__ == "__main__":
    generate(Path(sys.argv[1]))
