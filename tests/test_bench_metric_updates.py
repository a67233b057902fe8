"""bench.metric_updates: the request it simulates is the server's, and both modes run to a results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import metric_updates


def test_the_simulated_request_writes_what_a_real_detect_request_writes() -> None:
    """REQUEST is read off the server's code: a change there (a metric more or less on /detect) shows here."""
    r = metric_updates.REQUEST
    # A histogram's and a summary's observation write two values each (a bucket or the count, and the sum).
    simulated = 2 * r["histogram"] + 2 * r["summary"] + r["counter"] + r["gauge_inc"] + r["gauge_set"]
    assert metric_updates._writes_per_request(requests=20) == simulated


@pytest.mark.slow
def test_both_modes_run_and_are_recorded(tmp_path: Path) -> None:
    out = tmp_path / "metric_updates.json"
    assert metric_updates.main(["--rounds", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    for mode in ("single", "multiprocess"):
        figures = record["modes"][mode]["figures"]
        for name in ("request, direct", "request, buffered, idle", "request, buffered, busy"):
            assert figures[name]["cpu_us_median"] > 0
