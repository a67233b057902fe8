"""The examples a fine-tuning run trains and evaluates on: GLUE splits or custom files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from electra.errors import InputError
from electra.training.finetune.config import CustomColumns, FinetuneConfig
from electra.training.finetune.tasks import (
    CUSTOM_TASKS,
    MULTILABEL,
    RERANK,
    TASKS,
    Example,
    LabelType,
    TaskSpec,
    custom_task,
    label_names,
    multilabel_task,
    read_custom,
    read_glue,
    read_rerank_groups,
    rerank_task,
)


def read_columns(path: Path, columns: CustomColumns, label_type: LabelType | None = None) -> list[Example]:
    return read_custom(
        path,
        columns.text,
        columns.text_pair,
        columns.label,
        columns.regression,
        label_type,
        columns.separator,
    )


def glue_dev_splits(task: TaskSpec, data_dir: Path | None) -> dict[str, list[Example]]:
    """Every dev split of a GLUE task by name (MNLI has two)."""
    if data_dir is None:
        raise InputError(f"--task {task.name} needs --data-dir (the GLUE directory)")
    return {split: read_glue(task, data_dir, split) for split in task.dev_splits}


def load_datasets(cfg: FinetuneConfig) -> tuple[TaskSpec, list[Example], dict[str, list[Example]]]:
    """The task, its training examples, and its dev splits by name."""
    if cfg.task == "custom":
        return _custom_datasets(cfg)
    if cfg.task == RERANK:
        return _rerank_datasets(cfg)
    if cfg.task == MULTILABEL:
        return _multilabel_datasets(cfg)
    if cfg.task not in TASKS:
        raise InputError(f"--task {cfg.task!r} is not one of {', '.join([*TASKS, *CUSTOM_TASKS])}")
    if cfg.data_dir is None:
        raise InputError(f"--task {cfg.task} needs --data-dir (the GLUE directory)")
    task = TASKS[cfg.task]
    train = read_glue(task, cfg.data_dir, "train")
    return task, train, glue_dev_splits(task, cfg.data_dir)


def _custom_datasets(cfg: FinetuneConfig) -> tuple[TaskSpec, list[Example], dict[str, list[Example]]]:
    if cfg.train is None or cfg.dev is None:
        raise InputError("--task custom needs --train FILE and --dev FILE (CSV, TSV or JSONL)")
    train = read_columns(cfg.train, cfg.columns)
    dev = read_columns(cfg.dev, cfg.columns)
    # The training set defines the label ids, so a dev label it lacks could never be predicted.
    task = custom_task(None if cfg.regression else label_names(train))
    if task.labels is not None:
        unknown = sorted({str(e.label) for e in dev} - set(task.labels))
        if unknown:
            raise InputError(
                f"{cfg.dev} has labels {unknown[:5]} that never occur in {cfg.train}; the classifier "
                "cannot predict them: fix the labels or add training examples"
            )
    return task, train, {"dev": dev}


def _rerank_datasets(cfg: FinetuneConfig) -> tuple[TaskSpec, list[Example], dict[str, list[Example]]]:
    """(query, passage, relevance 0..1) pairs to train on; queries with their passages to rank on the dev
    set (read_rerank_groups)."""
    if cfg.train is None or cfg.dev is None:
        raise InputError(
            "--task rerank needs --train FILE ((query, passage, relevance) rows: CSV, TSV or JSONL) and "
            '--dev FILE (JSON lines {"query", "positive": [...], "negative": [...]})'
        )
    if cfg.text_pair_column is None:
        raise InputError(
            "--task rerank reads pairs: name the query's column with --text-column and the passage's with "
            "--text-pair-column"
        )
    return (
        rerank_task(),
        read_columns(cfg.train, cfg.columns, "relevance"),
        {"dev": read_rerank_groups(cfg.dev)},
    )


def _multilabel_datasets(cfg: FinetuneConfig) -> tuple[TaskSpec, list[Example], dict[str, list[Example]]]:
    """Texts with any number of labels each; the labels are those the training set has."""
    if cfg.train is None or cfg.dev is None:
        raise InputError(
            "--task multilabel needs --train FILE and --dev FILE (JSONL with a list of labels per text, or "
            "CSV/TSV with the labels joined by --label-separator)"
        )
    train = read_columns(cfg.train, cfg.columns, "labels")
    dev = read_columns(cfg.dev, cfg.columns, "labels")
    labels = label_names(train)
    if not labels:
        raise InputError(f"{cfg.train}: no example has a label; a multi-label classifier needs some")
    unknown = sorted({name for e in dev for name in e.label} - set(labels))  # type: ignore[union-attr]
    if unknown:
        raise InputError(
            f"{cfg.dev} has labels {unknown[:5]} that never occur in {cfg.train}; the classifier cannot "
            "predict them: fix the labels or add training examples"
        )
    return multilabel_task(labels), train, {"dev": dev}


def subsample(examples: list[Example], n: int) -> list[Example]:
    """A random subset of n examples in file order; the same one for every seed (a fixed generator)."""
    keep = np.sort(np.random.default_rng(0).permutation(len(examples))[:n])
    return [examples[i] for i in keep]


def double_unordered(task: TaskSpec, examples: list[Example]) -> list[Example]:
    """The official `double_unordered` (classification_tasks.py, MRPC and STS `_create_examples`): for a task
    whose two texts may come in either order, the examples followed by each one with its texts swapped.
    Other tasks are returned unchanged. Applied to training data only, as there."""
    if not task.unordered_pairs:
        return examples
    swapped = [
        Example(f"{e.guid}-swapped", e.text_pair, e.text, e.label)
        for e in examples
        if e.text_pair is not None
    ]
    return [*examples, *swapped]
