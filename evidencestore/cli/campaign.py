"""`evstore` subcommands: campaign (``init``, ``verify``, ``claim``, ``plan``, ``status``,
``tasks``, ``work``).

Exit codes: ``init`` 0 registered; ``verify`` 0 when every run of the campaign was
recorded under the frozen protocol, 1 with findings; ``claim`` 0 only when the claim
stands (its interval clears ``min_speedup`` within the measurement resolution), 1
otherwise; ``plan`` 0 when every condition's plan could be computed and its A/A check
includes 1.0 with runs enough to see a 1.3x drift, 1 otherwise; ``status`` 0 when ``ACCEPTED``, 1 when ``NOT_ACCEPTED`` or ``UNAVAILABLE``
(inputs missing: ``evstore pull``); ``void`` / ``withdraw`` 0 registered; ``tasks`` 0;
``work`` 0 when every chosen task was computed (and published), 1 when one could not be
(an input missing); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    NAME,
    ROOT,
    Commands,
    arg,
    json_flag,
    progress_line,
    repo_root,
    switch,
)

if TYPE_CHECKING:
    from ..campaign.protocol import Campaign
    from ..config import Repository
    from ..models import Model


def register(commands: Commands) -> None:
    """Register this group's subcommands."""
    csub = commands.group(
        "campaign",
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
    # Setting aside: what is set aside, why, and the record that says so.
    for command, what, record, summary in (
        (
            "void",
            arg("--run", required=True, metavar="RUN", help="the run bundle to set aside"),
            "name of the void record",
            "register a void record setting a mistaken run aside (effective once committed)",
        ),
        (
            "withdraw",
            arg("--arm", required=True, metavar="A", help="the candidate arm to withdraw"),
            "name of the record",
            "register a withdrawal record for a candidate arm (effective once committed)",
        ),
    ):
        reason = arg("--reason", required=True, metavar="TEXT", help="why (kept in the record)")
        named = arg("--record", required=True, metavar="BUNDLE", help=record)
        sign = arg(
            "--sign",
            metavar="KEY",
            help="sign the record with this private key (a campaign with [signing] counts "
            "only records signed by a key it pins)",
        )
        csub.add(command, _set_aside, [NAME, what, reason, named, sign, ROOT], help=summary)
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
        "plan",
        _plan,
        [
            NAME,
            arg(
                "--ratio",
                type=float,
                action="append",
                metavar="R",
                help="an assumed true speedup to plan for (repeatable; default: a range above "
                "min_speedup)",
            ),
            arg(
                "--power",
                type=float,
                default=0.8,
                metavar="P",
                help="the probability the claim should stand when the speedup is R (0.8)",
            ),
            arg(
                "--protocol",
                metavar="FILE",
                help="plan from this protocol.toml before `campaign init` (NAME is then only "
                "a label), with the --pilot runs as its baseline",
            ),
            arg(
                "--pilot",
                action="append",
                metavar="RUN",
                help="with --protocol: a baseline pilot run bundle (repeatable), matched to "
                "its condition by workload digest",
            ),
            json_flag("the plan"),
            ROOT,
        ],
        help="runs per arm needed to resolve min_speedup, from the baseline runs; the A/A check",
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
            switch(
                "--no-memo", help="compute everything again, reusing nothing kept (the same output)"
            ),
            arg(
                "--html",
                metavar="OUT",
                help="also write the status as a self-contained HTML report "
                "(evidencestore[report])",
            ),
            arg(
                "--jobs",
                type=int,
                metavar="N",
                help="compute pending tasks in N processes (default: the cores available, for work "
                "large enough to pay for starting them)",
            ),
            arg(
                "--recheck",
                type=int,
                default=3,
                metavar="K",
                help="compute K unsigned remote results again, chosen at random, before any "
                "counts (0: unsigned remote results are not used; default 3)",
            ),
            ROOT,
        ],
        help="conditions x arms, the verdict, and what remains",
    )
    shard = arg(
        "--shard",
        metavar="I/N",
        help="only the tasks of shard I of N (0 <= I < N), chosen by key: stable as "
        "other tasks complete",
    )
    csub.add(
        "tasks",
        _tasks,
        [NAME, json_flag("the task list"), shard, ROOT],
        help="every computation a status needs and does not have, by key",
    )
    csub.add(
        "work",
        _work,
        [
            NAME,
            arg(
                "--task",
                action="append",
                metavar="KEY",
                help="compute this task (repeatable; default: every task of the campaign)",
            ),
            shard,
            arg(
                "--push",
                metavar="REMOTE",
                help="publish results to this remote (default: the first writable one)",
            ),
            arg(
                "--sign",
                metavar="KEY",
                help="sign each result with this private key (counted without a recheck "
                "when the protocol pins its public key in [signing] workers)",
            ),
            arg(
                "--jobs",
                type=int,
                default=1,
                metavar="N",
                help="compute in N processes (default 1)",
            ),
            ROOT,
        ],
        help="compute tasks and publish each result by key to a remote",
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
                "voided": result.voided,
                "withdrawn": result.withdrawn,
                "never_started": result.never_started,
            }
        )
    else:
        commit = result.protocol_commit[:12] if result.protocol_commit else "not committed"
        print(f"campaign {result.campaign}: protocol {result.protocol_digest} ({commit})")
        for run, at in sorted(result.runs.items()):
            print(f"  ok        {run}" + (f" (added in {at[:12]})" if at else ""))
        set_aside = [
            ("voided   ", result.voided),
            ("withdrawn", result.withdrawn),
            ("never-started", result.never_started),
        ]
        for word, items in set_aside:
            for v in items:
                print(f"  {word} {v.run}: {v.message}")
        for f in result.findings:
            word = (
                "pending"
                if f.code == "uncommitted"
                else "finding"
                if not f.run or f.run in result.runs
                else "excluded"
            )
            print(f"  {word:<9} {f.run or '-'}: {f.code}: {f.message}")
        for line in result.protection:
            print(f"  {line}")
        counted = len(result.runs)
        print(
            f"{'verified' if result.ok else 'NOT verified'}: {counted} run(s) recorded under "
            f"the frozen protocol, {len(result.findings)} finding(s)"
        )
    return EXIT_OK if result.ok else EXIT_FAILED


