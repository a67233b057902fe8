"""Shared by the benchmark scripts (run as `python bench/NAME.py`, so this directory is on sys.path)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def git_commit() -> str:
    """The short commit of the checkout, recorded with every result."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def portable_path(path: str | os.PathLike[str], work: str | os.PathLike[str] | None = None) -> str:
    """`path` as a result records it: the same on any machine, never this machine's absolute paths.

    In the repository: relative to its root ("bench/naive_server.py"); under the shared data:
    "<shared data>/glue/SST-2/dev.tsv"; under `work` (the run's own scratch directory):
    "<work>/detector-fp32"; anywhere else (a model or run directory given on the command line): "<work>/"
    and its last name.
    """
    p = Path(os.path.abspath(path))
    for base, label in ((work, "<work>"), (SHARED_DATA, "<shared data>"), (ROOT, "")):
        if base is not None and p.is_relative_to(os.path.abspath(base)):
            rel = p.relative_to(os.path.abspath(base)).as_posix()
            if not label:
                return rel
            return label if rel == "." else f"{label}/{rel}"
    return f"<work>/{p.name}"


def write_result(record: dict, out: Path | None, default_name: str) -> Path:
    """Write a benchmark record as JSON to `out`, or bench/results/<default_name>.json; returns the path.

    Written whole to a temporary file and renamed, so an interrupted run never leaves half a result.
    """
    path = out or ROOT / "bench" / "results" / f"{default_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def cpu_name() -> str:
    # platform.processor() is often just "x86_64" on Linux; the model name says which machine this was.
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def run_facts(started: float) -> dict[str, Any]:
    """What a result records about its run: the seconds since `started` (a time.perf_counter()), the
    machine, the load average, the commit and the date (UTC)."""
    return {
        "seconds": time.perf_counter() - started,
        "machine": {"cpu": cpu_name(), "python": platform.python_version()},
        "load_average": list(os.getloadavg()),
        "commit": git_commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def usable_cores() -> int:
    # The affinity mask, not os.cpu_count(): a container or taskset may give us fewer cores than the host has.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values
