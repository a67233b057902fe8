"""The ONNX bundle format: what `electra export` writes and `electra serve` reads, defined once.

A bundle is a directory: `model.onnx` (the fused graph), the tokenizer files, the Hugging Face `config.json`
and `bundle.json`, the `Bundle` below; a discriminator exported with its generator (the masked LM it was
pre-trained with, which proposes what a flagged token should be) also holds `generator/model.onnx` and
`generator/config.json`, described by `Bundle.generator`. The exporter builds a `Bundle` and writes it with
`write_bundle`; the server and everything else reads it with `read_bundle`, which validates it and answers a
one-line InputError naming the file when it is missing, corrupt or from another format version.

Imports neither torch nor onnx: the server has neither.

Compatibility: every bundle.json the exporter has written (format version 1) has every field below, so all
are required except the nullable ones (labels, problem_type, dev_accuracy, a parity's agreement and
tolerance), which default to null. `generator` came later, with a default (null: no generator), so a bundle
without it reads as before, and an older server reads a bundle with one as a plain discriminator. `embedding`
likewise (null: a bundle exported before the graph answered its last hidden state, which cannot embed until it
is exported again; an older server ignores the extra output). Unknown
fields are ignored, so a newer exporter may add information
without breaking older servers; a change older readers must not ignore needs a new BUNDLE_VERSION.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, get_args

import msgspec

from electra.atomic import atomic_write_text
from electra.errors import InputError
from electra.files import BUNDLE_JSON, GENERATOR_DIR, MODEL_ONNX
from electra.padding import PADDING_SIDE

BUNDLE_FORMAT = "electra-onnx-bundle"
BUNDLE_VERSION = 1

Kind = Literal["discriminator", "classifier", "tagger"]
EXPORTABLE_KINDS: tuple[str, ...] = get_args(Kind)
Precision = Literal["fp32", "fp16", "int8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
# How a sentence vector is made of the last hidden state: the [CLS] position's (what ELECTRA's classifier head
# reads, so the default), or the mean over the real tokens (sentence-transformers' usual pooling).
Pooling = Literal["cls", "mean"]
POOLINGS: tuple[str, ...] = get_args(Pooling)

# The graph's inputs (int64, batch x sequence) and its output: float32 logits, batch x sequence for a
# discriminator, batch x labels for a classifier, batch x sequence x labels for a tagger.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "logits"
# A second output of every encoder's graph (not the generator's): the encoder's last hidden state, float32
# batch x sequence x hidden_size, transformers' name for it. It is an intermediate the logits need anyway, so
# a session that asks only for the logits computes and copies nothing more.
HIDDEN_OUTPUT = "last_hidden_state"
# The generator's graph takes one more input: flat indices into the batch x sequence positions (row * padded
# length + position) where a prediction is wanted; its logits are masked positions x vocabulary, so the
# vocabulary projection runs only where it is read.
MASKED_POSITIONS = "masked_positions"
GENERATOR_INPUT_NAMES = (*INPUT_NAMES, MASKED_POSITIONS)
# The fused attention reads the mask as per-row lengths, so inputs must be padded on the right (PADDING_SIDE,
# the side electra.padding pads on, re-exported here because a bundle records it).

_FIX = "export the model again into a fresh directory: electra export --model MODEL --out DIR"
# A Hub model id as `electra export --model` takes it: owner/name, nothing that a local path would need.
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


class Quantization(msgspec.Struct, frozen=True, kw_only=True):
    """How an int8 graph was quantised."""

    method: str
    weight_type: str
    op_types: list[str]


class ExportSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the graph was produced: exporter, attention path, ORT optimizer settings, quantisation."""

    exporter: str
    attention_impl: str
    optimizer: str
    model_type: str
    opt_level: int
    use_gpu: bool
    attention_mask_format: str
    quantization: Quantization | None = None


class Parity(msgspec.Struct, frozen=True, kw_only=True):
    """The exported graph against PyTorch on one padded batch of real text (ORT's CPU provider)."""

    texts: int
    batch_shape: list[int]
    real_tokens: int
    max_abs_diff: float
    mean_abs_diff: float
    agreement: float | None = None  # share of equal predictions; None for a regression
    compared: str  # which predictions `agreement` compares
    tolerance: float | None = None  # the max_abs_diff limit the export enforced (fp32 only)
    provider: str


