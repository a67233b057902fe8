"""`electra finetune`, `electra evaluate`, `electra predict`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from electra.cli.common import add_progress_flag, positive_int, show_progress
from electra.files import EVAL_RESULTS_JSON
from electra.training.device import DEVICES, PRECISIONS

TASK_CHOICES = ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "custom"]


def _seeds(value: str) -> list[int]:
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("expected at least one seed")
    return seeds


def _custom_args(p: argparse.ArgumentParser, labels: bool = True) -> None:
    p.add_argument("--text-column", default="text", help="custom data: column with the text (default text)")
    p.add_argument("--text-pair-column", help="custom data: column with the second text of a pair")
    if labels:
        p.add_argument("--label-column", default="label", help="custom data: column with the label")
        p.add_argument("--regression", action="store_true", help="custom data: labels are numbers")


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser(
        "finetune",
        help="fine-tune a discriminator on a GLUE task or your own classification/regression data",
        description="The ELECTRA fine-tuning recipe (layer-wise learning-rate decay, 10%% warmup, batch 32, "
        "3 "
        "epochs, 10 for RTE and STS-B); dev metrics after every epoch; with several --seeds the median is "
        "reported and the best seed's model is saved in Hugging Face format with eval_results.json.",
    )
    f.add_argument("--task", required=True, choices=TASK_CHOICES)
    f.add_argument(
        "--model",
        type=Path,
        required=True,
        help="a Hugging Face ELECTRA directory or the --out of `electra pretrain`",
    )
    f.add_argument("--out", type=Path, required=True, help="output classifier directory")
    f.add_argument("--data-dir", type=Path, help="GLUE data (the root, or the task's folder)")
    f.add_argument("--train", type=Path, help="custom data: training file (CSV, TSV or JSONL)")
    f.add_argument("--dev", type=Path, help="custom data: dev file")
    _custom_args(f)
    f.add_argument("--epochs", type=positive_int, help="default 3 (10 for RTE and STS-B)")
    f.add_argument("--lr", type=float, help="default 3e-4 small, 1e-4 base, 5e-5 large")
    f.add_argument("--layerwise-lr-decay", type=float, help="default 0.8 (0.9 large); 1 disables it")
    f.add_argument("--batch-size", type=positive_int, default=32)
    f.add_argument("--max-seq-len", type=positive_int, default=128)
    f.add_argument("--seeds", type=_seeds, default=[1], help="comma-separated, e.g. 1,2,3 (default 1)")
    f.add_argument("--precision", choices=PRECISIONS, help="default bf16 on CUDA, fp32 on CPU")
    f.add_argument("--device", choices=DEVICES)
    f.add_argument("--max-train-examples", type=positive_int, help="train on a random subset (quick runs)")
    f.add_argument("--overwrite", action="store_true")
    add_progress_flag(f)
    f.set_defaults(handler=run_finetune)

    e = sub.add_parser("evaluate", help="dev-set metrics of a fine-tuned classifier")
    e.add_argument("--task", required=True, choices=TASK_CHOICES)
    e.add_argument("--model", type=Path, required=True, help="a fine-tuned classifier directory")
    e.add_argument("--data-dir", type=Path, help="GLUE data (the root, or the task's folder)")
    e.add_argument("--dev", type=Path, help="custom data: the file to evaluate on")
    _custom_args(e)
    e.add_argument("--max-seq-len", type=positive_int, default=128)
    e.add_argument("--device", choices=DEVICES)
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.set_defaults(handler=run_evaluate)

    p = sub.add_parser("predict", help="predict labels for a file (GLUE submission format for GLUE tasks)")
    p.add_argument("--task", required=True, choices=TASK_CHOICES)
    p.add_argument("--model", type=Path, required=True, help="a fine-tuned classifier directory")
    p.add_argument("--input", type=Path, required=True, help="GLUE test.tsv, or a custom CSV/TSV/JSONL file")
    _custom_args(p, labels=False)
    p.add_argument("--out", type=Path, help="output TSV (default: stdout)")
    p.add_argument("--max-seq-len", type=positive_int, default=128)
    p.add_argument("--device", choices=DEVICES)
    p.set_defaults(handler=run_predict)


def run_finetune(args: argparse.Namespace) -> int:
    from electra.training.finetune.config import FinetuneConfig
    from electra.training.finetune.trainer import finetune

    cfg = FinetuneConfig(
        task=args.task,
        model=args.model,
        out=args.out,
        data_dir=args.data_dir,
        train=args.train,
        dev=args.dev,
        text_column=args.text_column,
        text_pair_column=args.text_pair_column,
        label_column=args.label_column,
        regression=args.regression,
        epochs=args.epochs,
        lr=args.lr,
        layerwise_lr_decay=args.layerwise_lr_decay,
        batch_size=args.batch_size,
        max_seq_len=args.max_seq_len,
        seeds=args.seeds,
        precision=args.precision,
        device=args.device,
        max_train_examples=args.max_train_examples,
        overwrite=args.overwrite,
        progress=show_progress(args),
    )
    summary = finetune(cfg)
    for split, metrics in summary["median"].items():
        print(f"{summary['task']} {split} (median of {len(summary['seeds'])} seed(s)): {_shown(metrics)}")
    print(f"wrote {args.out} (seed {summary['selected_seed']}) with {EVAL_RESULTS_JSON}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from electra.training.finetune.config import CustomColumns
    from electra.training.finetune.evaluate import evaluate_model

    results = evaluate_model(
        args.model,
        args.task,
        data_dir=args.data_dir,
        dev=args.dev,
        columns=CustomColumns(args.text_column, args.text_pair_column, args.label_column, args.regression),
        max_seq_len=args.max_seq_len,
        device=args.device,
    )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, metrics in results.items():
            print(f"{args.task} {name}: {_shown(metrics)}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from electra.training.finetune.config import CustomColumns
    from electra.training.finetune.predict import predict_file

    rows = predict_file(
        args.model,
        args.task,
        args.input,
        columns=CustomColumns(args.text_column, args.text_pair_column, label=None),
        max_seq_len=args.max_seq_len,
        device=args.device,
    )
    text = "".join("\t".join(r) + "\n" for r in rows)
    if args.out:
        from electra.atomic import atomic_write_text

        atomic_write_text(args.out, text)
        print(f"wrote {len(rows) - 1} predictions to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _shown(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
