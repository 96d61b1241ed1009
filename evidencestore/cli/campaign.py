"""`evstore` subcommands: campaign (``init``, ``verify``, ``claim``, ``status``).

Exit codes: ``init`` 0 registered; ``verify`` 0 when every run of the campaign was
recorded under the frozen protocol, 1 with findings; ``claim`` 0 for a claim, 1 when it
is refused; ``status`` 0 when ``ACCEPTED``, 1 when ``NOT_ACCEPTED``; 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import EXIT_FAILED, EXIT_OK, NAME, ROOT, Commands, arg, json_flag, repo_root


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Register this group's subcommands."""
    csub = Commands(sub).group(
        "campaign",
        help="campaign protocols, verification, speedup claims and status",
        description="A protocol frozen by digest before any result; verdicts, claims, status.",
    )
    csub.add(
        "init",
        _init,
        [NAME, arg("--protocol", required=True, metavar="FILE", help="protocol.toml"), ROOT],
        help="register a campaign protocol as bundle NAME",
    )
    csub.add(
        "verify",
        _verify,
        [
            NAME,
            json_flag("the findings"),
            arg(
                "--base",
                metavar="REV",
                help="the protected branch: the protocol must be on it, runs after it there "
                "or on top of it",
            ),
            ROOT,
        ],
        help="check from git history that the protocol predates every run",
    )
    csub.add(
        "claim",
        _claim,
        [
            NAME,
            arg("--condition", required=True, metavar="C"),
            arg("--arm", required=True, metavar="A"),
            json_flag("the claim record"),
            arg("--register", metavar="BUNDLE", help="also register the claim as a bundle"),
            ROOT,
        ],
        help="the speedup of an arm over the baseline, with its interval",
    )
    csub.add(
        "status",
        _status,
        [
            NAME,
            json_flag("the status record"),
            arg(
                "--register",
                metavar="BUNDLE",
                help="also register the status and every record behind it as a bundle",
            ),
            arg(
                "--base",
                metavar="REV",
                help="the protected branch the protocol must be on (as campaign verify)",
            ),
            arg(
                "--html",
                metavar="OUT",
                help="also write the status as a self-contained HTML report "
                "(evidencestore[report])",
            ),
            ROOT,
        ],
        help="conditions x arms, the verdict, and what remains",
    )


def _print_json(obj: Any) -> None:
    import msgspec

    print(json.dumps(msgspec.to_builtins(obj), indent=2))


def _init(args: argparse.Namespace) -> int:
    from ..campaign.protocol import init_campaign

    campaign = init_campaign(repo_root(args), args.name, args.protocol)
    p = campaign.protocol
    print(f"campaign {campaign.name}: protocol {campaign.digest}")
    print(f"  bundle {campaign.registration.digest}")
    for cond in p.condition:
        print(f"  condition {cond.name}: workload {campaign.workload_digest(cond.name)}")
    for arm in p.arm:
        role = "baseline" if arm.baseline else "candidate"
        print(f"  arm {arm.name} ({role}): {arm.runs} run(s) per condition")
    print(
        f"  join runs with: evstore run WORKLOAD --campaign {campaign.name} "
        "--condition C --arm A ..."
    )
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from ..campaign.protocol import load_campaign
    from ..campaign.verify import verify_campaign

    root = repo_root(args)
    result = verify_campaign(root, load_campaign(root, args.name), base=args.base)
    if args.json:
        _print_json(
            {
                "campaign": result.campaign,
                "protocol_digest": result.protocol_digest,
                "protocol_commit": result.protocol_commit,
                "ok": result.ok,
                "runs": result.runs,
                "findings": result.findings,
                "protection": result.protection,
            }
        )
    else:
        commit = result.protocol_commit[:12] if result.protocol_commit else "not committed"
        print(f"campaign {result.campaign}: protocol {result.protocol_digest} ({commit})")
        for run, at in sorted(result.runs.items()):
            print(f"  ok        {run}" + (f" (added in {at[:12]})" if at else ""))
        for f in result.findings:
            word = "finding " if not f.run or f.run in result.runs else "excluded"
            print(f"  {word}  {f.run or '-'}: {f.code}: {f.message}")
        for line in result.protection:
            print(f"  {line}")
        counted = len(result.runs) - sum(1 for f in result.findings if f.code == "uncommitted")
        print(
            f"{'verified' if result.ok else 'NOT verified'}: {counted} run(s) recorded under "
            f"the frozen protocol, {len(result.findings)} finding(s)"
        )
    return EXIT_OK if result.ok else EXIT_FAILED