class DevAccuracy(msgspec.Struct, frozen=True, kw_only=True):
    """A classifier's accuracy on the dev set it was tuned on, PyTorch against the exported graph."""

    examples: int
    accuracy_pytorch: float
    accuracy_onnx: float
    drop_points: float
    prediction_agreement: float


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """The model directory exported, and a checksum of its weights."""

    model_dir: str
    weights_file: str
    sha256: str


class Versions(msgspec.Struct, frozen=True, kw_only=True):
    onnxruntime: str
    torch: str
    onnx: str


class Generator(msgspec.Struct, frozen=True, kw_only=True):
    """The generator beside a discriminator: generator/model.onnx, fused and at the bundle's precision."""

    inputs: list[str] = msgspec.field(default_factory=lambda: list(GENERATOR_INPUT_NAMES))
    output: str = OUTPUT_NAME
    vocab_size: int
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    fused_operators: dict[str, int]
    parity: Parity  # logits at masked positions; agreement: the top-1 token
    source: Source


class Embedding(msgspec.Struct, frozen=True, kw_only=True):
    """The graph's last hidden state (HIDDEN_OUTPUT), and how a sentence vector is pooled from it."""

    output: str = HIDDEN_OUTPUT
    pooling: Pooling
    dimensions: int  # the hidden size: each vector's length
    parity: Parity  # the hidden state at real tokens, PyTorch against the graph


class Bundle(msgspec.Struct, frozen=True, kw_only=True):
    """bundle.json, field for field and in its order."""

    format: str = BUNDLE_FORMAT
    version: int = BUNDLE_VERSION
    kind: Kind
    # A classifier's or tagger's "0".."n-1" -> name; None for a discriminator.
    labels: dict[str, str] | None = None
    problem_type: str | None = None  # a classifier's HF problem_type (None for the other kinds)
    # A multi-label classifier's threshold per label name (from its config.json); None: 0.5 for every label.
    label_thresholds: dict[str, float] | None = None
    max_seq_len: int  # longest input in tokens, [CLS] and [SEP] included
    precision: Precision
    opset: int
    inputs: list[str] = msgspec.field(default_factory=lambda: list(INPUT_NAMES))
    output: str = OUTPUT_NAME
    padding_side: str = PADDING_SIDE
    type_vocab_size: int
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    # Fused and quantised operators in model.onnx by type (electra.onnx.fusion.FUSED_OPS), zeros included.
    fused_operators: dict[str, int]
    export: ExportSettings
    parity: Parity
    dev_accuracy: DevAccuracy | None = None
    generator: Generator | None = None
    embedding: Embedding | None = None
    source: Source
    versions: Versions
    created: str  # ISO 8601, UTC

    def to_dict(self) -> dict[str, Any]:
        """bundle.json's JSON object (without `generator`, `label_thresholds` or `embedding` when there is
        none, as before they existed)."""
        out = msgspec.to_builtins(self)
        for optional in ("generator", "label_thresholds", "embedding"):
            if out.get(optional) is None:
                out.pop(optional, None)
        return out


def write_bundle(bundle_dir: Path, bundle: Bundle) -> Path:
    """Write `bundle` as bundle_dir/bundle.json (atomically); returns its path."""
    path = Path(bundle_dir) / BUNDLE_JSON
    atomic_write_text(path, json.dumps(bundle.to_dict(), indent=2) + "\n")
    return path


def read_bundle(bundle_dir: Path) -> Bundle:
    """bundle.json of an exported bundle, validated (InputError naming the file when missing or corrupt)."""
    bundle_dir = Path(bundle_dir)
    if not bundle_dir.is_dir():
        raise InputError(_not_a_directory(bundle_dir))
    path = bundle_dir / BUNDLE_JSON
    if not path.is_file():
        raise InputError(_not_a_bundle(bundle_dir))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not readable JSON: {' '.join(str(e).split())} ({_FIX})") from None
    bundle = _parse(raw, path)
    if not (bundle_dir / MODEL_ONNX).is_file():
        raise InputError(f"{bundle_dir}: {MODEL_ONNX} is missing ({_FIX})")
    if bundle.generator is not None and not (bundle_dir / GENERATOR_DIR / MODEL_ONNX).is_file():
        raise InputError(f"{bundle_dir}: {GENERATOR_DIR}/{MODEL_ONNX} is missing ({_FIX})")
    positions = _max_positions(bundle_dir / "config.json")
    if positions is not None and bundle.max_seq_len > positions:
        # Longer inputs would index past the model's position embeddings: every call of such a length fails.
        raise InputError(
            f"{path}: max_seq_len {bundle.max_seq_len} is more than the model's {positions} positions "
            f"(config.json max_position_embeddings; {_FIX})"
        )
    return bundle


