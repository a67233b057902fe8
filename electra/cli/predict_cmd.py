"""`electra predict`: a fine-tuned model's predictions for a file."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from electra.cli.task_args import TASK_CHOICES, columns, custom_args, inference_args, model_args, model_dir

log = logging.getLogger("electra.cli")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict",
        help="predict labels for a file (GLUE submission format for GLUE tasks; taggers write the input's "
        "form: CoNLL `word tag` lines or JSONL)",
    )
    p.add_argument("--task", required=True, choices=TASK_CHOICES, help="the task it was fine-tuned on")
    model_args(p, "a fine-tuned classifier or tagger")
    p.add_argument(
        "--input",
        type=Path,
        required=True,
        help="GLUE test.tsv, a custom CSV/TSV/JSONL file, or a tagger's CoNLL columns (word first) or JSONL",
    )
    custom_args(p, labels=False)
    p.add_argument("--out", type=Path, help="output TSV (default: stdout); a tagger's output file (required)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    inference_args(p)
    p.set_defaults(handler=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    from electra.training.finetune.predict import predict

    n, text = predict(
        model_dir(args),
        args.task,
        args.input,
        args.out,
        columns=columns(args, labels=False),
        scheme=args.tag_scheme,
        max_seq_len=args.max_seq_len,
        device=args.device,
        overwrite=args.overwrite,
    )
    if text is not None:
        sys.stdout.write(text)
    else:
        log.info("wrote %d predictions to %s", n, args.out)
    return 0
