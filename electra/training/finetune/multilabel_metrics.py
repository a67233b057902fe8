"""A multi-label classifier's figures: micro and macro F1, at 0.5 and at a threshold per label chosen on the
dev set, and how each label's threshold is chosen.

Micro F1 pools every (example, label) decision; macro F1 averages the labels' own F1 (a label with no
positive example and no positive prediction counts 0.0, sklearn's zero_division default). A label's
threshold is the one of THRESHOLDS that gives it the best F1 on the dev set, the nearest to 0.5 on a tie.
"""

from __future__ import annotations

import numpy as np

THRESHOLDS = np.round(np.arange(0.05, 0.951, 0.05), 2)
DEFAULT = 0.5


def _counts(predicted: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp = np.sum(predicted & truth, axis=0)
    fp = np.sum(predicted & ~truth, axis=0)
    fn = np.sum(~predicted & truth, axis=0)
    return tp, fp, fn


def _f1(tp: np.ndarray | int, fp: np.ndarray | int, fn: np.ndarray | int) -> np.ndarray:
    denominator = 2 * np.asarray(tp) + fp + fn
    return np.where(denominator == 0, 0.0, 2 * np.asarray(tp) / np.maximum(denominator, 1))


def f1_scores(probs: np.ndarray, truth: np.ndarray, thresholds: np.ndarray) -> dict[str, float]:
    """Micro and macro F1 of the labels chosen at `thresholds` (one per label; a label is chosen above it)."""
    predicted = probs > np.asarray(thresholds)[None, :]
    tp, fp, fn = _counts(predicted, truth.astype(bool))
    return {"micro_f1": float(_f1(tp.sum(), fp.sum(), fn.sum())), "macro_f1": float(np.mean(_f1(tp, fp, fn)))}


def tune_thresholds(probs: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per label, the threshold of THRESHOLDS with the best F1 (the nearest to 0.5 on a tie)."""
    truth = truth.astype(bool)
    by_distance = sorted(THRESHOLDS, key=lambda t: (abs(t - DEFAULT), t))
    best = np.full(probs.shape[1], DEFAULT)
    for label in range(probs.shape[1]):
        scores = [(float(_f1(*_counts(probs[:, [label]] > t, truth[:, [label]]))[0]), t) for t in by_distance]
        best[label] = max(scores, key=lambda s: s[0])[1]  # max keeps the first of equals: the nearest to 0.5
    return best


def multilabel_metrics(probs: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """F1 at each label's tuned threshold (micro_f1, macro_f1) and at 0.5 (..._at_0.5)."""
    tuned = f1_scores(probs, truth, tune_thresholds(probs, truth))
    fixed = f1_scores(probs, truth, np.full(probs.shape[1], DEFAULT))
    return {**tuned, **{f"{k}_at_0.5": v for k, v in fixed.items()}}
