"""bench/demo_threads.py reads its figures from the demo's own log: the pre-training stage's seconds and the
threads it chose; and it reports the median of per-round ratios."""

from __future__ import annotations

import json

import pytest

from bench import demo_threads as dt


def log(*records: tuple[str, str]) -> str:
    lines = [
        json.dumps({"time": t, "level": "INFO", "logger": "electra.demo", "message": m}) for t, m in records
    ]
    return "\n".join(["a library's own line, not JSON", *lines, "{}"])


def test_stage_seconds_and_threads_from_the_json_log() -> None:
    records = dt.log_records(
        log(
            ("2026-11-27T10:00:00.000+01:00", "[3/7] pre-training data"),
            ("2026-11-27T10:00:01.250+01:00", "[4/7] pre-training (tiny model, 100 steps)"),
            ("2026-11-27T10:00:01.800+01:00", "pre-training on 1 CPU thread: 0.1 of 2 cores free (...)"),
            ("2026-11-27T10:01:03.750+01:00", "[5/7] fused ONNX bundle"),
        )
    )
    assert len(records) == 4
    assert dt.stage_seconds(records, 4, 5) == pytest.approx(62.5)
    assert dt.stage_seconds(records, 5, 6) is None
    line, threads = dt.threads_line(records)
    assert threads == 1 and line is not None and line.startswith("pre-training on 1 CPU thread")
    assert (
        dt.threads_line(dt.log_records(log(("2026-11-27T10:00:00+00:00", "pre-training on 12 CPU threads"))))[
            1
        ]
        == 12
    )


def test_the_summary_is_the_median_of_per_round_ratios() -> None:
    def run(pretrain: float, total: float) -> dict[str, float]:
        return {"pretrain_s": pretrain, "total_s": total}

    rounds = [
        {"torch_default": run(100, 120), "electra_choice": run(20, 40)},  # 5x
        {"torch_default": run(60, 80), "electra_choice": run(30, 50)},  # 2x
        {"torch_default": run(90, 110), "electra_choice": run(30, 50)},  # 3x
    ]
    s = dt.summary(rounds)
    assert s["pretrain_s_ratio_default_over_choice"]["median"] == pytest.approx(3.0)
    assert s["pretrain_s_ratio_default_over_choice"]["per_round"] == pytest.approx([5.0, 2.0, 3.0])
    assert s["torch_default_pretrain_s_median"] == 90 and s["electra_choice_pretrain_s_median"] == 30
    assert s["total_s_ratio_default_over_choice"]["median"] == pytest.approx(2.2)