def _signing_key(path: str | None) -> Any:
    if path is None:
        return None
    from ..dsse import load_private_key

    return load_private_key(path)


def _set_aside(args: argparse.Namespace) -> int:
    """``campaign void`` (a run) or ``campaign withdraw`` (an arm): register the record."""
    from ..campaign.protocol import load_campaign
    from ..campaign.setaside import void_run, withdraw_arm

    root = repo_root(args)
    campaign = load_campaign(root, args.name)
    key = _signing_key(args.sign)
    if args.campaign_command == "void":
        rec = void_run(root, campaign, args.run, args.reason, args.record, signing_key=key)
        what = f"run {rec.run} ({rec.run_digest}) voided"
    else:
        withdrawn = withdraw_arm(
            root, campaign, args.arm, args.reason, args.record, signing_key=key
        )
        what = f"arm {withdrawn.arm} withdrawn"
    print(f"campaign {campaign.name}: {what} by {args.record}")
    print(f"  commit evidence/{args.record} for it to take effect")
    return EXIT_OK


def _register(
    root: Repository,
    name: str,
    campaign: Campaign,
    records: Mapping[str, Model],
    evaluation: str | None,
) -> None:
    """Register the command's records as bundle ``name`` (``--register``)."""
    from ..campaign.records import register_records

    register_records(
        root,
        name,
        records,
        campaign=campaign.name,
        protocol_digest=campaign.digest,
        evaluation=evaluation,
    )


def _claim(args: argparse.Namespace) -> int:
    from ..campaign.claims import make_claim
    from ..campaign.members import campaign_runs
    from ..campaign.protocol import load_campaign
    from ..campaign.records import claim_records
    from ..remotes import repository_store

    root = repo_root(args)
    campaign = load_campaign(root, args.name)
    members = campaign_runs(root, campaign)
    claim = make_claim(repository_store(root), campaign, members, args.condition, args.arm)
    if args.register:
        from ..campaign.memo import memo_key
        from ..campaign.status import claim_key, evaluation_inputs

        key = memo_key("campaign-evaluation", evaluation_inputs(campaign, members))
        evaluation = claim_key(key, args.condition, args.arm)
        _register(root, args.register, campaign, claim_records(claim), evaluation)
    if args.json:
        _print_json(claim)
    else:
        _print_claim(args.condition, args.arm, claim)
    return EXIT_OK if claim.stands else EXIT_FAILED


