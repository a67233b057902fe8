"""ONNX export: fused graphs, parity with PyTorch at every precision, dynamic shapes, optimum, bad input.

Models are tiny with random (perturbed) weights; the tokenizer's vocabulary holds every word of the default
parity texts, so parity runs on real tokens rather than a row of [UNK]s.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from electra.bundle import BUNDLE_FORMAT, HIDDEN_OUTPUT, INPUT_NAMES, read_bundle
from electra.config import ElectraConfig
from electra.errors import ElectraError, InputError
from electra.hf_format import save_hf_dir
from electra.model import build_model
from electra.onnx import export as export_mod
from electra.onnx.export import export_bundle
from electra.onnx.fusion import FUSED_OPS, count_fused_operators
from electra.onnx.parity import DEFAULT_PARITY_TEXTS, encode_batch
from electra.tokenizer import SPECIAL_TOKENS, load_tokenizer, save_tokenizer

WORDS = sorted(
    {w for pair in DEFAULT_PARITY_TEXTS for t in pair if t for w in re.findall(r"\w+|[^\w\s]", t.lower())}
)
VOCAB = [*SPECIAL_TOKENS, *WORDS]
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


def tiny_config(**overrides: Any) -> ElectraConfig:
    # embedding_size 32 != hidden_size 64: the embeddings_project Linear is in the graph. 512 positions so the
    # dynamic-shape test can reach the maximum length.
    return ElectraConfig.from_size(
        "tiny", vocab_size=len(VOCAB), max_position_embeddings=512, **{"id2label": LABELS, **overrides}
    )


def small_shaped_config() -> ElectraConfig:
    # ELECTRA-Small's widths (embedding 128 -> hidden 256, 4 heads, FFN 1024), two layers to stay fast.
    return ElectraConfig.from_size(
        "small", vocab_size=len(VOCAB), max_position_embeddings=128, num_hidden_layers=2, id2label=LABELS
    )


def make_model_dir(root: Path, kind: str, cfg: ElectraConfig, seed: int = 0, tokenizer: bool = True) -> Path:
    torch.manual_seed(seed)
    model = build_model(kind, cfg)
    with torch.no_grad():
        # Off the init's zero biases and unit LayerNorms, so every parameter matters to the logits.
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    out = save_hf_dir(model, root / f"{kind}-{seed}")
    if tokenizer:
        vocab = root / "vocab.txt"
        vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
        save_tokenizer(load_tokenizer(vocab), out)
    return out


def pytorch_logits(model_dir: Path, batch: dict[str, np.ndarray]) -> np.ndarray:
    from electra.hf_format import load_hf_dir

    model = load_hf_dir(model_dir)
    with torch.no_grad():
        return model(*(torch.from_numpy(batch[k]) for k in INPUT_NAMES)).numpy()


def session(bundle: Path) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(
        str(bundle / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )


def random_batch(batch: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random in-vocabulary ids, right padding of random lengths, token types 0 then 1."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length  # at least one full row, so the padded length is used
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(5, len(VOCAB), size=(batch, length)).astype(np.int64) * mask
    types = ((np.arange(length)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def disc_dir(root: Path) -> Path:
    return make_model_dir(root, "discriminator", tiny_config())


@pytest.fixture(scope="module")
def clf_dir(root: Path) -> Path:
    return make_model_dir(root, "classifier", tiny_config())


@pytest.fixture(scope="module")
def dev_set() -> tuple[list[tuple[str, str | None]], list[int]]:
    examples = list(DEFAULT_PARITY_TEXTS) * 3
    return examples, [i % 3 for i in range(len(examples))]


@pytest.fixture(scope="module")
def disc_bundle(root: Path, disc_dir: Path) -> tuple[Path, dict[str, Any]]:
    out = root / "disc-fp32"
    return out, export_bundle(disc_dir, out)


@pytest.fixture(scope="module")
def clf_bundle(root: Path, clf_dir: Path, dev_set) -> tuple[Path, dict[str, Any]]:
    out = root / "clf-fp32"
    return out, export_bundle(clf_dir, out, dev_set=dev_set)


# ----------------------------------------------------------------------------------------------------------
# Fusion
# ----------------------------------------------------------------------------------------------------------


def test_tiny_models_fuse_attention_in_every_layer(disc_bundle, clf_bundle) -> None:
    for bundle, meta in (disc_bundle, clf_bundle):
        counts = meta["fused_operators"]
        assert counts["Attention"] == 2, counts
        assert counts["EmbedLayerNormalization"] == 1, counts
        assert counts["SkipLayerNormalization"] >= 2 * 2, counts
        assert counts["BiasGelu"] >= 2, counts
        assert counts == count_fused_operators(bundle / "model.onnx")
        nodes = Counter(node.op_type for node in onnx.load(str(bundle / "model.onnx")).graph.node)
        assert counts == {op: nodes[op] for op in FUSED_OPS}  # ORT's statistics, our keys and meaning
        ops = set(nodes)
        # Nothing of the unfused attention is left: its Softmax lives inside the fused node now.
        assert "Softmax" not in ops
        assert meta["export"]["exporter"].startswith("torch.onnx.export (TorchScript")


def test_small_shaped_model_fuses(root: Path) -> None:
    model_dir = make_model_dir(root, "discriminator", small_shaped_config(), seed=1)
    meta = export_bundle(model_dir, root / "small-fp32")
    counts = meta["fused_operators"]
    assert counts["Attention"] == 2
    assert counts["EmbedLayerNormalization"] == 1  # also with the 128 -> 256 embedding projection
    assert counts["SkipLayerNormalization"] >= 4
    assert counts["BiasGelu"] >= 2
    assert meta["parity"]["max_abs_diff"] < 1e-4
    assert meta["hidden_size"] == 256 and meta["num_attention_heads"] == 4


def test_failed_fusion_raises_and_leaves_nothing(root: Path, disc_dir: Path, monkeypatch) -> None:
    # Simulates an onnxruntime release whose optimizer no longer matches our attention.
    monkeypatch.setattr(export_mod, "optimize", lambda path, cfg: onnx.load(str(path)))
    parent = root / "failed"
    parent.mkdir()
    with pytest.raises(ElectraError, match=r"attention fused in 0 of 2 layers") as err:
        export_bundle(disc_dir, parent / "bundle")
    assert not isinstance(err.value, InputError)
    assert "\n" not in str(err.value)
    assert list(parent.iterdir()) == []  # neither the bundle nor a temporary directory


# ----------------------------------------------------------------------------------------------------------
# Parity
# ----------------------------------------------------------------------------------------------------------


def test_fp32_parity_and_bundle_contents(disc_bundle, clf_bundle, disc_dir: Path, clf_dir: Path) -> None:
    for (bundle, meta), model_dir, kind in (
        (disc_bundle, disc_dir, "discriminator"),
        (clf_bundle, clf_dir, "classifier"),
    ):
        assert meta == read_bundle(bundle).to_dict()
        assert list(meta["fused_operators"]) == list(FUSED_OPS)
        assert meta["format"] == BUNDLE_FORMAT and meta["version"] == 1
        assert meta["kind"] == kind and meta["precision"] == "fp32" and meta["opset"] == 17
        assert meta["max_seq_len"] == 512
        parity = meta["parity"]
        assert parity["texts"] == len(DEFAULT_PARITY_TEXTS)
        assert parity["max_abs_diff"] < 1e-4 and parity["agreement"] == 1.0
        batch_len = parity["batch_shape"][1]
        assert parity["real_tokens"] < parity["texts"] * batch_len  # the batch really was padded
        weights = (model_dir / "model.safetensors").read_bytes()
        assert meta["source"]["sha256"] == hashlib.sha256(weights).hexdigest()
        assert meta["versions"]["onnxruntime"] == onnxruntime.__version__
        assert (bundle / "config.json").read_bytes() == (model_dir / "config.json").read_bytes()
        assert load_tokenizer(bundle).get_vocab() == load_tokenizer(model_dir).get_vocab()
        assert {p.name for p in bundle.iterdir()} >= {
            "model.onnx",
            "tokenizer.json",
            "config.json",
            "bundle.json",
        }
    assert disc_bundle[1]["labels"] is None
    assert clf_bundle[1]["labels"] == {str(k): v for k, v in LABELS.items()}


def pytorch_hidden_state(model_dir: Path, batch: dict[str, np.ndarray]) -> np.ndarray:
    """The backbone's output (transformers' last_hidden_state) of the model in `model_dir`."""
    from electra.hf_format import load_hf_dir

    model = load_hf_dir(model_dir)
    with torch.no_grad():
        return model.electra(*(torch.from_numpy(batch[k]) for k in INPUT_NAMES)).numpy()


def test_every_encoder_graph_answers_its_last_hidden_state(
    disc_bundle, clf_bundle, disc_dir: Path, clf_dir: Path
) -> None:
    """The second output is the backbone's output at every real token, the logits unchanged beside it; the
    export measured its parity, and recorded CLS pooling (the default) and the vector's length."""
    batch = random_batch(4, 24, seed=3)
    real = batch["attention_mask"].astype(bool)
    for (bundle, meta), model_dir in ((disc_bundle, disc_dir), (clf_bundle, clf_dir)):
        sess = session(bundle)
        assert [o.name for o in sess.get_outputs()] == ["logits", HIDDEN_OUTPUT]
        logits, hidden = sess.run(None, batch)
        assert hidden.shape == (4, 24, 64) and hidden.dtype == np.float32
        np.testing.assert_allclose(hidden[real], pytorch_hidden_state(model_dir, batch)[real], atol=1e-4)
        reference = pytorch_logits(model_dir, batch)
        if meta["kind"] == "discriminator":  # per token: padding's logits are never read
            logits, reference = logits[real], reference[real]
        np.testing.assert_allclose(logits, reference, atol=1e-4)
        embedding = meta["embedding"]
        assert embedding["output"] == HIDDEN_OUTPUT and embedding["pooling"] == "cls"
        assert embedding["dimensions"] == 64
        parity = embedding["parity"]
        assert parity["max_abs_diff"] < 1e-4 and parity["tolerance"] == 1e-4 and parity["agreement"] == 1.0
        assert parity["real_tokens"] == meta["parity"]["real_tokens"]
        assert read_bundle(bundle).embedding is not None


