"""`electra evaluate`: the dev-set metrics of a fine-tuned classifier or tagger."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from electra.cli.task_args import (
    TASK_CHOICES,
    columns,
    custom_args,
    inference_args,
    model_args,
    model_dir,
    shown_metrics,
)

log = logging.getLogger("electra.cli")


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("evaluate", help="dev-set metrics of a fine-tuned classifier or tagger")
    e.add_argument("--task", required=True, choices=TASK_CHOICES, help="the task it was fine-tuned on")
    model_args(e, "a fine-tuned classifier or tagger")
    e.add_argument("--data-dir", type=Path, help="GLUE data (the root, or the task's folder)")
    e.add_argument("--dev", type=Path, help="custom data: the file to evaluate on")
    custom_args(e)
    inference_args(e)
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.set_defaults(handler=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    from electra.training.finetune.evaluate import evaluate

    evaluation = evaluate(
        model_dir(args),
        args.task,
        data_dir=args.data_dir,
        dev=args.dev,
        columns=columns(args),
        tag_column=args.tag_column,
        scheme=args.tag_scheme,
        max_seq_len=args.max_seq_len,
        device=args.device,
    )
    for split, check in evaluation.checks.items():
        if (warning := check.warning(split)) is not None:
            log.warning("%s %s", args.task, warning)
    if args.json:
        print(json.dumps(evaluation.to_json(), indent=2))
        return 0
    for name, metrics in evaluation.metrics.items():
        check = evaluation.checks.get(name)
        print(f"{args.task} {name}: {shown_metrics(metrics)}" + (f"; {check.beside()}" if check else ""))
    return 0
