"""Where experiment results go, and the caches that make every stage of an experiment resumable."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from electra.atomic import atomic_write_bytes, atomic_write_text

RESULTS = Path(__file__).resolve().parents[1] / "results"


class Cache:
    """Results by key in a JSON-lines file: a finished evaluation is never run twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the half-written last line of a killed run: that evaluation runs again
                self.rows[row["key"]] = row

    def get(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)

    def put(self, key: str, row: dict[str, Any]) -> dict[str, Any]:
        row = {"key": key, **row}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            # A line of its own even after a killed run's partial one.
            f.write("\n" + json.dumps(row) + "\n")
        self.rows[key] = row
        return row


def read_record(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """A stage's record, written whole or not at all: its presence says the stage finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return record


def save_figure(fig: Any, path: Path) -> Path:
    """A matplotlib figure as a PNG, written whole through a temporary file of its own (an experiment split
    between invocations may have two of them writing one plot)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue())
    return path
