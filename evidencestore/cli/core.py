"""``evstore`` core subcommands: hash, bundle, verify, prove, check-proof, schema."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, GitError, ManifestError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    NAME,
    ROOT,
    Commands,
    arg,
    flag_of,
    json_flag,
    progress_line,
    repeatable,
    repo_root,
    switch,
    verbosity,
)

if TYPE_CHECKING:
    from ..config import Repository
    from ..progress import Line, Observer


def _key_values(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


# -- init ----------------------------------------------------------------------
def _cmd_init(args: argparse.Namespace) -> int:
    from ..config import init_repository

    done = init_repository(args.root or ".")
    if done.wrote_config:
        print(f"wrote {done.config_path}")
    else:
        print(f"{done.config_path} already exists; left unchanged")
    for pattern in done.ignored:
        print(f"added {pattern} to {done.ignore_path}")
    return EXIT_OK


# -- hash ----------------------------------------------------------------------
def _cmd_hash(args: argparse.Namespace) -> int:
    from ..digest import Hashed, format_sum_line, hash_files, hash_stream

    if args.check:
        return _hash_check(args.check)
    if not args.paths:
        raise ConfigError("hash: give PATH..., - for stdin, or --check FILE")
    files: list[str] = []
    out = sys.stdout
    for p in args.paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            from ..bundle import collect_sources

            # Hashing prints digests and copies nothing, so links are followed.
            files.extend(str(s.source) for s in collect_sources([p], follow_symlinks=True))
        else:
            files.append(p)
    code = EXIT_OK
    named = [f for f in files if f != "-"]
    outcomes = iter(hash_files(named))
    for path in files:
        outcome = hash_stream(sys.stdin.buffer) if path == "-" else next(outcomes)
        if isinstance(outcome, Hashed):
            out.write(format_sum_line(outcome.digest, outcome.size, path, b3sum=args.b3sum))
            out.write("\n")
        else:
            print(f"evstore: error: {path}: {_reason(outcome)}", file=sys.stderr)
            code = EXIT_USAGE
    return code


def _reason(outcome: BaseException) -> str:
    """What went wrong, without the path (the caller names it)."""
    from ..errors import IntegrityError

    if isinstance(outcome, OSError) and outcome.strerror:
        return outcome.strerror
    if isinstance(outcome, IntegrityError):
        return outcome.reason
    return str(outcome)


def _hash_check(source: str) -> int:
    """Re-hash every file a digest list names; ``path: OK`` / ``path: FAILED``."""
    from ..digest import Hashed, hash_files, parse_sum_line, shown_name
    from ..verify.render import plural

    try:
        # bytes, not text mode: universal newlines would cut a name holding a carriage return
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--check {source}: cannot read: {exc}") from exc
    wanted: list[tuple[str, int | None, str]] = []
    malformed = 0
    # newlines alone end lines (as b3sum reads them): a name may hold any other character
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            wanted.append(parse_sum_line(line))
        except ValueError as exc:
            malformed += 1
            print(f"evstore: error: {source}:{number}: {exc}", file=sys.stderr)
    failed = 0
    outcomes = hash_files([w[2] for w in wanted], [w[1] for w in wanted])
    for (digest, _size, path), outcome in zip(wanted, outcomes, strict=True):
        text, escaped = shown_name(path)  # a name as b3sum --check shows it
        shown = "\\" + text if escaped else text
        if isinstance(outcome, Hashed) and outcome.digest == digest:
            print(f"{shown}: OK")
            continue
        failed += 1
        why = "content differs" if isinstance(outcome, Hashed) else _reason(outcome)
        print(f"{shown}: FAILED ({why})")
    if failed:
        print(f"evstore: {plural(failed, 'file')} of {len(wanted)} FAILED", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_USAGE if malformed or not wanted else EXIT_OK


# -- bundle --------------------------------------------------------------------
def _store_progress(args: argparse.Namespace, planned: Any, stream: Any = None) -> Any:
    """A byte-level progress line for the store entries being hashed and stored, on a
    terminal only (and not under ``-q``)."""
    out = sys.stderr if stream is None else stream
    if verbosity(args) < 0 or not getattr(out, "isatty", lambda: False)():
        return None
    total = sum(p.size for p in planned if p.location == "store")
    if not total:
        return None
    from ..storage.transfer import Progress

    n = sum(p.location == "store" for p in planned)
    # Each byte is counted twice: once hashed, once stored.
    return Progress(f"bundle create {args.name} (hash, store)", n, 2 * total, out)


def _cmd_bundle_create(args: argparse.Namespace) -> int:
    from ..bundle import create_bundle, oversized, plan_bundle
    from ..verify.render import plural

    root = repo_root(args)
    planned, warnings = plan_bundle(args.paths, args.external, follow_symlinks=args.follow_symlinks)
    for warning in warnings:
        said = warning if isinstance(warning, str) else warning.worded(flag_of)
        print(f"evstore: warning: {said}", file=sys.stderr)
    limit = root.config.bundle.max_git_file_size
    over = {
        path
        for path, _ in oversized(((p.path, p.size) for p in planned if p.location == "repo"), limit)
    }
    too_big = [p for p in planned if p.path in over]
    if args.dry_run:
        for p in planned:
            where = "git  " if p.location == "repo" else "store"
            flag = "  (over max_git_file_size)" if p in too_big else ""
            print(f"{where}  {p.size:>12}  {p.path}  <- {p.source}{flag}")
        n_store = sum(p.location == "store" for p in planned)
        print(
            f"dry run: {args.name} would have {plural(len(planned), 'entry', 'entries')} "
            f"({len(planned) - n_store} in git, "
            f"{sum(p.size for p in planned if p.location == 'repo')} bytes; {n_store} in the store, "
            f"{sum(p.size for p in planned if p.location == 'store')} bytes); nothing was written"
        )
        return EXIT_FAILED if too_big else EXIT_OK
    store = root.local_store()
    if args.link != "copy":
        from ..storage import LocalBlobStore

        store = LocalBlobStore(store.root, link=args.link)
    bar = _store_progress(args, planned)
    try:
        reg = create_bundle(
            root,
            args.name,
            args.paths,
            store=store,
            external=args.external,
            references=args.ref,
            annotations=_key_values(args.meta, "--meta"),
            follow_symlinks=args.follow_symlinks,
            on_bytes=None if bar is None else lambda n: bar.sent("bytes", n),
        )
    finally:
        if bar is not None:
            bar.close()
    m = reg.manifest
    n_store = sum(e.location == "store" for e in m.entries)
    print(
        f"registered {m.name}: {plural(len(m.entries), 'entry', 'entries')} "
        f"({len(m.entries) - n_store} in git, {n_store} in the store)"
    )
    print(f"  digest {reg.digest}")
    print(f"  evidence/{m.name}/bundle.json")
    return EXIT_OK


def _cmd_bundle_list(args: argparse.Namespace) -> int:
    from ..inventory import load_inventory
    from ..verify.render import plural

    inv = load_inventory(repo_root(args))
    rows: list[dict[str, Any]] = []
    for name in inv.names:
        reg = inv.registrations[name]
        entries = reg.manifest.entries
        rows.append(
            {
                "name": name,
                "digest": reg.digest,
                "entries": len(entries),
                "store_entries": sum(e.location == "store" for e in entries),
                "size": sum(e.descriptor.size for e in entries),
                "created": reg.manifest.metadata.created,
                "references": list(reg.manifest.metadata.references),
            }
        )
    if args.json:
        import json

        findings = [msgspec_builtins(f) for f in inv.findings]
        print(json.dumps({"bundles": rows, "findings": findings}, indent=2, sort_keys=True))
    else:
        for row in rows:
            print(
                f"{row['name']}  {plural(int(row['entries']), 'entry', 'entries')}  "
                f"{row['size']} bytes  {row['digest']}"
            )
    for f in inv.findings:
        if f.severity != "info" or verbosity(args) > 0:
            print(f"evstore: {f.severity}: {f.message}", file=sys.stderr)
    return EXIT_FAILED if any(f.severity == "error" for f in inv.findings) and not rows else EXIT_OK


def msgspec_builtins(obj: Any) -> Any:
    """A struct as plain JSON-ready values."""
    import msgspec

    return msgspec.to_builtins(obj)


# -- verify --------------------------------------------------------------------
def _base_problem(root: Repository, rev: str) -> GitError | None:
    """Why ``--base REV`` cannot be used here (a shallow clone lacks it...), or None."""
    from ..verify import base_problem

    return base_problem(root.root, rev)


def _rederive_imports(root: Any, report: Any, bundles: list[str] | None) -> Any:
    """The report with an ``import-mismatch`` finding for each imported run whose
    run.json its sealed harness files do not give (``runs/rederive.py``)."""
    broken = {b.name for b in report.bundles if not b.ok}
    # Only a repository holding imported runs pays for importing the re-derivation.
    imported = [
        b.name
        for b in report.bundles
        if b.ok
        and (bundles is None or b.name in bundles)
        and b'"harness-source"' in _registration_bytes(root.root, b.name)
    ]
    if not imported:
        return report
    import msgspec

    from ..runs.rederive import import_mismatches

    found = import_mismatches(root, root.local_store(), imported, skip=broken)
    if not found:
        return report
    return msgspec.structs.replace(report, ok=False, findings=(*report.findings, *found))


def _registration_bytes(root: Path, name: str) -> bytes:
    try:
        return (root / "evidence" / name / "bundle.json").read_bytes()
    except OSError:
        return b""


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..inventory import load_inventory
    from ..verify import verify_repository
    from ..verify.render import (
        RegisteredEntries,
        UnavailableMode,
        View,
        append_step_summary,
        plural,
        worktree_prefix,
    )

    json_to = args.json
    if json_to == "-" and args.github:
        raise ConfigError("--json and --github both write to stdout: give --json a FILE")
    if args.deep and not args.remote:
        raise ConfigError("--deep needs --remote NAME")
    root = repo_root(args)
    if args.base:
        problem = _base_problem(root, args.base)
        if problem:
            if args.github:
                print(f"::error title=evstore --base::{problem.worded(flag_of)}")
            raise problem
    notes: list[str] = []
    checker = None
    if args.remote:
        from ..remotes import verify_remote

        def checker(regs: Any) -> Any:
            with progress_line(args) as line:
                found = verify_remote(
                    root, regs, args.remote, deep=args.deep, observer=_drawn(line)
                )
            n = sum(e.location == "store" for r in regs.values() for e in r.manifest.entries)
            bad = sum(len(v) for v in found.values())
            how = "downloaded and re-hashed" if args.deep else "present, with the right size"
            notes.append(
                f"remote {args.remote!r}: {n - bad} of {plural(n, 'store entry', 'store entries')} "
                f"{how}" + ("" if not bad else f"; {bad} not")
            )
            return found

    mode: UnavailableMode = args.unavailable
    if mode == "summary" and verbosity(args) > 0:
        mode = "each"
    # --bundle, --base and --remote work on the registrations: loaded once, shared with
    # the view. Otherwise verify loads them itself (in its workers, for many bundles)
    # and the view reads only those of bundles with findings.
    inventory = load_inventory(root) if args.bundle or args.base or args.remote else None
    # The line is cleared before the report is written (standard output never mixes
    # in); the remote check draws a line of its own meanwhile.
    with progress_line(args) as line:
        report = verify_repository(
            root,
            bundles=args.bundle or None,
            store=root.local_store(),
            require_available=args.require_available or mode == "error",
            base=args.base,
            remote_checker=checker,
            inventory=inventory,
            # none when nothing is drawn: many bundles are then verified in the
            # largest steps
            observer=_drawn(line),
        )
    report = _rederive_imports(root, report, args.bundle or None)
    unknown = [f for f in report.findings if f.code == "unknown-bundle"]
    if unknown:
        for f in unknown:
            if args.github:
                print(f"::error title=evstore unknown-bundle::{f.message}")
        names = ", ".join(repr(f.bundle) for f in unknown)
        known = sorted(inventory.registrations) if inventory is not None else []
        raise ConfigError(
            f"--bundle {names}: no such bundle registered"
            + (f" (registered: {', '.join(known[:20])})" if known else " (none registered)")
        )
    view = View(
        report,
        root.root,
        inventory.registrations
        if inventory is not None
        else RegisteredEntries.on_disk(report, root.root),
        unavailable=mode,
        prefix=worktree_prefix(root.root)
        if args.github or os.environ.get("GITHUB_ACTIONS")
        else "",
        name=flag_of,
    )
    if json_to is not None:
        from .._canonical import pretty

        if json_to == "-":
            sys.stdout.buffer.write(pretty(report))
            sys.stdout.flush()
        else:
            try:
                Path(json_to).write_bytes(pretty(report))
            except OSError as exc:
                raise ConfigError(f"--json {json_to}: cannot write: {exc.strerror}") from exc
    if args.github:
        view.github(sys.stdout, extra=notes)
    elif json_to != "-":
        view.human(sys.stdout, verbosity=verbosity(args), extra=notes)
    append_step_summary(view.step_summary(extra=notes))
    return EXIT_OK if report.ok else EXIT_FAILED


def _drawn(line: Line) -> Observer | None:
    """``line`` as an observer when it draws (a terminal, no ``-q``), else None."""
    return line if line.enabled else None


# -- proofs --------------------------------------------------------------------
def _cmd_prove(args: argparse.Namespace) -> int:
    from .._canonical import pretty
    from ..inventory import decode_registration, read_registration, registration_path
    from ..merkle import registered_proof

    path = registration_path(repo_root(args), args.bundle)
    data = read_registration(path)
    reg = decode_registration(data, os.fspath(path))
    proof = registered_proof(reg, data, args.path)
    sys.stdout.buffer.write(pretty(proof))
    return EXIT_OK


def _cmd_check_proof(args: argparse.Namespace) -> int:
    import msgspec

    from .._canonical import decode_exact
    from ..merkle import verify_inclusion
    from ..models import InclusionProof

    try:
        data = Path(args.proof).read_bytes() if args.proof != "-" else sys.stdin.buffer.read()
    except OSError as exc:
        raise ConfigError(f"{args.proof}: cannot read: {exc.strerror}") from exc
    try:
        proof, exact = decode_exact(data, InclusionProof)
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{args.proof}: not an inclusion proof: {exc}") from None
    anchor, source = args.digest, "--digest"
    if args.bundle:
        from ..bundle import trusted_digest

        anchor = trusted_digest(repo_root(args), args.bundle)
        source = f"the registration of bundle {args.bundle!r}"
        if args.digest and args.digest != anchor:
            raise ConfigError(
                f"--digest {args.digest} disagrees with {source} ({anchor}): give one of them"
            )
        if proof.bundle != args.bundle:
            print(
                f"evstore: proof FAILED: the proof is for bundle {proof.bundle!r}, not {args.bundle!r}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    # a proof not exactly its value's encoding is checked as it stands
    problems = verify_inclusion(proof, anchor, None if exact else msgspec.json.decode(data))
    if problems:
        for p in problems:
            print(f"evstore: proof FAILED: {p}", file=sys.stderr)
        return EXIT_FAILED
    d = proof.entry.descriptor
    what = (
        f"{proof.entry.path} ({d.digest}, {d.size} bytes) is entry {proof.leaf_index} of "
        f"{proof.tree_size} in bundle {proof.bundle} {proof.bundle_digest}"
    )
    if anchor is None:
        print(
            f"evstore: proof NOT ANCHORED: self-consistent ({what}), but anyone can build a "
            "self-consistent proof for a bundle of that name: check it against a trusted "
            "bundle digest with --digest DIGEST, or --bundle NAME in the evidence repository",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"proof holds: {what} (anchored by {source})")
    return EXIT_OK


# -- schema --------------------------------------------------------------------
def _cmd_schema(args: argparse.Namespace) -> int:
    from .. import _schemas

    directory = Path(args.dir) if args.dir else _schemas.SCHEMA_DIR
    if args.write:
        for path in _schemas.write(directory):
            print(f"wrote {path}")
        return EXIT_OK
    if args.check:
        stale = _schemas.stale(directory)
        for name in stale:
            print(
                f"evstore: {directory / name} is out of date; run evstore schema --write",
                file=sys.stderr,
            )
        return EXIT_FAILED if stale else EXIT_OK
    schemas = {
        name.removesuffix(".schema.json"): data for name, data in _schemas.generate().items()
    }
    if args.name is None:
        for name in schemas:
            print(name)
        print("(print one with: evstore schema NAME)", file=sys.stderr)
        return EXIT_OK
    if args.name not in schemas:
        raise ConfigError(f"unknown schema {args.name!r} (schemas: {', '.join(schemas)})")
    sys.stdout.write(schemas[args.name].decode())
    return EXIT_OK


def register(commands: Commands) -> None:
    """Add the core subcommands to the ``evstore`` parser."""
    commands.add(
        "init",
        _cmd_init,
        [arg("--root", metavar="DIR", help="directory to initialise (default: .)")],
    )
    commands.add(
        "hash",
        _cmd_hash,
        [
            arg("paths", nargs="*", metavar="PATH"),
            arg(
                "-c",
                "--check",
                metavar="FILE",
                help="check the digests listed in FILE (- for stdin)",
            ),
            switch("--b3sum", help="print b3sum's '<hex>  PATH' lines (b3sum --check reads them)"),
        ],
        description="Print 'blake3:<hex>  SIZE  PATH' per file (- reads stdin; --b3sum: "
        "b3sum's '<hex>  PATH'). A name holding a backslash or newline is escaped as b3sum "
        "escapes it ('\\\\', '\\n', the line starting with '\\'). --check FILE re-hashes "
        "what a list names: this command's output or b3sum's, escaped or not; exit 1 when a "
        "file differs, 2 for unreadable or malformed lists.",
    )

    bsub = commands.group("bundle", metavar="ACTION")
    bsub.add(
        "create",
        _cmd_bundle_create,
        [
            NAME,
            arg("paths", nargs="+", metavar="PATH"),
            repeatable(
                "--external",
                "GLOB",
                "entries whose entry or source path matches GLOB go to the blob store, not git",
            ),
            arg(
                "--link",
                choices=("copy", "hardlink", "reflink"),
                default="copy",
                help="how store entries enter the local store: copy (default), hardlink (no "
                "copy; the file becomes read-only, and editing it in place corrupts the blob) "
                "or reflink (copy-on-write clone); both fall back to a copy where unsupported",
            ),
            switch(
                "-n",
                "--dry-run",
                help="print each entry, where it would go (git or store) and its size; write "
                "nothing",
            ),
            switch(
                "--follow-symlinks",
                help="copy what symlinks point to, even outside the source (default: refuse them)",
            ),
            repeatable("--ref", "TEXT", "reference such as a PR or issue id"),
            repeatable("--meta", "KEY=VALUE", "metadata annotation"),
            ROOT,
        ],
        help="register a new bundle",
        description="Register bundle NAME from files and directories. A file becomes the "
        "entry named by its base name; a directory D contributes 'D/<relative path>' for "
        "every file below it. --external GLOB sends an entry to the blob store when GLOB "
        "matches its entry path or its source path (fnmatch: '*' also matches '/', and the "
        "glob must match from the start: 'sub/*' does not match 'res/sub/a.mp4', '*/sub/*' "
        "and '*.mp4' do). Everything else is copied into git, permanently: check with "
        "--dry-run first. A glob that matches nothing is warned about; evstore.toml "
        "[bundle] max_git_file_size refuses files too large for git.",
    )
    bsub.add(
        "list",
        _cmd_bundle_list,
        [json_flag("the list"), ROOT],
        help="list registered bundles",
    )

    commands.add(
        "verify",
        _cmd_verify,
        [
            ROOT,
            repeatable("--bundle", "NAME", "verify only this bundle (repeatable)"),
            switch(
                "--require-available", help="store entries absent from the local store are errors"
            ),
            arg(
                "--base",
                metavar="REV",
                help="git revision whose registered bundles must be unchanged",
            ),
            arg(
                "--unavailable",
                choices=("summary", "each", "error"),
                default="summary",
                help="store entries absent from the local store: one notice with a count "
                "(default), a warning each, or an error each (as --require-available)",
            ),
            arg(
                "--remote",
                metavar="NAME",
                help="also check store entries exist on this remote",
            ),
            switch("--deep", help="with --remote: download and hash store entries"),
            arg(
                "--json",
                nargs="?",
                const="-",
                metavar="FILE",
                help="write the report as JSON (schemas/verify-report.schema.json) to stdout "
                "or FILE",
            ),
            switch(
                "--github",
                help="print GitHub workflow annotations (a table goes to $GITHUB_STEP_SUMMARY "
                "when set)",
            ),
        ],
    )

    commands.add(
        "prove",
        _cmd_prove,
        [arg("bundle", metavar="BUNDLE"), arg("path", metavar="PATH"), ROOT],
    )
    commands.add(
        "check-proof",
        _cmd_check_proof,
        [
            arg("proof", metavar="PROOF.json"),
            arg("--digest", metavar="DIGEST", help="the trusted bundle digest of the proof"),
            arg(
                "--bundle",
                metavar="NAME",
                help="take the trusted digest from this bundle's registration in the repository",
            ),
            ROOT,
        ],
    )
    commands.add(
        "schema",
        _cmd_schema,
        [
            arg("name", nargs="?", help="print this schema (without: list their names)"),
            switch("--write", help="write schemas/*.schema.json"),
            switch("--check", help="exit 1 if schemas/ is out of date"),
            arg("--dir", help=argparse.SUPPRESS),
        ],
    )
