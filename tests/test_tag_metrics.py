"""Token classification metrics: strict IOB2 entity scores by hand, against seqeval's defaults, bad input."""

from __future__ import annotations

import json
import random
import warnings

import pytest
from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score

from electra.training.finetune.tag_metrics import MAIN_METRIC, tag_metrics
from electra.training.finetune.tagging_data import from_iob2


def test_perfect_predictions_score_one() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    m = tag_metrics(gold, gold)
    assert MAIN_METRIC == "f1" and m[MAIN_METRIC] == 1.0
    assert m["precision"] == m["recall"] == m["accuracy"] == 1.0
    assert (m["support_PER"], m["support_LOC"], m["support_ORG"]) == (1.0, 1.0, 1.0)
    assert all(type(v) is float for v in m.values())
    json.dumps(m)


def test_a_wrong_boundary_or_type_is_no_true_positive() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "O", "B-LOC"]]
    m = tag_metrics(gold, pred)
    # gold: PER 0-2, LOC 3, ORG 0, MISC 2
    # predicted: PER 0-1 (boundary wrong), LOC 3, ORG 0, LOC 2 (type wrong)
    assert m["precision"] == pytest.approx(2 / 4) and m["recall"] == pytest.approx(2 / 4)
    assert m["f1"] == pytest.approx(0.5)
    assert m["accuracy"] == pytest.approx(5 / 7)
    assert (m["precision_PER"], m["recall_PER"], m["f1_PER"], m["support_PER"]) == (0.0, 0.0, 0.0, 1.0)
    assert m["precision_LOC"] == pytest.approx(1 / 2) and m["recall_LOC"] == 1.0
    assert m["f1_LOC"] == pytest.approx(2 / 3) and m["support_LOC"] == 1.0
    assert (m["f1_ORG"], m["support_ORG"]) == (1.0, 1.0)
    assert (m["precision_MISC"], m["recall_MISC"], m["support_MISC"]) == (0.0, 0.0, 1.0)


def test_an_i_after_o_starts_no_entity_in_strict_mode() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]]
    pred = [["I-PER", "I-PER", "O", "B-LOC", "I-LOC"]]
    m = tag_metrics(gold, pred)
    assert (m["precision"], m["recall"]) == (1.0, 0.5)
    assert m["f1_PER"] == 0.0 and m["support_PER"] == 1.0
    # seqeval's default mode (conlleval's reading) takes the stray I-PER as an entity start; strict does not.
    assert f1_score(gold, pred) == 1.0
    # A type named only by stray I- tags still gets its keys.
    m = tag_metrics([["O", "O"]], [["O", "I-DATE"]])
    assert m["support_DATE"] == m["precision_DATE"] == m["f1_DATE"] == 0.0


def random_iob2(rng: random.Random, length: int) -> list[str]:
    """A random valid IOB2 sequence of `length` tags (an entity cut at the end stays valid)."""
    tags: list[str] = []
    while len(tags) < length:
        kind = rng.choice(["PER", "LOC", "ORG"])
        if rng.random() < 0.5:
            tags.append("O")
        else:
            tags += [f"B-{kind}"] + [f"I-{kind}"] * rng.randrange(3)
    tags = tags[:length]
    assert from_iob2(tags, "iob2") == tags  # raises if invalid
    return tags


def test_valid_iob2_scores_equal_seqevals_defaults() -> None:
    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.randrange(1, 12) for _ in range(rng.randrange(1, 8))]
        gold = [random_iob2(rng, n) for n in lengths]
        pred = [random_iob2(rng, n) for n in lengths]
        m = tag_metrics(gold, pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seqeval's defaults warn on 0/0
            assert m["f1"] == pytest.approx(f1_score(gold, pred))
            assert m["precision"] == pytest.approx(precision_score(gold, pred))
            assert m["recall"] == pytest.approx(recall_score(gold, pred))
            report = classification_report(gold, pred, output_dict=True)
        assert m["accuracy"] == pytest.approx(accuracy_score(gold, pred))
        for kind in ("PER", "LOC", "ORG"):
            row = report.get(kind, {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 0})
            assert m.get(f"f1_{kind}", 0.0) == pytest.approx(row["f1-score"])
            assert m.get(f"precision_{kind}", 0.0) == pytest.approx(row["precision"])
            assert m.get(f"recall_{kind}", 0.0) == pytest.approx(row["recall"])
            assert m.get(f"support_{kind}", 0.0) == row["support"]


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ([["O", "O"]], [["O", "O"]]),  # no entities at all
        ([["O", "O"]], [["B-PER", "O"]]),  # no gold entity
        ([["B-PER", "O"]], [["O", "O"]]),  # no predicted entity
        ([["B-PER", "O"]], [["I-PER", "I-LOC"]]),  # only invalid predictions
        ([[], ["O"]], [[], ["O"]]),  # an empty sentence
    ],
)
def test_degenerate_input_scores_zero_without_warnings(gold: list[list[str]], pred: list[list[str]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = tag_metrics(gold, pred)
    if not any(t != "O" for s in gold + pred for t in s):
        assert m == {"f1": 0.0, "precision": 0.0, "recall": 0.0, "accuracy": 1.0}
    assert all(0.0 <= m[k] <= 1.0 for k in ("f1", "precision", "recall", "accuracy"))


def test_bad_input_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="1 predicted sentences for 2 gold"):
        tag_metrics([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 1 predicted tags for 2 gold"):
        tag_metrics([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match=r"sentence 0: predicted .*'PER'"):
        tag_metrics([["O"]], [["PER"]])
    with pytest.raises(ValueError, match=r"sentence 0: predicted .*'S-PER'"):
        tag_metrics([["O"]], [["S-PER"]])
    with pytest.raises(ValueError, match="gold tags are not valid IOB2"):
        tag_metrics([["I-PER"]], [["O"]])
    with pytest.raises(ValueError, match="no tokens"):
        tag_metrics([], [])


def test_a_missing_seqeval_is_a_clear_error_before_any_training(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from electra.errors import InputError
    from electra.training.finetune.tag_metrics import require_seqeval

    require_seqeval()  # installed here (train extra)
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "seqeval" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(InputError, match="pip install seqeval"):
        require_seqeval()
