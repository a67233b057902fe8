"""Start `electra serve`, drive it with Locust headless, write CSV stats and a summary JSON.

    python loadtests/run.py --model detector=DIR [--model sentiment=DIR] [--model ner=DIR]
        [--users 32] [--seconds 20] [--spawn-rate R] [--out bench/results] [--name smoke]
        [--server-arg="--max-batch-size 1"]

Exit status: 0 when Locust made requests without a single failure and the server stayed up; 1 on request
failures or no requests; 2 when the server would not start, got unready or died.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the electra package from this checkout, installed or not

from electra.serving.process import (  # noqa: E402
    ServerNotReady,
    ServerProcess,
    free_port,
    serve_command,
    stop,
)

LOCUSTFILE = Path(__file__).resolve().parent / "locustfile.py"
PERCENTILES = {"p50": "50%", "p90": "90%", "p95": "95%", "p99": "99%", "p99.9": "99.9%"}


class RunError(Exception):
    """The server could not be brought up (or went away): exit 2 with this message."""


def git_commit() -> str:
    # bench/ is a directory of scripts, not a package: import its helper from there.
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from benchlib import git_commit as commit

        return commit()
    finally:
        sys.path.remove(str(ROOT / "bench"))


def http_get(url: str, headers: dict[str, str], timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# The locustfile's variable for each route's model ("none": no users of that route).
MODEL_ENV = {
    "detect": "ELECTRA_DETECT_MODEL",
    "classify": "ELECTRA_CLASSIFY_MODEL",
    "tag": "ELECTRA_TAG_MODEL",
}
KIND_OF = {"detect": "discriminator", "classify": "classifier", "tag": "tagger"}
# Suggestions per flagged token the detector users ask for when their detector has a generator.
SUGGEST = 3


def pick_models(base: str, headers: dict[str, str], args: argparse.Namespace) -> tuple[dict[str, str], int]:
    """The model each route's users call ("detect", "classify", "tag"): as given, else the first of its kind
    in /models, else "none"; and the suggestions per token the detector users ask for (SUGGEST when the
    detector has a generator, else 0)."""
    status, body = http_get(f"{base}/models", headers)
    if status != 200:
        hint = " (set ELECTRA_API_KEY to a key from the server's --api-key-file)" if status == 401 else ""
        raise RunError(f"GET /models answered {status}: {body[:300]!r}{hint}")
    models = json.loads(body)["models"]
    by_kind: dict[str, list[str]] = {}
    for m in models:
        by_kind.setdefault(m["kind"], []).append(m["name"])
    picked = {
        route: getattr(args, f"{route}_model") or next(iter(by_kind.get(kind, [])), "none")
        for route, kind in KIND_OF.items()
    }
    if set(picked.values()) == {"none"}:
        raise RunError(f"nothing to load-test: no detector, classifier or tagger selected from {models}")
    detector = next((m for m in models if m["name"] == picked["detect"]), {})
    return picked, SUGGEST if detector.get("generator") else 0


@dataclass
class Outcome:
    """What happened: the models the users called, Locust's exit, the run's length and the server's end."""

    picked: dict[str, str] = field(default_factory=dict)
    suggest: int = 0  # the detector users' `suggest` (0: the detector has no generator)
    locust_rc: int | None = None
    elapsed: float = 0.0
    server_died: bool = False
    server_rc: int | None = None


def stop_server(proc: subprocess.Popen, grace: float = 20.0) -> int | None:
    """SIGTERM (the server drains in-flight requests), then SIGKILL after `grace` seconds."""

    def killing() -> None:
        print(f"loadtest: server ignored SIGTERM for {grace:.0f} s, killing it", file=sys.stderr)

    return stop(proc, grace, on_kill=killing)


def _num(value: str) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None  # Locust writes "N/A" for percentiles of names without requests


def read_stats(path: Path, seconds: float) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per-endpoint rows and the aggregated row of Locust's PREFIX_stats.csv (times in ms)."""
    endpoints: dict[str, dict[str, Any]] = {}
    aggregated: dict[str, Any] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            requests = int(row["Request Count"])
            entry: dict[str, Any] = {
                "requests": requests,
                "failures": int(row["Failure Count"]),
                # Locust's own Requests/s divides by the time since the first request of that name; over the
                # whole run is what capacity planning wants, and it is what total/seconds gives.
                "rps": round(requests / seconds, 2) if seconds > 0 else None,
                "rps_locust": _num(row["Requests/s"]),
                "avg_ms": _num(row["Average Response Time"]),
                "min_ms": _num(row["Min Response Time"]),
                "max_ms": _num(row["Max Response Time"]),
                "avg_bytes": _num(row["Average Content Size"]),
            }
            for key, column in PERCENTILES.items():
                entry[f"{key}_ms"] = _num(row.get(column, ""))
            if row["Name"] == "Aggregated":
                aggregated = entry
            else:
                endpoints[f"{row['Type']} {row['Name']}"] = entry
    return endpoints, aggregated


