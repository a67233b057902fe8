"""The binned ROC AUC of evaluation against scikit-learn's exact one."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.metrics import roc_auc_score

from electra.training.pretrain.diagnostics.detection_auc import BINS, auc_from_histograms, logit_histograms


def exact(logits: torch.Tensor, labels: torch.Tensor) -> float:
    keep = labels >= 0
    return float(roc_auc_score(labels[keep].numpy(), logits[keep].numpy()))


@pytest.mark.parametrize(
    ("center", "spread", "shift"),
    [
        (0.0, 2.0, 1.0),  # a trained discriminator
        (-1.73, 0.07, 0.02),  # one still near the replaced prior: the case binning must resolve
        (-1.73, 0.07, 0.0),  # no signal at all
        (3.0, 6.0, -2.0),  # worse than chance, with logits beyond the binned range
    ],
)
def test_matches_sklearn(center: float, spread: float, shift: float) -> None:
    g = torch.Generator().manual_seed(0)
    labels = (torch.rand(64, 128, generator=g) < 0.15).long()
    logits = center + spread * torch.randn(64, 128, generator=g) + shift * labels
    labels[:, 100:] = -1  # padding is left out
    auc = auc_from_histograms(logit_histograms(logits, labels))
    assert auc == pytest.approx(exact(logits, labels), abs=2e-3)


def test_histograms_add_up_over_batches() -> None:
    g = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(8, 16, generator=g), (torch.rand(8, 16, generator=g) < 0.3).long()
    whole = logit_histograms(logits, labels)
    parts = logit_histograms(logits[:3], labels[:3]) + logit_histograms(logits[3:], labels[3:])
    assert whole.shape == (2, BINS) and whole.dtype == torch.float32
    assert torch.equal(whole, parts)
    assert whole.sum(dim=1).tolist() == [float((labels == 0).sum()), float((labels == 1).sum())]


def test_separable_reversed_tied_and_one_sided() -> None:
    labels = torch.tensor([0, 0, 1, 1, -1])
    assert auc_from_histograms(logit_histograms(torch.tensor([-3.0, -2.0, 2.0, 3.0, 9.0]), labels)) == 1.0
    assert auc_from_histograms(logit_histograms(torch.tensor([3.0, 2.0, -2.0, -3.0, 9.0]), labels)) == 0.0
    assert auc_from_histograms(logit_histograms(torch.full((5,), -1.7), labels)) == 0.5
    assert math.isnan(auc_from_histograms(logit_histograms(torch.zeros(3), torch.tensor([0, 0, -1]))))
