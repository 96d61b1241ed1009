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
from typing import TYPE_CHECKING

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ROOT, Commands, arg, repo_root, switch

if TYPE_CHECKING:
    from ..config import Repository


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
            switch(
                "--statement",
                help="write the in-toto statement unsigned (no --key): its subjects and "
                "predicate for another signer, e.g. GitHub's actions/attest",
            ),
            arg(
                "--bundle",
                metavar="OUT.intoto.jsonl",
                help="append the envelope as one line to this attestation bundle (JSON lines)",
            ),
            arg(
                "--predicate",
                choices=("evidencestore", "test-result"),
                default="evidencestore",
                help="what to state: the bundle, run or record (default), or the verdict "
                "about it as an in-toto test-result (verify result, run validity, media "
                "comparison, campaign verdict)",
            ),
            switch("--json", help="verify: print the result as JSON"),
            arg(
                "--subject",
                metavar="TARGET",
                action="append",
                help="verify: the bundle name or record digest the envelope must be about; "
                "repeated for a bundle (*.jsonl), whose every line must be about one of them",
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
        usage="evstore attest TARGET --key KEY [--predicate test-result] "
        "[-o OUT | --bundle OUT.intoto.jsonl] [--oci [REMOTE]]\n"
        "       evstore attest TARGET --statement [--predicate test-result] [-o OUT]\n"
        "       evstore attest verify ENVELOPE|BUNDLE.jsonl --key PUB --subject TARGET... "
        "[--json]\n"
        "       evstore attest keygen KEYFILE",
        description="TARGET: a bundle name, a record digest in the store, or a file in the "
        "repository. `verify` checks the signature, that the statement is about --subject "
        "(its subjects and predicate type), re-hashes every subject and, for a test-result, "
        "recomputes the verdict (exit 0 verified, 1 refused); a *.jsonl bundle is checked "
        "line by line. `keygen` writes KEYFILE (private, 0600) and KEYFILE.pub.",
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
    from .. import attest, dsse

    if args.target == "keygen":
        if not args.path:
            return _usage("keygen needs KEYFILE")
        private, public = dsse.generate_key(args.path)
        print(f"private key {private} (keep it secret), public key {public}")
        return EXIT_OK
    if args.statement and args.target not in ("verify", "keygen"):
        return _statement(args)
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
    if args.output and args.bundle:
        return _usage("give -o OUT or --bundle OUT.intoto.jsonl, not both")
    from .._canonical import pretty

    envelope = attest.attest(repo_root(args), args.target, args.key, predicate=args.predicate)
    data = pretty(envelope)
    if args.bundle:
        line = attest.append_to_bundle(args.bundle, envelope)
        print(
            f"attestation of {args.target} appended to {args.bundle} (line {line})", file=sys.stderr
        )
        if args.oci is not None:
            _attach(args, data)
        return EXIT_OK
    if args.output:
        _write(args.output, data, "envelope")
        print(f"attestation of {args.target} written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode())
    if args.oci is not None:
        _attach(args, data)
    return EXIT_OK


def _statement(args: argparse.Namespace) -> int:
    """The unsigned statement, for a signer outside evstore."""
    from .. import attest
    from .._canonical import pretty

    if args.key or args.bundle or args.subject or args.path:
        return _usage("--statement writes the unsigned statement: no --key, --bundle, --subject")
    data = pretty(attest.statement_for(repo_root(args), args.target, predicate=args.predicate))
    if args.output:
        _write(args.output, data, "statement")
        print(f"statement about {args.target} written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode())
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
    from .. import attest, dsse
    from .._canonical import pretty

    root = repo_root(args)
    try:
        data = Path(args.path).read_bytes()
    except OSError as exc:
        raise attest.AttestationError(f"{args.path}: cannot read envelope: {exc.strerror}") from exc
    if attest.is_bundle_path(args.path):
        return _verify_bundle(args, root, data)
    if len(args.subject) > 1:
        return _usage("one --subject for an envelope (several are for a *.jsonl bundle)")
    [subject] = args.subject
    result = attest.verify_attestation(
        root, data, dsse.load_public_key(args.key), source=args.path, expected=subject
    )
    if args.json:
        sys.stdout.write(pretty(result).decode())
    elif result.ok:
        st = result.statement
        assert st is not None and result.keyid is not None
        about = st.predicate.get("bundle_digest") or next(
            (f"blake3:{s.digest['blake3']}" for s in st.subject if s.name.endswith("run.json")),
            subject,
        )
        result_of = f" ({st.predicate['result']})" if "result" in st.predicate else ""
        print(
            f"verified: {args.path} is about {subject} ({about}), signed by key "
            f"{result.keyid} ({args.key}); {len(result.verified)} subject(s) match the "
            f"repository; predicate {st.predicate_type}{result_of}"
        )
    else:
        print(f"REFUSED: {args.path}: {len(result.problems)} problem(s)")
        for problem in result.problems:
            print(f"  {problem}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _verify_bundle(args: argparse.Namespace, root: Repository, data: bytes) -> int:
    from .. import attest, dsse
    from .._canonical import pretty

    result = attest.verify_attestation_bundle(
        root, data, dsse.load_public_key(args.key), source=args.path, expected=args.subject
    )
    if args.json:
        sys.stdout.write(pretty(result).decode())
    elif result.ok:
        print(
            f"verified: {args.path}: {len(result.lines)} attestation(s), every line signed by "
            f"key {result.lines[0].result.keyid} ({args.key})"
        )
        for line in result.lines:
            st = line.result.statement
            assert st is not None
            of = f" ({st.predicate['result']})" if "result" in st.predicate else ""
            print(
                f"  line {line.line}: about {line.result.expected}, "
                f"{len(line.result.verified)} subject(s) match; predicate {st.predicate_type}{of}"
            )
    else:
        problems = [*result.problems, *(p for x in result.lines for p in x.result.problems)]
        print(f"REFUSED: {args.path}: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  {problem}")
    return EXIT_OK if result.ok else EXIT_FAILED
