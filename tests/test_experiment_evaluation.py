"""experiments/lib/evaluation.finetune_each with --jobs: the fine-tunes a cache lacks run that many at a time
in processes of their own with their share of the threads, each cached as it finishes, and one that fails
loses none of the others' work."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.lib.evaluation import FinetuneBudget, finetune_each, prefixed
from experiments.lib.store import Cache

BUDGETS = {"sst2": FinetuneBudget(None, 3), "conll2003": FinetuneBudget(None, 3)}


def fake_score(model: Path, task: str, seed: int, budget: FinetuneBudget) -> dict[str, Any]:
    """What finetune_score returns, with where it ran; slow enough that two workers both get work."""
    time.sleep(0.3)
    if task == "conll2003" and seed == 2:
        raise RuntimeError("diverged")
    return {
        "score": 10.0 * seed + len(task),
        "seconds": 0.3,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "model": model.name,
    }


def run(
    cache: Cache, jobs: int, tasks: tuple[str, ...] = ("sst2",), seeds: tuple[int, ...] = (1, 2, 3)
) -> None:
    finetune_each(
        cache, prefixed("m"), Path("encoder"), tasks, seeds, BUDGETS, {"arm": "x"}, "x", jobs, fake_score
    )


def test_fine_tunes_run_jobs_at_a_time_each_in_a_process_with_its_share_of_threads(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "evaluations.jsonl")
    cache.put("m/sst2/1", {"score": 99.0})  # cached: not run again
    run(cache, jobs=2, seeds=(1, 2, 3, 4, 5))
    rows = [cache.get(f"m/sst2/{seed}") for seed in (2, 3, 4, 5)]
    assert [row["score"] for row in rows if row] == [24.0, 34.0, 44.0, 54.0]
    assert {row["arm"] for row in rows if row} == {"x"} and cache.get("m/sst2/1") == {
        "key": "m/sst2/1",
        "score": 99.0,
    }
    pids = {row["pid"] for row in rows if row}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {row["threads"] for row in rows if row} == {max(1, torch.get_num_threads() // 2)}
    # Every row reached the file, once: another invocation reads them all.
    assert Cache(tmp_path / "evaluations.jsonl").rows == cache.rows


def test_one_failed_fine_tune_loses_none_of_the_others(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "evaluations.jsonl")
    with pytest.raises(RuntimeError, match="diverged"):
        run(cache, jobs=2, tasks=("conll2003",), seeds=(1, 2, 3))
    assert sorted(cache.rows) == ["m/conll2003/1", "m/conll2003/3"]


def test_one_job_runs_in_this_process(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "evaluations.jsonl")
    run(cache, jobs=1, seeds=(1, 2))
    assert {row["pid"] for row in cache.rows.values()} == {os.getpid()}
