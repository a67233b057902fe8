"""bench/demo_time.py times the demo's stages from its own log lines and keeps what it reached; one real fresh
build (few steps, a cut corpus) goes end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import demo_time as dtm
from bench.benchlib import log_records


def log(*records: tuple[str, str]) -> str:
    lines = [
        json.dumps({"time": t, "level": "INFO", "logger": "electra.demo", "message": m}) for t, m in records
    ]
    return "\n".join(["a library's own line, not JSON", *lines])


def test_each_stage_runs_from_its_line_to_the_next_and_the_last_to_built_in() -> None:
    records = log_records(
        log(
            ("2026-11-27T10:00:00.000+00:00", "[1/7] demo corpus"),
            ("2026-11-27T10:00:06.000+00:00", "[2/7] tokenizer"),
            ("2026-11-27T10:00:06.500+00:00", "wrote the tokenizer"),
            ("2026-11-27T10:00:07.000+00:00", "[3/7] pre-training data"),
            ("2026-11-27T10:00:10.000+00:00", "[4/7] pre-training (tiny model, 600 steps)"),
            ("2026-11-27T10:00:11.000+00:00", "pre-training on 2 CPU threads: 2.0 of 2 cores free"),
            (
                "2026-11-27T10:03:10.000+00:00",
                "pre-trained 600 steps: discriminator accuracy 0.891 (all-original baseline 0.852), "
                "replaced-token recall 0.412",
            ),
            ("2026-11-27T10:03:10.000+00:00", "[5/7] fused ONNX bundle"),
            ("2026-11-27T10:03:14.000+00:00", "[6/7] an example"),
            ("2026-11-27T10:03:15.000+00:00", "swapped one word in 368 sentences: it flags 200"),
            ("2026-11-27T10:03:15.250+00:00", "built in 195 s"),
        )
    )
    assert dtm.stage_times(records) == {
        "demo corpus": 6.0,
        "tokenizer": 1.0,
        "pre-training data": 3.0,
        "pre-training (tiny model, 600 steps)": 180.0,
        "fused ONNX bundle": 4.0,
        "an example": 1.25,
    }
    assert dtm.check_report(records) == ["swapped one word in 368 sentences: it flags 200"]
    assert dtm.trained(records) == {
        "threads": 2,
        "threads_line": "pre-training on 2 CPU threads: 2.0 of 2 cores free",
        "steps": 600,
        "discriminator_accuracy": 0.891,
        "all_original_baseline": 0.852,
        "replaced_recall": 0.412,
    }


def test_medians_over_rounds() -> None:
    rounds = [
        {"total_s": t, "stages_s": {"a": a, "b": b}} for t, a, b in ((10, 1, 9), (30, 3, 20), (20, 8, 5))
    ]
    assert dtm.medians(rounds) == {"total_s": 20, "stages_s": {"a": 3, "b": 9}}


@pytest.mark.slow
def test_a_fresh_build_is_timed_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo_time.json"
    assert dtm.main(["--steps", "3", "--corpus-mb", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (run,) = record["rounds"]
    assert list(run["stages_s"]) == [
        "demo corpus",
        "tokenizer",
        "pre-training data",
        "pre-training (tiny model, 3 steps)",
        "fused ONNX bundle",
        "an example: a docstring-like sentence with one word swapped, checked with the model",
    ]
    assert all(s >= 0 for s in run["stages_s"].values())
    assert sum(run["stages_s"].values()) <= run["total_s"]
    assert run["pretraining"]["steps"] == 3 and run["pretraining"]["threads"] >= 1
    assert run["example"]["checked"] > 0 and run["example"]["text"]
    report = run["check_report"]
    assert report[0].startswith(f"swapped one word in {run['example']['checked']} docstring-like sentences")
    assert report[1] == f'example: "{run["example"]["text"]}"'
    assert record["median"]["total_s"] == run["total_s"]
    assert record["command"][:4] == ["-m", "electra", "--log-format", "json"]
