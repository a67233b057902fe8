"""Model directories: where a discriminator is found, its tokenizer, and loading a fine-tuned classifier."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from electra.config import ARCHITECTURES
from electra.errors import InputError
from electra.files import CONFIG_JSON, DISCRIMINATOR_DIR
from electra.hf_format import load_hf_dir_with_report
from electra.model import Kind
from electra.tokenizer import load_tokenizer, special_ids
from electra.training.device import resolve_device
from electra.training.finetune.tasks import (
    MULTILABEL,
    RERANK,
    TASKS,
    TaskSpec,
    custom_task,
    multilabel_task,
    rerank_task,
)


def resolve_model_dir(path: Path) -> Path:
    """A Hugging Face directory, or a run of `electra pretrain` (its discriminator)."""
    if not path.exists():
        raise InputError(f"--model {path} does not exist")
    if (path / CONFIG_JSON).is_file():
        return path
    if (path / DISCRIMINATOR_DIR / CONFIG_JSON).is_file():
        return path / DISCRIMINATOR_DIR
    raise InputError(
        f"--model {path} is not a model directory (no config.json); pass a Hugging Face ELECTRA directory or "
        "the --out of `electra pretrain`"
    )


def load_model_tokenizer(model_dir: Path) -> Any:
    """The tokenizer saved with a model, with an error that names the --model it came from."""
    try:
        return load_tokenizer(model_dir)
    except InputError as e:
        raise InputError(f"--model {model_dir} has no usable tokenizer ({e})") from e


def classifier_head_config(labels: tuple[str, ...] | None, kind: str | None = None) -> dict[str, Any]:
    """Config overrides that give a discriminator a head for these labels (None: one output; a regression
    model's unless `kind` says "relevance", a cross-encoder's, whose problem_type stays unset as
    sentence-transformers saves one). A multi-label model's problem_type makes transformers' pipeline apply a
    sigmoid per label. The label names go into id2label / label2id, so the saved model predicts label strings
    on its own.
    """
    if labels is None:
        return {
            "num_labels": 1,
            "problem_type": None if kind == "relevance" else "regression",
            "id2label": {0: "LABEL_0"},
            "label2id": {"LABEL_0": 0},
        }
    return {
        "num_labels": len(labels),
        "problem_type": "multi_label_classification"
        if kind == "multi_label"
        else "single_label_classification",
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }


@dataclass
class Classifier:
    """A fine-tuned classifier ready to run: the model on its device, its tokenizer and its task."""

    model: nn.Module
    tokenizer: Any
    pad_id: int
    device: torch.device
    task: TaskSpec


def load_trained(model_dir: Path, kind: Kind) -> nn.Module:
    """A fine-tuned model of `kind`; InputError when the directory has no trained head of that kind (a
    discriminator, or a tagger where a classifier is wanted), which would otherwise run with a random one."""
    model, report = load_hf_dir_with_report(model_dir, kind=kind)
    if report.newly_initialized:
        what = ARCHITECTURES.get(report.source_architecture or "", report.source_architecture)
        raise InputError(
            f"--model {model_dir} is not a fine-tuned {kind} (it is a {what}: no weights for "
            f"{', '.join(report.newly_initialized[:2])}); pass the output of `electra finetune` for this task"
        )
    return model


def load_classifier(model_dir: Path, task_name: str, device: str | None) -> Classifier:
    """The output directory of `electra finetune` on `device` (default CUDA when available)."""
    model = load_trained(model_dir, "classifier")
    tok = load_model_tokenizer(model_dir)
    torch_device = resolve_device(device)
    return Classifier(
        model.to(torch_device), tok, special_ids(tok).pad, torch_device, task_for_model(task_name, model)
    )


def task_for_model(name: str, model: nn.Module) -> TaskSpec:
    """The task spec; for your own data rebuilt from the labels the classifier was saved with."""
    if name in TASKS:
        return TASKS[name]
    cfg = model.config
    labels = tuple(cfg.id2label[i] for i in range(cfg.num_labels))
    if name == RERANK:
        return rerank_task()
    if name == MULTILABEL:
        return multilabel_task(labels)
    return custom_task(None if cfg.problem_type == "regression" else labels)
