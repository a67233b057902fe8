"""Fine-tune one pre-trained model on several GLUE tasks and tabulate the dev metrics.

    python -m experiments.finetune_glue --model runs/small                 # the ELECTRA recipe, 5 tasks
    python -m experiments.finetune_glue --model runs/small --max-train-examples 8000 --max-epochs 3  # CPU

Each task's main metric (CoLA MCC, SST-2/RTE accuracy, MRPC F1/accuracy average, STS-B Pearson/Spearman
average; x100) and their average go to `experiments/results/finetune_glue_<name>.json`, with every
seed's figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.benchlib import portable_path, result_header, write_result
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.run import finetune
from electra.training.finetune.tasks import TASKS
from experiments.lib.evaluation import SCORE
from experiments.lib.shared_data import GLUE
from experiments.lib.store import RESULTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--glue", type=Path, default=GLUE)
    ap.add_argument("--tasks", default="sst2,mrpc,cola,stsb,rte")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--max-train-examples", type=int, default=None, help="cap per task (CPU budgets)")
    ap.add_argument("--max-epochs", type=int, default=None, help="cap the recipe's epochs (CPU budgets)")
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--recipe", default=None, help="a fine-tuning recipe (default: FinetuneConfig's)")
    ap.add_argument("--name", default="cpu", help="results file suffix")
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    if not args.glue.is_dir():
        print(f"skipped: {args.glue} is absent", file=sys.stderr)
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks.split(","):
            task = TASKS[name]
            epochs = min(task.default_epochs, args.max_epochs) if args.max_epochs else None
            start = time.perf_counter()
            summary = finetune(
                FinetuneConfig(
                    task=name,
                    model=args.model,
                    out=Path(tmp) / name,
                    data_dir=args.glue,
                    seeds=seeds,
                    epochs=epochs,
                    **({"recipe": args.recipe} if args.recipe else {}),
                    max_train_examples=args.max_train_examples,
                    max_seq_len=args.max_seq_len,
                    device=args.device,
                    progress=False,
                )
            )
            dev = summary["median"][task.dev_splits[0]]
            rows[name] = {
                "score": 100 * dev[SCORE[name]],
                "dev": dev,
                "epochs": summary["epochs"],
                "train_examples": summary["train_examples"],
                "seconds": time.perf_counter() - start,
                "per_seed": {s: r["final"] for s, r in summary["per_seed"].items()},
            }
            print(
                f"{name}: {rows[name]['score']:.1f} ({', '.join(f'{k} {v:.4f}' for k, v in dev.items())}) "
                f"in {rows[name]['seconds']:.0f} s",
                flush=True,
            )
    average = statistics.mean(r["score"] for r in rows.values())
    name = f"finetune_glue_{args.name}"
    record = {
        **result_header(name),
        "model": portable_path(args.model),
        "recipe": summary["recipe"],
        "seeds": seeds,
        "max_train_examples": args.max_train_examples,
        "max_epochs": args.max_epochs,
        "tasks": rows,
        "average": average,
    }
    out = write_result(record, RESULTS / f"{name}.json", name)
    print(f"average {average:.1f} over {len(rows)} tasks -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
