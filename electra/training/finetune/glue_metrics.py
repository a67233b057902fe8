"""The official GLUE metrics in plain numpy (scipy and scikit-learn are test-only dependencies).

Each function matches its reference (sklearn.metrics.accuracy_score / f1_score / matthews_corrcoef,
scipy.stats.pearsonr / spearmanr) to floating-point rounding, including their conventions for degenerate
input, with one deliberate exception:

* pearson / spearman of a constant vector are undefined; scipy returns nan (with a warning). Here they return
  0.0: a model that predicts one value for everything has no correlation with the truth, and a number keeps
  checkpoint selection (`>` against nan is always False), medians over seeds and JSON reports well defined.
  This is the same convention sklearn uses for MCC, whose denominator vanishes in the same situation.
* MCC of constant predictions (or labels) is 0.0, as in sklearn.
* F1 with no positive prediction and no positive label is 0.0, as sklearn's default (zero_division="warn").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from electra.training.finetune.tasks import TaskSpec, get_task


def _pair(preds: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(preds).reshape(-1), np.asarray(labels).reshape(-1)
    if p.shape != y.shape:
        raise ValueError(f"{p.size} predictions for {y.size} labels")
    if p.size == 0:
        raise ValueError("no predictions to score")
    return p, y


def accuracy(preds: Any, labels: Any) -> float:
    p, y = _pair(preds, labels)
    return float(np.mean(p == y))


def f1_binary(preds: Any, labels: Any, positive: Any = 1) -> float:
    p, y = _pair(preds, labels)
    tp = int(np.sum((p == positive) & (y == positive)))
    fp = int(np.sum((p == positive) & (y != positive)))
    fn = int(np.sum((p != positive) & (y == positive)))
    # 2*tp / (2*tp + fp + fn) equals 2PR/(P+R) and stays defined when only one of P, R is 0/0.
    denominator = 2 * tp + fp + fn
    return 0.0 if denominator == 0 else 2 * tp / denominator


def matthews_corrcoef(preds: Any, labels: Any) -> float:
    """Multiclass MCC (Gorodkin's R_K, as sklearn): binary CoLA is the 2x2 special case."""
    p, y = _pair(preds, labels)
    classes, idx = np.unique(np.concatenate([y, p]), return_inverse=True)
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (idx[: y.size], idx[y.size :]), 1.0)
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    n_correct, n = np.trace(confusion), confusion.sum()
    cov_yp = n_correct * n - t_sum @ p_sum
    cov_pp = n * n - p_sum @ p_sum
    cov_yy = n * n - t_sum @ t_sum
    if cov_pp * cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_yy * cov_pp))


def pearson(x: Any, y: Any) -> float:
    a, b = _pair(x, y)
    if a.size < 2:
        raise ValueError("pearson needs at least 2 values")
    a, b = a.astype(np.float64), b.astype(np.float64)
    if np.all(a == a[0]) or np.all(b == b[0]):
        return 0.0  # undefined (scipy: nan); see the module docstring
    a, b = a - a.mean(), b - b.mean()
    # Scaling by the largest magnitude before the norm (as scipy does) keeps the sum of squares from
    # overflowing (or underflowing) for extreme values.
    a, b = a / np.max(np.abs(a)), b / np.max(np.abs(b))
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    return float(np.clip(a @ b, -1.0, 1.0))


def rankdata(x: Any) -> np.ndarray:
    """Ranks 1..n, ties sharing the average of their ranks (scipy.stats.rankdata(method="average"))."""
    values = np.asarray(x).reshape(-1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # the highest rank in each group of equal values
    return (last - (counts - 1) / 2.0)[inverse.reshape(-1)]


def spearman(x: Any, y: Any) -> float:
    a, b = _pair(x, y)
    return pearson(rankdata(a), rankdata(b))


def glue_metrics(task: TaskSpec | str, preds: Any, labels: Any) -> dict[str, float]:
    """The task's metrics: label ids for classification, floats for regression.

    Adds "pearson_spearman_avg" when both correlations are computed (STS-B) and "f1_accuracy_avg" when F1 and
    accuracy are (MRPC, QQP): the GLUE leaderboard's single number for those tasks.
    Works for any TaskSpec (e.g. a custom one), driven by its `metrics`.
    """
    spec = get_task(task)
    p, y = _pair(preds, labels)
    if spec.labels is not None and (p.dtype.kind in "OUS" or y.dtype.kind in "OUS"):
        ids = {name: i for i, name in enumerate(spec.labels)}
        p = np.asarray([ids[str(v)] if isinstance(v, str) else v for v in p])
        y = np.asarray([ids[str(v)] if isinstance(v, str) else v for v in y])
    functions = {
        "accuracy": accuracy,
        "f1": f1_binary,
        "mcc": matthews_corrcoef,
        "pearson": pearson,
        "spearman": spearman,
    }
    unknown = [m for m in spec.metrics if m not in functions]
    if unknown:
        raise ValueError(f"task {spec.name}: unknown metric(s) {unknown}; known: {', '.join(functions)}")
    out = {m: functions[m](p, y) for m in spec.metrics}
    if "pearson" in out and "spearman" in out:
        out["pearson_spearman_avg"] = (out["pearson"] + out["spearman"]) / 2
    if "f1" in out and "accuracy" in out:
        out["f1_accuracy_avg"] = (out["f1"] + out["accuracy"]) / 2
    return out


def median_over_seeds(results: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-metric median over the runs of several seeds (the ELECTRA paper reports the median of 10).

    With an even number of runs this is the mean of the two middle values.
    """
    if not results:
        raise ValueError("median_over_seeds needs at least one result")
    keys = list(results[0])
    for r in results[1:]:
        if set(r) != set(keys):
            raise ValueError(f"results have different metrics: {sorted(keys)} vs {sorted(r)}")
    return {k: float(np.median([r[k] for r in results])) for k in keys}
