"""The authenticated LPIPS scorer against lpips 0.1.4's own loader.

The real 233 MB AlexNet backbone cannot be downloaded here, so a module fixture
generates one with torchvision's architecture (fixed seed), saves it under its
torchvision-style name ``alexnet-owt-<sha256[:8]>.pth`` in a temporary torch hub cache,
and links it as ``alexnet-owt-7be5be79.pth`` too: the name torchvision loads from its
cache without re-checking the hash, which is how ``lpips.LPIPS(net="alex")`` is built
here with its own loader and no network.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import io
import os
import pickle
import socket
import struct
import subprocess
import sys
import tomllib
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
lpips = pytest.importorskip("lpips")

from blake3 import blake3  # noqa: E402

from evidencestore import perceptual  # noqa: E402
from evidencestore.cli import main  # noqa: E402
from evidencestore.digest import hash_bytes, hash_file  # noqa: E402
from evidencestore.errors import ScorerError  # noqa: E402
from evidencestore.models import Descriptor  # noqa: E402
from evidencestore.perceptual import (  # noqa: E402
    SHA256_ANNOTATION,
    TITLE_ANNOTATION,
    TORCHVISION_BACKBONE_NAME,
    LpipsScorer,
    load_configured_scorer,
    load_scorer,
)
from evidencestore.storage import LocalBlobStore, MemoryBlobStore  # noqa: E402

SEED = 20240517


@dataclasses.dataclass
class Hub:
    """A temporary torch hub cache holding a generated AlexNet backbone."""

    torch_home: Path
    backbone: Path  # alexnet-owt-<its own sha256 prefix>.pth
    official: Path  # the same bytes under torchvision's release name
    sha256: str
    state: dict[str, Any]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Hub:
    torch_home = tmp_path_factory.mktemp("torch-home")
    checkpoints = torch_home / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        state = torchvision.models.alexnet(weights=None).state_dict()
    tmp = checkpoints / "generated.pth"
    torch.save(state, tmp)
    sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
    assert not sha.startswith("7be5be79")  # 1 in 2**32: the refusal tests need a mismatch
    backbone = checkpoints / f"alexnet-owt-{sha[:8]}.pth"
    tmp.rename(backbone)
    official = checkpoints / TORCHVISION_BACKBONE_NAME
    os.link(backbone, official)
    return Hub(torch_home, backbone, official, sha, state)


@pytest.fixture(scope="module")
def linear_path() -> Path:
    return perceptual.default_linear_path()


@dataclasses.dataclass
class Stored:
    store: LocalBlobStore
    backbone: Descriptor
    linear: Descriptor


@pytest.fixture(scope="module")
def stored(hub: Hub, linear_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    store = LocalBlobStore(tmp_path_factory.mktemp("store"))
    return Stored(store, store.put_file(hub.backbone), store.put_file(linear_path))


@pytest.fixture(scope="module")
def scorer(stored: Stored) -> LpipsScorer:
    return load_scorer(stored.store, stored.backbone, stored.linear, device="cpu")


def _block_network(mp: pytest.MonkeyPatch, calls: list[str], *, hub_loader: bool) -> None:
    def refuse(name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise OSError(f"test: network access attempted through {name}")

        return refused

    mp.setattr(socket.socket, "connect", refuse("socket.socket.connect"))
    mp.setattr(socket.socket, "connect_ex", refuse("socket.socket.connect_ex"))
    mp.setattr(socket, "create_connection", refuse("socket.create_connection"))
    mp.setattr(torch.hub, "download_url_to_file", refuse("torch.hub.download_url_to_file"))
    if hub_loader:
        mp.setattr(
            torch.hub, "load_state_dict_from_url", refuse("torch.hub.load_state_dict_from_url")
        )
        mp.setattr(
            torchvision.models._api,
            "load_state_dict_from_url",
            refuse("torchvision.models._api.load_state_dict_from_url"),
        )


@pytest.fixture(scope="module")
def reference(hub: Hub) -> Any:
    """``lpips.LPIPS(net="alex")`` built by lpips's own loader from the hub cache."""
    calls: list[str] = []
    urls: list[str] = []
    real_loader = torchvision.models._api.load_state_dict_from_url

    def cache_loader(url: str, *args: Any, **kwargs: Any) -> Any:
        urls.append(url)
        return real_loader(url, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_HOME", str(hub.torch_home))
        mp.setattr(torch.hub, "_hub_dir", None)
        _block_network(mp, calls, hub_loader=False)
        mp.setattr(torchvision.models._api, "load_state_dict_from_url", cache_loader)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torchvision's `pretrained=` notice
            model = lpips.LPIPS(net="alex", verbose=False)
    assert calls == []
    assert urls == [f"https://download.pytorch.org/models/{TORCHVISION_BACKBONE_NAME}"]
    # It really is the generated backbone that lpips loaded from the cache.
    assert torch.equal(model.net.slice1[0].weight, hub.state["features.0.weight"])
    return model


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """Sockets and torch hub downloads raise; the hub cache is empty."""
    calls: list[str] = []
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-torch-home"))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    _block_network(monkeypatch, calls, hub_loader=True)
    yield calls
    assert calls == [], f"network access attempted: {calls}"


@pytest.fixture
def torch_loads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record every ``torch.load`` call (still performed)."""
    calls: list[dict[str, Any]] = []
    real = torch.load

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording)
    return calls


def _frames(seed: int, n: int = 5, size: int = 64) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _serialised(obj: Any, *, legacy: bool = False) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def _linear_state(linear_path: Path) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(linear_path, weights_only=True, map_location="cpu")
    return state


# -- identical to lpips 0.1.4 ------------------------------------------------------------


def test_backbone_spec_is_torchvision_alexnet(hub: Hub) -> None:
    assert list(hub.state) == list(perceptual.BACKBONE_SHAPES)
    assert {k: tuple(v.shape) for k, v in hub.state.items()} == perceptual.BACKBONE_SHAPES
    assert all(v.dtype == torch.float32 for v in hub.state.values())


def test_linear_spec_is_lpips_alex_pth(linear_path: Path) -> None:
    state = _linear_state(linear_path)
    assert {k: tuple(v.shape) for k, v in state.items()} == perceptual.LINEAR_SHAPES


def test_state_equal_tensor_for_tensor(scorer: LpipsScorer, reference: Any) -> None:
    ours = scorer.module.state_dict()
    theirs = reference.state_dict()
    assert list(ours) == list(theirs)
    assert len(ours) == 22
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        assert torch.equal(ours[key], theirs[key]), key


def test_training_and_requires_grad_flags_match(scorer: LpipsScorer, reference: Any) -> None:
    ours = dict(scorer.module.named_modules())
    theirs = dict(reference.named_modules())
    assert list(ours) == list(theirs)
    assert {n: m.training for n, m in ours.items()} == {n: m.training for n, m in theirs.items()}
    assert not any(m.training for m in ours.values())
    ours_grad = {n: p.requires_grad for n, p in scorer.module.named_parameters()}
    theirs_grad = {n: p.requires_grad for n, p in reference.named_parameters()}
    assert ours_grad == theirs_grad
    assert ours_grad["net.slice1.0.weight"] is False and ours_grad["lin0.model.1.weight"] is True
    ours_buffers = {n: b.requires_grad for n, b in scorer.module.named_buffers()}
    assert ours_buffers == {n: b.requires_grad for n, b in reference.named_buffers()}


def _reference_scores(reference: Any, a: np.ndarray, b: np.ndarray) -> list[float]:
    # lpips's own preprocessing, frame by frame, batched as one tensor.
    t0 = torch.cat([lpips.im2tensor(frame) for frame in a])
    t1 = torch.cat([lpips.im2tensor(frame) for frame in b])
    with torch.no_grad():
        out = reference(t0, t1)
    return [float(v) for v in out.reshape(-1).double().tolist()]


def test_outputs_identical_to_lpips(scorer: LpipsScorer, reference: Any) -> None:
    a, b = _frames(1), _frames(2)
    b[2] = a[2]  # one identical pair
    whole = dataclasses.replace(scorer, batch_size=len(a))
    expected = _reference_scores(reference, a, b)
    assert whole.score(a, b) == expected
    assert expected[2] == 0.0 and all(v > 0 for i, v in enumerate(expected) if i != 2)
    single = dataclasses.replace(scorer, batch_size=1)
    per_frame = [_reference_scores(reference, a[i : i + 1], b[i : i + 1])[0] for i in range(5)]
    assert single.score(a, b) == per_frame
    # The default batching gives the same numbers up to float32 rounding.
    assert scorer.score(a, b) == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_preprocessing_matches_lpips_im2tensor(scorer: LpipsScorer) -> None:
    frame = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    ours = scorer._tensor(torch, frame[None])
    assert torch.equal(ours, lpips.im2tensor(frame))
    assert ours.dtype == torch.float32 and ours.shape == (1, 3, 16, 16)


def test_identical_frames_score_zero(scorer: LpipsScorer) -> None:
    a = _frames(3, n=6)
    assert scorer.score(a, a.copy()) == [0.0] * 6
    assert scorer.score(a[:0], a[:0]) == []


def test_scores_are_plain_floats_one_per_frame(scorer: LpipsScorer) -> None:
    scores = scorer.score(_frames(4, n=3), _frames(5, n=3))
    assert len(scores) == 3 and all(type(s) is float for s in scores)
    assert scorer.name == "lpips" and scorer.batch_size >= 1


def test_provenance_names_weights_state_and_versions(scorer: LpipsScorer, stored: Stored) -> None:
    prov = scorer.provenance()
    assert all(isinstance(v, str) for v in prov.values())
    assert prov["backbone_digest"] == stored.backbone.digest
    assert prov["backbone_size"] == str(stored.backbone.size)
    assert prov["linear_digest"] == stored.linear.digest
    assert prov["linear_size"] == str(stored.linear.size)
    assert prov["state_digest"] == scorer.state_digest
    assert prov["torch"] == torch.__version__
    assert prov["torchvision"] == torchvision.__version__
    assert prov["lpips"] == "0.1.4"
    assert prov["device"] == "cpu"


# -- scorer-state digest -----------------------------------------------------------------


def _documented_digest(state: dict[str, Any]) -> str:
    """The format in perceptual's docstring, reimplemented independently."""
    h = blake3(b"evidencestore/lpips-state/v1\x00")
    h.update(struct.pack(">Q", len(state)))
    for name, t in state.items():
        data = t.detach().cpu().contiguous().numpy().astype("<f4").tobytes()
        dims = ",".join(str(d) for d in t.shape)
        text = f'{{"dtype":"float32","name":"{name}","nbytes":{len(data)},"shape":[{dims}]}}'
        header = text.encode()
        h.update(struct.pack(">Q", len(header)) + header + data)
    return "blake3:" + h.hexdigest()


def test_state_digest_follows_documented_format(scorer: LpipsScorer, reference: Any) -> None:
    assert scorer.state_digest == _documented_digest(scorer.module.state_dict())
    # lpips's own model has the same state, hence the same digest.
    assert perceptual.compute_state_digest(reference.state_dict()) == scorer.state_digest


def test_state_digest_sees_one_ulp(scorer: LpipsScorer) -> None:
    state = {k: v.clone() for k, v in scorer.module.state_dict().items()}
    state["lin3.model.1.weight"].view(-1)[7] = torch.nextafter(
        state["lin3.model.1.weight"].view(-1)[7], torch.tensor(1.0)
    )
    assert perceptual.compute_state_digest(state) != scorer.state_digest


def test_pinned_state_digest(stored: Stored, scorer: LpipsScorer) -> None:
    pinned = load_scorer(
        stored.store, stored.backbone, stored.linear, state_digest=scorer.state_digest, device="cpu"
    )
    assert pinned.state_digest == scorer.state_digest
    wrong = "blake3:" + "0" * 64
    with pytest.raises(ScorerError, match=f"state digest is {scorer.state_digest}, but {wrong}"):
        load_scorer(stored.store, stored.backbone, stored.linear, state_digest=wrong, device="cpu")


# -- no network ----------------------------------------------------------------------------


def test_loads_and_scores_with_network_blocked(
    no_network: list[str], stored: Stored, scorer: LpipsScorer, torch_loads: list[dict[str, Any]]
) -> None:
    rng_before = torch.random.get_rng_state()
    fresh = load_scorer(stored.store, stored.backbone, stored.linear, device="cpu")
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # the caller's RNG untouched
    assert fresh.state_digest == scorer.state_digest
    a, b = _frames(6, n=2), _frames(7, n=2)
    assert fresh.score(a, b) == scorer.score(a, b)
    assert torch_loads == [{"weights_only": True, "map_location": "cpu"}] * 2
    with pytest.raises(OSError):  # the guards are live
        socket.create_connection(("download.pytorch.org", 443))
    no_network.clear()


def test_device_defaults_to_cuda_when_available(stored: Stored) -> None:
    scorer = load_scorer(stored.store, stored.backbone, stored.linear)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert scorer.device.startswith(expected)
    assert next(scorer.module.parameters()).device.type == expected
    default = perceptual.CUDA_BATCH_SIZE if expected == "cuda" else perceptual.CPU_BATCH_SIZE
    assert scorer.batch_size == default
    a = _frames(8, n=2)
    assert scorer.score(a, a) == [0.0, 0.0]


# -- refused before any unpickling -------------------------------------------------------


def test_refuses_digest_absent_from_store(
    stored: Stored, torch_loads: list[dict[str, Any]]
) -> None:
    other = Descriptor(digest=hash_bytes(b"not the weights").digest, size=stored.linear.size)
    with pytest.raises(ScorerError) as info:
        load_scorer(stored.store, stored.backbone, other, device="cpu")
    message = str(info.value)
    assert other.digest in message and "not found" in message
    assert "evstore lpips import --backbone" in message
    assert torch_loads == []


@pytest.mark.parametrize("role", ["backbone", "linear"])
def test_refuses_tampered_blob(
    role: str, hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    store = MemoryBlobStore()
    descs = {"backbone": store.put_file(hub.backbone), "linear": store.put_file(linear_path)}
    target = descs[role]
    data = bytearray(store.blobs[target.digest])
    data[len(data) // 2] ^= 0x01
    store.blobs[target.digest] = bytes(data)
    with pytest.raises(ScorerError, match=f"LPIPS {role} weights {target.digest}.*hashes to"):
        load_scorer(store, descs["backbone"], descs["linear"], device="cpu")
    assert torch_loads == []


def test_refuses_wrong_pinned_digest(
    stored: Stored, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    # The pin names other content than the store returns under that name.
    store = MemoryBlobStore()
    backbone = stored.backbone
    store.blobs[backbone.digest] = stored.store.get(backbone.digest, backbone.size)
    real = store.put_file(linear_path)
    forged = hash_bytes(b"x" * real.size).digest
    store.blobs[forged] = store.blobs[real.digest]
    with pytest.raises(ScorerError, match=f"{forged}.*hashes to {real.digest}"):
        load_scorer(store, backbone, Descriptor(digest=forged, size=real.size), device="cpu")
    assert torch_loads == []


class _LyingStore(MemoryBlobStore):
    """A store whose ``get`` returns other bytes than asked for (a broken remote layer)."""

    def __init__(self, answers: dict[str, bytes]) -> None:
        super().__init__()
        self.answers = answers

    def get(self, digest: str, size: int | None = None) -> bytes:
        return self.answers[digest]


def test_rechecks_what_the_store_returns(
    stored: Stored, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    backbone = stored.store.get(stored.backbone.digest, stored.backbone.size)
    linear = linear_path.read_bytes()
    lying = _LyingStore({stored.backbone.digest: backbone, stored.linear.digest: linear[:-1]})
    with pytest.raises(
        ScorerError, match=f"{stored.linear.digest}: got {len(linear) - 1} bytes, expected"
    ):
        load_scorer(lying, stored.backbone, stored.linear, device="cpu")
    swapped = bytearray(linear)
    swapped[-1] ^= 0xFF
    lying.answers[stored.linear.digest] = bytes(swapped)
    with pytest.raises(ScorerError, match=f"{stored.linear.digest}: content hashes to blake3:"):
        load_scorer(lying, stored.backbone, stored.linear, device="cpu")
    assert torch_loads == []


def test_refuses_truncated_blob(
    stored: Stored, linear_path: Path, tmp_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    store = LocalBlobStore(tmp_path / "store")
    linear = store.put_file(linear_path)
    path = store.path_of(linear.digest)
    os.chmod(path, 0o644)
    path.write_bytes(linear_path.read_bytes()[:-100])
    store.put(stored.store.get(stored.backbone.digest, stored.backbone.size))
    with pytest.raises(ScorerError, match=f"{linear.digest}.*expected {linear.size}"):
        load_scorer(store, stored.backbone, linear, device="cpu")
    assert torch_loads == []


def test_refuses_sha256_prefix_disagreeing_with_name(
    stored: Stored, hub: Hub, torch_loads: list[dict[str, Any]]
) -> None:
    named = msgspec.structs.replace(
        stored.backbone, annotations={TITLE_ANNOTATION: TORCHVISION_BACKBONE_NAME}
    )
    with pytest.raises(ScorerError, match=f"SHA-256 is {hub.sha256}.*7be5be79"):
        load_scorer(stored.store, named, stored.linear, device="cpu")
    pinned = msgspec.structs.replace(stored.backbone, annotations={SHA256_ANNOTATION: "ab" * 32})
    with pytest.raises(ScorerError, match=f"SHA-256 is {hub.sha256}, expected"):
        load_scorer(stored.store, pinned, stored.linear, device="cpu")
    assert torch_loads == []
    # The right name passes.
    good = msgspec.structs.replace(
        stored.backbone,
        annotations={TITLE_ANNOTATION: hub.backbone.name, SHA256_ANNOTATION: hub.sha256},
    )
    load_scorer(stored.store, good, stored.linear, device="cpu")


def test_check_backbone_file(hub: Hub, tmp_path: Path) -> None:
    assert perceptual.check_backbone_file(hub.backbone) == hub.sha256
    with pytest.raises(ScorerError, match="does not start with 7be5be79"):
        perceptual.check_backbone_file(hub.official)
    plain = tmp_path / "alexnet.pth"
    plain.write_bytes(b"weights")
    with pytest.raises(ScorerError, match="not a torchvision weight file name"):
        perceptual.check_backbone_file(plain)
    truncated = tmp_path / hub.backbone.name
    with open(hub.backbone, "rb") as src:
        truncated.write_bytes(src.read(1 << 20))
    with pytest.raises(ScorerError, match="does not start with"):
        perceptual.check_backbone_file(truncated)


def test_refuses_old_torch(
    stored: Stored, monkeypatch: pytest.MonkeyPatch, torch_loads: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(torch, "__version__", "2.9.1+cpu")
    with pytest.raises(ScorerError, match=r"torch 2\.9\.1\+cpu is too old.*>= 2\.10"):
        load_scorer(stored.store, stored.backbone, stored.linear, device="cpu")
    assert torch_loads == []


# -- refused with clear messages before unpickling (static pre-scan) ---------------------


def _load_with(hub: Hub, linear_path: Path, *, backbone: Any = None, linear: Any = None) -> None:
    store = MemoryBlobStore()
    b = store.put(_serialised(backbone)) if backbone is not None else store.put_file(hub.backbone)
    lin = store.put(_serialised(linear)) if linear is not None else store.put_file(linear_path)
    load_scorer(store, b, lin, device="cpu")


def test_refuses_backbone_missing_tensor(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    state = {k: v for k, v in hub.state.items() if k != "classifier.1.weight"}
    with pytest.raises(
        ScorerError,
        match=r"backbone .*missing classifier\.1\.weight \[4096, 9216\].*before unpickling",
    ):
        _load_with(hub, linear_path, backbone=state)
    assert torch_loads == []


def test_refuses_backbone_misshaped_tensor(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    state = dict(hub.state)
    state["classifier.1.weight"] = torch.zeros(4096, 10)
    with pytest.raises(
        ScorerError,
        match=r"classifier\.1\.weight has shape \[4096, 10\], expected \[4096, 9216\]",
    ):
        _load_with(hub, linear_path, backbone=state)
    assert torch_loads == []


def test_refuses_linear_extra_tensor(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    state = _linear_state(linear_path)
    torch_loads.clear()
    state["lin5.model.1.weight"] = torch.zeros(1, 512, 1, 1)
    with pytest.raises(ScorerError, match=r"linear .*unexpected 'lin5\.model\.1\.weight'"):
        _load_with(hub, linear_path, linear=state)
    assert torch_loads == []  # not even the (valid) backbone was unpickled


def test_refuses_linear_missing_and_misshaped(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    state = _linear_state(linear_path)
    torch_loads.clear()
    del state["lin4.model.1.weight"]
    state["lin2.model.1.weight"] = torch.zeros(1, 383, 1, 1)
    with pytest.raises(ScorerError) as info:
        _load_with(hub, linear_path, linear=state)
    message = str(info.value)
    assert "missing lin4.model.1.weight [1, 256, 1, 1]" in message
    assert "lin2.model.1.weight has shape [1, 383, 1, 1], expected [1, 384, 1, 1]" in message
    assert "refused before unpickling" in message
    assert torch_loads == []


def test_refuses_wrong_dtype_and_non_tensors(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    state = _linear_state(linear_path)
    values = list(_linear_state(linear_path).values())
    torch_loads.clear()
    state["lin0.model.1.weight"] = state["lin0.model.1.weight"].double()
    with pytest.raises(ScorerError, match=r"lin0\.model\.1\.weight is torch\.float64"):
        _load_with(hub, linear_path, linear=state)
    with pytest.raises(ScorerError, match="before unpickling: expected a state dict, found list"):
        _load_with(hub, linear_path, linear=values)
    state["lin0.model.1.weight"] = 7
    with pytest.raises(ScorerError, match=r"lin0\.model\.1\.weight is a int, expected a tensor"):
        _load_with(hub, linear_path, linear=state)
    assert torch_loads == []


def test_post_load_checks_remain(
    hub: Hub, linear_path: Path, monkeypatch: pytest.MonkeyPatch, torch_loads: list[dict[str, Any]]
) -> None:
    # Defence in depth: with the pre-scan bypassed, the loaded state is checked again.
    monkeypatch.setattr(perceptual.loader, "_prescan", lambda *args: None)
    state = _linear_state(linear_path)
    del state["lin4.model.1.weight"]
    state["lin2.model.1.weight"] = torch.zeros(1, 383, 1, 1)
    with pytest.raises(ScorerError) as info:
        _load_with(hub, linear_path, linear=state)
    message = str(info.value)
    assert "missing lin4.model.1.weight [1, 256, 1, 1]" in message
    assert "lin2.model.1.weight has shape [1, 383, 1, 1]" in message
    assert "before unpickling" not in message
    assert torch_loads[-1] == {"weights_only": True, "map_location": "cpu"}


def _shapes(state: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {k: (str(v.dtype).removeprefix("torch."), tuple(v.shape)) for k, v in state.items()}


def test_scan_state_dict_reads_torch_save_output(
    hub: Hub, linear_path: Path, torch_loads: list[dict[str, Any]]
) -> None:
    scanned = perceptual.scan_state_dict(hub.backbone.read_bytes())
    assert list(scanned.items()) == list(_shapes(hub.state).items())  # same order
    # lpips's alex.pth is in torch's legacy (pre-zip) format.
    linear_bytes = linear_path.read_bytes()
    assert not linear_bytes.startswith(b"PK\x03\x04")
    scanned = perceptual.scan_state_dict(linear_bytes)
    assert scanned == {k: ("float32", v) for k, v in perceptual.LINEAR_SHAPES.items()}
    assert torch_loads == []
    assert list(scanned.items()) == list(_shapes(_linear_state(linear_path)).items())
    # Other dtypes, views, scalars, empty and shared storages; both formats.
    base = torch.arange(12, dtype=torch.float64)
    various = {
        "view": base[3:7],
        "same": base.view(3, 4),
        "transposed": torch.zeros(4, 5).t(),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 5),
        "half": torch.ones(2, 3, dtype=torch.bfloat16),
        "long": torch.arange(3),
        "flags": torch.tensor([True, False]),
    }
    for zipped in (True, False):
        buf = io.BytesIO()
        torch.save(various, buf, _use_new_zipfile_serialization=zipped)
        assert perceptual.scan_state_dict(buf.getvalue()) == _shapes(various), zipped


def test_scan_state_dict_refuses_malformed_files(hub: Hub) -> None:
    data = hub.backbone.read_bytes()
    with pytest.raises(ScorerError, match="W: refused before unpickling: not a torch file"):
        perceptual.scan_state_dict(b"garbage", "W")
    with pytest.raises(ScorerError, match="refused before unpickling: unreadable zip archive"):
        perceptual.scan_state_dict(data[: len(data) // 2], "W")
    with pytest.raises(ScorerError, match="malformed pickle"):
        perceptual.scan_state_dict(_serialised({"x": torch.zeros(2)}, legacy=True)[:40])
    # A storage record shorter than its tensors need.
    buf = io.BytesIO()
    original = io.BytesIO(_serialised({"x": torch.zeros(4)}))
    with zipfile.ZipFile(original) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info, body[:8] if info.filename.endswith("data/0") else body)
    with pytest.raises(ScorerError, match=r"storage record archive/data/0 is 8 bytes, expected 16"):
        perceptual.scan_state_dict(buf.getvalue())
    # A tensor claiming more elements than its storage holds.
    short = _serialised({"x": torch.zeros(4)}, legacy=True).replace(b"K\x04\x85", b"K\x09\x85", 1)
    with pytest.raises(ScorerError, match=r"tensor .*reaches past its storage of 4 elements"):
        perceptual.scan_state_dict(short)
    # A dict key whose hash would take 2**80 steps (tuples of memoised tuples): refused
    # at once, as any key other than a str or int.
    nested = b"\x80\x02}q\x00)q\x01" + b"".join(
        b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]) for i in range(1, 81)
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        dst.writestr("archive/data.pkl", nested + b"Ns.")
    with pytest.raises(ScorerError, match=r"dict key \(tuple\) at byte \d+ is not a string"):
        perceptual.scan_state_dict(buf.getvalue())


class _SystemPayload:
    """Unpickling this runs ``os.system``: it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {str(self.marker)!r}",))


@pytest.mark.parametrize("container", ["torch.save", "pickle"])
def test_prescan_refuses_unexpected_global_executing_nothing(
    container: str,
    stored: Stored,
    linear_path: Path,
    tmp_path: Path,
    torch_loads: list[dict[str, Any]],
) -> None:
    marker = tmp_path / "pwned"
    # The payload first, so that it is the first global met, also in a plain pickle.
    state: dict[str, Any] = {"payload": _SystemPayload(marker), **_linear_state(linear_path)}
    torch_loads.clear()
    data = _serialised(state) if container == "torch.save" else pickle.dumps(state)
    with pytest.raises(ScorerError, match=r"unexpected global '(os|posix|nt) system'"):
        perceptual.scan_state_dict(data)
    linear = stored.store.put(data)
    with pytest.raises(ScorerError) as info:
        load_scorer(stored.store, stored.backbone, linear, device="cpu")
    message = str(info.value)
    assert f"LPIPS linear weights {linear.digest}: refused before unpickling" in message
    assert "system'" in message and "nothing was unpickled or executed" in message
    assert not marker.exists()
    assert torch_loads == []


class _Payload:
    """Unpickling this runs code: it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (builtins.exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("layer", ["pre-scan", "weights-only loader"])
@pytest.mark.parametrize("container", ["torch.save", "pickle"])
def test_code_execution_payload_is_refused_even_when_pinned(
    container: str,
    layer: str,
    stored: Stored,
    linear_path: Path,
    tmp_path: Path,
    torch_loads: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = tmp_path / "pwned"
    state: dict[str, Any] = _linear_state(linear_path)
    state["payload"] = _Payload(marker)
    data = _serialised(state) if container == "torch.save" else pickle.dumps(state)
    # Control: the payload is real, an unrestricted load runs it.
    control = tmp_path / "control"
    control_state = {"payload": _Payload(control)}
    control_data = (
        _serialised(control_state) if container == "torch.save" else pickle.dumps(control_state)
    )
    if container == "torch.save":
        torch.load(io.BytesIO(control_data), weights_only=False)
    else:
        pickle.loads(control_data)
    assert control.exists()
    torch_loads.clear()

    linear = stored.store.put(data)  # stored and pinned by its digest: integrity holds
    # torch's opt-out of weights-only loading cannot override the explicit weights_only=True.
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    if layer == "pre-scan":
        expected = f"linear weights {linear.digest}: refused before unpickling: unexpected global"
    else:
        # Either layer alone refuses it: bypass the static pre-scan.
        monkeypatch.setattr(perceptual.loader, "_prescan", lambda *args: None)
        expected = f"linear weights {linear.digest}: refused by torch's weights-only loader"
    with pytest.raises(ScorerError, match=expected):
        load_scorer(stored.store, stored.backbone, linear, device="cpu")
    assert not marker.exists()
    if layer == "pre-scan":
        assert torch_loads == []
    else:
        assert torch_loads[-1] == {"weights_only": True, "map_location": "cpu"}


# -- scoring input -----------------------------------------------------------------------


def test_score_refuses_bad_frames(scorer: LpipsScorer) -> None:
    a = _frames(9, n=2)
    with pytest.raises(ScorerError, match="uint8"):
        scorer.score(a.astype(np.float32), a)
    with pytest.raises(ScorerError, match=r"expected \(N, H, W, 3\)"):
        scorer.score(a[..., :2], a[..., :2])
    with pytest.raises(ScorerError, match="differ in shape"):
        scorer.score(a, a[:1])
    tiny = np.zeros((1, 8, 8, 3), np.uint8)
    with pytest.raises(ScorerError, match="cannot score 8x8 frames"):
        scorer.score(tiny, tiny + 1)


def test_score_accepts_non_contiguous_views(scorer: LpipsScorer) -> None:
    a, b = _frames(10, n=2, size=96), _frames(11, n=2, size=96)
    view_a, view_b = a[:, ::-1, 16:80], b[:, ::-1, 16:80]
    assert scorer.score(view_a, view_b) == scorer.score(
        np.ascontiguousarray(view_a), np.ascontiguousarray(view_b)
    )


# -- configuration and CLI ---------------------------------------------------------------


@pytest.fixture
def repo_as_cwd(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The empty evidence repository as the working directory (no ``--root``)."""
    monkeypatch.chdir(repo)
    return repo


def _toml(root: Path) -> dict[str, Any]:
    path = root / "evstore.toml"
    return tomllib.loads(path.read_text()) if path.exists() else {}


def test_unconfigured_scorer_says_how_to_import(repo_as_cwd: Path) -> None:
    with pytest.raises(ScorerError) as info:
        load_configured_scorer(repo_as_cwd)
    message = str(info.value)
    assert (
        "no LPIPS weights are configured" in message
        and str(repo_as_cwd / "evstore.toml") in message
    )
    assert f"evstore lpips import --backbone .../{TORCHVISION_BACKBONE_NAME}" in message


def test_cli_show_without_weights_exits_2(
    repo_as_cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lpips", "show"]) == 2
    assert "evstore lpips import --backbone" in capsys.readouterr().err


def test_cli_import_pins_weights(
    repo_as_cwd: Path,
    hub: Hub,
    linear_path: Path,
    scorer: LpipsScorer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (repo_as_cwd / "evstore.toml").write_text(
        '[store]\npath = "blobs"\n\n[remotes.team]\nurl = "memory://team"\n'
    )
    assert main(["lpips", "import", "--backbone", str(hub.backbone)]) == 0
    out = capsys.readouterr().out
    assert scorer.state_digest in out and "not torchvision's release file name" in out

    config = _toml(repo_as_cwd)
    assert config["remotes"]["team"]["url"] == "memory://team"  # the rest is kept
    section = config["lpips"]
    backbone_hash, linear_hash = hash_file(hub.backbone), hash_file(linear_path)
    assert section["backbone"]["digest"] == backbone_hash.digest
    assert section["backbone"]["size"] == backbone_hash.size
    assert section["backbone"]["annotations"] == {
        TITLE_ANNOTATION: hub.backbone.name,
        SHA256_ANNOTATION: hub.sha256,
    }
    assert section["linear"]["digest"] == linear_hash.digest
    assert section["linear"]["size"] == linear_hash.size
    assert section["state_digest"] == scorer.state_digest
    store = LocalBlobStore(repo_as_cwd / "blobs")
    assert store.has(backbone_hash.digest) and store.has(linear_hash.digest)

    loaded = load_configured_scorer(repo_as_cwd)
    assert loaded.state_digest == scorer.state_digest
    a, b = _frames(12, n=2), _frames(13, n=2)
    assert loaded.score(a, b) == pytest.approx(scorer.score(a, b), rel=1e-4)

    assert main(["lpips", "show"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out)
    assert shown["state_digest"] == scorer.state_digest
    assert shown["backbone_digest"] == backbone_hash.digest


def test_cli_show_prints_the_pin_without_torch_and_load_checks_the_weights(
    repo_as_cwd: Path,
    hub: Hub,
    linear_path: Path,
    scorer: LpipsScorer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import importlib.metadata

    assert main(["lpips", "import", "--backbone", str(hub.backbone)]) == 0
    capsys.readouterr()
    # A process of its own: `lpips show` imports neither torch nor numpy.
    code = (
        "import sys; from evidencestore.cli import main\n"
        f"code = main(['lpips', 'show', '--root', {str(repo_as_cwd)!r}])\n"
        "heavy = ('torch', 'torchvision', 'lpips', 'numpy', 'av')\n"
        "print(code, sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    *printed, last = out.stdout.splitlines()
    assert last == "0 []"
    backbone_hash, linear_hash = hash_file(hub.backbone), hash_file(linear_path)
    pinned = {
        "scorer": "lpips",
        "net": "alex",
        "model_version": "0.1",
        "backbone_digest": backbone_hash.digest,
        "backbone_size": str(backbone_hash.size),
        "backbone_file": hub.backbone.name,
        "backbone_sha256": hub.sha256,
        "backbone_local_size": backbone_hash.size,
        "linear_digest": linear_hash.digest,
        "linear_size": str(linear_hash.size),
        "linear_file": linear_path.name,
        "linear_sha256": hashlib.sha256(linear_path.read_bytes()).hexdigest(),
        "linear_local_size": linear_hash.size,
        "state_digest": scorer.state_digest,
        "torch": importlib.metadata.version("torch"),
        "torchvision": importlib.metadata.version("torchvision"),
        "lpips": importlib.metadata.version("lpips"),
    }
    assert msgspec.json.decode("\n".join(printed)) == pinned

    # --load loads and checks the scorer: the loaded provenance is added.
    assert main(["lpips", "show", "--load"]) == 0
    loaded = msgspec.json.decode(capsys.readouterr().out)
    assert loaded == {**pinned, **scorer.provenance()}
    assert loaded["device"] == scorer.device and loaded["torch"] == str(torch.__version__)

    # A corrupted backbone of the pinned size: show reads no weights, so it still prints
    # the pin; only --load re-verifies the bytes, and refuses them.
    store = LocalBlobStore(repo_as_cwd / ".evstore")
    blob = store.path_of(backbone_hash.digest)
    blob.chmod(0o644)
    with open(blob, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 1]))
    assert main(["lpips", "show"]) == 0
    assert msgspec.json.decode(capsys.readouterr().out) == pinned
    assert main(["lpips", "show", "--load"]) == 2
    err = capsys.readouterr().err
    assert f"LPIPS backbone weights {backbone_hash.digest}" in err

    # A weight file the local store does not hold is shown as such (null).
    store.delete(linear_hash.digest)
    assert main(["lpips", "show"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out)
    assert shown["linear_local_size"] is None and shown["linear_digest"] == linear_hash.digest


def test_configured_scorer_reads_through_a_remote(
    repo_as_cwd: Path, hub: Hub, scorer: LpipsScorer, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidencestore.storage import FsspecBlobStore

    # Import pins the weights; then they exist only on a remote, not locally.
    assert main(["lpips", "import", "--backbone", str(hub.backbone)]) == 0
    capsys.readouterr()
    config = (repo_as_cwd / "evstore.toml").read_text()
    url = f"memory://lpips-remote-{os.getpid()}-{id(repo_as_cwd)}"
    remote = FsspecBlobStore(url)
    local = LocalBlobStore(repo_as_cwd / ".evstore")
    for digest in list(local.iter_digests()):
        remote.put(local.get(digest))
        local.delete(digest)
    (repo_as_cwd / "evstore.toml").write_text(config + f'\n[remotes.team]\nurl = "{url}"\n')
    try:
        loaded = load_configured_scorer(repo_as_cwd)
        assert loaded.state_digest == scorer.state_digest
        assert local.has(loaded.backbone.digest) and local.has(loaded.linear.digest)  # cached
    finally:
        for digest in list(remote.iter_digests()):
            remote.delete(digest)


def test_cli_import_state_digest_option(
    repo_as_cwd: Path, hub: Hub, scorer: LpipsScorer, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "blake3:" + "1" * 64
    assert main(["lpips", "import", "--backbone", str(hub.backbone), "--state-digest", wrong]) == 2
    assert f"but {wrong} is pinned" in capsys.readouterr().err
    assert "lpips" not in _toml(repo_as_cwd)
    args = ["lpips", "import", "--backbone", str(hub.backbone), "--no-pin-state"]
    assert main(args) == 0
    assert "state_digest" not in _toml(repo_as_cwd)["lpips"]
    args = [
        "lpips",
        "import",
        "--backbone",
        str(hub.backbone),
        "--state-digest",
        scorer.state_digest,
    ]
    assert main(args) == 0
    assert _toml(repo_as_cwd)["lpips"]["state_digest"] == scorer.state_digest


def test_cli_import_refuses_name_hash_mismatch(
    repo_as_cwd: Path,
    hub: Hub,
    torch_loads: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lpips", "import", "--backbone", str(hub.official)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evstore: error: ")
    assert f"SHA-256 is {hub.sha256}" in err and "does not start with 7be5be79" in err
    assert str(hub.official) in err
    assert not (repo_as_cwd / "evstore.toml").exists()
    assert not (repo_as_cwd / ".evstore").exists()
    assert torch_loads == []


def test_cli_import_refuses_bad_paths(
    repo_as_cwd: Path, hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "alexnet.pth"
    os.link(hub.backbone, plain)
    assert main(["lpips", "import", "--backbone", str(plain)]) == 2
    assert "not a torchvision weight file name" in capsys.readouterr().err
    assert main(["lpips", "import", "--backbone", str(tmp_path / "nope-12345678.pth")]) == 2
    assert "no such backbone file" in capsys.readouterr().err
    args = ["lpips", "import", "--backbone", str(hub.backbone), "--linear", str(tmp_path / "x")]
    assert main(args) == 2
    assert "no such linear weights file" in capsys.readouterr().err
    assert not (repo_as_cwd / "evstore.toml").exists()


def test_cli_import_refuses_malformed_linear(
    repo_as_cwd: Path,
    hub: Hub,
    linear_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = _linear_state(linear_path)
    del state["lin1.model.1.weight"]
    bad = tmp_path / "alex.pth"
    torch.save(state, bad)
    args = ["lpips", "import", "--backbone", str(hub.backbone), "--linear", str(bad)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "missing lin1.model.1.weight [1, 192, 1, 1]" in err
    assert "refused before unpickling" in err
    assert not (repo_as_cwd / "evstore.toml").exists()


def test_import_evidencestore_needs_no_torch() -> None:
    code = (
        "import sys, evidencestore, evidencestore.perceptual as p, evidencestore.cli.lpips\n"
        "path = p.default_linear_path()\n"
        "assert path.name == 'alex.pth' and path.parent.name == 'v0.1', path\n"
        "bad = [m for m in ('torch', 'torchvision', 'lpips', 'numpy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- media comparison ----------------------------------------------------------------------


def _clips(tmp_path: Path) -> tuple[str, str]:
    pytest.importorskip("av")
    from evidencestore.testing.synth import VideoSpec, write_clip

    video = VideoSpec(width=64, height=64, frames=6, options={"qp": "0", "preset": "ultrafast"})

    def smudge(index: int, planes: np.ndarray) -> np.ndarray:
        if index == 3:
            planes = planes.copy()
            planes[8:40, 8:40] = 255 - planes[8:40, 8:40]
        return planes

    ref = write_clip(tmp_path / "ref.mp4", video=video)
    cand = write_clip(tmp_path / "cand.mp4", video=video, video_hook=smudge)
    return ref, cand


def test_media_comparison_records_lpips(scorer: LpipsScorer, tmp_path: Path) -> None:
    from evidencestore.media import FrameScorer, compare
    from evidencestore.media.records import Expectations, Thresholds, VideoExpectation

    assert isinstance(scorer, FrameScorer)
    ref, cand = _clips(tmp_path)
    expect = Expectations(video=VideoExpectation(width=64, height=64, frames=6))
    lenient = Thresholds(video_psnr_min=0.0, perceptual_max={"lpips": 10.0})
    record = compare(ref, cand, expect, lenient, scorers=[scorer])
    assert record.verdict == "INCONCLUSIVE"  # every threshold met, still not PASS
    assert record.scorers == {"lpips": scorer.provenance()}
    assert record.metrics is not None and record.metrics.video is not None
    per_frame = [f.perceptual["lpips"] for f in record.metrics.video.per_frame]
    assert per_frame[:3] == [0.0] * 3 and per_frame[4:] == [0.0] * 2 and per_frame[3] > 0
    summary = record.metrics.video.perceptual["lpips"]
    assert summary.frames == 6 and summary.max == per_frame[3]

    strict = Thresholds(video_psnr_min=0.0, perceptual_max={"lpips": per_frame[3] / 2})
    failed = compare(ref, cand, expect, strict, scorers=[scorer])
    assert failed.verdict == "FAIL"
    assert any(c.name == "threshold.perceptual.lpips" and not c.ok for c in failed.threshold_checks)


def test_cli_media_compare_lpips(
    repo_as_cwd: Path, hub: Hub, scorer: LpipsScorer, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, cand = _clips(repo_as_cwd)
    args = ["media", "compare", ref, cand, "--frames", "6", "--lpips", "--json"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no LPIPS weights are configured" in err and "evstore lpips import --backbone" in err

    assert main(["lpips", "import", "--backbone", str(hub.backbone)]) == 0
    capsys.readouterr()
    code = main([*args, "--thresholds", str(_thresholds(repo_as_cwd))])
    record = msgspec.json.decode(capsys.readouterr().out)
    assert code == 3 and record["verdict"] == "INCONCLUSIVE"
    provenance = record["scorers"]["lpips"]
    assert provenance["state_digest"] == scorer.state_digest
    assert provenance["backbone_digest"] == hash_file(hub.backbone).digest


def _thresholds(root: Path) -> Path:
    path = root / "thresholds.toml"
    path.write_text("video_psnr_min = 0.0\n\n[perceptual_max]\nlpips = 10.0\n")
    return path
