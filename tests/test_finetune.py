"""Fine-tuning: GLUE and custom tasks, evaluate, predict, bad input (the recipes: tests/test_recipes.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.cli.main import main
from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator
from electra.training.finetune.encoding import EncodedExamples
from electra.training.finetune.evaluate import evaluate, evaluate_model
from electra.training.finetune.predict import predict_file

from .conftest import shared_path


def _tiny_discriminator_dir(tmp: Path, vocab_file: Path) -> Path:
    from electra.tokenizer import load_tokenizer, save_tokenizer

    tok = load_tokenizer(vocab_file)
    out = tmp / "disc"
    torch.manual_seed(0)
    save_hf_dir(ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())), out)
    save_tokenizer(tok, out)
    return out


@pytest.fixture
def word_model(tmp_path: Path) -> Path:
    words = ["good", "great", "fine", "bad", "awful", "poor", "the", "movie", "was", "plot", "and", "very"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]) + "\n")
    return _tiny_discriminator_dir(tmp_path, vocab)


def _sentiment_rows(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        cue = rng.choice(["good", "great", "fine"] if label == "pos" else ["bad", "awful", "poor"])
        filler = rng.choices(["the", "movie", "was", "plot", "and", "very"], k=rng.randint(2, 8))
        filler.insert(rng.randrange(len(filler) + 1), cue)
        rows.append((" ".join(filler) + " .", label))
    return rows


def test_batches_are_padded_on_the_right_to_their_own_longest_row() -> None:
    data = EncodedExamples([[2, 7, 3], [2, 8, 9, 10, 3], [2, 3]], [[0, 0, 0], [0, 0, 1, 1, 1], [0, 0]], None)
    batch = data.batch(np.array([2, 0]), pad_id=0, device=torch.device("cpu"))
    assert batch["input_ids"].tolist() == [[2, 3, 0], [2, 7, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 0, 0]]
    assert all(t.dtype == torch.int64 for t in batch.values())


def _write_csv(path: Path, rows: list[tuple[str, str]], header=("text", "label")) -> Path:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def custom_args(train: Path, dev: Path, model: Path, out: Path, *extra: str) -> list[str]:
    """`electra finetune --task custom` on CSV files, plus extra options."""
    return [
        "finetune",
        "--task",
        "custom",
        "--train",
        str(train),
        "--dev",
        str(dev),
        "--model",
        str(model),
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def _transformers_gives_our_logits(model_dir: Path) -> None:
    """AutoModelForSequenceClassification and pipeline("text-classification"), with trust_remote_code=True,
    on a directory `electra finetune` wrote: our model's logits and probabilities, to 1e-5."""
    import transformers

    from electra.hf_format import load_hf_dir

    ours = load_hf_dir(model_dir, kind="classifier")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, trust_remote_code=True
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    texts = ["the movie was great .", "awful plot , awful acting ."]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        torch.testing.assert_close(theirs.eval()(**enc).logits, logits, atol=1e-5, rtol=0)
    pipe = transformers.pipeline(
        "text-classification", model=str(model_dir), trust_remote_code=True, top_k=None
    )
    labels = ours.config.id2label
    for got, row in zip(pipe(texts), logits.softmax(-1).tolist(), strict=True):
        want = {labels[i]: p for i, p in enumerate(row)}
        assert {g["label"]: g["score"] for g in got} == pytest.approx(want, abs=1e-5)