def test_mean_pooling_is_recorded_and_a_bad_pooling_refused(root: Path, disc_dir: Path) -> None:
    meta = export_bundle(disc_dir, root / "disc-mean", pooling="mean", max_seq_len=32)
    assert meta["embedding"]["pooling"] == "mean"
    one_line_input_error(
        lambda: export_bundle(disc_dir, root / "disc-max", pooling="max"), "unknown pooling 'max'"
    )
    assert not (root / "disc-max").exists()


def test_a_bundle_without_the_hidden_state_still_reads(root: Path, disc_bundle) -> None:
    """bundle.json from before the output existed (no `embedding`) reads, with embedding None; a pooling
    this version does not know is refused in words."""
    import shutil

    old = root / "disc-old"
    shutil.copytree(disc_bundle[0], old)
    raw = json.loads((old / "bundle.json").read_text())
    del raw["embedding"]
    (old / "bundle.json").write_text(json.dumps(raw))
    assert read_bundle(old).embedding is None
    raw["embedding"] = {**disc_bundle[1]["embedding"], "pooling": "max"}
    (old / "bundle.json").write_text(json.dumps(raw))
    one_line_input_error(lambda: read_bundle(old), "embedding pooling 'max' is not one of cls, mean")


def test_fp32_dev_accuracy_is_identical(clf_bundle, dev_set) -> None:
    dev = clf_bundle[1]["dev_accuracy"]
    assert dev["examples"] == len(dev_set[0])
    assert dev["accuracy_onnx"] == dev["accuracy_pytorch"] and dev["drop_points"] == 0.0
    assert dev["prediction_agreement"] == 1.0


