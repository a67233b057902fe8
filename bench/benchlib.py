"""Shared by the benchmark scripts (run as `python bench/NAME.py`, so this directory is on sys.path)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """The short commit of the checkout, recorded with every result."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


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
