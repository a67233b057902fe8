"""The majority-class baseline beside a classifier's dev score, and the warning when a model predicts one
label or does not beat it (what `electra finetune` and `evaluate` print)."""

from __future__ import annotations

import numpy as np
import pytest

from electra.training.finetune.baseline import MajorityCheck, majority_check
from electra.training.finetune.tasks import TASKS, custom_task, multilabel_task


def logits_for(preds: list[int], labels: int = 2) -> np.ndarray:
    out = np.zeros((len(preds), labels), dtype=np.float32)
    out[np.arange(len(preds)), preds] = 1.0
    return out


def sst2_dev() -> np.ndarray:
    """SST-2's dev labels as counted: 428 negative, 444 positive."""
    return np.array([0] * 428 + [1] * 444)


def test_all_positive_on_sst2_is_the_baseline_and_says_so() -> None:
    gold = sst2_dev()
    check = majority_check(TASKS["sst2"], logits_for([1] * len(gold)), gold)
    assert check is not None
    assert (check.majority, check.examples, check.metric) == ("positive", 872, "accuracy")
    assert check.baseline == pytest.approx(444 / 872) and check.score == check.baseline
    assert check.one_label and not check.beats_baseline and check.predicted == {"positive": 872}
    assert check.beside() == 'majority-class baseline accuracy 0.5092 ("positive" for all 872)'
    warning = check.warning("dev")
    assert warning is not None and warning.startswith(
        'dev: the model answers "positive" for all 872 examples, accuracy 0.5092 against the majority-class '
        "baseline's 0.5092: it has learned nothing from the text; fine-tune again"
    )


def test_mixed_predictions_no_better_than_the_majority() -> None:
    gold = sst2_dev()
    preds = [1] * 872
    preds[:100] = [0] * 100  # 100 negatives right
    preds[500:700] = [0] * 200  # 200 positives called negative
    check = majority_check(TASKS["sst2"], logits_for(preds), gold)
    assert check is not None and not check.one_label
    assert check.score == pytest.approx((100 + 444 - 200) / 872) and not check.beats_baseline
    assert check.predicted == {"positive": 572, "negative": 300}  # most often first
    warning = check.warning("dev")
    assert warning is not None
    assert warning.startswith("dev: accuracy 0.3945 is no better than the majority-class baseline's 0.5092")


def test_a_model_that_learned_draws_no_warning() -> None:
    gold = sst2_dev()
    preds = gold.copy()
    preds[:50] = 1  # 50 mistakes
    check = majority_check(TASKS["sst2"], logits_for(list(preds)), gold)
    assert check is not None and check.beats_baseline and check.warning("dev") is None


def test_equal_to_the_baseline_is_not_better() -> None:
    """A mix of labels that scores exactly the baseline is flagged: beating means scoring above it."""
    gold = np.array([0, 0, 1, 1, 0, 0])
    check = majority_check(custom_task(("a", "b")), logits_for([0, 0, 1, 0, 1, 0]), gold)
    assert check is not None and not check.one_label
    assert check.score == pytest.approx(4 / 6) and check.baseline == pytest.approx(4 / 6)
    assert 'no better than the majority-class baseline\'s 0.6667 ("a" for every example)' in (
        check.warning("dev") or ""
    )


def test_mcc_and_f1_baselines() -> None:
    """CoLA's main metric (MCC) gives any constant answer 0; MRPC's (F1 of the positive class) gives
    answering the majority "equivalent" 2p / (1 + p)."""
    gold = np.array([1] * 70 + [0] * 30)
    cola = majority_check(TASKS["cola"], logits_for([1] * 100), gold)
    assert cola is not None and cola.baseline == 0.0 and cola.majority == "acceptable"
    mrpc = majority_check(TASKS["mrpc"], logits_for(list(gold)), gold)
    assert mrpc is not None and mrpc.baseline == pytest.approx(2 * 0.7 / 1.7) and mrpc.score == 1.0
    assert mrpc.warning("dev") is None


def test_three_labels_and_a_tie() -> None:
    gold = np.array([2, 2, 1, 1, 0])  # a tie between 1 and 2: the first in label order
    check = majority_check(TASKS["mnli"], logits_for([2, 2, 2, 2, 2], labels=3), gold)
    assert check is not None and check.majority == "entailment" and check.majority_share == 0.4
    assert check.predicted == {"neutral": 5} and check.one_label


def test_only_single_label_classification_is_checked() -> None:
    values = np.array([0.5, 1.0, 2.0])
    assert majority_check(TASKS["stsb"], values[:, None], values) is None
    assert majority_check(custom_task(None), values[:, None], values) is None
    assert majority_check(multilabel_task(("a", "b")), np.zeros((2, 2)), np.zeros((2, 2))) is None
    assert majority_check(TASKS["sst2"], np.zeros((0, 2)), np.zeros(0, dtype=int)) is None
    assert majority_check(TASKS["sst2"], np.zeros((2, 2)), None) is None


def test_round_trip_through_json() -> None:
    gold = sst2_dev()
    check = majority_check(TASKS["sst2"], logits_for([1] * len(gold)), gold)
    assert check is not None and MajorityCheck(**check.to_dict()) == check
