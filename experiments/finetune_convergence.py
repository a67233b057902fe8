"""How much fine-tuning an encoder needs before its score stops rising: dev score against fine-tuning steps,
for a randomly initialised encoder and pre-trained ones, so that an experiment comparing them fine-tunes
each long enough to measure what it can become rather than where it starts.

Each encoder is fine-tuned on each task with growing training sets (the first N examples of a fixed
shuffle, `all` the whole training set) for --epochs, or as many as a size names (`allx6`: the whole set for
6 epochs, the way on once the training set runs out), with several seeds, under each --recipes:

    python -m experiments.finetune_convergence --work runs/conv \\
        --encoder random=runs/eq/arms/random/seed-1/point-000 \\
        --encoder mlm=runs/eq/arms/mlm/seed-1/point-100/mlm \\
        --sizes sst2=3000,10000,20000,all --sizes conll2003=3000,7000,all,allx6

Results are cached in --work; experiments/results/<--name>.json holds every score with its steps and time,
and where each encoder's curve stops rising (the smallest budget within --tolerance points of its best);
<--name>.png plots the curves.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from bench.benchlib import int_list, portable_path, result_header, write_result
from experiments.lib import tables
from experiments.lib.evaluation import FinetuneBudget, finetune_each, spread
from experiments.lib.shared_data import CONLL, GLUE, missing
from experiments.lib.store import RESULTS, Cache, save_figure

BATCH = 32  # electra finetune's default batch, which every evaluation uses


Budget = tuple[int | None, int]  # (training examples, None: all; epochs)


def parse_sizes(items: list[str], epochs: int) -> dict[str, list[Budget]]:
    """["sst2=3000,all", "conll2003=allx6"] -> {"sst2": [(3000, epochs), (None, epochs)], "conll2003":
    [(None, 6)]}; ValueError naming a bad item."""
    out: dict[str, list[Budget]] = {}
    for item in items:
        task, eq, values = item.partition("=")
        if not eq or not values:
            raise ValueError(f"--sizes {item!r}: expected TASK=N,N,...,all (NxE or allxE for E epochs)")
        budgets = []
        for value in values.split(","):
            size, x, times = value.partition("x")
            try:
                budget = (None if size == "all" else int(size), int(times) if x else epochs)
            except ValueError:
                raise ValueError(
                    f"--sizes {item!r}: a size is a whole number or all, optionally xE for E epochs"
                ) from None
            if (budget[0] is not None and budget[0] < 1) or budget[1] < 1:
                raise ValueError(f"--sizes {item!r}: sizes and epochs are at least 1")
            budgets.append(budget)
        out[task] = budgets
    return out


def size_name(budget: Budget) -> str:
    size, epochs = budget
    return f"{'all' if size is None else size}x{epochs}"


def key(encoder: str, task: str, budget: Budget, recipe: str) -> str:
    return f"{encoder}/{task}/{size_name(budget)}/{recipe}"


def curves(
    cache: Cache,
    encoders: dict[str, Path],
    sizes: dict[str, list[Budget]],
    recipes: list[str],
    seeds: tuple[int, ...],
    tolerance: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in encoders:
        for task, task_sizes in sizes.items():
            for recipe in recipes:
                points = []
                for budget in task_sizes:
                    rows = [cache.get(f"{key(name, task, budget, recipe)}/{task}/{s}") for s in seeds]
                    rows = [r for r in rows if r is not None]
                    if not rows:
                        continue
                    examples = rows[0]["train_examples"]
                    points.append(
                        {
                            "train_examples": examples,
                            "epochs": rows[0]["epochs"],
                            "steps": math.ceil(examples / BATCH) * rows[0]["epochs"],
                            "seconds_median": sorted(r["seconds"] for r in rows)[len(rows) // 2],
                            **spread([r["score"] for r in rows]),
                        }
                    )
                if points:
                    points.sort(key=lambda p: p["steps"])
                    best = max(p["median"] for p in points)
                    enough = next(p for p in points if p["median"] >= best - tolerance)
                    out.setdefault(name, {}).setdefault(task, {})[recipe] = {
                        "points": points,
                        "best_median": best,
                        "steps_within_tolerance": enough["steps"],
                        "train_examples_within_tolerance": enough["train_examples"],
                    }
    return out


def markdown_table(result: dict[str, Any]) -> str:
    """The write-up's table: per task and training-set size, each encoder's median over seeds and its range
    (a recipe other than the first is named beside the encoder)."""
    first_recipe = result["setup"]["recipes"][0]
    columns: list[tuple[str, str]] = []
    cells: dict[tuple[str, int, int], dict[tuple[str, str], str]] = {}
    steps: dict[tuple[str, int, int], int] = {}
    for name, per_task in result["curves"].items():
        for task, per_recipe in per_task.items():
            for recipe, curve in per_recipe.items():
                if (name, recipe) not in columns:
                    columns.append((name, recipe))
                for p in curve["points"]:
                    row = (task, p["train_examples"], p["epochs"])
                    steps[row] = p["steps"]
                    spread_ = f"{p['median']:.1f} ({p['min']:.1f}-{p['max']:.1f})"
                    cells.setdefault(row, {})[(name, recipe)] = spread_
    head = [
        "task",
        "training examples",
        "epochs",
        "steps",
        *(n if r == first_recipe else f"{n} ({r})" for n, r in columns),
    ]
    order = list(result["setup"]["sizes"])
    rows = [
        [
            task,
            f"{examples:,}",
            str(epochs),
            f"{steps[task, examples, epochs]:,}",
            *(cells[task, examples, epochs].get(c, "") for c in columns),
        ]
        for task, examples, epochs in sorted(cells, key=lambda r: (order.index(r[0]), steps[r]))
    ]
    return tables.markdown_table(head, rows)


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    tasks = [t for t in result["setup"]["sizes"] if any(t in enc for enc in result["curves"].values())]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        ticks: dict[int, str] = {}
        for name, per_task in result["curves"].items():
            for recipe, curve in per_task.get(task, {}).items():
                pts = curve["points"]
                x = [p["steps"] for p in pts]
                y = [p["median"] for p in pts]
                err = [[p["median"] - p["min"] for p in pts], [p["max"] - p["median"] for p in pts]]
                style = "-" if recipe == "official" else "--"
                ax.errorbar(x, y, yerr=err, fmt="o" + style, capsize=3, label=f"{name} ({recipe})")
                for p in pts:
                    ticks[p["steps"]] = f"{p['train_examples']:,}\nx{p['epochs']}"
        # Each budget at its steps, named by its training examples and epochs.
        ax.set_xscale("log")
        ax.set_xticks(list(ticks), list(ticks.values()), fontsize=7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("fine-tuning budget: training examples x epochs (log of steps at batch 32)")
        ax.set_ylabel(f"{task} dev score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def describe(
    encoders: dict[str, Path],
    sizes: dict[str, list[Budget]],
    epochs: int,
    recipes: list[str],
    seeds: tuple[int, ...],
    tolerance: float,
) -> dict[str, Any]:
    """The results file's setup: each encoder by the path it was read from (repository-relative: which
    run and point, not just a directory's last name)."""
    return {
        "encoders": {n: portable_path(p) for n, p in encoders.items()},
        "sizes": {t: [size_name(b) for b in v] for t, v in sizes.items()},
        "epochs": epochs,
        "recipes": recipes,
        "seeds": seeds,
        "tolerance": tolerance,
        "batch_size": BATCH,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="where the evaluations are cached")
    ap.add_argument("--encoder", action="append", default=[], help="NAME=DIR (an HF encoder directory)")
    ap.add_argument(
        "--sizes",
        action="append",
        default=[],
        help="TASK=N,N,...,all (training examples; NxE or allxE: E epochs)",
    )
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--recipes", default="official", help="fine-tuning recipes, comma-separated")
    ap.add_argument("--seeds", type=int_list, default=[1, 2])
    ap.add_argument("--tolerance", type=float, default=0.5, help="points below the best that count as there")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--name", default="finetune_convergence")
    a = ap.parse_args(argv)
    try:
        sizes = parse_sizes(a.sizes, a.epochs)
        encoders = {}
        for item in a.encoder:
            name, eq, path = item.partition("=")
            if not eq or not name or "/" in name:
                raise ValueError(f"--encoder {item!r}: expected NAME=DIR")
            encoders[name] = Path(path)
    except ValueError as e:
        ap.error(str(e))
    if not encoders or not sizes:
        ap.error("give at least one --encoder and one --sizes")
    if absent := missing(GLUE, CONLL, *(p / "config.json" for p in encoders.values())):
        print(f"skipped: {', '.join(map(str, absent))} absent", file=sys.stderr)
        return 0
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    started = time.perf_counter()
    cache = Cache(a.work / "convergence.jsonl")
    recipes = a.recipes.split(",")
    seeds = tuple(a.seeds)
    for name, model in encoders.items():
        for task, task_sizes in sizes.items():
            for recipe in recipes:
                for budget in task_sizes:
                    k = key(name, task, budget, recipe)
                    finetune_each(
                        cache,
                        lambda t, s, k=k: f"{k}/{t}/{s}",
                        model,
                        (task,),
                        seeds,
                        {task: FinetuneBudget(*budget, recipe)},
                        {"encoder": name, "recipe": recipe},
                        f"{k}:",
                    )
    result = {
        **result_header(a.name),
        "setup": describe(encoders, sizes, a.epochs, recipes, seeds, a.tolerance),
        "wall_seconds_this_invocation": time.perf_counter() - started,
        "curves": curves(cache, encoders, sizes, recipes, seeds, a.tolerance),
    }
    path = write_result(result, RESULTS / f"{a.name}.json", a.name)
    plot(result, path.with_suffix(".png"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
