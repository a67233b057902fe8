"""bench.import_gpu_run: a GPU run's files land in bench/results/gpu/ with the project's commit and their
provenance; and the committed H100 import carries both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.benchlib import RESULTS, ROOT


def test_a_run_is_imported_with_its_commit_and_provenance(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    header = {"benchmark": "x", "date": "2026-12-01T10:00:00+00:00", "commit": "c948580"}
    (run / "bench.json").write_text(json.dumps({**header, "machine": {"device": "NVIDIA H200"}, "v": 1}))
    (run / "eval.json").write_text(json.dumps({"data_dir": "../shared/data/glue/SST-2", "acc": 0.9}))
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    (run / "notes.txt").write_text("not a result")
    suite = {"steps": [{"name": "b", "results": "bench.json", "command": "python -m bench.x --fast"}]}
    (run / "suite.json").write_text(json.dumps(suite))
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.import_gpu_run", str(run), "--name", "2026-12-01-h200"]
    cmd += ["--commit", "abc1234", "--note", "a note", "--command", "eval.json=electra finetune ..."]
    cmd += ["--results", str(results)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dest = results / "gpu" / "2026-12-01-h200"
    bench = json.loads((dest / "bench.json").read_text())
    assert bench["commit"] == "abc1234" and bench["v"] == 1
    prov = bench["provenance"]
    assert prov["source"] == "imported from a GPU run" and prov["gpu"] == "NVIDIA H200"
    assert (
        prov["date"] == "2026-12-01" and prov["commit"] == "abc1234" and prov["recorded_commit"] == "c948580"
    )
    assert prov["command"] == "python -m bench.x --fast" and prov["note"] == "a note"
    evaluation = json.loads((dest / "eval.json").read_text())
    assert evaluation["data_dir"] == "<shared data>/glue/SST-2"
    assert evaluation["provenance"]["command"] == "electra finetune ..."
    assert (dest / "metrics.jsonl").read_text() == '{"step": 1}\n' and not (dest / "notes.txt").exists()
    listed = {e["file"]: e for e in json.loads((dest / "provenance.json").read_text())}
    assert set(listed) == {"bench.json", "eval.json", "metrics.jsonl", "suite.json"}
    assert listed["metrics.jsonl"]["commit"] == "abc1234"


def test_a_missing_run_directory_is_a_one_line_error(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "bench.import_gpu_run",
        str(tmp_path / "nope"),
        "--name",
        "n",
        "--commit",
        "c",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "not a directory" in done.stderr


def test_the_h100_run_is_imported_with_commit_73e5952() -> None:
    dest = RESULTS / "gpu" / "2026-11-27-h100"
    files = sorted(p.name for p in dest.iterdir())
    assert "pretrain_small.json" in files and "pretrain_metrics.jsonl" in files
    for path in dest.glob("*.json"):
        if path.name == "provenance.json":
            continue
        record = json.loads(path.read_text())
        assert record["commit"] == "73e5952", path.name
        assert record["provenance"]["source"] == "imported from a GPU run", path.name
        assert record["provenance"]["gpu"] == "NVIDIA H100 80GB HBM3", path.name
        assert record["provenance"]["date"] == "2026-11-27" and record["provenance"]["command"], path.name
