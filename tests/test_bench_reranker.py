"""The reranker bench's data split and its chance level (what its two configurations are read against)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import reranker_vs_st as rr


def test_chance_level_of_one_relevant_among_ten() -> None:
    rows = [{"query": "q", "positive": ["p"], "negative": [f"n{i}" for i in range(9)]}]
    chance = rr.chance_metrics(rows, draws=4000)
    # The relevant passage equally likely at each rank 1..10.
    assert chance["mrr@10"] == pytest.approx(sum(1 / r for r in range(1, 11)) / 10, abs=0.01)
    assert chance["map"] == pytest.approx(chance["mrr@10"], abs=1e-9)
    assert chance["ndcg@10"] == pytest.approx(sum(1 / math.log2(r + 1) for r in range(1, 11)) / 10, abs=0.01)


def test_qnli_relevance_keeps_questions_apart(tmp_path: Path) -> None:
    lines = ["index\tquestion\tsentence\tlabel"]
    for q in range(20):
        lines += [
            f"{q}a\tquestion {q}?\tanswer {q}.\tentailment",
            f"{q}b\tquestion {q}?\tother {q}.\tnot_entailment",
        ]
    path = tmp_path / "dev.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    train, dev = rr.qnli_relevance(path, dev_share=0.3, negatives=3)
    train_questions = {r["query"] for r in train}
    assert len(train_questions) == 14 and len(dev) == 6
    assert not train_questions & {r["query"] for r in dev}
    for row in dev:
        n = row["query"].split()[1].rstrip("?")
        assert row["positive"] == [f"answer {n}."]
        assert row["negative"][0] == f"other {n}." and len(row["negative"]) == 4
        assert f"answer {n}." not in row["negative"][1:]