_VERDICT_WORDS = {
    "STANDS": "the claim stands",
    "NOT_CLEARED": "NOT claimed: the interval does not clear the threshold",
    "UNRESOLVED": "NOT claimed: the measurement resolution could change the verdict",
    "REFUSED": "claim refused",
    "NO_TIMING_CLAIM": "no timing claim: the protocol declares none",
    "UNAVAILABLE": "UNAVAILABLE: an input is neither here nor on a configured remote",
}


def _spread(run: float | None, within: float | None) -> str:
    r = "-" if run is None else f"{run:.2%}"
    w = "-" if within is None else f"{within:.2%}"
    return f"run-to-run {r}, within-run {w}"


def _print_claim(condition: str, arm: str, claim: Any) -> None:
    head = f"{condition} {arm} vs {claim.baseline_arm}"
    threshold = (
        "no timing claim" if claim.min_speedup is None else f"min_speedup {claim.min_speedup:g}"
    )
    print(f"{head}: {_VERDICT_WORDS[claim.verdict]} ({threshold})")
    if claim.speedup is not None:
        s = claim.speedup
        pct = round(claim.confidence * 100, 4)
        df = "-" if claim.df is None else f"{claim.df:.2f}"
        metric = "" if claim.metric == "e2e" else f" on {claim.metric}"
        family = (
            f", family-wise over {claim.family_size} claims ({claim.correction}: each at "
            f"{round((claim.interval_confidence or claim.confidence) * 100, 4):g}%)"
            if claim.family_size > 1
            else ""
        )
        print(
            f"  speedup{metric} {s.ratio:.4f} ({pct:g}% CI {s.low:.4f} to {s.high:.4f}), "
            f"{claim.estimator}, df {df}{family}"
        )
        if claim.min_speedup is not None:
            side = "clears" if claim.clears else "does NOT clear"
            print(f"  the interval's low end {s.low:.4f} {side} min_speedup {claim.min_speedup:g}")
        b = claim.bounded
        if b is not None and (b.low < s.low * (1 - 1e-6) or b.high > s.high * (1 + 1e-6)):
            print(
                f"  within the measurement resolution (up to {claim.resolution_s:.4g} s a "
                f"request): {b.low:.4f} to {b.high:.4f}"
            )
    print(f"  metric {claim.metric} from {claim.harness}: {claim.metric_definition or '-'}")
    for reason in claim.reasons:
        print(f"  - {reason}")
    for what in claim.unavailable:
        print(f"  - unavailable: {what}")
    print(
        f"  runs used: {claim.runs_baseline} {claim.baseline_arm} ({claim.n_baseline} requests, "
        f"{_spread(claim.run_spread_baseline, claim.within_spread_baseline)}), "
        f"{claim.runs_candidate} {arm} ({claim.n_candidate} requests, "
        f"{_spread(claim.run_spread_candidate, claim.within_spread_candidate)})"
    )
    for rv in sorted(claim.runs, key=lambda r: (r.started, r.run)):
        cv = "-" if rv.cv is None else f"{rv.cv:.3%}"
        print(
            f"  {rv.arm:<12} {rv.run}: value {rv.value:.4f} s, mean {rv.mean:.4f} s, CV {cv}, "
            f"started {rv.started or '-'}, {rv.digest}"
        )
    for p in claim.percentiles:
        if p.value is None:
            continue
        where = (
            f"{round(claim.confidence * 100, 4):g}% CI {p.low:.4f} to {p.high:.4f}"
            if p.low is not None and p.high is not None
            else f"no interval: {p.n} requests, {p.needed} needed"
        )
        print(f"  {p.arm:<12} p{round(p.q * 100, 4):g} {p.value:.4f} s ({where})")
    for a, b in claim.pairs:
        print(f"  pair {a} / {b}")
    for name in claim.failed_runs:
        print(f"  failed   {name}: contributes no number")
    for e in claim.excluded:
        print(f"  excluded {e.run}: {e.code}: {e.message}")
    for note in claim.notes:
        print(f"  note: {note}")
    for d in claim.config_diff:
        print(f"  config {d['key']}: {d['a']!r} -> {d['b']!r}")