def _max_positions(config: Path) -> int | None:
    """The model's max_position_embeddings from its config.json, when the bundle has one that says."""
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _not_a_directory(path: Path) -> str:
    what = "not a directory" if path.exists() else "no such directory"
    if not path.exists() and _HUB_ID.fullmatch(str(path)):
        # The README's recipe for a Hub model: the server reads bundles, not Hub ids.
        name = str(path).split("/")[-1]
        return (
            f"{path}: {what}; the server takes exported bundles, not Hub ids (export it first: "
            f"electra export --model {path} --out bundles/{name}, then serve bundles/{name})"
        )
    return f"{path}: {what} (pass a bundle directory written by `electra export`)"


def _not_a_bundle(path: Path) -> str:
    if (path / "config.json").is_file():  # a pre-trained or fine-tuned model directory
        return (
            f"{path}: a model directory, not an exported bundle (export it first: electra export --model "
            f"{path} --out {path}-onnx, then serve {path}-onnx)"
        )
    return f"{path}: no {BUNDLE_JSON}, so not a bundle written by `electra export` ({_FIX})"


def _parse(raw: Any, path: Path) -> Bundle:
    """A decoded bundle.json (from `path`, named in errors) as a Bundle, or a one-line InputError."""
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object ({_FIX})")
    if raw.get("format") != BUNDLE_FORMAT:
        raise InputError(f"{path}: format is {raw.get('format')!r}, not {BUNDLE_FORMAT!r} ({_FIX})")
    if raw.get("version") != BUNDLE_VERSION:
        raise InputError(
            f"{path}: bundle version {raw.get('version')!r} is not supported (this tool reads "
            f"{BUNDLE_VERSION}; {_FIX})"
        )
    # The checks that name what a reader relies on come first, in words; the schema catches the rest.
    problems = _problems(raw)
    if problems:
        raise InputError(f"{path}: {'; '.join(problems)} ({_FIX})")
    try:
        return msgspec.convert(raw, Bundle)
    except msgspec.ValidationError as e:  # one line, e.g. "Expected `int`, got `str` - at `$.opset`"
        raise InputError(f"{path}: {e} ({_FIX})") from None


def _problems(raw: dict[str, Any]) -> list[str]:
    problems = []
    if raw.get("kind") not in EXPORTABLE_KINDS:
        problems.append(f"kind {raw.get('kind')!r} is not one of {', '.join(EXPORTABLE_KINDS)}")
    if raw.get("precision") not in PRECISIONS:
        problems.append(f"precision {raw.get('precision')!r} is not one of {', '.join(PRECISIONS)}")
    for key in ("max_seq_len", "opset"):
        value = raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"{key} {value!r} is not a positive integer")
    labels = raw.get("labels")
    if raw.get("kind") in ("classifier", "tagger"):
        if not isinstance(labels, dict) or not labels or not all(isinstance(v, str) for v in labels.values()):
            problems.append(f"a {raw['kind']} needs labels (an id -> name object)")
        elif set(labels) != {str(i) for i in range(len(labels))}:
            problems.append(f"label ids must be 0..{len(labels) - 1}")
    elif labels is not None:
        problems.append("a discriminator has no labels")
    if not isinstance(raw.get("fused_operators"), dict):
        problems.append("fused_operators is missing")
    if not isinstance(raw.get("parity"), dict):
        problems.append("parity is missing")
    generator = raw.get("generator")
    if generator is not None and raw.get("kind") != "discriminator":
        problems.append(f"a {raw.get('kind')} has no generator (only a discriminator does)")
    embedding = raw.get("embedding")
    if isinstance(embedding, dict) and embedding.get("pooling") not in POOLINGS:
        problems.append(f"embedding pooling {embedding.get('pooling')!r} is not one of {', '.join(POOLINGS)}")
    return problems


__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "EXPORTABLE_KINDS",
    "GENERATOR_INPUT_NAMES",
    "HIDDEN_OUTPUT",
    "INPUT_NAMES",
    "MASKED_POSITIONS",
    "OUTPUT_NAME",
    "PADDING_SIDE",
    "POOLINGS",
    "PRECISIONS",
    "Bundle",
    "DevAccuracy",
    "Embedding",
    "ExportSettings",
    "Generator",
    "Kind",
    "Parity",
    "Pooling",
    "Precision",
    "Quantization",
    "Source",
    "Versions",
    "read_bundle",
    "write_bundle",
]
