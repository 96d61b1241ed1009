"""``evstore`` subcommands for remotes: remote, push, pull, fetch, cat, gc."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._grace import DEFAULT_GRACE
from ..errors import ConfigError, IntegrityError, RemoteConfigError
from ._common import (
    BUNDLES,
    EXIT_OK,
    NAME,
    ROOT,
    Commands,
    arg,
    json_flag,
    reader_gone,
    repeatable,
    repo_root,
    switch,
    verbosity,
)

if TYPE_CHECKING:
    from ..config import Repository


def _jobs(args: argparse.Namespace) -> int:
    from ..storage.transfer import DEFAULT_JOBS

    jobs: int | None = args.jobs
    if jobs is None:
        return DEFAULT_JOBS
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    return jobs


# -- remote ------------------------------------------------------------------------
def _cmd_remote_add(args: argparse.Namespace) -> int:
    import msgspec

    from ..config import (
        CONFIG_NAME,
        LOCAL_CONFIG_NAMES,
        RemoteConfig,
        load_config,
        parse_option,
        remote_name_problem,
        save_config,
        url_problem,
    )

    root = repo_root(args)
    # The file the remote is written to: the refusal of a secret names it.
    target = LOCAL_CONFIG_NAMES[-1] if args.local else CONFIG_NAME
    from ..remotes import remote_url_problem

    problem = (
        remote_name_problem(args.name)
        or url_problem(args.url, target=target)
        or remote_url_problem(args.url)
    )
    if problem:
        raise RemoteConfigError(f"remote {args.name!r}: {problem}")
    merged = root.config
    if args.name in merged.remotes and not args.force:
        raise RemoteConfigError(
            f"remote {args.name!r} already exists ({merged.remotes[args.name].url}); "
            "use --force to replace it"
        )
    # Only the file being written is rewritten: per-user remotes never leak into git.
    config = _local_layer(root) if args.local else load_config(root, local=False)
    options: dict[str, Any] = {}
    for text in args.option:
        keys, value = parse_option(text, target=target)
        cursor = options
        for key in keys[:-1]:
            nxt = cursor.setdefault(key, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"option {text!r}: {key!r} is already a plain value")
            cursor = nxt
        cursor[keys[-1]] = value
    remote = RemoteConfig(url=args.url, options=options, read_only=args.read_only)
    remotes = dict(config.remotes)
    remotes[args.name] = remote
    path = save_config(root, msgspec.structs.replace(config, remotes=remotes), local=args.local)
    print(f"remote {args.name!r} -> {args.url} added to {path}")
    return EXIT_OK


def _local_layer(root: Repository) -> Any:
    """The per-user file ``remote add --local`` rewrites, alone (defaults if absent)."""
    from ..config import LOCAL_CONFIG_NAMES, load_config_file

    return load_config_file(root / LOCAL_CONFIG_NAMES[-1])


def _cmd_remote_remove(args: argparse.Namespace) -> int:
    import msgspec

    from ..config import load_config, save_config

    root = repo_root(args)
    merged = root.config
    if args.name not in merged.remotes:
        known = ", ".join(repr(n) for n in merged.remotes) or "none configured"
        raise RemoteConfigError(f"unknown remote {args.name!r} (remotes: {known})")
    local = _local_layer(root)
    in_local = args.name in local.remotes
    config = local if in_local else load_config(root, local=False)
    if args.name not in config.remotes:
        raise RemoteConfigError(
            f"remote {args.name!r} is set in evstore.local.toml; edit or remove it there"
        )
    remotes = {k: v for k, v in config.remotes.items() if k != args.name}
    path = save_config(root, msgspec.structs.replace(config, remotes=remotes), local=in_local)
    print(f"remote {args.name!r} removed from {path}")
    return EXIT_OK


def _cmd_remote_list(args: argparse.Namespace) -> int:

    config = repo_root(args).config
    for name, remote in config.remotes.items():
        flags = " (read-only)" if remote.read_only else ""
        options = " ".join(f"{k}={v}" for k, v in _flatten(remote.options))
        print(f"{name}\t{remote.url}{flags}" + (f"\t{options}" if options else ""))
    return EXIT_OK


def _flatten(options: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in options.items():
        if isinstance(value, dict):
            out.extend(_flatten(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


# -- transfers ---------------------------------------------------------------------
def _cmd_push_pull(args: argparse.Namespace) -> int:
    from .. import remotes
    from ..errors import TransferError
    from ..remotes import TransferSummary

    root = repo_root(args)
    try:
        given = {"remote": args.remote, "jobs": _jobs(args), "progress": _progress_stream(args)}
        if args.command == "push":
            summary = remotes.push(root, args.bundles or None, repair=args.repair, **given)
        else:
            summary = remotes.pull(root, args.bundles or None, **given)
    except TransferError as exc:
        failures = _name_failures(root, exc.summary)
        if args.json and exc.summary is not None:
            _print_json(exc.summary, failures=failures)
        more = len(failures) - 20
        done = exc.summary
        head = done.line() if isinstance(done, TransferSummary) else str(exc).split(":\n", 1)[0]
        raise TransferError(
            head
            + ":\n  "
            + "\n  ".join(failures[:20])
            + (f"\n  ... and {more} more" if more > 0 else ""),
            exc.summary,
        ) from None
    if args.json:
        _print_json(summary)
    else:
        print(summary.line())
    return EXIT_OK


def _print_json(obj: Any, **override: Any) -> None:
    """A summary or plan (dataclasses, named tuples) as one JSON document on stdout."""
    import dataclasses
    import json

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if hasattr(value, "_asdict"):
            return plain(value._asdict())
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [plain(v) for v in value]
        return value

    doc = plain(obj)
    doc.update(override)
    print(json.dumps(doc, indent=2, sort_keys=True))


def _name_failures(root: Repository, summary: Any) -> list[str]:
    """The failure lines of a transfer, each naming the bundles and entry paths of its
    digest (a digest alone tells a user nothing about what is missing)."""
    import re

    from ..inventory import load_inventory

    users: dict[str, list[str]] = {}
    for name, reg in sorted(load_inventory(root).registrations.items()):
        for entry in reg.manifest.entries:
            if entry.location == "store":
                users.setdefault(entry.descriptor.digest, []).append(f"{name}:{entry.path}")
    failures: list[str] = []
    for line in getattr(summary, "failures", None) or []:
        found = re.search(r"blake3:[0-9a-f]{64}", line)
        names = users.get(found.group(0), []) if found else []
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        failures.append(f"{shown}: {line}" if names else line)
    return failures


def _cmd_fetch(args: argparse.Namespace) -> int:
    from ..digest import digest_hex, parse_digest
    from ..remotes import export_blob, fetch

    root = repo_root(args)
    digests = list(dict.fromkeys(parse_digest(d) for d in args.digests))
    output = Path(args.output) if args.output else None
    if output is not None and len(digests) > 1 and output.exists() and not output.is_dir():
        raise ConfigError(f"-o {output}: several digests need a directory")
    summary = fetch(
        root, digests, remote=args.remote, jobs=_jobs(args), progress=_progress_stream(args)
    )
    cache = root.local_store()
    for digest in digests:
        if output is None:
            print(f"{digest}\t{cache.path_of(digest)}")
            continue
        dest = output / digest_hex(digest) if len(digests) > 1 or output.is_dir() else output
        export_blob(cache, digest, dest)
        print(f"{digest}\t{dest}")
    print(summary.line(), file=sys.stderr)
    return EXIT_OK


def _cmd_cat(args: argparse.Namespace) -> int:
    from ..inventory import resolve_blob
    from ..remotes import repository_store

    root = repo_root(args)
    digest, known_size, in_git = resolve_blob(root, args.digest)
    if in_git is not None:  # a repo entry: its file in git, verified before output
        from ..digest import hash_bytes

        try:
            data = in_git.read_bytes()  # files in git are small; checked before output
        except OSError as exc:
            raise ConfigError(f"{in_git}: cannot read: {exc.strerror}") from exc
        got = hash_bytes(data)
        if got.digest != digest:
            raise IntegrityError(f"{in_git}: content hashes to {got.digest}, expected {digest}")
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return EXIT_OK
    store = repository_store(root, args.remote)
    out = sys.stdout.buffer
    store.fetch(digest, known_size)
    size = store.cache.size(digest) or 0
    if size <= 256 << 20:
        out.write(store.get(digest))
    else:
        # Verify (repairing a corrupt cached copy from the remotes) before the first
        # byte goes out: a stream cut short by a late IntegrityError would be half a blob.
        store.verify(digest)
        with store.open(digest) as reader:
            while not reader_gone() and (chunk := reader.read(8 << 20)):  # verified already
                out.write(chunk)
    out.flush()
    return EXIT_OK


def _cmd_gc(args: argparse.Namespace) -> int:
    from ..gc import collect_garbage

    plan = collect_garbage(
        repo_root(args),
        remote=args.remote,
        revs=args.rev,
        scope=args.scope,
        grace=args.grace,
        delete=args.yes,
    )
    if args.json:
        _print_json(plan, line=plan.line())
        return EXIT_OK
    for note in plan.notes:
        print(f"evstore: note: {note}", file=sys.stderr)
    for ref, count in plan.kept_by_ref.items():
        print(f"kept by {ref}\t{count}")
    if args.verbose or not args.yes:
        for blob in plan.garbage:
            print(f"{'removed' if plan.deleted else 'would remove'}\t{blob.digest}\t{blob.size}")
        for key in (*plan.temporaries, *plan.leases, *plan.staging):
            print(f"{'removed' if plan.deleted else 'would remove'}\t{key}")
    print(plan.line())
    if not args.yes and (plan.garbage or plan.temporaries or plan.leases or plan.staging):
        print("dry run: nothing was deleted; rerun with --yes to delete", file=sys.stderr)
    return EXIT_OK


_JOBS = arg(
    "-j", "--jobs", type=int, default=None, metavar="N", help="parallel transfers (default 16)"
)
_ANY_REMOTE = arg("--remote", metavar="NAME", help="only this remote (default: all, in order)")


def _progress_stream(args: argparse.Namespace) -> Any:
    """Where the transfer's progress line goes: stderr (drawn only on a terminal), or
    nowhere with the global ``-q``."""
    return sys.stderr if verbosity(args) >= 0 else None


def register(commands: Commands) -> None:
    """Add this module's subcommands to the ``evstore`` parser."""
    rsub = commands.group("remote", metavar="ACTION")
    rsub.add(
        "add",
        _cmd_remote_add,
        [
            NAME,
            arg("url", metavar="URL", help="e.g. s3://bucket/prefix, a directory, https://..."),
            repeatable(
                "--option", "KEY=VALUE", "storage option (dotted keys nest; never credentials)"
            ),
            switch("--read-only", help="never push or gc this remote"),
            switch(
                "--local",
                help="write it to the untracked .evstore/config.toml (per user, survives branch "
                "switches), not evstore.toml",
            ),
            switch("--force", help="replace an existing remote"),
            ROOT,
        ],
        help="add a remote: an fsspec URL with storage options",
    )
    rsub.add("remove", _cmd_remote_remove, [NAME, ROOT], help="remove a remote")
    rsub.add("list", _cmd_remote_list, [ROOT], help="list remotes, in the order they are tried")
    commands.add(
        "push",
        _cmd_push_pull,
        [
            BUNDLES,
            arg("--remote", metavar="NAME", help="default: the first writable remote"),
            switch(
                "--repair",
                help="also download and hash every copy the remote holds, and replace each "
                "corrupt one from the verified local copy",
            ),
            json_flag("the summary"),
            ROOT,
            _JOBS,
        ],
    )
    commands.add(
        "pull",
        _cmd_push_pull,
        [BUNDLES, _ANY_REMOTE, json_flag("the summary"), ROOT, _JOBS],
    )
    commands.add(
        "fetch",
        _cmd_fetch,
        [
            arg("digests", nargs="+", metavar="DIGEST"),
            arg("-o", "--output", metavar="PATH", help="also write the blob(s) here"),
            _ANY_REMOTE,
            ROOT,
            _JOBS,
        ],
    )
    commands.add(
        "cat",
        _cmd_cat,
        [
            arg(
                "digest",
                metavar="BUNDLE:PATH|DIGEST",
                help="an entry of a bundle, a digest, or a unique prefix of one (6+ hex digits)",
            ),
            _ANY_REMOTE,
            ROOT,
        ],
    )
    commands.add(
        "gc",
        _cmd_gc,
        [
            arg("--remote", metavar="NAME", help="collect on this remote (default: local store)"),
            repeatable(
                "--rev", "REV", "also keep blobs referenced at this git revision (repeatable)"
            ),
            arg(
                "--scope",
                choices=("refs", "worktree"),
                default="refs",
                help="what is kept: the working tree and every branch, remote-tracking branch "
                "and tag (refs, the default; a remote refuses --yes when the refs cannot be "
                "read), or only the working tree (worktree)",
            ),
            switch("--yes", help="really delete"),
            json_flag("the plan (or what was done)"),
            arg(
                "--grace",
                type=float,
                default=DEFAULT_GRACE,
                metavar="SECONDS",
                help=f"never delete blobs younger than this (default {DEFAULT_GRACE:.0f})",
            ),
            switch("-v", "--verbose", help="list what was deleted"),
            ROOT,
        ],
    )
