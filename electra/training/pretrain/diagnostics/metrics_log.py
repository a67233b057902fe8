"""RUN/metrics.jsonl: one JSON record per line, train and validation, appended as the run goes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        # NaN and infinity are not JSON: a metric undefined for a window (precision, nothing flagged) is null.
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(clean) + "\n")

    def truncate_after(self, step: int) -> None:
        """On resume, drop records past the checkpoint so the curves have no duplicated steps."""
        if not self.path.exists():
            return
        keep = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill -9
        self.path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
