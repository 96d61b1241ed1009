"""``[quality] lpips = true``: every INCONCLUSIVE pair of unequal video is an
``output-lpips`` task, scored with the weights pinned in evstore.toml; listed once its
pair is known, computed by workers, collected by a status that then computes nothing,
and equal to an independent comparison with the same scorer. Without pinned weights
the pair is UNAVAILABLE, never INCONCLUSIVE unscored."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("av")
pytest.importorskip("torch")
pytest.importorskip("lpips")

from helpers.campaigns import commit, git, init_git_repo, protocol_text, write_protocol
from helpers.fresh import rerun_fresh
from helpers.remotes import run, set_remotes

from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
from evidencestore.campaign.tasks import plan
from evidencestore.cli import main
from evidencestore.testing.video_server import serve_video

NAME = "lp"


def _near_render() -> Any:
    """The reference server's content with one block of the first frame a little
    brighter before encoding: valid, unequal video, within every PSNR threshold."""
    from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip

    def render(fields: dict[str, str], number: int) -> bytes:
        w, h = (int(v) for v in fields["size"].split("x"))
        fps, seed = int(fields["fps"]), int(fields["seed"])
        shift = seed % 97

        def tint(index: int, planes: Any) -> Any:
            import numpy as np

            out = ((planes.astype(np.uint16) + shift) % 256).astype(np.uint8)
            if index == 0:  # an 8x8 block 6 steps brighter: about 46 dB, above 40
                out[8:16, 8:16] = np.clip(out[8:16, 8:16].astype(int) + 6, 0, 255)
            return out

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "near.mp4"
            write_clip(
                path,
                video=VideoSpec(width=w, height=h, rate=fps,
                                frames=round(float(fields["seconds"]) * fps),
                                options={"preset": "ultrafast", "threads": "1"}),
                audio=AudioSpec(rate=48000, layout="stereo",
                                samples=round(float(fields["seconds"]) * 48000),
                                frequency=220.0 + 10 * (seed % 50)),
                format="mp4",
                video_hook=tint,
            )  # fmt: skip
            return path.read_bytes()

    return render


def _backbone(where: Path) -> Path:
    """A generated AlexNet backbone named as torchvision names its release."""
    import torch
    import torchvision

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(20240517)
        state = torchvision.models.alexnet(weights=None).state_dict()
    tmp = where / "generated.pth"
    torch.save(state, tmp)
    sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
    return tmp.rename(where / f"alexnet-owt-{sha[:8]}.pth")


@pytest.fixture(scope="module")
def author(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("lp")
    root = tmp / "author"
    init_git_repo(root)
    text = protocol_text(NAME, [("baseline", 2), ("near", 1)], ("5s",))
    text = text.replace("min_runs = 3", "min_runs = 2").replace(
        "[quality]\n", "[quality]\nlpips = true\n"
    )
    src = write_protocol(tmp / "p", text)
    assert main(["campaign", "init", NAME, "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", f"evidence/{NAME}")
    workload = str(root / f"evidence/{NAME}/workloads/5s.toml")
    with serve_video() as server:
        for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("near", "n1")):
            if arm == "near":
                server.render = _near_render()  # type: ignore[method-assign]
            argv = ["-q", "run", workload, "--arm", arm, "--server", server.url, "--name",
                    name, "--campaign", NAME, "--condition", "5s", "--root", str(root)]  # fmt: skip
            assert main(argv) == 0
    code, _, err = run("lpips", "import", "--backbone", str(_backbone(tmp)), "--root", str(root))
    assert code == 0, err
    set_remotes(root, origin={"url": str(tmp / "remote")})
    commit(root, "runs", "evstore.toml", "evidence")
    assert run("push", "--root", str(root))[0] == 0
    # the weights travel through the remote too, by digest
    store = root / ".evstore"
    shutil.copytree(store / "blobs", tmp / "remote" / "blobs", dirs_exist_ok=True)
    return root


def _clone(author: Path, to: Path) -> Path:
    git(to.parent, "clone", "-q", str(author), str(to))
    remote = to.parent / f"{to.name}-remote"
    shutil.copytree(author.parent / "remote", remote, ignore=shutil.ignore_patterns("results"))
    set_remotes(to, origin={"url": str(remote)})
    return to


def test_lpips_tasks_are_listed_after_their_pair_and_collected(
    author: Path, tmp_path: Path
) -> None:
    from evidencestore.media.comparison import compare
    from evidencestore.media.source import MediaSource
    from evidencestore.perceptual import load_configured_scorer
    from evidencestore.remotes import repository_store
    from evidencestore.runs.workload import expectations_for, load_workload

    w = _clone(author, tmp_path / "w")
    campaign = load_campaign(w, NAME)
    first = plan(w, campaign).tasks
    assert sorted(t.kind for t in first) == ["output-check", "output-check", "output-pair",
                                             "output-pair"]  # fmt: skip
    # the worker computes the pairs, then lists and computes the LPIPS task
    code, out, err = run("campaign", "work", NAME, "--root", str(w))
    assert code == 0, err
    assert out.startswith("5 task(s): 5 computed, 5 published"), out
    remote = tmp_path / "w-remote"
    assert len(list((remote / "results").rglob("*.json"))) == 5
    # a fresh clone with that remote computes nothing, and says what it rests on
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(author), str(fresh))
    set_remotes(fresh, origin={"url": str(remote)})
    ev = evaluate(fresh, load_campaign(fresh, NAME), recheck=5)
    assert ev.decoded == 0 and ev.computed == 5  # every result rechecked here
    assert any("5 unsigned remote result(s), counted after 5" in n for n in ev.status.notes)
    comparisons = ev.adjudications["5s/near"].comparisons  # three sends of one request
    cmp = comparisons[0]
    assert cmp.lpips_max is not None
    assert all(c.lpips_max == cmp.lpips_max for c in comparisons)
    # truth: the media comparison of the same outputs with the same scorer
    store = repository_store(fresh)
    scorer = load_configured_scorer(fresh)
    wl = load_workload(fresh / f"evidence/{NAME}/workloads/5s.toml").workload

    def source(digest: str) -> MediaSource:
        from evidencestore.models import Descriptor

        data = store.get(digest)
        return MediaSource(name=digest, descriptor=Descriptor(digest=digest, size=len(data),
                           media_type="video/mp4"), data=data)  # fmt: skip

    assert cmp.reference is not None and cmp.candidate is not None
    truth = compare(source(cmp.reference), source(cmp.candidate), expectations_for(wl, 0),
                    scorers=[scorer])  # fmt: skip
    video = truth.metrics.video if truth.metrics else None
    assert video is not None
    assert cmp.lpips_max == video.perceptual["lpips"].max
    assert cmp.verdict == truth.verdict
    assert ev.adjudications["5s/near"].verdict == truth.verdict


def test_without_pinned_weights_the_pair_is_unavailable(author: Path, tmp_path: Path) -> None:
    import tomllib

    import tomli_w

    c = _clone(author, tmp_path / "c")
    config = tomllib.loads((c / "evstore.toml").read_text())
    config.pop("lpips")
    (c / "evstore.toml").write_text(tomli_w.dumps(config))
    ev = evaluate(c, load_campaign(c, NAME))
    adj = ev.adjudications["5s/near"]
    assert adj.verdict == "UNAVAILABLE"
    cmp = adj.comparisons[0]
    assert cmp.verdict == "UNAVAILABLE" and "`evstore lpips import`" in cmp.reasons[0]
    assert ev.status.verdict != "ACCEPTED"


def test_forked_workers_share_the_scorer_loaded_once(
    author: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """LPIPS tasks in worker processes: the scorer is loaded once, in the process that
    forks them (not once per worker), torch's thread count there is left as it was,
    and the record is the one a single process computes."""
    import os

    import msgspec
    import torch

    import evidencestore.perceptual as perceptual
    from evidencestore._fork import can_fork
    from evidencestore.campaign import adjudication
    from evidencestore.campaign.memo import open_memo
    from evidencestore.campaign.tasks import compute
    from evidencestore.config import as_repository
    from evidencestore.scale.local import chunks, run_tasks

    if not can_fork():  # an earlier test's thread lives on: fork in a fresh process
        return rerun_fresh(request)
    w = _clone(author, tmp_path / "w")
    campaign = load_campaign(w, NAME)
    assert compute(w, plan(w, campaign).tasks) == {}
    scores = [t for t in plan(w, campaign).tasks if t.kind == "output-lpips"]
    assert len(scores) == 1
    # a second chunk, so two processes: the same pair the other way round
    pair = scores[0].pair
    assert pair is not None
    turned = msgspec.structs.replace(pair, reference=pair.candidate, candidate=pair.reference)
    repo = as_repository(w)
    key = adjudication.Judge(repo, repo.local_store()).lpips_key(turned)
    assert key is not None
    other = msgspec.structs.replace(scores[0], key=key, pair=turned)
    assert len(chunks([*scores, other])) == 2
    loads = tmp_path / "loads"
    real = perceptual.load_configured_scorer

    def load(root: Any) -> Any:
        with loads.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(root)

    monkeypatch.setattr(perceptual, "load_configured_scorer", load)
    monkeypatch.setattr(adjudication, "_SCORERS", {})
    threads = torch.get_num_threads()
    assert run_tasks(w, [*scores, other], jobs=2) == {}
    assert loads.read_text().split() == [str(os.getpid())]
    assert torch.get_num_threads() == threads
    one = _clone(author, tmp_path / "one")
    assert compute(one, plan(one, campaign).tasks) == {}
    assert compute(one, [*scores, other]) == {}
    for key in (scores[0].key, other.key):
        kept = open_memo(as_repository(w).local_store()).stored(key)
        assert kept is not None
        assert kept == open_memo(as_repository(one).local_store()).stored(key)
