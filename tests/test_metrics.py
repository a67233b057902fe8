"""GLUE metrics against scipy / scikit-learn, degenerate inputs, per-task keys, median over seeds."""

from __future__ import annotations

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from electra.training.finetune import glue_metrics as metrics
from electra.training.finetune.glue_metrics import (
    accuracy,
    f1_binary,
    glue_metrics,
    matthews_corrcoef,
    median_over_seeds,
    pearson,
    rankdata,
    spearman,
)
from electra.training.finetune.tasks import TASKS, TaskSpec

sk = pytest.importorskip("sklearn.metrics", reason="scikit-learn (a dev extra) is the reference")
stats = pytest.importorskip("scipy.stats", reason="scipy (a dev extra) is the reference")

SEEDS = [0, 1, 2, 3, 4]


def _labels(seed: int, n: int = 200, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    # predictions that agree with the labels more often than chance, so the metrics are not all near 0
    p = np.where(rng.random(n) < 0.7, y, rng.integers(0, k, n))
    return p, y


@pytest.mark.parametrize("seed", SEEDS)
def test_classification_metrics_match_sklearn(seed: int) -> None:
    p, y = _labels(seed)
    assert accuracy(p, y) == pytest.approx(sk.accuracy_score(y, p), abs=1e-12)
    assert f1_binary(p, y) == pytest.approx(sk.f1_score(y, p), abs=1e-12)
    assert f1_binary(p, y, positive=0) == pytest.approx(sk.f1_score(y, p, pos_label=0), abs=1e-12)
    assert matthews_corrcoef(p, y) == pytest.approx(sk.matthews_corrcoef(y, p), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_multiclass_mcc_matches_sklearn(seed: int) -> None:
    p, y = _labels(seed, n=300, k=3 + seed % 3)
    assert matthews_corrcoef(p, y) == pytest.approx(sk.matthews_corrcoef(y, p), abs=1e-12)
    words = np.array(["contradiction", "entailment", "neutral", "x", "y"])
    assert matthews_corrcoef(words[p], words[y]) == pytest.approx(sk.matthews_corrcoef(y, p), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, 500)
    y = x + rng.normal(0, 1.5, 500)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert pearson(x, -y) == pytest.approx(stats.pearsonr(x, -y)[0], abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_spearman_with_ties_uses_average_ranks_like_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 300).astype(float)  # STS-B-like scores: many ties
    y = np.round(x + rng.normal(0, 1.0, 300))
    np.testing.assert_allclose(rankdata(x), stats.rankdata(x, method="average"))
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert spearman(x, x) == pytest.approx(1.0)


def test_large_values_do_not_overflow() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, 100) * 1e200
    y = x + rng.normal(0, 1, 100) * 1e200
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-9)
    assert -1.0 <= pearson(x, x) <= 1.0


def test_degenerate_inputs_follow_the_documented_conventions() -> None:
    y = np.array([0, 1, 1, 0, 1])
    constant = np.ones(5, dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # sklearn: MCC 0.0 for constant predictions or labels; F1 0.0 with no positives at all
        assert matthews_corrcoef(constant, y) == sk.matthews_corrcoef(y, constant) == 0.0
        assert matthews_corrcoef(y, constant) == 0.0
        assert matthews_corrcoef(constant, constant) == sk.matthews_corrcoef(constant, constant) == 0.0
        zeros = np.zeros(5, dtype=int)
        assert f1_binary(zeros, zeros) == sk.f1_score(zeros, zeros) == 0.0
        assert f1_binary(zeros, y) == sk.f1_score(y, zeros) == 0.0
        # scipy: nan for a constant input; here 0.0 (see the module docstring)
        assert math.isnan(stats.pearsonr(constant.astype(float), y.astype(float))[0])
    assert pearson(constant, y) == 0.0 and pearson(y, constant) == 0.0
    assert spearman(constant, y) == 0.0
    assert accuracy(y, y) == 1.0 and matthews_corrcoef(y, y) == 1.0 and matthews_corrcoef(1 - y, y) == -1.0
    with pytest.raises(ValueError):
        accuracy([], [])
    with pytest.raises(ValueError):
        accuracy([1, 0], [1])
    with pytest.raises(ValueError):
        pearson([1.0], [2.0])


def test_glue_metrics_keys_per_task() -> None:
    p, y = _labels(11)
    expected = {
        "cola": {"mcc"},
        "sst2": {"accuracy"},
        "mrpc": {"f1", "accuracy", "f1_accuracy_avg"},
        "qqp": {"f1", "accuracy", "f1_accuracy_avg"},
        "mnli": {"accuracy"},
        "qnli": {"accuracy"},
        "rte": {"accuracy"},
        "wnli": {"accuracy"},
    }
    for name, keys in expected.items():
        out = glue_metrics(name, p, y)
        assert set(out) == keys, name
        assert all(isinstance(v, float) for v in out.values())
        assert TASKS[name].main_metric in out
    mrpc = glue_metrics(TASKS["mrpc"], p, y)
    assert mrpc["f1"] == pytest.approx(sk.f1_score(y, p))
    assert mrpc["f1_accuracy_avg"] == pytest.approx((mrpc["f1"] + mrpc["accuracy"]) / 2)
    assert glue_metrics("cola", p, y)["mcc"] == pytest.approx(sk.matthews_corrcoef(y, p))

    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 100)
    pred = gold + rng.normal(0, 1, 100)
    stsb = glue_metrics("stsb", pred, gold)
    assert set(stsb) == {"pearson", "spearman", "pearson_spearman_avg"}
    assert stsb["pearson_spearman_avg"] == pytest.approx((stsb["pearson"] + stsb["spearman"]) / 2)
    assert stsb["spearman"] == pytest.approx(stats.spearmanr(pred, gold)[0])


def test_glue_metrics_accepts_label_strings_and_custom_specs() -> None:
    words = ["entailment", "not_entailment", "entailment", "entailment"]
    assert glue_metrics("rte", words, [0, 1, 1, 0]) == {"accuracy": 0.75}
    custom = TaskSpec(
        "custom", "", ("a", "b", "c"), ("accuracy",), "accuracy", ("dev",), ("test",), 3, "custom"
    )
    assert glue_metrics(custom, [0, 1, 2, 2], [0, 1, 2, 1]) == {"accuracy": 0.75}


def test_median_over_seeds() -> None:
    runs = [{"accuracy": 0.8, "f1": 0.7}, {"accuracy": 0.9, "f1": 0.6}, {"accuracy": 0.85, "f1": 0.9}]
    assert median_over_seeds(runs) == {"accuracy": pytest.approx(0.85), "f1": pytest.approx(0.7)}
    assert median_over_seeds(runs[:2]) == {"accuracy": pytest.approx(0.85), "f1": pytest.approx(0.65)}
    assert median_over_seeds(runs[:1]) == runs[0]
    with pytest.raises(ValueError):
        median_over_seeds([])
    with pytest.raises(ValueError):
        median_over_seeds([{"accuracy": 1.0}, {"mcc": 0.5}])


def test_metrics_module_does_not_import_scipy_or_sklearn() -> None:
    tree = ast.parse(Path(metrics.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported.isdisjoint({"scipy", "sklearn", "torch"}), imported