def test_custom_csv_classification_end_to_end(
    word_model: Path, tmp_path: Path, capsys, hf_remote_code: Path
) -> None:
    train = _write_csv(tmp_path / "train.csv", _sentiment_rows(400, 1))
    dev = _write_csv(tmp_path / "dev.csv", _sentiment_rows(100, 2))
    out = tmp_path / "clf"
    args = custom_args(
        train, dev, word_model, out, "--epochs", "4", "--lr", "2e-3", "--batch-size", "16", "--seeds", "1,2"
    )
    assert main(args) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results["per_seed"]) == {"1", "2"} and results["selected_seed"] in (1, 2)
    assert results["median"]["dev"]["accuracy"] > 0.9  # the cue word decides the label
    assert len(results["per_seed"]["1"]["epochs"]) == 4
    printed = capsys.readouterr()
    # The majority-class baseline beside the score; a model that beats it draws no warning.
    majority = results["majority_class"]["dev"]
    dev_labels = [label for _, label in _sentiment_rows(100, 2)]
    share = max(dev_labels.count("pos"), dev_labels.count("neg")) / 100
    assert majority["baseline"] == pytest.approx(share) and majority["examples"] == 100
    assert f"majority-class baseline accuracy {share:.4f}" in printed.out
    assert "majority-class baseline" not in printed.err
    loads = transformers_line(printed.out)
    assert loads == f'pipeline("text-classification", model="{out}", trust_remote_code=True)'

    # The default (official) recipe saves the official linear head, which transformers' class refuses; the
    # remote code saved with it gives transformers' Auto class and pipeline our logits. Without
    # trust_remote_code the Auto class and the pipeline refuse with transformers' own message.
    assert json.loads((out / "config.json").read_text())["classifier_head"] == "linear"
    import transformers

    with pytest.raises(RuntimeError, match="size mismatch"):
        transformers.ElectraForSequenceClassification.from_pretrained(out)
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        transformers.AutoModelForSequenceClassification.from_pretrained(out)
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        transformers.pipeline("text-classification", model=str(out))
    _transformers_gives_our_logits(out)
    # The line `electra finetune` printed loads the model as it is.
    assert eval(loads, {"pipeline": transformers.pipeline})("the movie was great .")[0]["label"] == "pos"
    capsys.readouterr()  # transformers' own "Do you wish to run the custom code? [y/N]" prompts

    assert main(["evaluate", "--task", "custom", "--model", str(out), "--dev", str(dev), "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["dev"]["accuracy"] == pytest.approx(
        results["per_seed"][str(results["selected_seed"])]["final"]["dev"]["accuracy"]
    )
    unlabeled = tmp_path / "new.jsonl"
    unlabeled.write_text('{"text": "the movie was great ."}\n{"text": "awful plot ."}\n')
    pred = tmp_path / "pred.tsv"
    assert (
        main(
            [
                "predict",
                "--task",
                "custom",
                "--model",
                str(out),
                "--input",
                str(unlabeled),
                "--out",
                str(pred),
            ]
        )
        == 0
    )
    assert pred.read_text().splitlines()[1:] == ["0\tpos", "1\tneg"]

    # The library functions behind the two commands give what the commands print and write.
    assert evaluate(out, "custom", dev=dev, device="cpu").to_json() == evaluated
    assert evaluated["dev"]["majority_class"] == results["majority_class"]["dev"]
    assert evaluate_model(out, "custom", dev=dev, device="cpu") == {
        "dev": {k: v for k, v in evaluated["dev"].items() if k != "majority_class"}
    }
    rows = predict_file(out, "custom", unlabeled, device="cpu")
    assert ["\t".join(r) for r in rows] == pred.read_text().splitlines()


def transformers_line(stdout: str) -> str:
    """The transformers call `electra finetune` printed (its comment left out)."""
    lines = [line for line in stdout.splitlines() if line.strip().startswith("transformers: ")]
    assert len(lines) == 1, stdout
    return lines[0].strip().removeprefix("transformers: ").split("  #")[0]


def test_a_model_that_answers_one_label_is_called_out(word_model: Path, tmp_path: Path, capsys) -> None:
    """Trained on texts that say nothing about a label that is nearly always "pos", the model answers "pos" to
    everything; on a dev set mostly "neg" that scores below the majority-class baseline. Both commands say
    so and print the baseline beside the score."""
    rng = random.Random(0)
    texts = [
        " ".join(rng.choices(["the", "movie", "was", "plot", "and", "very"], k=5)) + " ." for _ in range(80)
    ]
    train = _write_csv(tmp_path / "train.csv", [(t, "neg" if i == 0 else "pos") for i, t in enumerate(texts)])
    dev = _write_csv(tmp_path / "dev.csv", [(t, "pos" if i < 8 else "neg") for i, t in enumerate(texts[:20])])
    out = tmp_path / "clf"
    args = custom_args(train, dev, word_model, out, "--epochs", "2", "--lr", "2e-3", "--head", "hf")
    assert main(args) == 0
    printed = capsys.readouterr()
    results = json.loads((out / "eval_results.json").read_text())
    majority = results["majority_class"]["dev"]
    assert majority["predicted"] == {"pos": 20}, majority
    assert (majority["majority"], majority["baseline"], majority["score"]) == ("neg", 0.6, 0.4)
    assert (
        'the model answers "pos" for all 20 examples, accuracy 0.4000 against the majority-class '
        in printed.err
    )
    assert 'accuracy 0.4000; majority-class baseline accuracy 0.6000 ("neg" for all 20)' in printed.out
    # transformers' own head (--head hf) loads without remote code.
    loads = transformers_line(printed.out)
    assert loads == f'pipeline("text-classification", model="{out}")'
    import transformers

    assert eval(loads, {"pipeline": transformers.pipeline})("the movie .")[0]["label"] == "pos"

    assert main(["evaluate", "--task", "custom", "--model", str(out), "--dev", str(dev)]) == 0
    printed = capsys.readouterr()
    assert 'the model answers "pos" for all 20 examples' in printed.err
    assert (
        printed.out.strip()
        == 'custom dev: accuracy 0.4000; majority-class baseline accuracy 0.6000 ("neg" for all 20)'
    )


def test_same_seed_same_results_on_cpu(word_model: Path, tmp_path: Path) -> None:
    train = _write_csv(tmp_path / "train.csv", _sentiment_rows(64, 3))
    dev = _write_csv(tmp_path / "dev.csv", _sentiment_rows(32, 4))
    runs = []
    for name in ("a", "b"):
        args = custom_args(train, dev, word_model, tmp_path / name, "--epochs", "1", "--seeds", "7")
        assert main(args) == 0
        runs.append(json.loads((tmp_path / name / "eval_results.json").read_text())["per_seed"])
    assert runs[0] == runs[1]


def test_custom_regression(word_model: Path, tmp_path: Path) -> None:
    rows = [(text, "4.5" if label == "pos" else "0.5") for text, label in _sentiment_rows(400, 5)]
    train = _write_csv(tmp_path / "train.csv", rows, header=("sentence", "score"))
    out = tmp_path / "reg"
    args = custom_args(
        train,
        train,
        word_model,
        out,
        "--regression",
        "--text-column",
        "sentence",
        "--label-column",
        "score",
        "--epochs",
        "8",
        "--batch-size",
        "16",
        "--lr",
        "2e-3",
        "--recipe",
        "hf",
    )
    assert main(args) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["median"]["dev"]["pearson"] > 0.8
    import transformers

    hf = transformers.ElectraForSequenceClassification.from_pretrained(out)
    assert hf.config.problem_type == "regression"
    from electra.hf_format import load_hf_dir

    ours = load_hf_dir(out, kind="classifier")
    ids = torch.tensor([[2, 7, 8, 9, 3, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        torch.testing.assert_close(
            hf(input_ids=ids, attention_mask=mask).logits, ours(ids, mask), atol=1e-5, rtol=0
        )
    # The hf recipe's head is transformers' own: the Auto class and the pipeline need no remote code.
    auto = transformers.AutoModelForSequenceClassification.from_pretrained(out)
    assert type(auto) is transformers.ElectraForSequenceClassification
    pipe = transformers.pipeline("text-classification", model=str(out), function_to_apply="none")
    texts = ["the movie was great .", "awful plot ."]
    enc = pipe.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])[:, 0].tolist()
    assert [r["score"] for r in pipe(texts)] == pytest.approx(want, abs=1e-5)


BAD_CASES = [
    "missing model",
    "not a model dir",
    "no tokenizer",
    "not electra",
    "unknown dev label",
    "regression with string labels",
]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_inputs(word_model: Path, tmp_path: Path, capsys, case: str) -> None:
    train = _write_csv(tmp_path / "train.csv", _sentiment_rows(20, 1))
    model, dev, extra, needle = word_model, train, [], ""
    if case == "missing model":
        model, needle = tmp_path / "nothing", "no such directory"
    elif case == "not a model dir":
        model, needle = tmp_path, "not a model directory"
    elif case == "no tokenizer":
        model, needle = _no_tokenizer(tmp_path, word_model), "no usable tokenizer"
    elif case == "not electra":
        model, needle = _not_electra(tmp_path), "electra"
    elif case == "unknown dev label":
        dev, needle = _write_csv(tmp_path / "odd.csv", [("good .", "maybe")]), "never occur"
    elif case == "regression with string labels":
        extra, needle = ["--regression"], "not a number"
    code = main(custom_args(train, dev, model, tmp_path / "out", *extra))
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def _no_tokenizer(tmp: Path, model: Path) -> Path:
    import shutil

    bare = tmp / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(model / name, bare / name)
    return bare


def _not_electra(tmp: Path) -> Path:
    d = tmp / "bert"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 64}))
    return d


