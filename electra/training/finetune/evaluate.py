"""`electra evaluate`: the dev-set metrics of a fine-tuned classifier or tagger (`evaluate` picks which)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.training.finetune.baseline import MajorityCheck, majority_check
from electra.training.finetune.config import CustomColumns
from electra.training.finetune.data import glue_dev_splits, read_columns
from electra.training.finetune.encoding import encode, max_len_for
from electra.training.finetune.inference import predict_logits, score
from electra.training.finetune.model_dir import load_classifier
from electra.training.finetune.tasks import CUSTOM_TASKS, MULTILABEL, RERANK, read_rerank_groups


@dataclass(frozen=True)
class Evaluation:
    """Metrics by dev split, and each split's majority-class check (single-label classifiers only)."""

    metrics: dict[str, dict[str, float]]
    checks: dict[str, MajorityCheck] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """{split: metrics}, with "majority_class" beside the metrics of a checked split."""
        return {
            split: {
                **metrics,
                **({"majority_class": self.checks[split].to_dict()} if split in self.checks else {}),
            }
            for split, metrics in self.metrics.items()
        }


def evaluate(
    model_dir: Path,
    task: str,
    *,
    data_dir: Path | None = None,
    dev: Path | None = None,
    columns: CustomColumns | None = None,
    tag_column: int = -1,
    scheme: str = "iob2",
    max_seq_len: int = 128,
    device: str | None = None,
) -> Evaluation:
    """The dev splits' metrics of the model fine-tuned on `task`: a tagger's for a tagging task (seqeval), a
    classifier's otherwise, with the majority-class check of a single-label classifier."""
    from electra.training.finetune.tag_predict import evaluate_tagger
    from electra.training.finetune.tagging_tasks import is_tagging_task

    if is_tagging_task(task):
        tagged = evaluate_tagger(
            model_dir,
            task,
            data_dir=data_dir,
            dev=dev,
            tag_column=tag_column,
            scheme=scheme,
            max_seq_len=max_seq_len,
            device=device,
        )
        return Evaluation(tagged)
    return evaluate_classifier(
        model_dir, task, data_dir=data_dir, dev=dev, columns=columns, max_seq_len=max_seq_len, device=device
    )


def evaluate_model(
    model_dir: Path,
    task: str,
    *,
    data_dir: Path | None = None,
    dev: Path | None = None,
    columns: CustomColumns | None = None,
    max_seq_len: int = 128,
    device: str | None = None,
) -> dict[str, dict[str, float]]:
    """A classifier's metrics by dev split (`evaluate_classifier`'s, without the checks)."""
    return evaluate_classifier(
        model_dir, task, data_dir=data_dir, dev=dev, columns=columns, max_seq_len=max_seq_len, device=device
    ).metrics


def evaluate_classifier(
    model_dir: Path,
    task: str,
    *,
    data_dir: Path | None = None,
    dev: Path | None = None,
    columns: CustomColumns | None = None,
    max_seq_len: int = 128,
    device: str | None = None,
) -> Evaluation:
    """Metrics by dev split: the GLUE task's dev splits in `data_dir`, or "dev" for the custom file `dev`.

    A custom file is read with `columns` (default: text and label). Runs in fp32 on any device.
    """
    clf = load_classifier(model_dir, task, device)
    if task in CUSTOM_TASKS:
        if dev is None:
            raise InputError(f"--task {task} needs --dev FILE to evaluate on")
        if task == RERANK:
            splits = {"dev": read_rerank_groups(dev)}
        else:
            splits = {
                "dev": read_columns(dev, columns or CustomColumns(), "labels" if task == MULTILABEL else None)
            }
    else:
        splits = glue_dev_splits(clf.task, data_dir)
    max_seq_len = max_len_for(max_seq_len, clf.model.config.max_position_embeddings)
    results, checks = {}, {}
    for name, examples in splits.items():
        data = encode(clf.tokenizer, examples, clf.task, max_seq_len)
        logits = predict_logits(clf.model, data, clf.pad_id, clf.device, nullcontext())
        results[name] = score(clf.task, logits, data.labels, data.groups)
        if (check := majority_check(clf.task, logits, data.labels)) is not None:
            checks[name] = check
    return Evaluation(results, checks)
