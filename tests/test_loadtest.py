"""CI smoke of the load test: loadtests/run.py starts `electra serve`, Locust drives it, nothing fails."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "loadtests" / "run.py"


@pytest.mark.slow
def test_loadtest_runs_without_failures(
    serving_bundles: dict[str, Path], suggest_bundle: Path, tmp_path: Path
) -> None:
    # Only looked up, never imported: importing locust monkey-patches this process with gevent.
    if importlib.util.find_spec("locust") is None:
        pytest.skip("locust is absent (it is in the dev extra: pip install -e '.[dev]')")
    out = tmp_path / "results"
    # The detector has a generator, so its users ask for suggestions too (/detect, v2, fill-mask on /hf).
    cmd = [sys.executable, str(RUNNER), "--model", f"detector={suggest_bundle}"]
    cmd += ["--model", f"sentiment={serving_bundles['sentiment']}"]
    cmd += ["--model", f"tagger={serving_bundles['tagger']}"]
    # CI has 2 cores shared by the server and Locust: a handful of users keeps latency meaningful.
    cmd += ["--users", "8", "--seconds", "20", "--out", str(out), "--name", "ci"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    log = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, log

    summary = json.loads((out / "loadtest_ci.json").read_text())
    assert summary["failures"] == 0, summary["failure_kinds"]
    assert summary["total_requests"] > 0 and summary["rps"] > 0
    assert summary["server_died"] is False and summary["server_exit_code"] == 0, log
    models = (summary["detect_model"], summary["classify_model"], summary["tag_model"])
    assert models == ("detector", "sentiment", "tagger") and summary["detect_suggest"] > 0
    # Every endpoint saw traffic (the standard protocols' too) and has latency percentiles.
    endpoints = (
        "POST /detect",
        "POST /classify",
        "POST /tag",
        "POST /v2/models/{name}/infer",
        "POST /hf/{name}",
        "POST /detect suggest",
        "POST /hf/{name} fill-mask",
    )
    for endpoint in endpoints:
        stats = summary["endpoints"][endpoint]
        assert stats["requests"] > 0 and stats["failures"] == 0
        assert 0 <= stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] and stats["p99_ms"] > 0
    assert summary["aggregated"]["requests"] == summary["total_requests"]

    stats_csv = out / "loadtest_ci_stats.csv"
    assert stats_csv.exists()
    with stats_csv.open(newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    assert int(rows["Aggregated"]["Request Count"]) == summary["total_requests"]
