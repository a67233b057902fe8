"""The reranker bench's data split and its chance level (what its two configurations are read against)."""

from __future__ import annotations

import math
import random
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


def test_ours_and_cross_encoder_fit_train_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's two configurations are one training: from the same weights (head included), dropout off,
    one full batch per step (so batch order cannot differ), `--task rerank` and `CrossEncoder.fit` end at the
    same weights, to float rounding amplified by Adam over 8 steps. A different weight decay (or decay on
    other parameters), warmup or learning rate moves some weight 35x further than that. Nothing is left in
    the working directory (fit() makes checkpoints/model there)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("datasets")
    import argparse

    import torch
    from safetensors.torch import load_file

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import ElectraClassifier
    from electra.tokenizer import load_tokenizer, save_tokenizer
    from tests.test_rerank_multilabel import FILLER, TOPICS, passage, write_jsonl

    words = sorted({w for ws in TOPICS.values() for w in ws} | set(FILLER) | set(TOPICS) | {"what", "about"})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]) + "\n")
    tok = load_tokenizer(vocab)
    cfg = ElectraConfig.from_size(
        "tiny", vocab_size=tok.get_vocab_size(), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    ).replace(num_labels=1)
    torch.manual_seed(0)
    start = tmp_path / "start"
    save_hf_dir(ElectraClassifier(cfg), start)
    save_tokenizer(tok, start)
    rng = random.Random(0)
    rows = []
    for _ in range(16):
        topic = rng.choice(list(TOPICS))
        other = rng.choice([t for t in TOPICS if t != topic])
        rows.append({"query": f"what about {topic}", "passage": passage(rng, topic), "label": 1})
        rows.append({"query": f"what about {topic}", "passage": passage(rng, other, named=False), "label": 0})
    dev = [
        {"query": "what about music", "positive": [passage(rng, "music")], "negative": [passage(rng, "food")]}
    ]
    train, dev_path = write_jsonl(tmp_path / "train.jsonl", rows), write_jsonl(tmp_path / "dev.jsonl", dev)
    args = argparse.Namespace(
        model=start, epochs=8, lr=1e-2, batch_size=32, max_seq_len=128, warmup_fraction=0.25, weight_decay=0.1
    )
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    rr.train_ours(args, train, dev_path, tmp_path / "ours", seed=1)
    rr.train_theirs(args, rows, tmp_path / "theirs", seed=1)
    assert not list(cwd.iterdir()), "the bench left files in the working directory"
    ours = load_file(tmp_path / "ours" / "model.safetensors")
    theirs = load_file(tmp_path / "theirs" / "model.safetensors")
    initial = load_file(start / "model.safetensors")
    assert set(ours) == set(theirs) == set(initial)
    moved = max(float((ours[k] - initial[k]).abs().max()) for k in ours)
    apart = max(float((ours[k] - theirs[k]).abs().max()) for k in ours)
    assert moved > 0.02, moved  # training happened
    assert apart < 1e-3, apart
