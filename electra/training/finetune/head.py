"""The classifier head's recipe-specific parts: its initialisation and the regression label scale."""

from __future__ import annotations

import torch
from torch import nn

from electra.errors import InputError
from electra.model import ElectraClassifier
from electra.training.finetune.recipe import HeadInit
from electra.training.finetune.tasks import TaskSpec


def init_head(model: ElectraClassifier, how: HeadInit) -> None:
    """Re-draw the head's dense weights (biases zero) from the global torch generator.

    "glorot" is what the official head gets: tf.layers.dense without a kernel_initializer, i.e. TF's
    glorot_uniform. "normal" is transformers' N(0, initializer_range), what the model was built with.
    """
    if how == "normal":
        return
    with torch.no_grad():
        for m in model.classifier.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                m.bias.zero_()


def check_head(model: ElectraClassifier) -> None:
    """Refuse the one linear head transformers would load silently (see ElectraLinearClassificationHead)."""
    cfg = model.config
    if model.head == "linear" and cfg.num_labels == cfg.hidden_size:
        raise InputError(
            f"a linear head with as many labels as the hidden size ({cfg.hidden_size}) would load into "
            "transformers' ElectraForSequenceClassification unnoticed; use --head hf"
        )


def target_scale(task: TaskSpec, normalize: bool) -> tuple[float, float] | None:
    """(min, max) when regression targets are trained as (label - min) / max, as the official RegressionTask
    does for STS-B; None when labels are used as they are."""
    return task.label_range if normalize and task.is_regression else None


def fold_target_scale(model: ElectraClassifier, scale: tuple[float, float]) -> None:
    """Make a model trained on (label - lo) / hi predict labels: output x hi + lo, folded into the last layer,
    so the saved model, its export and the server give scores on the task's own scale."""
    lo, hi = scale
    layer = model.output_layer
    with torch.no_grad():
        layer.weight.mul_(hi)
        layer.bias.mul_(hi).add_(lo)
