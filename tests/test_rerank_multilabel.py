"""Beyond GLUE: a cross-encoder reranker and a multi-label classifier, each fine-tuned by `electra finetune`,
opened by the libraries their users reach for (sentence-transformers' CrossEncoder, transformers' Auto classes
and pipeline), exported with parity and served; their metrics checked against sklearn's and by hand."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from electra.cli.main import main
from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator
from electra.training.finetune.multilabel_metrics import f1_scores, multilabel_metrics, tune_thresholds
from electra.training.finetune.ranking_metrics import ranking_metrics

TOPICS = {
    "sports": ["match", "goal", "team", "coach"],
    "music": ["song", "band", "guitar", "album"],
    "food": ["bread", "soup", "cook", "kitchen"],
    "travel": ["train", "hotel", "city", "map"],
}
FILLER = ["the", "a", "was", "is", "and", "of", "new", "old"]


def word_model(root: Path) -> Path:
    from electra.tokenizer import load_tokenizer, save_tokenizer

    words = sorted({w for ws in TOPICS.values() for w in ws} | set(FILLER) | set(TOPICS) | {"what", "about"})
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]) + "\n")
    tok = load_tokenizer(vocab)
    out = root / "disc"
    torch.manual_seed(0)
    save_hf_dir(ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())), out)
    save_tokenizer(tok, out)
    return out


def passage(rng: random.Random, topic: str, named: bool = True) -> str:
    """A passage about `topic`: two of its words among filler, and its name (what a query asks for) when
    `named` (a relevant passage names it; a tiny random encoder learns that cue in seconds, which is what a
    test of the machinery needs)."""
    words = [topic] * named + rng.choices(TOPICS[topic], k=2) + rng.choices(FILLER, k=rng.randint(2, 5))
    rng.shuffle(words)
    return " ".join(words) + " ."


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------------------
# The metrics
# ----------------------------------------------------------------------------------------------------------


def test_ranking_metrics_match_sklearn_and_the_definitions() -> None:
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(0)
    scores, relevance, groups = [], [], []
    for g in range(30):
        n = int(rng.integers(3, 15))
        scores += list(rng.normal(size=n))
        relevance += list(rng.integers(0, 3, size=n).astype(float))
        groups += [g] * n
    s, r, gr = np.array(scores), np.array(relevance), np.array(groups)
    got = ranking_metrics(s, r, gr)
    kept = [g for g in np.unique(gr) if r[gr == g].max() > 0]
    want_ndcg = np.mean([ndcg_score([r[gr == g]], [s[gr == g]], k=10) for g in kept])
    assert got["ndcg@10"] == pytest.approx(want_ndcg, abs=1e-12)
    # MRR@10: the first relevant passage's reciprocal rank within the top 10, 0 past it.
    want_mrr = []
    for g in kept:
        ranked = r[gr == g][np.argsort(-s[gr == g], kind="stable")]
        hits = [i for i, x in enumerate(ranked[:10]) if x > 0]
        want_mrr.append(1 / (hits[0] + 1) if hits else 0.0)
    assert got["mrr@10"] == pytest.approx(np.mean(want_mrr), abs=1e-12)
    # By hand: relevant at ranks 2 and 3 of 4 -> MRR 1/2, AP (1/2 + 2/3) / 2.
    one = ranking_metrics(np.array([0.9, 0.8, 0.7, 0.1]), np.array([0.0, 1.0, 1.0, 0.0]), np.zeros(4))
    assert one["mrr@10"] == pytest.approx(0.5) and one["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    with pytest.raises(ValueError, match="no query has a relevant passage"):
        ranking_metrics(np.array([1.0]), np.array([0.0]), np.array([0]))


def test_multilabel_f1_matches_sklearn_and_thresholds_are_tuned_per_label() -> None:
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(1)
    truth = rng.random((200, 4)) < 0.3
    probs = np.clip(truth * 0.35 + rng.random((200, 4)) * 0.6, 0, 1)
    cut = np.array([0.5, 0.3, 0.6, 0.45])
    got = f1_scores(probs, truth, cut)
    pred = probs > cut
    assert got["micro_f1"] == pytest.approx(f1_score(truth, pred, average="micro"), abs=1e-12)
    assert got["macro_f1"] == pytest.approx(
        f1_score(truth, pred, average="macro", zero_division=0), abs=1e-12
    )
    tuned = tune_thresholds(probs, truth)
    for label in range(4):
        best = max(f1_score(truth[:, label], probs[:, label] > t) for t in np.arange(0.05, 0.951, 0.05))
        assert f1_score(truth[:, label], probs[:, label] > tuned[label]) == pytest.approx(best, abs=1e-12)
    both = multilabel_metrics(probs, truth)
    assert both["micro_f1"] >= both["micro_f1_at_0.5"]


# ----------------------------------------------------------------------------------------------------------
# A reranker
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rerank")
    model = word_model(root)
    rng = random.Random(0)
    train = []
    for _ in range(400):
        topic = rng.choice(list(TOPICS))
        other = rng.choice([t for t in TOPICS if t != topic])
        query = f"what about {topic}"
        train.append({"query": query, "passage": passage(rng, topic), "label": 1})
        train.append({"query": query, "passage": passage(rng, other, named=False), "label": 0})
    dev = []
    for topic in TOPICS:
        others = [t for t in TOPICS if t != topic]
        dev.append(
            {
                "query": f"what about {topic}",
                "positive": [passage(rng, topic) for _ in range(2)],
                "negative": [passage(rng, rng.choice(others), named=False) for _ in range(6)],
            }
        )
    out = root / "reranker"
    args = ["finetune", "--task", "rerank", "--model", str(model), "--out", str(out), "--quiet"]
    args += [
        "--train",
        str(write_jsonl(root / "train.jsonl", train)),
        "--dev",
        str(write_jsonl(root / "dev.jsonl", dev)),
    ]
    args += ["--text-column", "query", "--text-pair-column", "passage", "--epochs", "3", "--lr", "1e-3"]
    assert main(args) == 0
    return out


def test_a_reranker_trains_ranks_and_opens_in_cross_encoder_and_transformers(reranker: Path) -> None:
    import transformers
    from sentence_transformers import CrossEncoder

    results = json.loads((reranker / "eval_results.json").read_text())
    dev = results["median"]["dev"]
    assert set(dev) >= {"ndcg@10", "mrr@10", "map"} and dev["ndcg@10"] > 0.9, dev  # an easy task, learned
    cfg = json.loads((reranker / "config.json").read_text())
    assert len(cfg["id2label"]) == 1 and cfg["architectures"] == ["ElectraForSequenceClassification"]
    assert "auto_map" not in cfg  # transformers' own head: no remote code needed
    pairs = [
        ("what about music", "music song band and the album ."),
        ("what about music", "bread soup the old ."),
    ]
    st_scores = CrossEncoder(str(reranker), device="cpu").predict(pairs)
    assert st_scores[0] > st_scores[1]
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(reranker).eval()
    tok = transformers.AutoTokenizer.from_pretrained(reranker)
    with torch.no_grad():
        logits = hf(
            **tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
        ).logits
    assert torch.sigmoid(logits[:, 0]).numpy() == pytest.approx(st_scores, abs=1e-5)


def test_a_fine_tuned_reranker_is_served_by_rerank_with_cross_encoders_scores(
    reranker: Path, tmp_path: Path
) -> None:
    from litestar.testing import TestClient
    from sentence_transformers import CrossEncoder

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    bundle = tmp_path / "bundle"
    assert main(["export", "--model", str(reranker), "--out", str(bundle)]) == 0
    query, texts = (
        "what about food",
        ["bread soup and the cook .", "goal team was new .", "map of the city ."],
    )
    expected = CrossEncoder(str(reranker), device="cpu").predict([(query, t) for t in texts])
    with TestClient(create_app(ServeSettings(models=(ModelSpec("rr", bundle),)))) as client:
        while client.get("/health/ready").status_code != 200:
            pass
        ranks = client.post("/rerank", json={"query": query, "texts": texts}).json()
    assert [r["index"] for r in ranks] == sorted(range(3), key=lambda i: -float(expected[i]))
    assert [r["score"] for r in ranks] == pytest.approx(
        sorted((float(x) for x in expected), reverse=True), abs=1e-4
    )


def test_reranker_data_errors_name_the_fix(tmp_path: Path, capsys) -> None:
    model = word_model(tmp_path)
    train = write_jsonl(tmp_path / "t.jsonl", [{"query": "q", "passage": "p", "label": 3}])
    dev = write_jsonl(tmp_path / "d.jsonl", [{"query": "q", "positive": ["p"], "negative": []}])
    base = ["finetune", "--task", "rerank", "--model", str(model), "--out", str(tmp_path / "o"), "--quiet"]
    base += ["--train", str(train), "--dev", str(dev), "--text-column", "query"]
    assert main(base) == 2
    assert "--text-pair-column" in capsys.readouterr().err
    assert main([*base, "--text-pair-column", "passage"]) == 2
    assert "relevance 3 is not between 0 and 1" in capsys.readouterr().err
    bad_dev = write_jsonl(tmp_path / "bad.jsonl", [{"query": "q", "positive": "p"}])
    write_jsonl(train, [{"query": "q", "passage": "p", "label": 1}])
    assert main([*base, "--text-pair-column", "passage", "--dev", str(bad_dev)]) == 2
    assert "must be lists of passages" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------
# A multi-label classifier
# ----------------------------------------------------------------------------------------------------------


def multilabel_rows(rng: random.Random, n: int) -> list[dict[str, Any]]:
    rows = []
    for _ in range(n):
        topics = rng.sample(list(TOPICS), rng.choice([0, 1, 1, 2]))
        words = [w for t in topics for w in rng.choices(TOPICS[t], k=2)] + rng.choices(FILLER, k=3)
        rng.shuffle(words)
        rows.append({"text": " ".join(words) + " .", "labels": sorted(topics)})
    return rows


@pytest.fixture(scope="module")
def multilabel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("multilabel")
    model = word_model(root)
    rng = random.Random(1)
    train = write_jsonl(root / "train.jsonl", multilabel_rows(rng, 600))
    # The dev set as a TSV, its labels joined by "|": both forms read alike.
    dev = root / "dev.tsv"
    dev.write_text(
        "text\tlabels\n"
        + "".join(f"{r['text']}\t{'|'.join(r['labels'])}\n" for r in multilabel_rows(rng, 120))
    )
    out = root / "classifier"
    args = ["finetune", "--task", "multilabel", "--model", str(model), "--out", str(out), "--quiet"]
    args += ["--train", str(train), "--dev", str(dev), "--label-column", "labels", "--label-separator", "|"]
    args += ["--epochs", "4", "--lr", "1e-3", "--head", "hf"]
    assert main(args) == 0
    return out


def test_a_multilabel_classifier_trains_with_thresholds_and_transformers_applies_a_sigmoid(
    multilabel: Path,
) -> None:
    import transformers

    results = json.loads((multilabel / "eval_results.json").read_text())
    dev = results["median"]["dev"]
    assert dev["micro_f1"] > 0.8 and set(dev) >= {"macro_f1", "micro_f1_at_0.5", "macro_f1_at_0.5"}, dev
    cfg = json.loads((multilabel / "config.json").read_text())
    assert cfg["problem_type"] == "multi_label_classification"
    assert set(cfg["id2label"].values()) == set(TOPICS)
    assert (
        set(cfg["label_thresholds"]) == set(TOPICS) and results["label_thresholds"] == cfg["label_thresholds"]
    )
    pipe = transformers.pipeline("text-classification", model=str(multilabel), top_k=None)
    got = {g["label"]: g["score"] for g in pipe(["song band goal team the ."])[0]}
    model = transformers.AutoModelForSequenceClassification.from_pretrained(multilabel).eval()
    tok = transformers.AutoTokenizer.from_pretrained(multilabel)
    with torch.no_grad():
        logits = model(**tok("song band goal team the .", return_tensors="pt")).logits[0]
    want = {model.config.id2label[i]: float(p) for i, p in enumerate(torch.sigmoid(logits))}
    assert got == pytest.approx(want, abs=1e-6)  # one sigmoid per label, not a softmax
    assert got["music"] > 0.5 and got["sports"] > 0.5 and got["food"] < 0.5


def test_a_multilabel_classifier_exports_and_serves_its_labels(multilabel: Path, tmp_path: Path) -> None:
    from litestar.testing import TestClient

    from electra.bundle import read_bundle
    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    bundle = tmp_path / "bundle"
    assert main(["export", "--model", str(multilabel), "--out", str(bundle)]) == 0
    b = read_bundle(bundle)
    cfg = json.loads((multilabel / "config.json").read_text())
    assert b.problem_type == "multi_label_classification" and b.label_thresholds == cfg["label_thresholds"]
    assert b.parity.max_abs_diff is not None and b.parity.max_abs_diff < 1e-3
    text = "song band goal team the ."
    with TestClient(create_app(ServeSettings(models=(ModelSpec("topics", bundle),)))) as client:
        while client.get("/health/ready").status_code != 200:
            pass
        result = client.post("/classify", json={"text": text}).json()["results"][0]
        predicted = client.post("/predict", json={"inputs": text}).json()
        v2 = client.post(
            "/v2/models/topics/infer",
            json={"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [text]}]},
        ).json()
    scores = result["scores"]
    assert set(scores) == set(TOPICS) and sum(scores.values()) != pytest.approx(1.0, abs=1e-3)
    assert result["labels"] == sorted(
        label for label, p in scores.items() if p > cfg["label_thresholds"][label]
    )
    assert {"music", "sports"} <= set(result["labels"])
    assert {p["label"]: p["score"] for p in predicted} == pytest.approx(scores, abs=1e-6)
    probs = next(o for o in v2["outputs"] if o["name"] == "probabilities")["data"]
    assert sorted(probs) == pytest.approx(sorted(scores.values()), abs=1e-6)


def test_multilabel_data_errors_name_the_fix(tmp_path: Path, capsys) -> None:
    model = word_model(tmp_path)
    train = write_jsonl(
        tmp_path / "t.jsonl", [{"text": "song .", "labels": ["music"]}, {"text": "goal .", "labels": []}]
    )
    dev = write_jsonl(tmp_path / "d.jsonl", [{"text": "soup .", "labels": ["food"]}])
    base = [
        "finetune",
        "--task",
        "multilabel",
        "--model",
        str(model),
        "--out",
        str(tmp_path / "o"),
        "--quiet",
    ]
    assert main([*base, "--train", str(train), "--dev", str(dev), "--label-column", "labels"]) == 2
    assert "never occur in" in capsys.readouterr().err
    write_jsonl(dev, [{"text": "soup .", "labels": "music"}, {"text": "x .", "labels": 5}])
    assert main([*base, "--train", str(train), "--dev", str(dev), "--label-column", "labels"]) == 2
    assert "list of strings" in capsys.readouterr().err
