"""`electra export` on the command line: a bundle from a fine-tuned classifier, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from electra.cli.main import main
from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraClassifier
from electra.tokenizer import load_tokenizer, save_tokenizer
from tests.conftest import ERROR_LINE

WORDS = ["good", "bad", "the", "movie", "was", "plot", "and", "very", "fine", "awful"]


@pytest.fixture
def classifier(tmp_path: Path) -> Path:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]) + "\n")
    tok = load_tokenizer(vocab)
    cfg = ElectraConfig.from_size(
        "tiny",
        vocab_size=tok.get_vocab_size(),
        num_labels=2,
        id2label={0: "0", 1: "1"},
        label2id={"0": 0, "1": 1},
    )
    torch.manual_seed(0)
    out = tmp_path / "clf"
    save_hf_dir(ElectraClassifier(cfg), out)
    save_tokenizer(tok, out)
    return out


def test_export_writes_a_fused_bundle(classifier: Path, tmp_path: Path, capsys) -> None:
    bundle = tmp_path / "bundle"
    args = ["export", "--model", str(classifier), "--out", str(bundle), "--pooling", "mean"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 Attention" in out and "classifier fp32" in out
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["kind"] == "classifier" and meta["fused_operators"]["Attention"] == 2
    assert meta["parity"]["max_abs_diff"] < 1e-4
    # --pooling: how /embed pools the last hidden state the graph answers beside the logits.
    assert meta["embedding"]["pooling"] == "mean" and meta["embedding"]["parity"]["max_abs_diff"] < 1e-4
    assert {"model.onnx", "tokenizer.json", "config.json", "bundle.json"} <= {
        p.name for p in bundle.iterdir()
    }


def test_export_measures_dev_accuracy_on_the_task_it_was_tuned_for(
    classifier: Path, tmp_path: Path, capsys
) -> None:
    sst2 = tmp_path / "glue" / "SST-2"
    sst2.mkdir(parents=True)
    rows = ["sentence\tlabel"] + [f"the movie was {w} .\t{int(w in ('good', 'fine'))}" for w in WORDS * 3]
    (sst2 / "dev.tsv").write_text("\n".join(rows) + "\n")
    (classifier / "eval_results.json").write_text(
        json.dumps({"config": {"task": "sst2", "data_dir": str(sst2)}})
    )
    bundle = tmp_path / "bundle"
    assert main(["export", "--model", str(classifier), "--out", str(bundle), "--precision", "int8"]) == 0
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["precision"] == "int8"
    dev = meta["dev_accuracy"]
    assert dev["examples"] == len(WORDS) * 3
    assert 0.0 <= dev["accuracy_onnx"] <= 1.0 and 0.0 <= dev["accuracy_pytorch"] <= 1.0
    assert dev["drop_points"] == pytest.approx(100 * (dev["accuracy_pytorch"] - dev["accuracy_onnx"]))


@pytest.mark.parametrize("case", ["not a model", "output exists", "unknown task"])
def test_bad_input(classifier: Path, tmp_path: Path, capsys, case: str) -> None:
    args = ["export", "--model", str(classifier), "--out", str(tmp_path / "bundle")]
    if case == "not a model":
        args[2] = str(tmp_path)
    elif case == "output exists":
        (tmp_path / "bundle").mkdir()
    else:
        args += ["--task", "nope", "--data-dir", str(tmp_path)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert ERROR_LINE.match(err.rstrip("\n")) and err.count("\n") == 1, err