def _plan(args: argparse.Namespace) -> int:
    from ..campaign.members import campaign_runs
    from ..campaign.plan import plan_campaign
    from ..campaign.protocol import load_campaign
    from ..errors import ConfigError

    if not 0.0 < args.power < 1.0:
        raise ConfigError(f"--power {args.power}: expected a probability between 0 and 1")
    for r in args.ratio or ():
        if not r > 0:
            raise ConfigError(f"--ratio {r}: expected a positive speedup")
    root = repo_root(args)
    if args.protocol is not None:
        from pathlib import Path

        from ..campaign.plan import pilot_runs, plan_protocol
        from ..campaign.protocol import parse_protocol
        from ..digest import hash_bytes

        source = Path(args.protocol)
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise ConfigError(f"--protocol {source}: cannot read: {exc.strerror}") from exc
        protocol = parse_protocol(data, str(source))
        pilots = pilot_runs(root, protocol, source, args.pilot or ())
        plans = plan_protocol(protocol, pilots, ratios=args.ratio or (),
                              target_power=args.power)  # fmt: skip
        label, digest = f"{args.name} (from {source}, not registered)", hash_bytes(data).digest
    else:
        if args.pilot:
            raise ConfigError("--pilot: only with --protocol (a registered campaign plans "
                              "from its own baseline runs)")  # fmt: skip
        campaign = load_campaign(root, args.name)
        plans = plan_campaign(campaign, campaign_runs(root, campaign), ratios=args.ratio or (),
                              target_power=args.power)  # fmt: skip
        label, digest = campaign.name, campaign.digest
    ok = all(
        p.run_spread is not None and p.aa_includes_one and p.aa_conclusive is not False
        for p in plans
    )
    if args.json:
        _print_json({"campaign": args.name, "protocol_digest": digest,
                     "ok": ok, "conditions": plans})  # fmt: skip
        return EXIT_OK if ok else EXIT_FAILED
    print(f"campaign {label}: protocol {digest}")
    for p in plans:
        spread = "-" if p.run_spread is None else f"{p.run_spread:.2%}"
        within = "-" if p.within_spread is None else f"{p.within_spread:.2%}"
        print(
            f"  {p.condition}: {len(p.baseline_runs)} baseline run(s), run-to-run spread "
            f"{spread}, within-run {within}; min_speedup {p.min_speedup:g} at "
            f"{p.confidence:.0%} confidence, power {p.power:.0%}"
        )
        if p.planned_spread is not None:
            print(
                f"    planned with spread {p.planned_spread:.2%} (its {p.assurance:.0%} upper "
                f"bound), at least min_runs = {p.min_runs} runs"
            )
        for row in p.rows:
            need = "-" if row.runs_needed is None else str(row.runs_needed)
            pw = "-" if row.power_at_required is None else f"{row.power_at_required:.0%}"
            print(
                f"    true speedup {row.ratio:g}: {need} runs per arm; "
                f"power with {p.required_runs} runs: {pw}"
            )
        if p.aa is not None:
            word = (
                "EXCLUDES 1.0"
                if not p.aa_includes_one
                else "includes 1.0, INCONCLUSIVE (too few runs to see a drift)"
                if p.aa_conclusive is False
                else "includes 1.0"
            )
            print(
                f"    A/A check: {p.aa.ratio:.4f} [{p.aa.low:.4f}, {p.aa.high:.4f}] {word} "
                f"({', '.join(p.aa_halves[0])} vs {', '.join(p.aa_halves[1])})"
            )
        for note in p.notes:
            print(f"    note: {note}")
    return EXIT_OK if ok else EXIT_FAILED


