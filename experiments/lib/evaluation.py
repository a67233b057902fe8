"""Fine-tuning evaluations of an encoder: one task and seed per call, cached by key, summarised per task as
the median and range over seeds."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
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


Score = Callable[[Path, str, int, FinetuneBudget], dict[str, Any]]


def finetune_each(
    cache: Cache,
    keys: Keys,
    model: Path,
    tasks: tuple[str, ...],
    seeds: tuple[int, ...],
    budgets: dict[str, FinetuneBudget],
    fields: dict[str, Any],
    label: str,
    jobs: int = 1,
    score: Score = finetune_score,
) -> None:
    """Fine-tune `model` for every task (with its budget) and seed the cache has no row for yet; `jobs` at
    a time (see fine_tunes_at_once), each cached as it finishes."""
    todo = [(task, seed) for task in tasks for seed in seeds if cache.get(keys(task, seed)) is None]
    for (task, seed), figures in fine_tunes_at_once(model, todo, budgets, jobs, score):
        row = cache.put(keys(task, seed), {**fields, "task": task, "seed": seed, **figures})
        print(f"{label} {task} seed {seed}: {row['score']:.1f} ({row['seconds']:.0f} s)", flush=True)


def fine_tunes_at_once(
    model: Path, todo: list[tuple[str, int]], budgets: dict[str, FinetuneBudget], jobs: int, score: Score
) -> Iterator[tuple[tuple[str, int], dict[str, Any]]]:
    """Each (task, seed) of `todo` scored, in the order they finish: one after another in this process, or
    with `jobs` > 1 that many at a time in processes of their own, each with 1/jobs of this process's torch
    threads (at least one). Why: a micro model's step is too small to keep a second thread busy, so two
    single-thread fine-tunes should finish more per hour on 2 cores than one two-thread one (not measured);
    with one thread each they also compute as a --threads 1 run does."""
    if jobs <= 1 or len(todo) <= 1:
        for task, seed in todo:
            yield (task, seed), score(model, task, seed, budgets[task])
        return
    import multiprocessing

    import torch

    threads = max(1, torch.get_num_threads() // jobs)
    # spawn, not fork: this process may hold torch's thread pools, which a forked child inherits broken.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_set_threads, initargs=(threads,)) as pool:
        running = {pool.submit(score, model, task, seed, budgets[task]): (task, seed) for task, seed in todo}
        failed: BaseException | None = None
        for done in as_completed(running):
            try:
                figures = done.result()
            except Exception as e:  # the others' work is still cached; the first failure is raised after
                failed = failed or e
                continue
            yield running[done], figures
    if failed is not None:
        raise failed


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


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
