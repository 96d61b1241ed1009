"""Push and fetch against an S3 protocol server, with ``aws s3 sync`` as the peer.

One moto server (its own process, 127.0.0.1, free port) serves both tools; a WSGI
middleware counts the requests it receives by method, so the no-op push shows what
it costs. Both tools run as separate processes (``python -m evidencestore`` and
``aws``), timed end to end including start-up.

    python benches/bench_remotes.py [--blobs 1000] [--size-mib 1] [--jobs 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SERVER = r"""
import json, logging, sys, threading
from collections import Counter
logging.getLogger("werkzeug").setLevel(logging.ERROR)
from moto.server import DomainDispatcherApplication, create_backend_app
from moto.moto_server.werkzeug_app import MotoRequestHandler
from werkzeug.serving import make_server

app = DomainDispatcherApplication(create_backend_app)
counts = Counter()
ports = set()
lock = threading.Lock()

def counting(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/__counts":
        with lock:
            body = json.dumps(dict(counts)).encode()
            if environ["REQUEST_METHOD"] == "POST":
                counts.clear()
                ports.clear()
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    with lock:
        counts[environ["REQUEST_METHOD"]] += 1
        ports.add(environ.get("REMOTE_PORT"))
        counts["connections"] = len(ports)
    return app(environ, start_response)

server = make_server("127.0.0.1", 0, counting, threaded=True, request_handler=MotoRequestHandler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_CONFIG_FILE": os.devnull,
}
BUCKET = "bench"


def _counts(endpoint: str, reset: bool = True) -> dict[str, int]:
    request = urllib.request.Request(f"{endpoint}/__counts", method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run a tool; return (wall seconds, the tool's CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def _cpu_of(pid: int) -> float:
    """CPU seconds a running process has used (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blobs", type=int, default=1000)
    parser.add_argument("--size-mib", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per tool")
    parser.add_argument("--no-fetch", action="store_true", help="only the push benchmarks")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    aws = shutil.which("aws")
    if aws is None:
        print("aws CLI not found: install awscli to run the peer", file=sys.stderr)
        return 2
    from evidencestore.bundle import create_bundle
    from evidencestore.config import Config, RemoteConfig, save_config
    from evidencestore.remotes import local_store

    env = {**os.environ, **ENV}
    os.environ.update(ENV)
    work = Path(tempfile.mkdtemp(prefix="evstore-bench-"))
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)

        size = int(args.size_mib * (1 << 20))
        src = work / "src"
        src.mkdir()
        for i in range(args.blobs):
            (src / f"blob{i:05d}.bin").write_bytes(os.urandom(size))
        total = args.blobs * size
        mb = total / 1e6

        repo = work / "repo"
        repo.mkdir()

        def use_prefix(prefix: str) -> None:
            remote = RemoteConfig(url=f"s3://{BUCKET}/{prefix}", options={"endpoint_url": endpoint})
            save_config(repo, Config(remotes={"s3": remote}))

        use_prefix("evstore-0")
        create_bundle(
            repo, "bench", [src], store=local_store(repo), external=["*"],
            created="2026-01-01T00:00:00Z",
        )  # fmt: skip
        cache = local_store(repo).root
        cache_copy = work / "cache-copy"
        shutil.copytree(cache, cache_copy)
        evstore = [sys.executable, "-m", "evidencestore"]
        jobs = ["--jobs", str(args.jobs), "--root", str(repo)]
        aws_s3 = [aws, "s3", "--endpoint-url", endpoint, "--only-show-errors"]
        runs: dict[tuple[str, str], list[tuple[float, float, float, dict[str, int]]]] = {}

        def run(label: str, tool: str, argv: list[str]) -> None:
            _counts(endpoint)
            server_cpu = _cpu_of(server.pid)
            seconds, cpu = _timed(argv, env)
            server_cpu = _cpu_of(server.pid) - server_cpu
            runs.setdefault((label, tool), []).append((seconds, cpu, server_cpu, _counts(endpoint)))

        digests: list[str] = []
        for rep in range(args.repeat):
            # The tools alternate, each into a fresh prefix / directory, so that drifts in
            # machine load hit both alike.
            order = [0, 1] if rep % 2 == 0 else [1, 0]
            for who in order:
                if who == 0:
                    run(
                        "push",
                        "aws s3 sync",
                        [*aws_s3, "sync", str(src), f"s3://{BUCKET}/aws-{rep}"],
                    )
                else:
                    use_prefix(f"evstore-{rep}")
                    run("push", "evstore push", [*evstore, "push", *jobs])
            for who in order:
                if who == 0:
                    run("push (all present)", "aws s3 sync",
                        [*aws_s3, "sync", str(src), f"s3://{BUCKET}/aws-{rep}"])  # fmt: skip
                else:
                    run("push (all present)", "evstore push", [*evstore, "push", *jobs])
            for who in order if not args.no_fetch else []:
                if who == 0:
                    dst = work / f"dst-aws-{rep}"
                    run(
                        "fetch",
                        "aws s3 sync",
                        [*aws_s3, "sync", f"s3://{BUCKET}/aws-{rep}", str(dst)],
                    )
                    assert _tree_bytes(dst) == total
                    shutil.rmtree(dst)
                else:
                    shutil.rmtree(cache)
                    run("fetch", "evstore pull", [*evstore, "pull", *jobs])
                    assert _tree_bytes(cache) == total
                    if not digests:
                        digests = sorted(
                            "blake3:" + p.name for p in cache.rglob("*") if p.is_file()
                        )
                    shutil.rmtree(cache)
                    run("fetch", "evstore fetch DIGEST...", [*evstore, "fetch", *digests, *jobs])
                    assert _tree_bytes(cache) == total

        print(
            f"\n{args.blobs} blobs x {args.size_mib:g} MiB = {mb:.0f} MB; one moto S3 server "
            f"(own process) on 127.0.0.1; {os.cpu_count()} CPUs; evstore --jobs {args.jobs}; "
            f"aws CLI defaults (10 concurrent requests); median of {args.repeat} alternating runs\n"
        )
        print(
            f"{'operation':<20} {'tool':<24} {'seconds':>8} {'MB/s':>8} {'vs aws':>7} "
            f"{'tool CPU s':>10} {'server CPU s':>12}  requests the server received"
        )
        peer: dict[str, float] = {}
        for (label, tool), samples in runs.items():
            seconds = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            server_cpu = statistics.median(s[2] for s in samples)
            counts = samples[-1][3]
            if tool.startswith("aws"):
                peer[label] = seconds
            ratio = f"{peer[label] / seconds:.2f}x" if label in peer else "-"
            rate = f"{mb / seconds:.1f}" if "present" not in label else "-"
            requests = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            print(
                f"{label:<20} {tool:<24} {seconds:8.2f} {rate:>8} {ratio:>7} {cpu:10.2f} "
                f"{server_cpu:12.2f}  {requests}"
            )
        print(
            "\n'vs aws': the aws CLI's median time divided by evstore's (above 1.00x, evstore is "
            "faster). Every run is a fresh process, start-up included; moto closes every "
            "connection, so each request is a new TCP connection for both tools."
        )
        print("all runs (seconds):")
        for (label, tool), samples in runs.items():
            print(f"  {label:<20} {tool:<24} " + " ".join(f"{s[0]:.2f}" for s in samples))
    finally:
        server.terminate()
        server.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
