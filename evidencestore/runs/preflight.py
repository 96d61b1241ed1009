"""A run's pre-flight: everything checked before anything is sent, once, for ``evstore
run``, ``evstore run --launch`` (before the server is even started) and the library
(``run_workload``, ``launch_and_run``), with one set of error texts.

In order: the server URL; the workload, every value and input file of it (``workload.py``);
the configuration files and server logs by the one file-reading rule (``confined.py``);
the campaign's rules (condition, arm, workload digest, declared configuration files:
``fit.CampaignRules``; then who may sign its runs: ``fit.check_signer``); for a run that
starts its server, the server it starts (its command and ``[server] cwd``:
:class:`ServerLaunch`); then the run is opened (``RunRecorder``: the name checked free,
the workload stored). An error raises, registers nothing and leaves nothing open. The
recorder returned is the run's: the runner records into it, and a launched server that
never gets ready seals it as the failed run it is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack
from urllib.parse import urlsplit

from .._keywords import check_keywords
from ..confined import MAX_CONTROL_FILE, MAX_LOG_FILE, check_file
from ..errors import ConfigError, WorkloadError
from .fit import CampaignRules, check_signer
from .recorder import RunRecorder
from .workload import LoadedWorkload, load_workload

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..config import Repository
    from ..storage import LocalBlobStore

__all__ = ["Prepared", "RunOptions", "ServerLaunch", "check_server_url", "preflight"]


class RunOptions(TypedDict, total=False):
    """What a run may be given besides its workload, arm, server and name, as keywords
    (every entry point passes them to :func:`preflight`, which checks them): ``configs``
    (the arm's configuration files), ``server_logs``, ``campaign`` (its rules,
    ``evidencestore.campaign.campaign_rules(root, NAME)``), ``protocol_digest``,
    ``condition``, ``store`` (default: the repository's local store) and ``signing_key``
    (signs the record, ``run.dsse.json``)."""

    configs: Sequence[str | os.PathLike[str]]
    server_logs: Sequence[str | os.PathLike[str]]
    campaign: CampaignRules | None
    protocol_digest: str | None
    condition: str | None
    store: LocalBlobStore | None
    signing_key: Ed25519PrivateKey | None


@dataclass(frozen=True)
class ServerLaunch:
    """The server a run starts itself: its argv (no shell) and working directory."""

    argv: tuple[str, ...]
    cwd: Path


@dataclass(frozen=True)
class Prepared:
    """A run that passed its pre-flight: the server's base URL, the workload, the files
    to attach, the run's recorder (opened; nothing registered yet) and the server it
    starts (None: the server is running already)."""

    base: str
    loaded: LoadedWorkload
    configs: tuple[str | os.PathLike[str], ...]
    server_logs: tuple[str | os.PathLike[str], ...]
    recorder: RunRecorder
    launch: ServerLaunch | None = None


def check_server_url(url: str) -> str:
    """Return ``url`` without a trailing slash if it is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{{server}} {url!r}: expected an http:// or https:// URL with a host",
            parameters=("server",),
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"{{server}} {url!r}: give the base URL only (no query or fragment)",
            parameters=("server",),
        )
    return url.rstrip("/")


def preflight(
    repo: Repository,
    workload_path: str | os.PathLike[str],
    *,
    arm: str,
    server: str,
    name: str,
    command: Sequence[str] | None = None,
    launch: bool | None = False,
    **options: Unpack[RunOptions],
) -> Prepared:
    """Check everything a run is given and open it (see the module). ``launch``: False,
    the server is running already; True, the run starts it (``command``, else the
    workload's ``[server] command``); None, it does when either names one."""
    check_keywords("preflight", options, RunOptions)
    configs = options.get("configs", ())
    server_logs = options.get("server_logs", ())
    campaign = options.get("campaign")
    protocol_digest = options.get("protocol_digest")
    condition = options.get("condition")
    base = check_server_url(server)
    store = options.get("store")
    store = store if store is not None else repo.local_store()
    loaded = load_workload(workload_path, roots=(repo.root,), store=store)
    for parameter, path in [
        *(("configs", c) for c in configs),
        *(("server_logs", g) for g in server_logs),
    ]:
        if not os.path.lexists(path):
            raise ConfigError(f"{{{parameter}}} {path}: no such file", parameters=(parameter,))
    for path, limit, parameter in [
        *((g, MAX_LOG_FILE, "server_logs") for g in server_logs),
        *((c, MAX_CONTROL_FILE, "configs") for c in configs),
    ]:
        check_file(
            path,
            (repo.root, Path(path).absolute().parent),
            limit=limit,
            where=f"{{{parameter}}} {path}",
            parameters=(parameter,),
        )
    if campaign is not None:
        protocol_digest = _fits(
            campaign, workload_path, loaded, arm, condition, configs, protocol_digest
        )
        check_signer(campaign, repo.root, options.get("signing_key"))
    started = _server_launch(loaded, command, launch)
    recorder = RunRecorder(
        repo,
        name,
        arm=arm,
        workload=loaded.descriptor,
        workload_bytes=loaded.data,
        tokenizer=loaded.tokenizer,
        store=store,
        campaign=campaign.name if campaign is not None else None,
        protocol_digest=protocol_digest,
        condition=condition,
        signing_key=options.get("signing_key"),
    )
    return Prepared(base, loaded, tuple(configs), tuple(server_logs), recorder, started)


def _server_launch(
    loaded: LoadedWorkload, command: Sequence[str] | None, launch: bool | None
) -> ServerLaunch | None:
    """The server the run starts (see :func:`preflight`), its command and working
    directory checked; None when it starts none."""
    if launch is False:
        return None
    section = loaded.workload.server
    argv = tuple(command) if command else None
    if argv is None and section is not None and section.command:
        argv = section.command
    if argv is None:
        if launch is None:
            return None
        raise WorkloadError(
            f'workload {loaded.path}: no server to launch: give {{command}} "CMD ..." or '
            "[server] command = [...]",
            parameters=("command",),
        )
    where = section.cwd if section is not None else None
    cwd = (loaded.path.absolute().parent / where) if where else Path.cwd()
    if not cwd.is_dir():
        raise WorkloadError(f"workload {loaded.path}: [server] cwd {where!r}: not a directory")
    return ServerLaunch(argv, cwd)


def _fits(
    rules: CampaignRules | str,
    workload_path: str | os.PathLike[str],
    loaded: LoadedWorkload,
    arm: str,
    condition: str | None,
    configs: Sequence[str | os.PathLike[str]],
    protocol_digest: str | None,
) -> str:
    """The protocol digest of the campaign, once the run fits its rules."""
    from ..digest import hash_file

    if isinstance(rules, str):
        raise ConfigError(
            f"campaign={rules!r}: pass the campaign's rules, "
            f"evidencestore.campaign.campaign_rules(root, {rules!r}), so the run is checked "
            "against its protocol before anything is sent"
        )
    digests = []
    for config in configs:
        try:
            digests.append(hash_file(config).digest)
        except OSError as exc:
            raise ConfigError(
                f"{{configs}} {config}: cannot read: {exc.strerror}", parameters=("configs",)
            ) from exc
    rules.check_run(
        arm=arm,
        condition=condition,
        workload_digest=loaded.descriptor.digest,
        config_digests=digests,
        workload_source=os.fspath(workload_path),
    )
    if protocol_digest is not None and protocol_digest != rules.digest:
        raise ConfigError(
            f"protocol digest {protocol_digest}: campaign {rules.name!r} is protocol {rules.digest}"
        )
    return rules.digest