def _claim(args: argparse.Namespace) -> int:
    from ..campaign.claims import make_claim
    from ..campaign.members import campaign_runs
    from ..campaign.protocol import load_campaign
    from ..campaign.records import register_records
    from ..config import local_store

    root = repo_root(args)
    campaign = load_campaign(root, args.name)
    claim = make_claim(
        local_store(root), campaign, campaign_runs(root, campaign), args.condition, args.arm
    )
    if args.register:
        register_records(
            root,
            args.register,
            {f"claims/{args.condition}-{args.arm}.json": claim},
            campaign=campaign.name,
            protocol_digest=campaign.digest,
        )
    if args.json:
        _print_json(claim)
    else:
        head = f"{args.condition} {args.arm} vs {claim.baseline_arm}"
        if claim.speedup is None:
            print(f"{head}: claim refused")
            for reason in claim.reasons:
                print(f"  - {reason}")
        else:
            s = claim.speedup
            pct = round(claim.confidence * 100, 4)
            print(
                f"{head}: speedup {s.ratio:.4f} ({pct:g}% CI {s.low:.4f} to {s.high:.4f}), "
                f"n = {claim.n_baseline} / {claim.n_candidate}, {claim.estimator}"
            )
            for rv in claim.runs:
                cv = "-" if rv.cv is None else f"{rv.cv:.3%}"
                print(f"  {rv.arm:<12} {rv.run}: mean {rv.mean:.4f} s, CV {cv}, {rv.digest}")
            for d in claim.config_diff:
                print(f"  config {d['key']}: {d['a']!r} -> {d['b']!r}")
    return EXIT_OK if claim.speedup is not None else EXIT_FAILED


def _status(args: argparse.Namespace) -> int:
    from ..campaign.protocol import load_campaign
    from ..campaign.records import register_records
    from ..campaign.status import evaluate

    root = repo_root(args)
    campaign = load_campaign(root, args.name)
    ev = evaluate(root, campaign, base_rev=args.base)
    status = ev.status
    if args.register:
        records: dict[str, Any] = {"status.json": status}
        records.update({f"repeatability/{k}.json": v for k, v in ev.repeatability.items()})
        records.update(
            {f"adjudications/{k.replace('/', '-')}.json": v for k, v in ev.adjudications.items()}
        )
        records.update({f"claims/{k.replace('/', '-')}.json": v for k, v in ev.claims.items()})
        register_records(
            root, args.register, records, campaign=campaign.name, protocol_digest=campaign.digest
        )
    if args.html:
        _write_html(args.html, root, campaign, ev)
    if args.json:
        _print_json(status)
        return EXIT_OK if status.verdict == "ACCEPTED" else EXIT_FAILED
    out = sys.stdout
    print(f"campaign {status.campaign}: protocol {status.protocol_digest}", file=out)
    print(
        f"  {'condition':<10} {'arm':<16} {'runs':>7} {'failed':>6} {'repeat':<10} "
        f"{'lossless':<13} speedup",
        file=out,
    )
    for c in status.cells:
        speed = (
            "-"
            if c.speedup is None
            else f"{c.speedup.ratio:.3f} [{c.speedup.low:.3f}, {c.speedup.high:.3f}]"
        )
        print(
            f"  {c.condition:<10} {c.arm:<16} {f'{c.runs_done}/{c.runs_required}':>7} "
            f"{c.runs_failed:>6} {c.repeatability or '-':<10} {c.lossless or '-':<13} {speed}",
            file=out,
        )
    for note in status.notes:
        print(f"  note: {note}", file=out)
    print(status.verdict, file=out)
    for item in status.remaining:
        print(f"  - {item}", file=out)
    return EXIT_OK if status.verdict == "ACCEPTED" else EXIT_FAILED


def _write_html(out: str, root: Any, campaign: Any, ev: Any) -> None:
    """The same page as ``evstore report NAME``, from this evaluation (not a second one)."""
    from .._atomic import write_replace
    from ..errors import ConfigError
    from ..report.targets import render_campaign

    page = render_campaign(root, campaign.name, evaluated=(campaign, ev))
    try:
        write_replace(out, page.html.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"--html {out}: cannot write: {exc.strerror or exc}") from exc
    print(f"wrote {out}", file=sys.stderr)
