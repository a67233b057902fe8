"""Token classification: fine-tuning (CoNLL-2003 and custom tag sets), evaluate, predict, export.

The data layer (file formats, schemes, errors) is tests/test_tagging_data.py, the metrics
tests/test_tag_metrics.py, serving a tagger tests/test_tagging_serving.py.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.cli.main import main
from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator
from electra.tokenizer import load_tokenizer, save_tokenizer
from electra.training.finetune.tag_encoding import IGNORE, encode_sentences, word_tags
from electra.training.finetune.tagging_data import TaggedSentence, read_tagged
from tests.conftest import ERROR_LINE

from .conftest import shared_path

FIRST_NAMES = ["john", "mary", "anna"]
SURNAMES = ["smith", "jones"]
PEOPLE = [*FIRST_NAMES, *SURNAMES]
PLACES = ["paris", "london", "berlin", "rome"]
FILLER = ["the", "a", "visited", "met", "in", "and", "said", "today", "with", "went", "to", "from"]
PIECES = ["##s", "##ing", "##ly"]


@pytest.fixture
def tag_model(tmp_path: Path) -> Path:
    """A tiny random discriminator whose vocabulary holds the synthetic task's words (and some pieces)."""
    vocab = tmp_path / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "new", "york"]
    vocab.write_text("\n".join([*specials, *PEOPLE, *PLACES, *FILLER, *PIECES]) + "\n")
    tok = load_tokenizer(vocab)
    torch.manual_seed(0)
    out = tmp_path / "disc"
    save_hf_dir(ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())), out)
    save_tokenizer(tok, out)
    return out