@pytest.mark.slow
@pytest.mark.shared_data
def test_tiny_model_on_an_sst2_slice_beats_the_majority_baseline(tmp_path: Path, capsys) -> None:
    glue = shared_path("glue")
    model = _tiny_discriminator_dir(tmp_path, shared_path("models/bert-uncased-vocab/vocab.txt"))
    out = tmp_path / "sst2"
    args = [
        "finetune",
        "--task",
        "sst2",
        "--data-dir",
        str(glue),
        "--model",
        str(model),
        "--out",
        str(out),
        "--max-train-examples",
        "4000",
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
    acc = results["median"]["dev"]["accuracy"]
    majority = 444 / 872  # SST-2 dev: 444 positive of 872
    assert acc > majority + 0.08, acc
    assert results["majority_class"]["dev"]["majority"] == "positive"
    assert results["majority_class"]["dev"]["baseline"] == pytest.approx(majority)
    # GLUE's label names, not the files' "0"/"1": what /classify and transformers' pipeline answer with.
    assert json.loads((out / "config.json").read_text())["id2label"] == {"0": "negative", "1": "positive"}
    import transformers

    pipe = transformers.pipeline("text-classification", model=str(out), trust_remote_code=True)
    assert pipe("a gorgeous, witty, seductive movie .")[0]["label"] in ("negative", "positive")
    capsys.readouterr()
    pred = tmp_path / "SST-2.tsv"
    assert (
        main(
            [
                "predict",
                "--task",
                "sst2",
                "--model",
                str(out),
                "--input",
                str(glue / "SST-2" / "test.tsv"),
                "--out",
                str(pred),
            ]
        )
        == 0
    )
    lines = pred.read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 1822
    assert {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}  # the leaderboard's labels