def read_failures(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return [
            {
                "endpoint": f"{r['Method']} {r['Name']}",
                "error": r["Error"],
                "occurrences": int(r["Occurrences"]),
            }
            for r in csv.DictReader(f)
        ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Load-test `electra serve` with Locust (headless) and summarise the run as JSON.",
        epilog='Options for the server go through --server-arg, e.g. --server-arg="--max-batch-size 1".',
    )
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR", help="bundle to serve")
    p.add_argument("--users", type=int, default=32, help="concurrent Locust users (default 32)")
    p.add_argument("--spawn-rate", type=float, help="users started per second (default: all in ~1 s)")
    p.add_argument("--seconds", type=int, default=20, help="run time after the start (default 20)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="directory for CSV and JSON")
    p.add_argument("--name", default="smoke", help="run name: files loadtest_NAME*.csv/.json (default smoke)")
    p.add_argument("--host", default="127.0.0.1", help="address the server listens on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="server port (default: a free one)")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARGS",
        help="extra `electra serve` arguments, split like a shell would (repeatable)",
    )
    p.add_argument(
        "--detect-model",
        help="detector for /detect (default: the first in /models; 'none': no /detect traffic)",
    )
    p.add_argument(
        "--classify-model",
        help="classifier for /classify (default: the first in /models; 'none': no /classify traffic)",
    )
    p.add_argument(
        "--tag-model",
        help="tagger for /tag (default: the first in /models; 'none': no /tag traffic)",
    )
    p.add_argument(
        "--wait",
        type=float,
        nargs=2,
        default=[0.05, 0.5],
        metavar=("MIN", "MAX"),
        help="think time between a user's requests, seconds (default 0.05 0.5; 0 0: back to back)",
    )
    p.add_argument("--ready-timeout", type=float, default=180.0, help="seconds to wait for /health/ready")
    args = p.parse_args(argv)
    for spec in args.model:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            p.error(f"--model wants NAME=DIR, got {spec!r}")
        if not Path(path).is_dir():
            p.error(f"--model {spec}: {path} is not a directory")
    if args.users < 1 or args.seconds < 1:
        p.error("--users and --seconds must be at least 1")
    return args


def run_locust(args: argparse.Namespace, base: str, prefix: Path, outcome: Outcome) -> None:
    """Locust headless against `base` for --seconds, its CSVs at `prefix`; fills in `outcome`."""
    spawn_rate = args.spawn_rate or float(args.users)
    env = dict(os.environ, **{MODEL_ENV[route]: name for route, name in outcome.picked.items()})
    env["ELECTRA_DETECT_SUGGEST"] = str(outcome.suggest)
    env.update(ELECTRA_WAIT_MIN=str(args.wait[0]), ELECTRA_WAIT_MAX=str(args.wait[1]))
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless"]
    cmd += ["-u", str(args.users), "-r", f"{spawn_rate:g}", "-t", f"{args.seconds}s"]
    cmd += ["--host", base, "--csv", str(prefix), "--only-summary", "--stop-timeout", "10"]
    started = time.time()
    try:
        # Generous limit: Locust stops itself after -t plus --stop-timeout; this only catches a hang.
        outcome.locust_rc = subprocess.run(cmd, env=env, cwd=ROOT, timeout=args.seconds + 120).returncode
    except subprocess.TimeoutExpired:
        print("loadtest: locust did not finish in time", file=sys.stderr)
    outcome.elapsed = time.time() - started


def summarize(
    args: argparse.Namespace, prefix: Path, server_args: list[str], outcome: Outcome
) -> dict[str, Any]:
    """The summary JSON's content, from Locust's CSVs and the outcome."""
    endpoints, aggregated = read_stats(Path(f"{prefix}_stats.csv"), float(args.seconds))
    total = aggregated.get("requests", 0)
    n_failures = aggregated.get("failures", 0)
    chosen = {f"{route}_model": None if name == "none" else name for route, name in outcome.picked.items()}
    return {
        "name": args.name,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "models": dict(spec.partition("=")[::2] for spec in args.model),
        **chosen,
        "detect_suggest": outcome.suggest,
        "server_args": server_args,
        "users": args.users,
        "spawn_rate": args.spawn_rate or float(args.users),
        "wait_seconds": args.wait,
        "seconds": args.seconds,
        "wall_seconds": round(outcome.elapsed, 2),
        "total_requests": total,
        "failures": n_failures,
        "failure_rate": round(n_failures / total, 6) if total else None,
        "rps": aggregated.get("rps"),
        "aggregated": aggregated,
        "endpoints": endpoints,
        "failure_kinds": read_failures(Path(f"{prefix}_failures.csv")),
        "locust_exit_code": outcome.locust_rc,
        "server_died": outcome.server_died,
        "server_exit_code": outcome.server_rc,
        "csv_prefix": prefix.name,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Absolute: Locust runs with the repository as its working directory, not the caller's.
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / f"loadtest_{args.name}"
    summary_path = out / f"loadtest_{args.name}.json"
    # Files of an earlier run under this name would otherwise pass for this run's if Locust fails early.
    for suffix in (".json", "_stats.csv", "_failures.csv", "_exceptions.csv", "_stats_history.csv"):
        Path(f"{prefix}{suffix}").unlink(missing_ok=True)
    port = args.port or free_port(args.host)
    base = f"http://{args.host}:{port}"
    api_key = os.environ.get("ELECTRA_API_KEY", "").strip()
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    cmd = serve_command("--host", args.host, "--port", str(port))
    for spec in args.model:
        name, _, path = spec.partition("=")
        cmd += ["--model", f"{name}={Path(path).resolve()}"]
    server_args = [a for chunk in args.server_arg for a in shlex.split(chunk)]
    cmd += server_args
    print(f"loadtest: starting {shlex.join(cmd)}", file=sys.stderr)
    # The server writes to a file: a pipe nobody drains would stall it once full.
    server = ServerProcess(cmd, url=base, log=out / f"loadtest_{args.name}_server.log", cwd=ROOT)
    outcome = Outcome()
    try:
        ready_s = server.wait_ready(args.ready_timeout, name="electra serve")
        outcome.picked, outcome.suggest = pick_models(base, auth, args)
        chosen = " ".join(f"{route}={name}" for route, name in outcome.picked.items())
        if outcome.suggest:
            chosen += f" (with suggest {outcome.suggest})"
        print(
            f"loadtest: server ready in {ready_s:.1f} s; {chosen}; {args.users} users for {args.seconds} s",
            file=sys.stderr,
        )
        run_locust(args, base, prefix, outcome)
        outcome.server_died = server.poll() is not None
    except (RunError, ServerNotReady) as e:
        print(f"loadtest: {e}", file=sys.stderr)
        return 2
    finally:
        outcome.server_rc = stop_server(server)

    stats_csv = Path(f"{prefix}_stats.csv")
    if not stats_csv.exists():
        print(f"loadtest: Locust wrote no {stats_csv} (exit {outcome.locust_rc})", file=sys.stderr)
        return 2 if outcome.server_died else 1
    summary = summarize(args, prefix, server_args, outcome)
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return report(summary, summary_path, server)


def report(summary: dict[str, Any], summary_path: Path, server: ServerProcess) -> int:
    """Per-endpoint lines and the verdict on stdout/stderr; the exit status."""
    for endpoint, e in summary["endpoints"].items():
        print(
            f"{endpoint:<16} {e['requests']:>7} req {e['failures']:>5} fail {e['rps'] or 0:>8.1f} rps  "
            f"p50 {e['p50_ms']} p95 {e['p95_ms']} p99 {e['p99_ms']} ms"
        )
    total, n_failures = summary["total_requests"], summary["failures"]
    print(f"loadtest: {total} requests, {n_failures} failures, {summary['rps']} rps -> {summary_path}")
    if summary["server_died"]:
        print(
            f"loadtest: the server died during the run (exit {summary['server_exit_code']}):\n"
            f"{server.log_tail(3000)}",
            file=sys.stderr,
        )
        return 2
    for f in summary["failure_kinds"][:10]:
        print(f"loadtest: failure {f['endpoint']} x{f['occurrences']}: {f['error']}", file=sys.stderr)
    if n_failures or not total or summary["locust_exit_code"] != 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
