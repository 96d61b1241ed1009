"""``evstore`` subcommands: lpips.

``evstore lpips import --backbone PATH [--linear PATH] [--state-digest DIGEST]
[--no-pin-state]`` stores both weight files in the local blob store, trial-loads the
scorer from the stored bytes and pins the descriptors (and the scorer-state digest) in
``evstore.toml`` ``[lpips]``. ``evstore lpips show [--load]`` prints the pinned
provenance as JSON and whether the local store holds each weight file, without importing
torch or reading the weights; ``--load`` loads the scorer as a comparison would (re-verify,
scan, deserialise, check the scorer-state digest) and adds the loaded provenance.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError, ScorerError
from ._common import ROOT, Commands, arg, found_repository, switch


def register(commands: Commands) -> None:
    """Add this module's subcommands to the ``evstore`` parser."""
    lsub = commands.group(
        "lpips",
        description="Manage the LPIPS (AlexNet, v0.1) weights pinned in evstore.toml.",
    )
    lsub.add(
        "import",
        _import,
        [
            arg(
                "--backbone",
                required=True,
                metavar="PATH",
                help="torchvision's alexnet-owt-7be5be79.pth; its SHA-256 must start with the "
                "hex prefix in its file name",
            ),
            arg(
                "--linear",
                metavar="PATH",
                help="lpips's linear weights (default: weights/v0.1/alex.pth of the installed "
                "lpips)",
            ),
            arg(
                "--state-digest",
                metavar="DIGEST",
                help="refuse the import unless the loaded scorer's state digest is this one",
            ),
            switch(
                "--no-pin-state",
                help="do not pin the scorer-state digest in evstore.toml (the weight digests are)",
            ),
            ROOT,
        ],
        help="store the LPIPS weight files and pin them in evstore.toml",
        description=(
            "Store torchvision's AlexNet backbone and lpips's linear weights in the local "
            "blob store, trial-load the scorer from the stored bytes, and pin both "
            "descriptors and the scorer-state digest in evstore.toml [lpips]."
        ),
    )
    lsub.add(
        "show",
        _show,
        [
            switch(
                "--load",
                help="also load the scorer as a comparison would: re-verify both weight files "
                "(BLAKE3, SHA-256, static scan), deserialise them with torch and check the "
                "pinned scorer-state digest (imports torch; reads the 244 MB backbone)",
            ),
            ROOT,
        ],
        help="print the pinned LPIPS scorer's provenance (--load: load and check it)",
        description=(
            "Print the LPIPS provenance pinned in evstore.toml [lpips] as JSON: the weight "
            "descriptors, the pinned scorer-state digest, the installed torch, torchvision "
            "and lpips versions, and the size of the blob the local store holds under each "
            "pinned digest (null: not held locally, fetched from the remotes on load). "
            "Nothing is imported or read from the weights unless --load is given."
        ),
    )


def _import(args: argparse.Namespace) -> int:
    import msgspec

    from ..config import LpipsConfig, save_config
    from ..digest import parse_digest
    from ..perceptual import (
        SHA256_ANNOTATION,
        TITLE_ANNOTATION,
        TORCHVISION_BACKBONE_NAME,
        check_backbone_file,
        default_linear_path,
        load_scorer,
        sha256_file,
    )

    root = found_repository(args)
    config = root.config  # an unusable evstore.toml is reported before any work
    pinned = parse_digest(args.state_digest) if args.state_digest is not None else None
    backbone_path = Path(args.backbone)
    if not backbone_path.is_file():
        raise ConfigError(f"{backbone_path}: no such backbone file")
    try:
        linear_path = Path(args.linear) if args.linear is not None else default_linear_path()
    except ScorerError as exc:
        raise ScorerError(f"{exc} (--linear PATH)") from None
    if not linear_path.is_file():
        raise ConfigError(f"{linear_path}: no such linear weights file")

    backbone_sha = check_backbone_file(backbone_path)
    linear_sha = sha256_file(linear_path)
    store = root.local_store()
    backbone = store.put_file(backbone_path)
    backbone = msgspec.structs.replace(
        backbone,
        annotations={TITLE_ANNOTATION: backbone_path.name, SHA256_ANNOTATION: backbone_sha},
    )
    linear = store.put_file(linear_path)
    linear = msgspec.structs.replace(
        linear, annotations={TITLE_ANNOTATION: linear_path.name, SHA256_ANNOTATION: linear_sha}
    )
    # Trial load from the stored bytes: malformed weights are refused before pinning.
    scorer = load_scorer(store, backbone, linear, state_digest=pinned, device="cpu")

    lpips = LpipsConfig(
        backbone=backbone,
        linear=linear,
        state_digest=None if args.no_pin_state else scorer.state_digest,
    )
    path = save_config(root, msgspec.structs.replace(config, lpips=lpips))
    note = (
        ""
        if backbone_path.name == TORCHVISION_BACKBONE_NAME
        else (f" (not torchvision's release file name {TORCHVISION_BACKBONE_NAME})")
    )
    print(f"backbone {backbone.digest} {backbone.size} bytes  {backbone_path}{note}")
    print(f"linear   {linear.digest} {linear.size} bytes  {linear_path}")
    state = "not pinned" if args.no_pin_state else "pinned"
    print(f"scorer state {scorer.state_digest} ({state})")
    print(f"wrote [lpips] to {path}")
    return 0


def _show(args: argparse.Namespace) -> int:
    import json

    from ..perceptual import load_configured_scorer, pinned_provenance

    repo = found_repository(args)
    shown: dict[str, object] = dict(pinned_provenance(repo))
    if args.load:
        scorer = load_configured_scorer(repo)
        shown.update(scorer.provenance())
        # Loading fetched any weights the local store lacked: say what it holds now.
        store = repo.local_store()
        shown["backbone_local_size"] = store.size(scorer.backbone.digest)
        shown["linear_local_size"] = store.size(scorer.linear.digest)
    print(json.dumps(shown, indent=2, sort_keys=True))
    return 0
