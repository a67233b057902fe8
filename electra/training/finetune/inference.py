"""A classifier's logits over an encoded example set, and the task's metrics on them."""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import torch
from torch import nn

from electra.training.finetune.encoding import EncodedExamples
from electra.training.finetune.glue_metrics import glue_metrics
from electra.training.finetune.multilabel_metrics import multilabel_metrics
from electra.training.finetune.ranking_metrics import ranking_metrics
from electra.training.finetune.tasks import TaskSpec


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    data: EncodedExamples,
    pad_id: int,
    device: torch.device,
    autocast: AbstractContextManager,
    batch_size: int = 128,
) -> np.ndarray:
    """(examples, num_labels) float32 logits, in the order of `data`."""
    model.eval()
    # Sorting by length keeps padding (wasted compute) small; results go back in the original order.
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    out = np.zeros((len(data), model.config.num_labels), dtype=np.float32)
    for lo in range(0, len(order), batch_size):
        idx = order[lo : lo + batch_size]
        with autocast:
            logits = model(**data.batch(idx, pad_id, device))
        out[idx] = logits.float().cpu().numpy()
    return out


def score(
    task: TaskSpec, logits: np.ndarray, labels: np.ndarray, groups: np.ndarray | None = None
) -> dict[str, float]:
    """The task's metrics: GLUE's, a reranker's over its queries (`groups`), or a multi-label model's."""
    if task.kind == "relevance":
        if groups is None:
            raise ValueError("a reranker is scored per query: the examples need their groups")
        return ranking_metrics(logits[:, 0], labels, groups)
    if task.kind == "multi_label":
        return multilabel_metrics(sigmoid(logits), labels)
    preds = logits[:, 0] if task.is_regression else logits.argmax(-1)
    return glue_metrics(task, preds, labels)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x.astype(np.float64)))
