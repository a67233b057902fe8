"""electra.bundle: bundle.json written and read back, bundles of the earlier exporter, one-line errors for
every malformed bundle.json, and an import that needs neither torch nor onnx."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from electra.bundle import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    INPUT_NAMES,
    OUTPUT_NAME,
    PADDING_SIDE,
    Bundle,
    DevAccuracy,
    ExportSettings,
    Parity,
    Quantization,
    Source,
    Versions,
    read_bundle,
    write_bundle,
)
from electra.errors import InputError
from electra.files import BUNDLE_JSON, MODEL_ONNX

# bundle.json of an int8 classifier as the exporter wrote it before electra.bundle existed (its writer was
# `json.dumps(metadata, indent=2) + "\n"`); only model_dir and sha256 are made up.
CLASSIFIER_V1: dict[str, Any] = {
    "format": "electra-onnx-bundle",
    "version": 1,
    "kind": "classifier",
    "labels": {"0": "negative", "1": "neutral", "2": "positive"},
    "problem_type": None,
    "max_seq_len": 512,
    "precision": "int8",
    "opset": 17,
    "inputs": ["input_ids", "attention_mask", "token_type_ids"],
    "output": "logits",
    "padding_side": "right",
    "type_vocab_size": 2,
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 2,
    "fused_operators": {
        "EmbedLayerNormalization": 1,
        "Attention": 0,
        "MultiHeadAttention": 0,
        "QAttention": 2,
        "SkipLayerNormalization": 4,
        "LayerNormalization": 0,
        "BiasGelu": 2,
        "FastGelu": 0,
        "Gelu": 1,
        "GemmFastGelu": 0,
        "MatMulInteger": 9,
        "DynamicQuantizeMatMul": 0,
    },
    "export": {
        "exporter": "torch.onnx.export (TorchScript, dynamo=False)",
        "attention_impl": "math",
        "optimizer": "onnxruntime.transformers.optimizer.optimize_model",
        "model_type": "bert",
        "opt_level": 1,
        "use_gpu": False,
        "attention_mask_format": "mask_index_end",
        "quantization": {
            "method": "quantize_dynamic",
            "weight_type": "QInt8",
            "op_types": ["MatMul", "Attention"],
        },
    },
    "parity": {
        "texts": 16,
        "batch_shape": [16, 33],
        "real_tokens": 266,
        "max_abs_diff": 0.002283334732055664,
        "mean_abs_diff": 0.000745231460314244,
        "agreement": 1.0,
        "compared": "argmax label",
        "tolerance": None,
        "provider": "CPUExecutionProvider",
    },
    "dev_accuracy": {
        "examples": 48,
        "accuracy_pytorch": 0.3333333333333333,
        "accuracy_onnx": 0.3333333333333333,
        "drop_points": 0.0,
        "prediction_agreement": 1.0,
    },
    "source": {"model_dir": "models/sst2", "weights_file": "model.safetensors", "sha256": "ab" * 32},
    "versions": {"onnxruntime": "1.31.1", "torch": "2.13.0+cpu", "onnx": "1.23.2"},
    "created": "2026-11-23T09:37:18+00:00",
}


def discriminator_v1() -> dict[str, Any]:
    raw = copy.deepcopy(CLASSIFIER_V1)
    raw.update(kind="discriminator", labels=None, precision="fp32", dev_accuracy=None)
    raw["export"]["quantization"] = None
    raw["parity"].update(compared="replaced flags (logit > 0) over real tokens", tolerance=0.0001)
    return raw


def bundle_dir(root: Path, raw: Any, name: str = "bundle") -> Path:
    """A bundle directory: `raw` as bundle.json (text as is, anything else as JSON) and a model.onnx."""
    path = root / name
    path.mkdir(exist_ok=True)
    (path / MODEL_ONNX).write_bytes(b"onnx")
    text = raw if isinstance(raw, str | bytes) else json.dumps(raw, indent=2)
    (path / BUNDLE_JSON).write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def one_line_error(bundle: Path, match: str) -> str:
    with pytest.raises(InputError, match=match) as err:
        read_bundle(bundle)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(bundle))
    return message


# ----------------------------------------------------------------------------------------------------------
# Round trip and earlier bundles
# ----------------------------------------------------------------------------------------------------------


def test_write_then_read_gives_the_same_bundle(tmp_path: Path) -> None:
    bundle = Bundle(
        kind="classifier",
        labels={"0": "no", "1": "yes"},
        problem_type="single_label_classification",
        max_seq_len=128,
        precision="int8",
        opset=17,
        type_vocab_size=2,
        num_hidden_layers=12,
        hidden_size=256,
        num_attention_heads=4,
        fused_operators={"Attention": 0, "QAttention": 12},
        export=ExportSettings(
            exporter="e",
            attention_impl="math",
            optimizer="o",
            model_type="bert",
            opt_level=1,
            use_gpu=False,
            attention_mask_format="mask_index_end",
            quantization=Quantization(method="quantize_dynamic", weight_type="QInt8", op_types=["MatMul"]),
        ),
        parity=Parity(
            texts=2,
            batch_shape=[2, 9],
            real_tokens=12,
            max_abs_diff=0.01,
            mean_abs_diff=0.001,
            agreement=1.0,
            compared="argmax label",
            provider="CPUExecutionProvider",
        ),
        dev_accuracy=DevAccuracy(
            examples=10, accuracy_pytorch=0.9, accuracy_onnx=0.8, drop_points=10.0, prediction_agreement=0.9
        ),
        source=Source(model_dir="m", weights_file="model.safetensors", sha256="0" * 64),
        versions=Versions(onnxruntime="1", torch="2", onnx="3"),
        created="2026-01-01T00:00:00+00:00",
    )
    assert (bundle.format, bundle.version) == (BUNDLE_FORMAT, BUNDLE_VERSION)
    assert (bundle.inputs, bundle.output, bundle.padding_side) == (list(INPUT_NAMES), OUTPUT_NAME, "right")
    path = write_bundle(tmp_path, bundle)
    assert path == tmp_path / BUNDLE_JSON
    (tmp_path / MODEL_ONNX).write_bytes(b"onnx")
    assert read_bundle(tmp_path) == bundle
    assert json.loads(path.read_text()) == bundle.to_dict()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


@pytest.mark.parametrize("raw", [CLASSIFIER_V1, discriminator_v1()], ids=["classifier", "discriminator"])
def test_bundles_of_the_earlier_exporter_load_and_write_back_byte_for_byte(tmp_path: Path, raw) -> None:
    bundle = read_bundle(bundle_dir(tmp_path, raw))
    assert bundle.to_dict() == raw and list(bundle.to_dict()) == list(raw)
    assert bundle.labels == raw["labels"] and bundle.fused_operators["QAttention"] == 2
    assert bundle.parity.max_abs_diff == raw["parity"]["max_abs_diff"]
    assert bundle.padding_side == PADDING_SIDE
    out = tmp_path / "again"
    out.mkdir()
    write_bundle(out, bundle)
    assert (out / BUNDLE_JSON).read_text() == json.dumps(raw, indent=2) + "\n"


def test_unknown_fields_are_ignored_and_nullable_ones_may_be_absent(tmp_path: Path) -> None:
    raw = discriminator_v1()
    raw["added_by_a_newer_exporter"] = {"anything": [1, 2]}
    raw["parity"]["new_figure"] = 0.5
    del raw["labels"], raw["problem_type"], raw["dev_accuracy"]
    bundle = read_bundle(bundle_dir(tmp_path, raw))
    assert bundle.labels is None and bundle.problem_type is None and bundle.dev_accuracy is None
    assert "added_by_a_newer_exporter" not in bundle.to_dict()


# ----------------------------------------------------------------------------------------------------------
# Malformed bundle.json
# ----------------------------------------------------------------------------------------------------------


def test_missing_directory_file_or_model(tmp_path: Path) -> None:
    one_line_error(
        tmp_path / "absent", "no such directory \\(pass a bundle directory written by `electra export`\\)"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(empty, "no bundle.json, so not a bundle written by `electra export`")
    (empty / "config.json").write_text("{}")
    one_line_error(
        empty,
        re.escape(
            "a model directory, not an exported bundle "
            f"(export it first: electra export --model {empty} --out {empty}-onnx"
        ),
    )


def test_a_hub_id_is_pointed_to_electra_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    hub_id = "google/electra-small-discriminator"
    fix = f"(export it first: electra export --model {hub_id} --out bundles/electra-small-discriminator, then"
    one_line_error(Path(hub_id), re.escape(fix))
    bundle = bundle_dir(tmp_path, CLASSIFIER_V1)
    (bundle / MODEL_ONNX).unlink()
    one_line_error(bundle, "model.onnx is missing")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not readable JSON"),
        ("", "not readable JSON"),
        (b"\xff\xfe{}", "not readable JSON"),
        ("[1, 2]", "expected a JSON object"),
        ("null", "expected a JSON object"),
    ],
    ids=["broken", "empty", "not-utf8", "list", "null"],
)
def test_not_a_json_object(tmp_path: Path, text: str | bytes, match: str) -> None:
    message = one_line_error(bundle_dir(tmp_path, text), match)
    assert message.endswith(
        "(export the model again into a fresh directory: electra export --model MODEL --out DIR)"
    )


def changed(raw: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """raw with dotted keys set (or deleted, for a value of ...)."""
    raw = copy.deepcopy(raw)
    for key, value in change.items():
        *parents, last = key.split(".")
        target = raw
        for parent in parents:
            target = target[parent]
        if value is ...:
            del target[last]
        else:
            target[last] = value
    return raw


@pytest.mark.parametrize(
    ("change", "match"),
    [
        # format and version first: a bundle of another format or version is not read any further
        ({"format": "other"}, "format is 'other', not 'electra-onnx-bundle'"),
        ({"format": ...}, "format is None"),
        ({"version": 2}, "bundle version 2 is not supported \\(this tool reads 1;"),
        ({"version": "1"}, "bundle version '1' is not supported"),
        # what a reader relies on, in words (several at once)
        ({"kind": "generator"}, "kind 'generator' is not one of discriminator, classifier"),
        ({"kind": ...}, "kind None is not one of"),
        ({"precision": "int4"}, "precision 'int4' is not one of fp32, fp16, int8"),
        ({"max_seq_len": 0}, "max_seq_len 0 is not a positive integer"),
        ({"max_seq_len": "512"}, "max_seq_len '512' is not a positive integer"),
        ({"opset": True}, "opset True is not a positive integer"),
        ({"max_seq_len": ..., "opset": 1.5}, "max_seq_len None .*; opset 1.5 is not a positive integer"),
        ({"labels": None}, "a classifier needs labels"),
        ({"labels": {"0": 1}}, "a classifier needs labels"),
        ({"labels": {"1": "a", "2": "b"}}, "label ids must be 0..1"),
        ({"kind": "discriminator"}, "a discriminator has no labels"),
        ({"fused_operators": ...}, "fused_operators is missing"),
        ({"parity": []}, "parity is missing"),
        # the rest of the schema
        ({"created": ...}, "Object missing required field `created`"),
        ({"source": ...}, "Object missing required field `source`"),
        ({"parity.provider": ...}, "Object missing required field `provider` - at `\\$.parity`"),
        ({"hidden_size": "64"}, "Expected `int`, got `str` - at `\\$.hidden_size`"),
        ({"fused_operators.Attention": 1.5}, "Expected `int`, got `float` - at `\\$.fused_operators"),
        ({"parity.max_abs_diff": "small"}, "Expected `float`, got `str` - at `\\$.parity.max_abs_diff`"),
        ({"export.use_gpu": "no"}, "Expected `bool`, got `str` - at `\\$.export.use_gpu`"),
        ({"export.quantization": {"method": "x"}}, "missing required field `weight_type`"),
        ({"inputs": "input_ids"}, "Expected `array`, got `str` - at `\\$.inputs`"),
        ({"dev_accuracy": 0.9}, "Expected `object \\| null`, got `float` - at `\\$.dev_accuracy`"),
    ],
)
def test_malformed_fields(tmp_path: Path, change: dict[str, Any], match: str) -> None:
    message = one_line_error(bundle_dir(tmp_path, changed(CLASSIFIER_V1, change)), match)
    assert str(tmp_path / "bundle" / BUNDLE_JSON) in message
    assert message.endswith(
        "export the model again into a fresh directory: electra export --model MODEL --out DIR)"
    )


# ----------------------------------------------------------------------------------------------------------
# Import
# ----------------------------------------------------------------------------------------------------------


def test_import_needs_neither_torch_nor_onnx() -> None:
    code = (
        "import sys, electra.bundle\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'onnx', 'onnxruntime'))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_max_seq_len_past_the_models_positions_is_refused(tmp_path: Path) -> None:
    """Inputs longer than the position embeddings fail in the model: a server warmed up on them never got
    ready. The bundle's config.json says how many positions there are."""
    raw = discriminator_v1()
    bundle = bundle_dir(tmp_path, {**raw, "max_seq_len": 1000})
    (bundle / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    one_line_error(bundle, "max_seq_len 1000 is more than the model's 512 positions")
    (bundle / "config.json").write_text(json.dumps({"max_position_embeddings": 1000}))
    assert read_bundle(bundle).max_seq_len == 1000