@pytest.mark.parametrize("kind", ["discriminator", "classifier"])
def test_fp16_runs_on_cpu_with_fp32_io(root: Path, disc_dir: Path, clf_dir: Path, kind: str) -> None:
    model_dir = disc_dir if kind == "discriminator" else clf_dir
    out = root / f"{kind}-fp16"
    meta = export_bundle(model_dir, out, precision="fp16")
    assert meta["fused_operators"]["Attention"] == 2
    parity = meta["parity"]
    assert parity["tolerance"] is None
    assert 0 < parity["max_abs_diff"] < 1e-2
    assert parity["agreement"] >= 0.95
    model = onnx.load(str(out / "model.onnx"))
    assert {i.type.tensor_type.elem_type for i in model.graph.input} == {onnx.TensorProto.INT64}
    # Both outputs, the logits and the hidden state, stay float32.
    assert [o.name for o in model.graph.output] == ["logits", HIDDEN_OUTPUT]
    assert {o.type.tensor_type.elem_type for o in model.graph.output} == {onnx.TensorProto.FLOAT}
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer)
    hidden = meta["embedding"]["parity"]
    assert hidden["tolerance"] is None and 0 < hidden["max_abs_diff"] < 5e-2 and hidden["agreement"] == 1.0


def test_int8_discriminator(root: Path, disc_dir: Path) -> None:
    meta = export_bundle(disc_dir, root / "disc-int8", precision="int8")
    counts = meta["fused_operators"]
    assert counts["QAttention"] == 2 and counts["MatMulInteger"] > 0
    nodes = Counter(node.op_type for node in onnx.load(str(root / "disc-int8" / "model.onnx")).graph.node)
    assert counts == {op: nodes[op] for op in FUSED_OPS}  # QAttention and MatMulInteger: ORT does not count
    assert meta["export"]["quantization"]["weight_type"] == "QInt8"
    assert 0 < meta["parity"]["max_abs_diff"] < 0.5
    assert meta["parity"]["agreement"] >= 0.9


