"""``evstore`` core subcommands: hash, bundle, verify, prove, check-proof, schema."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._cli import add_root, repo_root
from .errors import ConfigError, ManifestError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
    from .config import CONFIG_NAME, Config, save_config

    root = Path(args.root or ".").absolute()
    root.mkdir(parents=True, exist_ok=True)
    if (root / CONFIG_NAME).exists():
        print(f"{root / CONFIG_NAME} already exists; left unchanged")
    else:
        save_config(root, Config())
        print(f"wrote {root / CONFIG_NAME}")
    (root / "evidence").mkdir(exist_ok=True)
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    if ".evstore/" not in lines and "/.evstore/" not in lines:
        with open(ignore, "a") as fh:
            fh.write(("\n" if lines and lines[-1] else "") + ".evstore/\n")
        print(f"added .evstore/ to {ignore}")
    return EXIT_OK


# -- hash ----------------------------------------------------------------------
def _cmd_hash(args: argparse.Namespace) -> int:
    from .digest import Hashed, hash_files

    files: list[str] = []
    for p in args.paths:
        if os.path.isdir(p):
            from .bundle import collect_sources

            files.extend(str(s.source) for s in collect_sources([p]))
        else:
            files.append(p)
    code = EXIT_OK
    out = sys.stdout
    for path, outcome in zip(files, hash_files(files), strict=True):
        if isinstance(outcome, Hashed):
            out.write(f"{outcome.digest}  {outcome.size}  {path}\n")
        else:
            reason = (
                outcome.strerror
                if isinstance(outcome, OSError) and outcome.strerror
                else str(outcome)
            )
            print(f"evstore: error: {path}: {reason}", file=sys.stderr)
            code = EXIT_USAGE
    return code


# -- bundle --------------------------------------------------------------------
def _cmd_bundle_create(args: argparse.Namespace) -> int:
    from .bundle import create_bundle
    from .config import local_store

    root = repo_root(args)
    reg = create_bundle(
        root,
        args.name,
        args.paths,
        store=local_store(root),
        external=args.external,
        references=args.ref,
        annotations=_key_values(args.meta, "--meta"),
    )
    m = reg.manifest
    n_store = sum(e.location == "store" for e in m.entries)
    print(
        f"registered {m.name}: {len(m.entries)} entries ({len(m.entries) - n_store} in git, {n_store} in the store)"
    )
    print(f"  digest {reg.digest}")
    print(f"  evidence/{m.name}/bundle.json")
    return EXIT_OK


def _cmd_bundle_list(args: argparse.Namespace) -> int:
    from .inventory import load_inventory

    inv = load_inventory(repo_root(args))
    for name in inv.names:
        reg = inv.registrations[name]
        size = sum(e.descriptor.size for e in reg.manifest.entries)
        print(f"{name}  {len(reg.manifest.entries)} entries  {size} bytes  {reg.digest}")
    for f in inv.findings:
        print(f"evstore: {f.severity}: {f.message}", file=sys.stderr)
    return (
        EXIT_OK
        if not any(f.severity == "error" for f in inv.findings) or inv.registrations
        else EXIT_FAILED
    )


# -- verify --------------------------------------------------------------------
def _print_human(report: Any) -> None:
    out = sys.stdout
    out.write(f"evstore verify {report.root}\n")
    for b in report.bundles:
        status = "ok" if b.ok else "FAILED"
        out.write(
            f"  {b.name}: {b.entries} entries, {b.checked} hashed, {b.unavailable} unavailable: {status}\n"
        )
        for f in b.findings:
            out.write(f"    {f.severity}: {f.code}: {f.path or '-'}: {f.message}\n")
    for f in report.findings:
        where = f" [{f.bundle}]" if f.bundle else ""
        out.write(f"  {f.severity}: {f.code}{where}: {f.message}\n")
    t = report.totals
    out.write(
        f"{t.bundles} bundles, {t.entries} entries, {t.checked} hashes checked, "
        f"{t.unavailable} unavailable, {t.errors} errors, {t.warnings} warnings\n"
    )
    out.write("verified\n" if report.ok else "verification FAILED\n")


def _gh_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _print_github(report: Any) -> None:
    for f in [*(f for b in report.bundles for f in b.findings), *report.findings]:
        if f.severity == "info":
            continue
        file = (
            f"evidence/{f.bundle}/{f.path}"
            if f.bundle and f.path
            else (f"evidence/{f.bundle}" if f.bundle else "evidence")
        )
        props = f"file={_gh_escape(file).replace(',', '%2C').replace(':', '%3A')},title=evstore {f.code}"
        print(f"::{f.severity} {props}::{_gh_escape(f.message)}")
    t = report.totals
    print(
        f"evstore: {t.bundles} bundles, {t.entries} entries, {t.checked} hashes checked, {t.unavailable} unavailable, {t.errors} errors"
    )


def _cmd_verify(args: argparse.Namespace) -> int:
    from .config import local_store
    from .verify import verify_repository

    root = repo_root(args)
    checker = None
    if args.remote:
        from .remotes import check_remote

        def checker(regs: Any) -> Any:
            return check_remote(root, regs, args.remote, deep=args.deep)
    elif args.deep:
        raise ConfigError("--deep needs --remote NAME")
    report = verify_repository(
        root,
        bundles=args.bundle or None,
        store=local_store(root),
        require_available=args.require_available,
        base=args.base,
        remote_checker=checker,
    )
    if args.json:
        from ._canonical import pretty

        sys.stdout.buffer.write(pretty(report))
        sys.stdout.flush()
    elif args.github:
        _print_github(report)
    else:
        _print_human(report)
    return EXIT_OK if report.ok else EXIT_FAILED


# -- proofs --------------------------------------------------------------------
def _cmd_prove(args: argparse.Namespace) -> int:
    from ._canonical import pretty
    from .inventory import load_registration, registration_path
    from .merkle import inclusion_proof

    reg = load_registration(registration_path(repo_root(args), args.bundle))
    proof = inclusion_proof(reg.manifest, args.path)
    if proof.bundle_digest != reg.digest:
        raise ManifestError(
            f"bundle {args.bundle!r}: registration digest {reg.digest} does not match its manifest ({proof.bundle_digest}); run evstore verify"
        )
    sys.stdout.buffer.write(pretty(proof))
    return EXIT_OK


def _cmd_check_proof(args: argparse.Namespace) -> int:
    import msgspec

    from ._canonical import decode
    from .merkle import verify_inclusion
    from .models import InclusionProof

    try:
        data = Path(args.proof).read_bytes() if args.proof != "-" else sys.stdin.buffer.read()
    except OSError as exc:
        raise ConfigError(f"{args.proof}: cannot read: {exc.strerror}") from exc
    try:
        proof = decode(data, InclusionProof)
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{args.proof}: not an inclusion proof: {exc}") from None
    problems = verify_inclusion(proof, args.digest)
    if problems:
        for p in problems:
            print(f"evstore: proof FAILED: {p}", file=sys.stderr)
        return EXIT_FAILED
    d = proof.entry.descriptor
    print(
        f"proof holds: {proof.entry.path} ({d.digest}, {d.size} bytes) is entry {proof.leaf_index} of {proof.tree_size} in bundle {proof.bundle} {proof.bundle_digest}"
    )
    return EXIT_OK


# -- schema --------------------------------------------------------------------
def _cmd_schema(args: argparse.Namespace) -> int:
    from . import _schemas

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
    for name, data in _schemas.generate().items():
        if args.name in (None, name.removesuffix(".schema.json")):
            sys.stdout.write(data.decode())
    return EXIT_OK


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the core subcommands to the ``evstore`` parser."""
    p = sub.add_parser("init", help="make this directory an evidence repository")
    p.add_argument("--root", metavar="DIR", help="directory to initialise (default: .)")
    p.set_defaults(func=_cmd_init)

    p = sub.add_parser("hash", help="print blake3 digests and sizes of files")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=_cmd_hash)

    bundle = sub.add_parser("bundle", help="create and list bundles")
    bsub = bundle.add_subparsers(dest="bundle_command", metavar="ACTION")
    bsub.required = True
    p = bsub.add_parser("create", help="register a new bundle")
    p.add_argument("name", metavar="NAME")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--external",
        action="append",
        default=[],
        metavar="GLOB",
        help="entries matching GLOB go to the blob store, not git",
    )
    p.add_argument(
        "--ref",
        action="append",
        default=[],
        metavar="TEXT",
        help="reference such as a PR or issue id",
    )
    p.add_argument(
        "--meta", action="append", default=[], metavar="KEY=VALUE", help="metadata annotation"
    )
    add_root(p)
    p.set_defaults(func=_cmd_bundle_create)
    p = bsub.add_parser("list", help="list registered bundles")
    add_root(p)
    p.set_defaults(func=_cmd_bundle_list)

    p = sub.add_parser(
        "verify", help="verify every bundle (exit 0 verified, 1 failed, 2 usage error)"
    )
    add_root(p)
    p.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="NAME",
        help="verify only this bundle (repeatable)",
    )
    p.add_argument(
        "--require-available",
        action="store_true",
        help="store entries absent from the local store are errors",
    )
    p.add_argument(
        "--base", metavar="REV", help="git revision whose registered bundles must be unchanged"
    )
    p.add_argument("--remote", metavar="NAME", help="also check store entries exist on this remote")
    p.add_argument(
        "--deep", action="store_true", help="with --remote: download and hash store entries"
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (schemas/verify-report.schema.json)",
    )
    fmt.add_argument("--github", action="store_true", help="print GitHub workflow annotations")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("prove", help="print an inclusion proof of one entry as JSON")
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("path", metavar="PATH")
    add_root(p)
    p.set_defaults(func=_cmd_prove)

    p = sub.add_parser("check-proof", help="check an inclusion proof without the other entries")
    p.add_argument("proof", metavar="PROOF.json")
    p.add_argument("--digest", metavar="DIGEST", help="the bundle digest the proof must be for")
    p.set_defaults(func=_cmd_check_proof)

    p = sub.add_parser("schema", help="print or write the JSON Schemas")
    p.add_argument("name", nargs="?", help="print only this schema")
    p.add_argument("--write", action="store_true", help="write schemas/*.schema.json")
    p.add_argument("--check", action="store_true", help="exit 1 if schemas/ is out of date")
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_schema)