def synthetic(n: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Sentences of filler words with people ("mary", "john smith") and places ("paris", "new york"): each
    word's tag follows from the word, so a tiny random-init model learns them in seconds."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words: list[str] = []
        tags: list[str] = []
        for _ in range(rng.randint(2, 5)):
            words.append(rng.choice(FILLER))
            tags.append("O")
            kind = rng.random()
            if kind < 0.35:
                names = [rng.choice(FIRST_NAMES)] + ([rng.choice(SURNAMES)] if rng.random() < 0.5 else [])
                words += names
                tags += ["B-PER"] + ["I-PER"] * (len(names) - 1)
            elif kind < 0.6:
                place = ["new", "york"] if rng.random() < 0.3 else [rng.choice(PLACES)]
                words += place
                tags += ["B-LOC"] + ["I-LOC"] * (len(place) - 1)
        words.append(".")
        tags.append("O")
        out.append((words, tags))
    return out


def to_bioes(tags: list[str]) -> list[str]:
    out = []
    for i, tag in enumerate(tags):
        continues = i + 1 < len(tags) and tags[i + 1].startswith("I-")
        if tag.startswith("B-"):
            out.append(tag if continues else "S-" + tag[2:])
        elif tag.startswith("I-"):
            out.append(tag if continues else "E-" + tag[2:])
        else:
            out.append(tag)
    return out


def write_conll(path: Path, sentences: list[tuple[list[str], list[str]]], scheme: str = "iob2") -> Path:
    blocks = []
    for words, tags in sentences:
        shown = to_bioes(tags) if scheme == "bioes" else tags
        blocks.append("\n".join(f"{w} X {t}" for w, t in zip(words, shown, strict=True)))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def write_text_jsonl(path: Path, sentences: list[tuple[list[str], list[str]]]) -> Path:
    """The text + character-span form of the same sentences."""
    lines = []
    for words, tags in sentences:
        text, entities, offsets = "", [], []
        for w in words:
            text += ("" if not text else " ") + w
            offsets.append((len(text) - len(w), len(text)))
        for i, tag in enumerate(tags):
            if tag.startswith("B-"):
                j = i + 1
                while j < len(tags) and tags[j] == "I-" + tag[2:]:
                    j += 1
                entities.append({"start": offsets[i][0], "end": offsets[j - 1][1], "label": tag[2:]})
        lines.append(json.dumps({"text": text, "entities": entities}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tags_args(train: Path, dev: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "finetune",
        "--task",
        "tags",
        "--train",
        str(train),
        "--dev",
        str(dev),
        "--model",
        str(model),
        "--out",
        str(out),
        "--epochs",
        "4",
        "--lr",
        "2e-3",
        "--batch-size",
        "16",
        "--quiet",
        *extra,
    ]


# --------------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------------


def test_labels_sit_on_each_words_first_piece_only(tag_model: Path) -> None:
    tok = load_tokenizer(tag_model)
    labels = ("O", "B-PER", "I-PER")
    sentence = TaggedSentence(
        "s:1", ["johns", "visited", "mary", "smith"], ["B-PER", "O", "B-PER", "I-PER"], 1
    )
    enc = encode_sentences(tok, [sentence], labels, 32)
    pieces = tok.encode(sentence.words, is_pretokenized=True).tokens
    assert pieces == ["[CLS]", "john", "##s", "visited", "mary", "smith", "[SEP]"]
    assert enc.labels is not None
    assert enc.labels[0].tolist() == [IGNORE, 1, IGNORE, 0, 1, 2, IGNORE]
    assert enc.first_piece[0].tolist() == [1, 3, 4, 5]
    # Predictions are read back from the same first pieces.
    logits = np.zeros((7, 3), dtype=np.float32)
    logits[[1, 4], 1] = 1
    logits[5, 2] = 1
    assert word_tags([logits], enc, labels) == [["B-PER", "O", "B-PER", "I-PER"]]


def test_words_past_the_length_limit_are_predicted_outside(tag_model: Path) -> None:
    tok = load_tokenizer(tag_model)
    words = ["john"] * 10
    enc = encode_sentences(tok, [TaggedSentence("s:1", words, ["B-PER"] * 10, 1)], ("O", "B-PER"), 6)
    assert enc.first_piece[0].tolist() == [1, 2, 3, 4, -1, -1, -1, -1, -1, -1]
    logits = np.tile(np.array([[0.0, 1.0]], dtype=np.float32), (6, 1))
    assert word_tags([logits], enc, ("O", "B-PER"))[0] == ["B-PER"] * 4 + ["O"] * 6


def test_a_stray_inside_tag_starts_an_entity_as_conlleval_reads_it(tag_model: Path) -> None:
    tok = load_tokenizer(tag_model)
    labels = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    words = ["the", "mary", "smith", "paris"]
    enc = encode_sentences(tok, [TaggedSentence("s:1", words, None, 1)], None, 16)
    logits = np.zeros((6, 5), dtype=np.float32)
    logits[[1, 2, 3, 4], [0, 2, 2, 4]] = 1  # O I-PER I-PER I-LOC
    assert word_tags([logits], enc, labels) == [["O", "B-PER", "I-PER", "B-LOC"]]


# --------------------------------------------------------------------------------------------------------
# Custom tag sets, end to end
# --------------------------------------------------------------------------------------------------------


def test_custom_bioes_columns_learn_and_predict_in_their_scheme(tag_model: Path, tmp_path: Path) -> None:
    train = write_conll(tmp_path / "train.txt", synthetic(300, 1), "bioes")
    dev_sentences = synthetic(60, 2)
    dev = write_conll(tmp_path / "dev.txt", dev_sentences, "bioes")
    out = tmp_path / "tagger"
    args = tags_args(train, dev, tag_model, out, "--tag-scheme", "bioes", "--tag-column", "2")
    assert main(args) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["labels"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    f1 = results["median"]["dev"]["f1"]
    assert f1 > 0.9, f1
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["ElectraForTokenClassification"]
    assert config["id2label"] == {str(i): t for i, t in enumerate(results["labels"])}

    # evaluate gives what training logged; predict writes BIOES back, the words untouched.
    assert (
        main(["evaluate", "--task", "tags", "--model", str(out), "--dev", str(dev), "--tag-scheme", "bioes"])
        == 0
    )
    words_only = tmp_path / "words.txt"
    words_only.write_text("\n\n".join("\n".join(w) for w, _ in dev_sentences) + "\n")
    pred = tmp_path / "pred.txt"
    predict = [
        "predict",
        "--task",
        "tags",
        "--model",
        str(out),
        "--input",
        str(words_only),
        "--out",
        str(pred),
    ]
    assert main([*predict, "--tag-scheme", "bioes"]) == 0
    predicted = read_tagged(pred, scheme="bioes")
    assert [s.words for s in predicted] == [w for w, _ in dev_sentences]
    right = sum(p.tags == t for p, (_, t) in zip(predicted, dev_sentences, strict=True))
    assert right / len(dev_sentences) > 0.8
    assert any(line.split()[1].startswith(("S-", "E-")) for line in pred.read_text().splitlines() if line)


def test_custom_jsonl_text_spans_round_trip(tag_model: Path, tmp_path: Path) -> None:
    train = write_text_jsonl(tmp_path / "train.jsonl", synthetic(300, 3))
    dev = write_text_jsonl(tmp_path / "dev.jsonl", synthetic(60, 4))
    out = tmp_path / "tagger"
    assert main(tags_args(train, dev, tag_model, out)) == 0
    assert json.loads((out / "eval_results.json").read_text())["median"]["dev"]["f1"] > 0.9
    pred = tmp_path / "pred.jsonl"
    assert (
        main(["predict", "--task", "tags", "--model", str(out), "--input", str(dev), "--out", str(pred)]) == 0
    )
    gold = [json.loads(line) for line in dev.read_text().splitlines()]
    got = [json.loads(line) for line in pred.read_text().splitlines()]
    assert [g["text"] for g in gold] == [p["text"] for p in got]
    for p in got:
        for e in p["entities"]:
            assert e["label"] in ("PER", "LOC")
            assert p["text"][e["start"] : e["end"]].strip() == p["text"][e["start"] : e["end"]]
    agree = sum(g["entities"] == p["entities"] for g, p in zip(gold, got, strict=True))
    assert agree / len(gold) > 0.8


def test_same_seed_same_tagger(tag_model: Path, tmp_path: Path) -> None:
    train = write_conll(tmp_path / "train.txt", synthetic(80, 5))
    dev = write_conll(tmp_path / "dev.txt", synthetic(20, 6))
    runs = []
    for name in ("a", "b"):
        assert main(tags_args(train, dev, tag_model, tmp_path / name, "--epochs", "1")) == 0
        runs.append(json.loads((tmp_path / name / "eval_results.json").read_text())["median"])
    assert runs[0] == runs[1]


def test_saved_tagger_runs_in_transformers_like_ours(tag_model: Path, tmp_path: Path, capsys) -> None:
    import transformers
    from transformers import ElectraForTokenClassification

    from electra.hf_format import load_hf_dir

    train = write_conll(tmp_path / "train.txt", synthetic(40, 7))
    dev = write_conll(tmp_path / "dev.txt", synthetic(10, 8))
    out = tmp_path / "tagger"
    assert main(tags_args(train, dev, tag_model, out, "--epochs", "1")) == 0
    # The line `electra finetune` prints to load it: transformers' own class, no remote code.
    assert f'  transformers: pipeline("token-classification", model="{out}")\n' in capsys.readouterr().out
    ours = load_hf_dir(out)
    theirs = ElectraForTokenClassification.from_pretrained(out).eval()
    ids = torch.tensor([[2, 9, 10, 11, 12, 3]])
    with torch.no_grad():
        np.testing.assert_allclose(ours(ids).numpy(), theirs(input_ids=ids).logits.numpy(), atol=1e-5)
    assert theirs.config.id2label[0] == "O"
    # transformers' Auto class and token-classification pipeline, as a user opens the directory.
    auto = transformers.AutoModelForTokenClassification.from_pretrained(out)
    assert type(auto) is ElectraForTokenClassification
    pipe = transformers.pipeline("token-classification", model=str(out), aggregation_strategy="none")
    text = " ".join(synthetic(1, 9)[0][0])
    enc = pipe.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probs = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])[0].softmax(-1)
    got = pipe(text, ignore_labels=[])
    assert [g["index"] for g in got] == list(range(1, enc["input_ids"].shape[1] - 1))  # every real token
    for g in got:
        assert g["entity"] == ours.config.id2label[int(probs[g["index"]].argmax())]
        assert g["score"] == pytest.approx(float(probs[g["index"]].max()), abs=1e-5)


@pytest.mark.parametrize(
    "case",
    ["no_files", "unknown_dev_tag", "ragged", "iob2_violation", "bad_column", "classifier_as_tagger"],
)
def test_bad_tagging_input_is_one_line(tag_model: Path, tmp_path: Path, capsys, case: str) -> None:
    train = write_conll(tmp_path / "train.txt", synthetic(20, 9))
    dev = write_conll(tmp_path / "dev.txt", synthetic(5, 10))
    args = tags_args(train, dev, tag_model, tmp_path / "out")
    expect = ""
    if case == "no_files":
        args = ["finetune", "--task", "tags", "--model", str(tag_model), "--out", str(tmp_path / "o")]
        expect = "--train FILE and --dev FILE"
    elif case == "unknown_dev_tag":
        dev.write_text("paris X B-CITY\n")
        expect = "dev.txt:1"
    elif case == "ragged":
        train.write_text("paris X B-LOC\nrome B-LOC\n")
        expect = "train.txt:2"
    elif case == "iob2_violation":
        train.write_text("the X O\nparis X I-LOC\n")
        expect = "train.txt:2"
    elif case == "bad_column":
        args += ["--tag-column", "7"]
        expect = "column"
    else:
        args = ["evaluate", "--task", "tags", "--model", str(tag_model), "--dev", str(dev)]
        expect = "not a fine-tuned tagger"
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ERROR_LINE.match(err.strip()) and expect in err, err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------------
# CoNLL-2003
# --------------------------------------------------------------------------------------------------------


def test_conll2003_finetune_evaluate_predict_export(tmp_path: Path, capsys) -> None:
    """A tagger fine-tuned on a slice of CoNLL-2003 (small cap), evaluated, test set predicted, exported."""
    conll = shared_path("ner/conll2003")
    vocab = shared_path("models/bert-uncased-vocab/vocab.txt")
    tok = load_tokenizer(vocab)
    torch.manual_seed(0)
    disc = save_hf_dir(
        ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())), tmp_path / "d"
    )
    save_tokenizer(tok, disc)
    out = tmp_path / "ner"
    args = [
        "finetune",
        "--task",
        "conll2003",
        "--data-dir",
        str(conll),
        "--model",
        str(disc),
        "--out",
        str(out),
    ]
    args += [
        "--max-train-examples",
        "3000",
        "--epochs",
        "2",
        "--lr",
        "1e-3",
        "--max-seq-len",
        "64",
        "--quiet",
    ]
    assert main(args) == 0
    results = json.loads((out / "eval_results.json").read_text())
    dev_f1, test_f1 = results["median"]["dev"]["f1"], results["median"]["test"]["f1"]
    # A random-init tiny model on 3,000 sentences: far above nothing, far below a pre-trained one.
    assert dev_f1 > 0.3 and test_f1 > 0.25, (dev_f1, test_f1)
    assert {"f1_PER", "f1_LOC", "f1_ORG", "f1_MISC"} <= set(results["median"]["dev"])
    capsys.readouterr()

    assert (
        main(["evaluate", "--task", "conll2003", "--model", str(out), "--data-dir", str(conll), "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == results["median"]

    pred = tmp_path / "test.pred"
    predict = ["predict", "--task", "conll2003", "--model", str(out), "--input", str(conll / "test.txt")]
    assert main([*predict, "--out", str(pred)]) == 0
    predicted = read_tagged(pred)
    gold = read_tagged(conll / "test.txt")
    assert [s.words for s in predicted] == [s.words for s in gold]

    bundle = tmp_path / "ner-bundle"
    assert main(["export", "--model", str(out), "--out", str(bundle)]) == 0
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["kind"] == "tagger" and meta["parity"]["agreement"] == 1.0
    assert list(meta["labels"].values()) == results["labels"]
    served_tags_equal_pytorch(out, bundle, read_tagged(conll / "dev.txt"))


def served_tags_equal_pytorch(model_dir: Path, bundle: Path, dev: list[TaggedSentence]) -> None:
    """The bundle served on /tag ("first": a word's tag from its first piece) gives the entities the PyTorch
    tagger predicts, on dev sentences whose words the tokenizer splits no further."""
    from litestar.testing import TestClient

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings
    from electra.training.finetune.tag_predict import load_tagger

    sentences = [s for s in dev if all(w.isalnum() for w in s.words)][:200]
    expected = load_tagger(model_dir, "conll2003", "iob2", "cpu").predict(sentences, 128)
    served = []
    with TestClient(create_app(ServeSettings(models=(ModelSpec("ner", bundle),)))) as client:
        deadline = time.monotonic() + 30
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.02)
        for lo in range(0, len(sentences), 50):
            chunk = sentences[lo : lo + 50]
            body = {"texts": [" ".join(s.words) for s in chunk], "aggregation_strategy": "first"}
            r = client.post("/tag", json=body)
            assert r.status_code == 200, r.text
            served += [
                tags_of(s.words, res["entities"]) for s, res in zip(chunk, r.json()["results"], strict=True)
            ]
    same = sum(a == b for a, b in zip(served, expected, strict=True))
    assert same >= 0.98 * len(sentences), (same, len(sentences))


def tags_of(words: list[str], entities: list[dict]) -> list[str]:
    """Word tags (IOB2) of entities given as character spans of the words joined by spaces."""
    starts, tags, position = [], [], 0
    for w in words:
        starts.append(position)
        position += len(w) + 1
        tags.append("O")
    for e in entities:
        inside = [i for i, start in enumerate(starts) if e["start"] <= start < e["end"]]
        for k, i in enumerate(inside):
            tags[i] = ("B-" if k == 0 else "I-") + e["label"]
    return tags
