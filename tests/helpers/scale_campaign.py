"""A small video campaign for the scale tests: baseline b1, b2, candidate fast f1, f2 and
lsb l1 (one audio sample one LSB off), three distinct requests each, every run committed
after its protocol and pushed to a directory remote; the protocol pins a worker key."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import CampaignEvaluation
from evidencestore.campaign.tasks import plan
from evidencestore.cli import main
from evidencestore.dsse import generate_key
from evidencestore.testing.video_server import sample_workload, serve_video
from helpers.campaigns import commit, git, init_git_repo, lsb_render, protocol_text, write_protocol

from .remotes import run, set_remotes

__all__ = ["NAME", "build_author", "clone", "count", "records"]


NAME = "scale"


def _protocol(tmp: Path) -> Path:
    text = protocol_text(NAME, [("baseline", 2), ("fast", 2), ("lsb", 1)], ("5s",))
    text = text.replace("min_runs = 3", "min_runs = 2").replace("\n[[condition]]", (
        '\n[signing]\nworkers = ["keys/worker.pub"]\n\n[[condition]]'
    ), 1)  # fmt: skip
    src = write_protocol(tmp, text)
    # three distinct requests (seeds), each measured once
    base = sample_workload(seconds=(1,), size="64x48", fps=8, warmup=0, measured=1)
    extra = base[base.index("[[request]]") :]
    wl = base + "".join("\n" + extra.replace("seed = 42", f"seed = {s}") for s in (7, 9))
    (tmp / "workloads" / "5s.toml").write_text(wl)
    (tmp / "keys").mkdir()
    generate_key(tmp / "keys" / "worker")
    return src


def build_author(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evidence repository with every run committed and pushed to a directory remote
    (``remote/`` beside it), its worker key at ``p/keys/worker``."""
    tmp = tmp_path_factory.mktemp("scale")
    root = tmp / "author"
    init_git_repo(root)
    src = _protocol(tmp / "p")
    assert main(["campaign", "init", NAME, "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", f"evidence/{NAME}")
    workload = str(root / f"evidence/{NAME}/workloads/5s.toml")
    with serve_video() as server:
        for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("fast", "f1"),
                          ("fast", "f2"), ("lsb", "l1")):  # fmt: skip
            if arm == "lsb":
                server.render = lsb_render()  # type: ignore[attr-defined]
            argv = ["-q", "run", workload, "--arm", arm, "--server", server.url, "--name",
                    name, "--campaign", NAME, "--condition", "5s", "--root", str(root)]  # fmt: skip
            assert main(argv) == 0
    set_remotes(root, origin={"url": str(tmp / "remote")})
    commit(root, "runs", "evstore.toml", "evidence")
    assert run("push", "--root", str(root))[0] == 0
    return root


def clone(author: Path, to: Path, remote: Path | None = None) -> Path:
    git(to.parent, "clone", "-q", str(author), str(to))
    set_remotes(to, origin={"url": str(remote or author.parent / "remote")})
    return to


def count(author: Path) -> int:
    """How many tasks the campaign has (9 here: see the listing test)."""
    return len(plan(author, load_campaign(author, NAME), every=True).tasks)


def records(ev: CampaignEvaluation) -> bytes:
    core = ev.core or ev.status
    return msgspec.json.encode([core, ev.repeatability, ev.adjudications, ev.claims])