def test_int8_classifier_reports_dev_accuracy(root: Path, clf_dir: Path, dev_set) -> None:
    meta = export_bundle(clf_dir, root / "clf-int8", precision="int8", dev_set=dev_set)
    assert meta["fused_operators"]["QAttention"] == 2
    # Random tiny classifiers have near-tied logits, so only a loose bound is meaningful here.
    assert meta["parity"]["agreement"] >= 0.5
    dev = meta["dev_accuracy"]
    assert dev["drop_points"] == pytest.approx(100 * (dev["accuracy_pytorch"] - dev["accuracy_onnx"]))
    assert 0.0 <= dev["accuracy_onnx"] <= 1.0


def test_custom_parity_texts_and_max_seq_len(root: Path, disc_dir: Path) -> None:
    texts = ["the cat sat on the mat . " * 10, "why ?"]
    meta = export_bundle(disc_dir, root / "disc-short", max_seq_len=16, parity_texts=texts)
    assert meta["max_seq_len"] == 16
    assert meta["parity"]["texts"] == 2 and meta["parity"]["batch_shape"] == [2, 16]  # truncated to 16
    assert meta["parity"]["max_abs_diff"] < 1e-4


# ----------------------------------------------------------------------------------------------------------
# Dynamic shapes and optimum
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["disc", "clf"])
def test_dynamic_batch_and_sequence(
    which: str, disc_bundle, clf_bundle, disc_dir: Path, clf_dir: Path
) -> None:
    bundle, model_dir = (disc_bundle[0], disc_dir) if which == "disc" else (clf_bundle[0], clf_dir)
    sess = session(bundle)
    for batch_size in (1, 7, 64):
        for length in (1, 33, 512):
            batch = random_batch(batch_size, length, seed=batch_size + length)
            got = sess.run(["logits"], batch)[0]
            want = pytorch_logits(model_dir, batch)
            assert got.shape == want.shape
            if which == "disc":
                real = batch["attention_mask"].astype(bool)
                got, want = got[real], want[real]
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=0, err_msg=f"{batch_size}x{length}")


