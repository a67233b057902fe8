"""Fine-tuning evaluations of an encoder: one task and seed per call, cached by key, summarised per task as
the median and range over seeds."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.lib.shared_data import CONLL, GLUE
from experiments.lib.store import Cache

# The figure each task contributes to an average (x100), as in the paper's tables.
SCORE = {
    "cola": "mcc",
    "sst2": "accuracy",
    "mrpc": "f1_accuracy_avg",
    "stsb": "pearson_spearman_avg",
    "rte": "accuracy",
    "qnli": "accuracy",
    "wnli": "accuracy",
    "qqp": "f1_accuracy_avg",
    "mnli": "accuracy",
    "conll2003": "f1",
}


@dataclass(frozen=True)
class FinetuneBudget:
    """How much fine-tuning each evaluation gets: training examples (None: all) and epochs (None: the
    task's default), the same for every encoder; and the recipe (electra.training.finetune.recipe)."""

    max_train_examples: int | None = 3000
    epochs: int | None = 3
    recipe: str = "official"

    def describe(self) -> dict[str, Any]:
        return {"max_train_examples": self.max_train_examples, "epochs": self.epochs, "recipe": self.recipe}


def finetune_score(model: Path, task: str, seed: int, budget: FinetuneBudget) -> dict[str, Any]:
    from electra.training.finetune.config import FinetuneConfig
    from electra.training.finetune.run import finetune

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        summary = finetune(
            FinetuneConfig(
                task=task,
                model=model,
                out=Path(tmp) / "model",
                data_dir=CONLL if task == "conll2003" else GLUE,
                seeds=[seed],
                epochs=budget.epochs,
                max_train_examples=budget.max_train_examples,
                recipe=budget.recipe,
                progress=False,
            )
        )
    dev = summary["median"]["dev"]
    return {
        "score": 100 * dev[SCORE[task]],
        "dev": {
            k: v
            for k, v in dev.items()
            if isinstance(v, float) and not k.startswith(("precision_", "recall_"))
        },
        "epochs": summary["epochs"],
        "train_examples": summary["train_examples"],
        "seconds": time.perf_counter() - started,
        "load_average": os.getloadavg()[0],
    }


Keys = Callable[[str, int], str]  # (task, seed) -> the cache key of that evaluation


def prefixed(prefix: str) -> Keys:
    """Keys `prefix/task/seed`."""
    return lambda task, seed: f"{prefix}/{task}/{seed}"


def finetune_each(
    cache: Cache,
    keys: Keys,
    model: Path,
    tasks: tuple[str, ...],
    seeds: tuple[int, ...],
    budgets: dict[str, FinetuneBudget],
    fields: dict[str, Any],
    label: str,
) -> None:
    """Fine-tune `model` for every task (with its budget) and seed the cache has no row for yet."""
    for task in tasks:
        for seed in seeds:
            key = keys(task, seed)
            if cache.get(key) is None:
                score = finetune_score(model, task, seed, budgets[task])
                row = cache.put(key, {**fields, "task": task, "seed": seed, **score})
                print(f"{label} {task} seed {seed}: {row['score']:.1f} ({row['seconds']:.0f} s)", flush=True)


def spread(scores: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(scores), "min": min(scores), "max": max(scores), "per_seed": scores}


def task_scores(
    cache: Cache, keys: Keys, tasks: tuple[str, ...], seeds: tuple[int, ...]
) -> dict[str, dict[str, Any]]:
    """Per task with any seed evaluated: median, range, scores in seed order."""
    out = {}
    for task in tasks:
        rows = (cache.get(keys(task, seed)) for seed in seeds)
        scores = [row["score"] for row in rows if row is not None]
        if scores:
            out[task] = spread(scores)
    return out
