"""`evstore` subcommands: run (``run WORKLOAD``, ``run show``, ``run diff``).

``run`` is both a command taking WORKLOAD and a group with ``show``, ``diff`` and
``determinism``: the ``run`` parser takes its arguments verbatim and dispatches on the
first one to one of four parsers, so ``evstore run workload.toml --arm x`` and ``evstore
run show B`` both parse (a workload file literally named ``show`` is given as ``./show``).

Exit codes: ``run`` 0 for a complete run with every output valid, 1 for any other run
(registered all the same), 2 for usage errors; ``show`` 0, or 2; ``diff`` as
``evstore diff``: 0 the same, 1 different, 2 usage errors; ``determinism`` 0 when every
prompt got one distinct output, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import ConfigError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    ROOT,
    Adder,
    Commands,
    add_arguments,
    arg,
    json_flag,
    progress_line,
    repeatable,
    repo_root,
)

if TYPE_CHECKING:
    from ..runs.models import RunRecord


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise ConfigError(f"{self.prog}: {message}")


def register(commands: Commands) -> None:
    """Register this group's subcommands: ``run`` and, as the parser's ``subcommands``
    default (what ``cli/reference.py`` documents), the names it dispatches on."""
    usages = " | ".join(f"run {name} {usage}" for name, (usage, _, _) in _SUBCOMMANDS.items())
    p = commands.add(
        "run",
        _dispatch,
        [arg("argv", nargs=argparse.REMAINDER)],
        description=f"evstore run WORKLOAD --arm NAME --server URL ... | {usages} "
        "(see `evstore run WORKLOAD -h`, `evstore run show -h`)",
        prefix_chars="\x00",
        add_help=False,
    )
    p.set_defaults(subcommands=tuple(_SUBCOMMANDS))


def _parser(prog: str, description: str, arguments: list[Adder]) -> _Parser:
    """A parser of its own for ``run``, ``run show`` or ``run diff`` (see the module)."""
    p = _Parser(prog=prog, description=description)
    add_arguments(p, [*arguments, ROOT])
    return p


def _run_parser() -> _Parser:
    return _parser(
        "evstore run",
        "Check the server, send the workload's warmup then measured requests, "
        "check every output against its request, and register the run as a bundle. "
        "Exit 0 for a complete run with every output valid, 1 otherwise, 2 usage error.",
        [
            arg("workload", metavar="WORKLOAD", help="workload.toml"),
            arg("--arm", required=True, help="the configuration under test (baseline, ...)"),
            arg("--server", required=True, metavar="URL", help="base URL of the server"),
            repeatable("--config", "FILE", "a resolved configuration file (repeatable)"),
            repeatable("--server-log", "FILE", "a server log to keep (repeatable)"),
            arg("--name", metavar="BUNDLE", help="bundle name (default: <arm>-<UTC time>)"),
            arg(
                "--campaign",
                metavar="NAME",
                help="campaign bundle whose protocol.toml this run follows",
            ),
            arg("--condition", metavar="C", help="the campaign condition (e.g. 5s)"),
            arg(
                "--sign",
                metavar="KEY",
                help="sign the run record with this ed25519 private key (run.dsse.json)",
            ),
            arg(
                "--launch",
                metavar="CMD",
                help="start the server with this command (no shell), keep its argv, "
                "environment names, log, time to ready and exit status, stop it after the run "
                "(default: the workload's [server] command, if any)",
            ),
        ],
    )


def _show_parser() -> _Parser:
    return _parser(
        "evstore run show",
        "Per phase: requests, failures, E2E latency, TTFB.",
        [arg("bundle", metavar="BUNDLE"), json_flag("the summary")],
    )


def _diff_parser() -> _Parser:
    return _parser(
        "evstore run diff",
        "Every difference between two runs' configuration files, workloads, "
        "server identity and client environment.",
        [arg("a", metavar="A"), arg("b", metavar="B"), json_flag("the differences")],
    )


def _determinism_parser() -> _Parser:
    return _parser(
        "evstore run determinism",
        "The determinism check across batch sizes: the same prompts in runs at different "
        "concurrencies must give identical tokens. Exit 0 when every prompt has one "
        "distinct output, 1 otherwise.",
        [arg("runs", metavar="RUN", nargs="+"), json_flag("the check")],
    )


def _determinism(args: argparse.Namespace) -> int:
    import msgspec

    from ..campaign.tokens import determinism_of_runs

    result = determinism_of_runs(repo_root(args), args.runs)
    if args.json:
        print(json.dumps(msgspec.to_builtins(result), indent=2))
    else:
        shown = ", ".join(
            f"{n} (concurrency {c})" for n, c in zip(result.runs, result.concurrency, strict=True)
        )
        verdict = "deterministic" if result.deterministic else "NOT deterministic"
        print(f"{verdict} across {shown}")
        for p in result.prompts:
            print(f"  request {p.request}: {p.distinct} distinct output(s)")
        for reason in result.reasons:
            print(f"  {reason}")
    return EXIT_OK if result.deterministic else EXIT_FAILED


def _dispatch(args: argparse.Namespace) -> int:
    argv: list[str] = list(args.argv)
    verbosity = getattr(args, "verbosity", 0)
    if not argv:
        _run_parser().error(
            f"the following arguments are required: WORKLOAD (or {' / '.join(_SUBCOMMANDS)})"
        )
    head = argv[0]
    if head in _SUBCOMMANDS:
        _, make, func = _SUBCOMMANDS[head]
        parser, rest = make(), argv[1:]
    else:
        parser, func, rest = _run_parser(), _run, argv
    try:
        ns = parser.parse_args(rest)
    except SystemExit as exc:  # -h
        return int(exc.code or 0)
    ns.verbosity = verbosity
    if getattr(args, "root", None) and not getattr(ns, "root", None):
        ns.root = args.root  # `evstore --root DIR run ...`
    return func(ns)


def _run(args: argparse.Namespace) -> int:
    from ..runs.preflight import preflight
    from ..runs.runner import run_prepared

    root = repo_root(args)
    key = None
    if args.sign:
        from ..dsse import load_private_key

        key = load_private_key(args.sign)
    rules = None
    if args.campaign:
        from ..campaign.fit import campaign_rules

        rules = campaign_rules(root, args.campaign)
    name = args.name or f"{args.arm}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    given: dict[str, Any] = {
        "arm": args.arm,
        "server": args.server,
        "name": name,
        "configs": args.config,
        "server_logs": args.server_log,
        "campaign": rules,
        "condition": args.condition,
        "signing_key": key,
    }
    from ..runs.launch import launch_prepared, parse_command

    command = parse_command(args.launch) if args.launch else None
    # One pre-flight (the workload loaded once, the server to launch checked), then
    # launch the server if the run names one (--launch, or the workload's [server]
    # command), else run against --server.
    prepared = preflight(root, args.workload, command=command, launch=None, **given)
    with progress_line(args) as line:
        if prepared.launch is not None:
            registration, record = launch_prepared(prepared, observer=line)
        else:
            registration, record = run_prepared(prepared, observer=line)
    return _ran(registration, record, name)


def _ran(registration: Any, record: RunRecord, name: str) -> int:
    if record.name != name:
        from ..runs.recorder import renamed

        print(f"evstore: warning: {renamed(name, record.name)}", file=sys.stderr)
    counts = record.counts
    failed = sum(sum(c.failures.values()) for c in counts.values())
    total = sum(c.requests for c in counts.values())
    line = (
        f"run {record.name}: {record.outcome}, {total} requests "
        f"({counts['warmup'].requests} warmup, {counts['measured'].requests} measured), {failed} failed"
    )
    if record.reason:
        line += f" ({record.reason})"
    if not record.server.ok and record.server.message:
        line += f"; server: {record.server.message}"
    print(line)
    launched = record.launched
    if launched is not None:
        ready = "never ready" if launched.ready_s is None else f"ready in {launched.ready_s:.3f} s"
        how = "stopped by the run" if launched.stopped_by_run else "exited by itself"
        print(
            f"server {' '.join(launched.argv)}: {ready}, exit status {launched.exit_status} "
            f"({how}), log logs/server.log"
        )
    print(f"registered evidence/{record.name}/ ({registration.digest})")
    if record.campaign is not None and record.outcome != "complete":
        print(_campaign_note(record))
    return EXIT_OK if record.outcome == "complete" else EXIT_FAILED


def _campaign_note(record: RunRecord) -> str:
    """What a run that is not complete means to its campaign, and what to do about it."""
    from ..runs.recorder import never_started

    where = f"campaign {record.campaign}: run {record.name}"
    if never_started(record):
        return f"{where} never started (no server was reached); it counts against no arm"
    return (
        f"{where} counts as a failed run of arm {record.arm}; if it failed for a reason "
        f"that is not the arm's, set it aside with `evstore campaign void {record.campaign} "
        f"--run {record.name} --reason TEXT --record BUNDLE` (effective once committed)"
    )


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _show(args: argparse.Namespace) -> int:
    from ..runs.recorder import load_run
    from ..runs.summary import summarize

    summary = summarize(load_run(repo_root(args), args.bundle))
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_OK
    print(f"run {summary['name']}: arm {summary['arm']}, outcome {summary['outcome']}")
    if summary["reason"]:
        print(f"  {summary['reason']}")
    harness = summary["harness"]
    if harness:
        print(
            f"  imported from {harness['name']} {harness['version'] or '(version unknown)'}"
            + (f": {harness['command']}" if harness["command"] else "")
        )
        for field, definition in harness["metrics"].items():
            print(f"  {field}: {definition}")
        for missing in harness["not_recorded"]:
            print(f"  not recorded: {missing}")
        loadgen = harness["loadgen"]
        if loadgen:
            print(f"  LoadGen {loadgen['scenario']} {loadgen['mode']}: {loadgen['validity']}")
            for rule in loadgen["rules"]:
                print(f"    {rule['name']}: {'met' if rule['met'] else 'NOT met'}")
            for pct, ns in loadgen["percentiles_ns"].items():
                print(f"    p{pct} latency {ns} ns")
            if loadgen["early_stopping"]:
                print(f"    early stopping: {loadgen['early_stopping']}")
    if not summary["server_ok"]:
        print(f"  server check failed: {summary['server_message']}")
    explain_sd = False
    for phase, info in summary["phases"].items():
        fails = ", ".join(f"{k} {v}" for k, v in info["failures"].items()) or "none"
        print(f"{phase}: {info['requests']} requests, {info['ok']} ok, failures: {fails}")
        for key, label in (
            ("e2e_s", "E2E"),
            ("ttfb_s", "TTFB"),
            ("ttft_s", "TTFT"),
            ("itl_s", "ITL"),
            ("tpot_s", "TPOT"),
        ):
            s = info.get(key)
            if s and s["n"]:
                sd = f"  sd {s['sd']:.3f}" if s["sd"] is not None else ""
                explain_sd = explain_sd or bool(sd)
                print(
                    f"  {label} s (n={s['n']}): min {_fmt(s['min'])}  median {_fmt(s['median'])}  "
                    f"p90 {_fmt(s['p90'])}  max {_fmt(s['max'])}  mean {_fmt(s['mean'])}{sd}"
                )
        if "output_tokens" in info:
            print(f"  output tokens: {info['output_tokens']}")
    if explain_sd:
        print(
            "  (sd: the sample standard deviation over the phase's requests; a speedup "
            "claim takes one value per run, see `evstore campaign claim`)"
        )
    load = summary.get("load")
    if load and load.get("request_rate") is not None:
        lag = load["send_lag_median_s"] or 0.0
        print(
            f"open loop: {load['request_rate']:g} requests/s asked, "
            f"{load['achieved_rate'] or 0.0:.4g} achieved; schedule slip median "
            f"{lag * 1e3:.3f} ms, p99 {(load['send_lag_p99_s'] or 0.0) * 1e3:.3f} ms, max "
            f"{(load['send_lag_max_s'] or 0.0) * 1e3:.3f} ms"
        )
    good = summary.get("goodput")
    if good:
        print(
            f"goodput: {good['rate']:.4g} requests/s ({good['good']} of {good['measured']} "
            f"measured met the SLO over {good['span_s']:.4g} s; missed: {good['missed']})"
        )
    if load and load["client_bound"]:
        print("client-bound: " + "; ".join(load["reasons"]))
    elif load:  # stated either way: "not client-bound" is a finding too
        lag = load.get("send_lag_median_s")
        print(
            f"not client-bound: client CPU {load['cpu_fraction']:.0%} of one core"
            + (
                f", median send lag {lag * 1000:.3g} ms (limit {load['max_send_lag_s'] * 1000:.3g} ms)"
                if lag is not None
                else ""
            )
        )
    for f in summary["failures"]:
        print(f"  {f['label']} (record {f['index']}): {f['failure']}: {f['message']}")
    if summary["unchecked"]:
        print(
            f"  {summary['unchecked']} output(s) not checked against their request "
            "(check_media off, or the check could not run): no verdict can be PASS on them"
        )
    if summary["bounded"]:
        first = summary["bounded"][0]
        print(
            f"  {len(summary['bounded'])} output(s) with an audio length bounded, not "
            f"verified (no lossless PASS on them unless a protocol accepts bounded lengths); "
            f"first: {first['label']}: {first['message']}"
        )
    for audit in summary["audits"]:
        found = len(audit["findings"])
        print(f"audit {audit['name']}: {found} finding(s); {audit['description']}")
        for finding in audit["findings"]:
            print(f"  {finding['message']}")
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    from ..remotes import repository_store
    from ..runs.diff import diff_runs
    from ..runs.recorder import load_run

    root = repo_root(args)
    a: RunRecord = load_run(root, args.a)
    b: RunRecord = load_run(root, args.b)
    diffs = diff_runs(a, b, repository_store(root))
    if args.json:
        print(
            json.dumps(
                {"a": a.name, "b": b.name, "differences": [d.as_dict() for d in diffs]}, indent=2
            )
        )
        return EXIT_FAILED if diffs else EXIT_OK
    print(f"run diff {a.name} {b.name}: {len(diffs)} differences")
    for d in diffs:
        print(f"  {d.section} {d.key}: {json.dumps(d.a)} -> {json.dumps(d.b)}")
    return EXIT_FAILED if diffs else EXIT_OK


#: ``run``'s own subcommands, the one list: name -> (usage, parser, handler). Any other
#: first argument is a workload (a workload file named like one is given as ``./show``).
_SUBCOMMANDS: dict[str, tuple[str, Callable[[], _Parser], Callable[[argparse.Namespace], int]]] = {
    "show": ("BUNDLE", _show_parser, _show),
    "diff": ("A B", _diff_parser, _diff),
    "determinism": ("RUN...", _determinism_parser, _determinism),
}
