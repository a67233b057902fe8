"""A/B of fine-tuning recipes (issue 22): official vs hf (or any --recipes) from one pre-trained model.

    python -m experiments.finetune_recipes_ab --model google-electra-small-discriminator-dir --seeds 1,2,3
    python -m experiments.finetune_recipes_ab --model runs/small/discriminator --harness-check \\
        --max-train-examples 800 --max-epochs 2                       # a CPU check of the harness itself

Every (task, recipe) pair is fine-tuned with every seed; each task's main figure (as in the paper's tables:
CoLA MCC, SST-2/RTE accuracy, MRPC F1/accuracy average, STS-B Pearson/Spearman average; x100) is reported per
seed, with median, mean and standard deviation, and the median difference of each recipe against the first.
The record goes to `experiments/results/finetune_recipes_ab_<name>.json` with the date, commit, machine, load
average, the model's weights checksum and every option. Only a real pre-trained model (ELECTRA-Small or
larger, full training sets, the recipe's epochs) decides the default recipe; `--harness-check` labels a run
that only shows the harness works ("kind": "harness check, not a result").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.benchlib import int_list, portable_path, result_header, write_result
from electra.digest import file_sha256
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.model_dir import resolve_model_dir
from electra.training.finetune.recipe import RECIPES
from electra.training.finetune.run import finetune
from electra.training.finetune.tasks import TASKS
from experiments.lib.evaluation import SCORE
from experiments.lib.shared_data import GLUE
from experiments.lib.store import RESULTS

SMALL_GLUE = "cola,sst2,mrpc,stsb,rte"


def run_pair(args: argparse.Namespace, task: str, recipe: str, seeds: list[int], tmp: Path) -> dict:
    spec = TASKS[task]
    epochs = min(spec.default_epochs, args.max_epochs) if args.max_epochs else None
    start = time.perf_counter()
    summary = finetune(
        FinetuneConfig(
            task=task,
            model=args.model,
            out=tmp / f"{task}-{recipe}",
            data_dir=args.glue,
            recipe=recipe,
            seeds=seeds,
            epochs=epochs,
            max_train_examples=args.max_train_examples,
            max_seq_len=args.max_seq_len,
            device=args.device,
            progress=False,
        )
    )
    split = spec.dev_splits[0]
    scores = {s: 100 * r["final"][split][SCORE[task]] for s, r in summary["per_seed"].items()}
    values = list(scores.values())
    return {
        "per_seed": scores,
        "median": statistics.median(values),
        "mean": statistics.mean(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        "epochs": summary["epochs"],
        "train_examples": summary["train_examples"],  # after double_unordered
        "recipe": summary["recipe"],
        "seconds": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="HF-format discriminator or `pretrain` --out")
    ap.add_argument("--glue", type=Path, default=GLUE)
    ap.add_argument("--tasks", default=SMALL_GLUE)
    ap.add_argument("--recipes", default="official,hf", help="the first is the reference of the differences")
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3])
    ap.add_argument("--max-train-examples", type=int, default=None, help="cap per task (CPU budgets)")
    ap.add_argument("--max-epochs", type=int, default=None, help="cap the tasks' epochs (CPU budgets)")
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--device", default=None)
    ap.add_argument("--name", default="cpu", help="results file suffix")
    ap.add_argument("--harness-check", action="store_true", help="label the record: not a result")
    ap.add_argument("--note", default="", help="where the model came from, recorded with the result")
    args = ap.parse_args(argv)
    recipes = args.recipes.split(",")
    tasks = args.tasks.split(",")
    bad = [r for r in recipes if r not in RECIPES] + [t for t in tasks if t not in TASKS]
    if bad:
        print(f"error: unknown recipe or task {bad[0]!r}", file=sys.stderr)
        return 2
    if not args.glue.is_dir():
        print(f"skipped: {args.glue} is absent", file=sys.stderr)
        return 0
    model_dir = resolve_model_dir(args.model)
    header = result_header(f"finetune_recipes_ab_{args.name}")
    started = time.perf_counter()
    rows: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            rows[task] = {}
            for recipe in recipes:
                rows[task][recipe] = row = run_pair(args, task, recipe, args.seeds, Path(tmp))
                print(
                    f"{task} {recipe}: median {row['median']:.1f} (seeds "
                    f"{', '.join(f'{v:.1f}' for v in row['per_seed'].values())}) in {row['seconds']:.0f} s",
                    flush=True,
                )
    reference = recipes[0]
    averages = {r: statistics.mean(rows[t][r]["median"] for t in tasks) for r in recipes}
    differences = {
        r: {t: rows[t][r]["median"] - rows[t][reference]["median"] for t in tasks} for r in recipes[1:]
    }
    record = {
        **header,
        "kind": "harness check, not a result" if args.harness_check else "result",
        "load_average_after": result_header("")["load_average"],
        "model": portable_path(model_dir),
        "model_note": args.note,
        "model_weights_sha256": file_sha256(
            next(model_dir.glob("model.safetensors"), model_dir / "pytorch_model.bin")
        ),
        "options": {k: portable_path(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "score": {t: SCORE[t] for t in tasks},
        "tasks": rows,
        "average_of_medians": averages,
        f"median_difference_vs_{reference}": differences,
        "seconds": time.perf_counter() - started,
    }
    out = write_result(record, RESULTS / f"{header['benchmark']}.json", header["benchmark"])
    summary = ", ".join(f"{r} {a:.1f}" for r, a in averages.items())
    print(f"average of medians over {len(tasks)} tasks: {summary} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