def _status(args: argparse.Namespace) -> int:
    from ..campaign.protocol import load_campaign
    from ..campaign.records import evaluation_records
    from ..campaign.status import evaluate

    root = repo_root(args)
    campaign = load_campaign(root, args.name)
    from ..scale.local import LocalProcesses, available_cpus

    jobs = available_cpus() if args.jobs is None else args.jobs
    executor = LocalProcesses(args.jobs) if jobs > 1 else None  # None: the cores, if worth it
    if jobs < 1 or args.recheck < 0:
        from ..errors import ConfigError

        raise ConfigError(
            f"--jobs {args.jobs}: expected at least 1"
            if jobs < 1
            else f"--recheck {args.recheck}: expected 0 or more"
        )
    with progress_line(args) as line:
        ev = evaluate(
            root, campaign, base_rev=args.base, memo=not args.no_memo,
            executor=executor, recheck=args.recheck, observer=line,
        )  # fmt: skip
    status = ev.status
    if args.register:
        evaluation = ev.key if status.verdict != "UNAVAILABLE" else None
        _register(root, args.register, campaign, evaluation_records(ev), evaluation)
    if args.html:
        _write_html(args.html, root, campaign, ev)
    if args.json:
        _print_json(status)
        return EXIT_OK if status.verdict == "ACCEPTED" else EXIT_FAILED
    out = sys.stdout
    print(f"campaign {status.campaign}: protocol {status.protocol_digest}", file=out)
    verdict = f"{status.verdict} {status.qualifier}" if status.qualifier else status.verdict
    print(f"verdict {verdict} (accept = {status.accept})", file=out)
    for a in status.arms:
        role = "baseline" if a.baseline else "candidate"
        print(f"  {a.arm} ({role}): {a.conclusion}", file=out)
        if a.conclusion in ("rejected", "withdrawn"):
            for why in a.reasons:
                print(f"      {why}", file=out)
    print(
        f"  {'condition':<10} {'arm':<16} {'runs':>7} {'failed':>6} {'repeat':<10} "
        f"{'lossless':<13} {'conclusion':<10} speedup",
        file=out,
    )
    for c in status.cells:
        speed = (
            "-"
            if c.speedup is None
            else f"{c.speedup.ratio:.3f} [{c.speedup.low:.3f}, {c.speedup.high:.3f}]"
        ) + (f" {c.claim}" if c.claim is not None and c.speedup is not None else "")
        print(
            f"  {c.condition:<10} {c.arm:<16} {f'{c.runs_done}/{c.runs_required}':>7} "
            f"{c.runs_failed:>6} {c.repeatability or '-':<10} {c.lossless or '-':<13} "
            f"{c.conclusion or '-':<10} {speed}",
            file=out,
        )
    for note in status.notes:
        print(f"  note: {note}", file=out)
    for v in (*status.voided, *status.withdrawn, *status.never_started):
        print(f"  {v.code}: {v.run}: {v.message}", file=out)
    for m in status.missing:
        print(f"  missing {m.digest}: {m.needed_by}", file=out)
    for r in status.records:
        word = {None: "history", True: "agrees", False: "MISMATCH"}[r.agrees]
        print(f"  registered {word}: {r.message}", file=out)
    print(verdict, file=out)
    for item in status.remaining:
        print(f"  - {item}", file=out)
    return EXIT_OK if status.verdict == "ACCEPTED" else EXIT_FAILED


def _tasks(args: argparse.Namespace) -> int:
    from ..campaign.protocol import load_campaign
    from ..campaign.tasks import parse_shard, plan, shard

    root = repo_root(args)
    tasks = plan(root, load_campaign(root, args.name)).tasks
    if args.shard is not None:
        tasks = shard(tasks, *parse_shard(args.shard))
    if args.json:
        _print_json(
            [
                {"key": t.key, "kind": t.kind, "inputs": t.inputs, "cost": t.cost,
                 "needs": list(t.needs)}
                for t in tasks
            ]
        )  # fmt: skip
        return EXIT_OK
    for t in tasks:
        inputs = " ".join(f"{k}={v}" for k, v in t.inputs.items() if v is not None)
        print(f"{t.key} {t.kind:<12} cost {t.cost:>10} {inputs}")
    total = sum(t.cost for t in tasks)
    print(f"{len(tasks)} task(s), {total} byte(s) to decode (estimated)")
    return EXIT_OK


def _work(args: argparse.Namespace) -> int:
    from ..campaign.protocol import load_campaign
    from ..campaign.results import work
    from ..campaign.tasks import parse_shard
    from ..scale.local import LocalProcesses

    root = repo_root(args)
    if args.jobs < 1:
        from ..errors import ConfigError

        raise ConfigError(f"--jobs {args.jobs}: expected at least 1")
    done = work(
        root,
        load_campaign(root, args.name),
        keys=args.task or (),
        shard=parse_shard(args.shard) if args.shard is not None else None,
        push=args.push,
        signer=_signing_key(args.sign),
        executor=LocalProcesses(args.jobs) if args.jobs > 1 else None,
    )
    where = f"remote {done.remote!r}" if done.remote else "no remote (local memo only)"
    print(
        f"{done.tasks} task(s): {done.computed} computed, {done.published} published to "
        f"{where}, {done.present} already there, {len(done.failed)} failed"
    )
    for key, why in sorted(done.failed.items()):
        print(f"  failed {key}: {why}", file=sys.stderr)
    return EXIT_FAILED if done.failed else EXIT_OK


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
