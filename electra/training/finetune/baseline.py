"""The majority-class baseline of a single-label classifier's dev set, and whether a model beats it.

A classifier that answers the same label for every input scores that label's share of the dev set in
accuracy (SST-2 dev: 0.5092, its share of positive reviews) without having learned anything from the text,
and the score alone does not say so. `electra finetune` and `evaluate` print this baseline beside the score
and warn when a model's predictions are all one label, or score no better than the baseline on the task's
main metric. Regression, reranking, multi-label and tagging tasks have no majority class and are not checked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from electra.training.finetune.glue_metrics import glue_metrics
from electra.training.finetune.tasks import TaskSpec

# What a warning suggests, for a classifier that learned nothing the majority class does not know.
_REMEDY = (
    "fine-tune again with more --epochs or another --lr, or start from a larger or longer pre-trained model"
)


@dataclass(frozen=True)
class MajorityCheck:
    """A model's main dev metric beside the majority-class baseline's, and what the model predicted."""

    examples: int
    metric: str  # the task's main metric
    score: float  # the model's
    baseline: float  # always answering `majority`
    majority: str  # the most frequent label of the dev set (the first in label order on a tie)
    majority_share: float
    predicted: dict[str, int]  # label -> how many examples the model gave it, most often first

    @property
    def one_label(self) -> bool:
        return len(self.predicted) == 1

    @property
    def beats_baseline(self) -> bool:
        return bool(self.score > self.baseline)  # a nan score does not

    def beside(self) -> str:
        """The baseline as the score's line shows it."""
        return (
            f'majority-class baseline {self.metric} {self.baseline:.4f} ("{self.majority}" for all '
            f"{self.examples:,})"
        )

    def warning(self, split: str) -> str | None:
        """One line when the model predicts one label only or does not beat the baseline, else None."""
        if self.one_label:
            (label,) = self.predicted
            return (
                f'{split}: the model answers "{label}" for all {self.examples:,} examples, {self.metric} '
                f"{self.score:.4f} against the majority-class baseline's {self.baseline:.4f}: it has learned "
                f"nothing from the text; {_REMEDY}"
            )
        if not self.beats_baseline:
            return (
                f"{split}: {self.metric} {self.score:.4f} is no better than the majority-class baseline's "
                f'{self.baseline:.4f} ("{self.majority}" for every example); {_REMEDY}'
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        """As eval_results.json and `electra evaluate --json` hold it (`MajorityCheck(**d)` reads it back)."""
        return dataclasses.asdict(self)


def majority_check(task: TaskSpec, logits: np.ndarray, labels: np.ndarray | None) -> MajorityCheck | None:
    """The check of a single-label classifier's logits against its dev labels (ids); None for any other
    kind of task, or a split without labels."""
    if task.kind != "single_label" or labels is None or len(labels) == 0:
        return None
    names = task.names or tuple(str(i) for i in range(logits.shape[-1]))
    gold = np.asarray(labels).reshape(-1)
    preds = logits.argmax(-1)
    counts = np.bincount(gold, minlength=len(names))
    majority = int(np.argmax(counts))  # argmax takes the first of equal counts
    baseline = glue_metrics(task, np.full_like(gold, majority), gold)[task.main_metric]
    ids, n = np.unique(preds, return_counts=True)
    predicted = {names[int(i)]: int(c) for c, i in sorted(zip(n, ids, strict=True), key=lambda ci: -ci[0])}
    return MajorityCheck(
        examples=len(gold),
        metric=task.main_metric,
        score=glue_metrics(task, preds, gold)[task.main_metric],
        baseline=baseline,
        majority=names[majority],
        majority_share=float(counts[majority] / len(gold)),
        predicted=predicted,
    )