def test_optimum_loads_classifier_bundle(clf_bundle, clf_dir: Path) -> None:
    from optimum.onnxruntime import ORTModelForSequenceClassification

    bundle = clf_bundle[0]
    model = ORTModelForSequenceClassification.from_pretrained(bundle, provider="CPUExecutionProvider")
    assert model.config.id2label == LABELS
    batch = encode_batch(load_tokenizer(bundle), DEFAULT_PARITY_TEXTS, max_seq_len=512)
    with torch.no_grad():
        via_optimum = model(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.numpy()
    via_ort = session(bundle).run(["logits"], batch)[0]
    via_torch = pytorch_logits(clf_dir, batch)
    np.testing.assert_allclose(via_optimum, via_ort, atol=1e-6, rtol=0)
    np.testing.assert_allclose(via_optimum, via_torch, atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------------------


def one_line_input_error(call, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_bad_inputs(root: Path, disc_dir: Path, disc_bundle) -> None:
    bad = root / "bad"
    bad.mkdir()
    out = bad / "out"
    one_line_input_error(lambda: export_bundle(disc_dir, out, precision="int4"), "unknown precision 'int4'")
    one_line_input_error(lambda: export_bundle(disc_dir, out, opset=9), "opset 9 is not supported")
    one_line_input_error(lambda: export_bundle(disc_dir, disc_bundle[0]), "already exists")
    one_line_input_error(lambda: export_bundle(disc_dir, out, max_seq_len=513), "max_position_embeddings")
    one_line_input_error(lambda: export_bundle(bad / "nowhere", out), "no such directory")

    not_electra = bad / "bert"
    not_electra.mkdir()
    (not_electra / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertModel"]})
    )
    one_line_input_error(lambda: export_bundle(not_electra, out), "not 'electra'")

    cfg = tiny_config()
    no_weights = make_model_dir(bad, "discriminator", cfg, seed=3)
    (no_weights / "model.safetensors").unlink()
    one_line_input_error(lambda: export_bundle(no_weights, out), "no model.safetensors")

    no_tokenizer = make_model_dir(bad, "discriminator", cfg, seed=4, tokenizer=False)
    one_line_input_error(lambda: export_bundle(no_tokenizer, out), "no tokenizer.json or vocab.txt")

    generator = make_model_dir(bad, "generator", cfg.replace(hidden_size=32, intermediate_size=64), seed=5)
    one_line_input_error(lambda: export_bundle(generator, out), "generator .* cannot be exported")

    one_line_input_error(
        lambda: export_bundle(disc_dir, out, dev_set=([("a", None)], [0])), "only for classifiers"
    )
    assert not out.exists()


def test_overwrite_replaces_an_existing_output(root: Path, disc_dir: Path) -> None:
    out = root / "replace-me"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    meta = export_bundle(disc_dir, out, overwrite=True)
    assert not (out / "stale.txt").exists()
    assert read_bundle(out).created == meta["created"]


def test_read_bundle_rejects_broken_bundles(root: Path, disc_bundle) -> None:
    good = json.loads((disc_bundle[0] / "bundle.json").read_text())
    bundle = root / "broken"
    bundle.mkdir()
    one_line_input_error(lambda: read_bundle(bundle), "no bundle.json")
    one_line_input_error(lambda: read_bundle(root / "absent"), "no such directory")
    (bundle / "bundle.json").write_text("{not json")
    one_line_input_error(lambda: read_bundle(bundle), "not readable JSON")
    for change, match in (
        ({"format": "other"}, "format is 'other'"),
        ({"version": 2}, "version 2 is not supported"),
        ({"kind": "generator"}, "kind 'generator'"),
        ({"max_seq_len": 0}, "max_seq_len 0"),
        ({"kind": "classifier", "labels": None}, "needs labels"),
    ):
        (bundle / "bundle.json").write_text(json.dumps({**good, **change}))
        one_line_input_error(lambda: read_bundle(bundle), match)
    (bundle / "bundle.json").write_text(json.dumps(good))
    one_line_input_error(lambda: read_bundle(bundle), "model.onnx is missing")
    one_line_input_error(lambda: count_fused_operators(bundle / "bundle.json"), "not a readable ONNX model")


def test_linear_head_classifier_exports_and_loads_in_optimum(root: Path) -> None:
    """The official recipe's linear head: exported, fp32 parity, and optimum runs the bundle like PyTorch."""
    from optimum.onnxruntime import ORTModelForSequenceClassification

    from electra.model import ElectraClassifier

    torch.manual_seed(3)
    model = ElectraClassifier(tiny_config(), head="linear")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model_dir = save_hf_dir(model, root / "linear-head")
    vocab = root / "linear-vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    save_tokenizer(load_tokenizer(vocab), model_dir)
    out = root / "linear-fp32"
    meta = export_bundle(model_dir, out)
    assert meta["parity"]["max_abs_diff"] < 1e-4
    assert meta["fused_operators"]["Attention"] == 2
    config = json.loads((out / "config.json").read_text())
    # The graph holds the head: the bundle's config is a plain ELECTRA one, read without trust_remote_code.
    assert config["classifier_head"] == "linear" and config["model_type"] == "electra"
    assert "auto_map" not in config
    batch = encode_batch(load_tokenizer(out), DEFAULT_PARITY_TEXTS, max_seq_len=512)
    ort_model = ORTModelForSequenceClassification.from_pretrained(out, provider="CPUExecutionProvider")
    with torch.no_grad():
        via_optimum = ort_model(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.numpy()
    np.testing.assert_allclose(via_optimum, pytorch_logits(model_dir, batch), atol=1e-4, rtol=0)
    from electra.serving.engine.runtime import (
        ModelRunner,  # the server reads only the bundle: no head to know
    )

    assert list(ModelRunner("linear", out).labels) == list(LABELS.values())


TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_tagger_exports_with_per_token_parity_and_loads_in_optimum(root: Path, precision: str) -> None:
    """A token classifier: fused, per-token parity over real tokens, and optimum's token-classification
    class runs the bundle like PyTorch (and like transformers' ElectraForTokenClassification)."""
    from optimum.onnxruntime import ORTModelForTokenClassification
    from transformers import ElectraForTokenClassification

    from electra.model import ElectraTagger
    from electra.serving.engine.runtime import ModelRunner

    torch.manual_seed(4)
    model = ElectraTagger(tiny_config(id2label=TAGS))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model_dir = save_hf_dir(model, root / f"tagger-{precision}")
    vocab = root / "tagger-vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    save_tokenizer(load_tokenizer(vocab), model_dir)
    out = root / f"tagger-{precision}-bundle"
    meta = export_bundle(model_dir, out, precision=precision)
    assert meta["kind"] == "tagger"
    assert meta["labels"] == {str(i): t for i, t in TAGS.items()}
    assert meta["problem_type"] is None
    fused = meta["fused_operators"]
    assert fused["Attention"] + fused["QAttention"] == 2
    assert meta["parity"]["compared"] == "argmax label of every real token"
    if precision == "fp32":
        assert meta["parity"]["max_abs_diff"] < 1e-4
        assert meta["parity"]["agreement"] == 1.0
    batch = encode_batch(load_tokenizer(out), DEFAULT_PARITY_TEXTS, max_seq_len=512)
    real = batch["attention_mask"].astype(bool)
    ort_model = ORTModelForTokenClassification.from_pretrained(out, provider="CPUExecutionProvider")
    assert ort_model.config.id2label == TAGS
    with torch.no_grad():
        via_optimum = ort_model(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.numpy()
        hf = ElectraForTokenClassification.from_pretrained(model_dir).eval()
        via_hf = hf(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.numpy()
    assert via_optimum.shape == (*batch["input_ids"].shape, len(TAGS))
    np.testing.assert_allclose(via_hf[real], pytorch_logits(model_dir, batch)[real], atol=1e-5, rtol=0)
    if precision == "fp32":
        np.testing.assert_allclose(via_optimum[real], via_hf[real], atol=1e-4, rtol=0)
    else:  # int8 moves logits, not most predictions
        assert (via_optimum[real].argmax(-1) == via_hf[real].argmax(-1)).mean() > 0.9
    assert ModelRunner("tagger", out).labels == list(TAGS.values())


def test_export_prints_the_dev_accuracy_beside_the_majority_baseline(tmp_path: Path, capsys) -> None:
    """What bundle.json records of the dev set, `electra export` prints: both accuracies, and the accuracy of
    answering the most frequent label to everything, which a classifier has to beat."""
    from electra.cli.main import main

    model = make_model_dir(tmp_path, "classifier", tiny_config(id2label={0: "negative", 1: "positive"}))
    sst2 = tmp_path / "glue" / "SST-2"
    sst2.mkdir(parents=True)
    labels = [1, 1, 0, 1, 1, 0, 1]  # 5 of 7 positive
    rows = [f"{' '.join(WORDS[i : i + 6])}\t{label}" for i, label in enumerate(labels)]
    (sst2 / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "bundle"
    args = [
        "export",
        "--model",
        str(model),
        "--out",
        str(out),
        "--task",
        "sst2",
        "--data-dir",
        str(sst2.parent),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    dev = json.loads((out / "bundle.json").read_text())["dev_accuracy"]
    assert dev["examples"] == 7
    assert (
        f"dev accuracy on 7 examples: {dev['accuracy_onnx']:.4f} exported, {dev['accuracy_pytorch']:.4f} "
        f"PyTorch ({dev['drop_points']:.2f} points lost, predictions agree "
        f"{dev['prediction_agreement']:.1%}); majority-class baseline 0.7143"
    ) in printed
