"""Import the results of a run on a GPU host into bench/results/gpu/NAME/, with their provenance as data.

A GPU run comes back as a directory of the JSON files the project's own benchmarks wrote (and JSONL metrics):
either what `bench.gpu_suite` wrote (suite.json holds every step's command and results file) or files from
commands run by hand. Each JSON file is copied with its `commit` set to the project commit that ran (the
host's copy may have recorded another repository's, or none) and a `provenance` object: "imported from a
GPU run", the GPU, the date, the commit, the command that wrote it, the commit the file itself recorded when
that differs, and a note. Paths into the shared data are written the portable way (<shared data>/...).
provenance.json lists every imported file (JSONL files too, which cannot carry a field of their own).

    python -m bench.import_gpu_run RUN_DIR --name 2026-11-27-h100 --commit 73e5952 \\
        --command pretrain_small.json="python -m bench.pretrain_throughput --device cuda ..." --note "..."
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from bench.benchlib import RESULTS
from electra.atomic import atomic_write_text

SOURCE = "imported from a GPU run"
SHARED_PREFIX = re.compile(r"^(?:\.\./)+shared/data(?=/|$)")


def suite_commands(run: Path) -> dict[str, str]:
    """{results file name: command} from a gpu_suite run's suite.json, if there is one."""
    suite = run / "suite.json"
    if not suite.is_file():
        return {}
    steps = json.loads(suite.read_text()).get("steps", [])
    return {s["results"]: s["command"] for s in steps if s.get("results") and s.get("command")}


def portable(value: Any) -> Any:
    """Every string that starts in the shared data, written from <shared data>."""
    if isinstance(value, str):
        return SHARED_PREFIX.sub("<shared data>", value)
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    return value


def provenance(record: dict[str, Any], args: argparse.Namespace, command: str | None) -> dict[str, Any]:
    machine = record.get("machine", {}) if isinstance(record.get("machine"), dict) else {}
    out: dict[str, Any] = {
        "source": SOURCE,
        "run": args.name,
        "gpu": args.gpu or machine.get("device"),
        "date": args.date or str(record.get("date", ""))[:10] or None,
        "commit": args.commit,
    }
    recorded = record.get("commit")
    if recorded and recorded != args.commit:
        out["recorded_commit"] = recorded
    if command:
        out["command"] = command
    if args.note:
        out["note"] = args.note
    return out


def import_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Copy the run's JSON and JSONL files; returns provenance.json's entries."""
    dest = args.results / "gpu" / args.name
    commands = {**suite_commands(args.run), **dict(args.command)}
    entries = []
    for path in sorted(args.run.iterdir()):
        if path.suffix == ".json":
            record = json.loads(path.read_text())
            prov = provenance(record, args, commands.get(path.name))
            if isinstance(record, dict):
                record = {**portable(record), "commit": args.commit, "provenance": prov}
            atomic_write_text(dest / path.name, json.dumps(record, indent=2) + "\n")
        elif path.suffix == ".jsonl":
            prov = provenance({}, args, commands.get(path.name))
            atomic_write_text(dest / path.name, path.read_text())
        else:
            continue
        entries.append({"file": path.name, **prov})
    atomic_write_text(dest / "provenance.json", json.dumps(entries, indent=2) + "\n")
    return entries


def command_pair(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not name or not command:
        raise argparse.ArgumentTypeError(f"expected FILE=COMMAND, got {text!r}")
    return name, command


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="the directory the GPU run brought back")
    ap.add_argument("--name", required=True, help="its name under bench/results/gpu/, e.g. 2026-11-27-h100")
    ap.add_argument("--commit", required=True, help="the project commit that ran")
    ap.add_argument("--gpu", help="the GPU (default: each file's machine.device)")
    ap.add_argument("--date", help="YYYY-MM-DD (default: each file's date)")
    ap.add_argument("--note", help="what a reader should know about the run")
    ap.add_argument(
        "--command", type=command_pair, action="append", default=[], help="FILE=COMMAND that wrote it"
    )
    ap.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.run.is_dir():
        print(f"error: {args.run} is not a directory", file=sys.stderr)
        return 2
    entries = import_run(args)
    if not entries:
        print(f"error: {args.run} holds no .json or .jsonl file", file=sys.stderr)
        return 2
    print(f"imported {len(entries)} files into {args.results / 'gpu' / args.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
