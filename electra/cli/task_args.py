"""The options `electra finetune`, `evaluate` and `predict` share: the task, the model, custom data's
columns, a tagger's files, and inference's length and device."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from electra.cli.common import model_path, positive_int
from electra.hub import LOCAL_OR_HUB, REVISION_HELP
from electra.training.device import DEVICES
from electra.training.finetune.config import CustomColumns, FinetuneConfig
from electra.training.finetune.tagging_data import SCHEMES
from electra.training.finetune.tagging_tasks import CUSTOM_TAGS, TAGGING_TASK_NAMES
from electra.training.finetune.tasks import CUSTOM_TASKS, TASKS

TASK_CHOICES = [*TASKS, *CUSTOM_TASKS, *TAGGING_TASK_NAMES]
TASK_HELP = (
    "a GLUE task; custom (--train and --dev files: classification or regression); rerank (a cross-encoder: "
    "(query, passage, relevance) rows to train on, queries with their passages to rank on the dev set); "
    "multilabel (any number of labels per text); conll2003 (named entities, --data-dir); "
    f"{CUSTOM_TAGS} (your own tag set: --train and --dev files, CoNLL columns or JSONL)"
)
# The defaults shown in --help and used when an option is left out: FinetuneConfig's (one source).
DEFAULTS = {
    f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    for f in dataclasses.fields(FinetuneConfig)
}


def custom_args(p: argparse.ArgumentParser, labels: bool = True) -> None:
    p.add_argument(
        "--text-column",
        default=DEFAULTS["text_column"],
        help="custom data: column with the text (default: %(default)s)",
    )
    p.add_argument("--text-pair-column", help="custom data: column with the second text of a pair")
    if labels:
        p.add_argument(
            "--label-column",
            default=DEFAULTS["label_column"],
            help="custom data: column with the label (default: %(default)s)",
        )
        p.add_argument("--regression", action="store_true", help="custom data: labels are numbers")
        p.add_argument(
            "--label-separator",
            default=DEFAULTS["label_separator"],
            help="--task multilabel, CSV/TSV files: what joins a cell's labels (default: %(default)r; JSON "
            "lines give a list)",
        )
    tag_args(p, labels)


def tag_args(p: argparse.ArgumentParser, labels: bool = True) -> None:
    if labels:
        p.add_argument(
            "--tag-column",
            type=int,
            default=DEFAULTS["tag_column"],
            help="--task tags, CoNLL columns: the column holding the tag, 0 the word's, negative from the "
            "end (default: %(default)s, the last)",
        )
    p.add_argument(
        "--tag-scheme",
        choices=[*SCHEMES, "iobes"],
        default=DEFAULTS["tag_scheme"],
        help="--task tags: the files' tagging scheme; tags are trained as IOB2, predictions written back "
        "in this scheme (default: %(default)s)",
    )


def model_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--model", required=True, help=f"{what}: {LOCAL_OR_HUB}")
    p.add_argument("--revision", help=REVISION_HELP)


def inference_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-seq-len",
        type=positive_int,
        default=DEFAULTS["max_seq_len"],
        help="longer inputs are truncated (default: %(default)s)",
    )
    p.add_argument("--device", choices=DEVICES, help="default: cuda when available, else cpu")


def model_dir(args: argparse.Namespace) -> Path:
    """--model as a local directory: a Hub id is fetched into (or found in) the Hugging Face cache."""
    return model_path(args.model, args.revision)


def columns(args: argparse.Namespace, labels: bool = True) -> CustomColumns:
    """Custom data's columns as the options give them."""
    if not labels:
        return CustomColumns(args.text_column, args.text_pair_column, label=None)
    return CustomColumns(
        args.text_column, args.text_pair_column, args.label_column, args.regression, args.label_separator
    )


def shown_metrics(metrics: dict[str, float]) -> str:
    # A tagger's per-type precision, recall and support are in --json and eval_results.json; one line shows
    # the overall figures and each type's F1.
    return ", ".join(
        f"{k} {v:.4f}" for k, v in metrics.items() if not k.startswith(("precision_", "recall_", "support_"))
    )
