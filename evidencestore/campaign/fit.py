"""Whether a run fits its campaign, checked before anything is sent.

A run that names a campaign must name a condition and an arm the protocol declares, run
the workload that condition binds (byte for byte: its digest), and carry exactly the
configuration files its arm declares, when the arm declares any. ``run_workload`` applies
:func:`check_run_fits`, so a library caller gets the refusals ``evstore run --campaign``
gives, before a long run rather than as an exclusion from ``campaign status`` afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import ConfigError, ManifestError
from .protocol import PROTOCOL_ENTRY, Campaign, load_campaign

__all__ = ["check_run_fits"]


def check_run_fits(
    root: str | os.PathLike[str],
    campaign: str,
    *,
    arm: str,
    condition: str | None,
    workload_digest: str,
    config_digests: Sequence[str] = (),
    workload_source: str = "the workload",
) -> Campaign:
    """Return campaign ``campaign`` (its protocol registered in ``root``) once a run of
    ``arm`` under ``condition``, of the workload with ``workload_digest`` and the
    configuration files with ``config_digests``, fits it; raise :class:`ConfigError`
    naming what does not fit otherwise."""
    from ..inventory import load_registration, registration_path

    if not condition:
        raise ConfigError("--campaign needs --condition (the protocol condition this run is for)")
    hint = f"run `evstore campaign init {campaign} --protocol FILE` first"
    try:
        registration = load_registration(registration_path(root, campaign))
    except ManifestError as exc:
        raise ConfigError(
            f"--campaign {campaign}: no campaign bundle {campaign!r} ({exc}); {hint}"
        ) from None
    if not any(e.path == PROTOCOL_ENTRY for e in registration.manifest.entries):
        raise ConfigError(
            f"--campaign {campaign}: bundle {campaign!r} has no {PROTOCOL_ENTRY} entry; {hint}"
        )
    try:
        loaded = load_campaign(root, campaign)
    except ManifestError as exc:
        raise ConfigError(f"--campaign {campaign}: {exc}") from None
    conditions = {c.name: c for c in loaded.protocol.condition}
    if condition not in conditions:
        raise ConfigError(
            f"--condition {condition!r}: campaign {campaign!r} declares the conditions "
            f"{', '.join(sorted(conditions))}"
        )
    arms = sorted(a.name for a in loaded.protocol.arm)
    if arm not in arms:
        raise ConfigError(
            f"--arm {arm!r}: campaign {campaign!r} declares the arms {', '.join(arms)}"
        )
    bound = loaded.workload_digest(condition)
    if workload_digest != bound:
        raise ConfigError(
            f"workload {workload_source} hashes to {workload_digest}, but campaign {campaign!r} "
            f"binds condition {condition!r} to {conditions[condition].workload} ({bound})"
        )
    declared = loaded.config_digests(arm)
    if declared and frozenset(config_digests) != declared:
        names = ", ".join(loaded.arm(arm).configs)
        raise ConfigError(
            f"--config: campaign {campaign!r} declares the configuration files {names} for arm "
            f"{arm!r}; the files given ({len(config_digests)}) are not those, byte for byte"
        )
    return loaded
