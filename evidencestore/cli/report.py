"""``evstore`` subcommands: report (self-contained HTML) and attest (signed statements).

Exit codes: ``report`` 0 when the page was written; ``attest`` 0 when the envelope was
written; ``attest verify`` 0 when the signature, the expected subject (``--subject``,
required) and every subject verify, 1 when the attestation is refused; 2 for usage
errors and unusable inputs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ROOT, Commands, arg, repo_root


def register(commands: Commands) -> None:
    """Register this group's subcommands."""
    commands.add(
        "report",
        _report,
        [
            arg("target", metavar="TARGET"),
            arg("-o", "--output", metavar="OUT.html", required=True),
            arg(
                "--base",
                metavar="REV",
                help="a campaign: anchor its history at this protected branch, as "
                "`campaign status --base`",
            ),
            ROOT,
        ],
        description="TARGET: a record file, a record digest, a bundle name, BUNDLE:PATH, or a "
        "campaign name. The page needs no network access when opened.",
    )
    commands.add(
        "attest",
        _attest,
        [
            arg("target", metavar="TARGET|verify|keygen"),
            arg("path", nargs="?", metavar="ENVELOPE|KEYFILE", help=argparse.SUPPRESS),
            arg("--key", metavar="KEY", help="private key to sign with, public key to verify"),
            arg("-o", "--output", metavar="OUT", help="envelope file (default: stdout)"),
            arg("--json", action="store_true", help="verify: print the result as JSON"),
            arg(
                "--subject",
                metavar="TARGET",
                help="verify: the bundle name or record digest the envelope must be about",
            ),
            arg(
                "--oci",
                nargs="?",
                const="",
                metavar="REMOTE",
                help="also attach the envelope to the bundle's manifest on an OCI registry "
                "remote, as a referrer (default: the first oci:// remote)",
            ),
            ROOT,
        ],
        usage="evstore attest TARGET --key KEY [-o OUT] [--oci [REMOTE]]\n"
        "       evstore attest verify ENVELOPE --key PUB --subject TARGET [--json]\n"
        "       evstore attest keygen KEYFILE",
        description="TARGET: a bundle name, a record digest in the store, or a file in the "
        "repository. `verify` checks the signature, that the statement is about --subject "
        "(its subjects and predicate type) and re-hashes every subject "
        "(exit 0 verified, 1 refused). `keygen` writes KEYFILE (private, 0600) and "
        "KEYFILE.pub.",
    )


def _write(path: str, data: bytes, what: str) -> None:
    from ..report.targets import ReportError

    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write {what}: {exc.strerror}") from exc


def _report(args: argparse.Namespace) -> int:
    from ..report import render_report

    root = repo_root(args) if args.root else None
    rendered = render_report(root, args.target, base_rev=args.base)
    _write(args.output, rendered.html.encode(), "report")
    print(f"{rendered.kind} report of {rendered.digest} written to {args.output}")
    return EXIT_OK


def _usage(message: str) -> int:
    print(f"evstore attest: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _attest(args: argparse.Namespace) -> int:
    from .. import attest

    if args.target == "keygen":
        if not args.path:
            return _usage("keygen needs KEYFILE")
        private, public = attest.generate_key(args.path)
        print(f"private key {private} (keep it secret), public key {public}")
        return EXIT_OK
    if args.key is None:
        return _usage("--key KEY is required")
    if args.target == "verify":
        if not args.path:
            return _usage("verify needs ENVELOPE")
        if not args.subject:
            return _usage(
                "verify needs --subject TARGET (the bundle name or record digest the envelope "
                "must be about)"
            )
        return _verify(args)
    if args.subject:
        return _usage("--subject is for `attest verify`")
    if args.path:
        return _usage(f"unexpected argument {args.path!r}")
    from .._canonical import pretty

    envelope = attest.attest(repo_root(args), args.target, args.key)
    data = pretty(envelope)
    if args.output:
        _write(args.output, data, "envelope")
        print(f"attestation of {args.target} written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode())
    if args.oci is not None:
        _attach(args, data)
    return EXIT_OK


def _attach(args: argparse.Namespace, envelope: bytes) -> None:
    from .. import oci
    from ..remotes import registry_remote

    root = repo_root(args)
    remote = registry_remote(root, args.oci or None)
    names = oci.bundles_about(root, envelope)
    for name, digest in zip(
        names, oci.attach(root, remote.store, remote.name, envelope, names), strict=True
    ):
        print(
            f"attestation attached to bundle {name!r} on remote {remote.name!r} as {digest}",
            file=sys.stderr,
        )


def _verify(args: argparse.Namespace) -> int:
    from .. import attest
    from .._canonical import pretty

    root = repo_root(args)
    try:
        data = Path(args.path).read_bytes()
    except OSError as exc:
        raise attest.AttestationError(f"{args.path}: cannot read envelope: {exc.strerror}") from exc
    result = attest.verify_attestation(
        root, data, attest.load_public_key(args.key), source=args.path, expected=args.subject
    )
    if args.json:
        sys.stdout.write(pretty(result).decode())
    elif result.ok:
        st = result.statement
        assert st is not None and result.keyid is not None
        about = st.predicate.get("bundle_digest") or next(
            (f"blake3:{s.digest['blake3']}" for s in st.subject if s.name.endswith("run.json")),
            args.subject,
        )
        print(
            f"verified: {args.path} is about {args.subject} ({about}), signed by key "
            f"{result.keyid} ({args.key}); {len(result.verified)} subject(s) match the "
            f"repository; predicate {st.predicate_type}"
        )
    else:
        print(f"REFUSED: {args.path}: {len(result.problems)} problem(s)")
        for problem in result.problems:
            print(f"  {problem}")
    return EXIT_OK if result.ok else EXIT_FAILED
