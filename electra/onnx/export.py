"""Export a discriminator or classifier to a self-contained, fused ONNX bundle, and prove it still agrees.

The path, chosen because it is the one ONNX Runtime's transformer optimizer recognises for our graph:

1. `torch.onnx.export(..., dynamo=False)` (the TorchScript exporter) of the model on its "math" attention
   path, whose matmul -> add mask -> softmax -> matmul sequence is BERT's op for op;
2. `onnxruntime.transformers.optimizer.optimize_model(model_type="bert", opt_level=1)` on the CPU provider,
   which fuses every layer's attention into one `Attention` node, residual + LayerNorm into
   `SkipLayerNormalization` and bias + gelu into `BiasGelu`. The export fails loudly when any layer's
   attention is left unfused: an unfused graph still computes the right numbers, just several times slower,
   and nobody would notice until serving;
3. fp16: `convert_float_to_float16(keep_io_types=True)` of the fused graph (inputs int64, logits fp32);
   int8: `quantize_dynamic` (QInt8 weights) of the fused graph;
4. parity against the PyTorch model on real, padded text on ORT's CPU provider, then the bundle directory
   (model.onnx, tokenizer, HF config.json, bundle.json) is moved into place atomically.

The fused attention reads the mask as per-row lengths (ORT's BERT default, the fast GPU path), so a bundle
expects right-padded input, as our tokenizer and server produce; bundle.json says so ("padding_side").

Only the standard library is imported at module level: the server imports `load_bundle_metadata` from here
and has neither torch nor onnx installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from electra.atomic import atomic_dir, check_output_dir
from electra.errors import ElectraError, InputError

if TYPE_CHECKING:
    import numpy as np
    import onnx
    import tokenizers

    from electra.config import ElectraConfig
    from electra.model import ElectraHeadModel

log = logging.getLogger(__name__)

Precision = Literal["fp32", "fp16", "int8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
EXPORTABLE_KINDS = ("discriminator", "classifier")

BUNDLE_FORMAT = "electra-onnx-bundle"
BUNDLE_VERSION = 1
BUNDLE_JSON = "bundle.json"
MODEL_ONNX = "model.onnx"
CONFIG_JSON = "config.json"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "logits"

# The TorchScript exporter stops at opset 20; below 14 some of our ops have no exact ONNX form.
MIN_OPSET, MAX_OPSET = 14, 20
FP32_TOLERANCE = 1e-4
# Level 1 (basic: constant folding, redundant node removal) is provider-independent, so one fused graph serves
# CPU and GPU; the serving session applies the provider-specific levels itself. Higher levels, or use_gpu=True
# (which optimises inside a CUDA session), can bake Memcpy nodes into the saved graph that then fail to load
# on the CPU provider (onnxruntime#11348) -- and the parity check below runs on the CPU provider.
OPT_LEVEL = 1
OPTIMIZER_MODEL_TYPE = "bert"
# ORT's BERT default: attention takes per-row lengths (ReduceSum of the mask), which lets the GPU kernels skip
# padding. It assumes right padding, which is what our tokenizer and server produce.
ATTENTION_MASK_FORMAT = "mask_index_end"
PADDING_SIDE = "right"
# Only the compute-heavy ops: quantising the embedding Gathers saves disk but costs accuracy and no time.
INT8_OP_TYPES = ["MatMul", "Attention"]
ATTENTION_OPS = ("Attention", "MultiHeadAttention", "QAttention")
# What count_fused_operators reports: ORT's fused transformer ops and the dynamic-quantisation ops.
FUSED_OPS = (
    "EmbedLayerNormalization",
    "Attention",
    "MultiHeadAttention",
    "QAttention",
    "SkipLayerNormalization",
    "LayerNormalization",
    "BiasGelu",
    "FastGelu",
    "Gelu",
    "GemmFastGelu",
    "MatMulInteger",
    "DynamicQuantizeMatMul",
)
DEV_BATCH_SIZE = 32
INT8_ACCURACY_DROP_TARGET = 1.0  # points

Example = tuple[str, str | None]

# Mixed lengths (one word to ~40 tokens), single texts and pairs, punctuation, numbers and casing: what the
# parity batch needs to exercise padding, token types and truncation-free long rows.
DEFAULT_PARITY_TEXTS: tuple[Example, ...] = (
    ("Hi.", None),
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Is this a question?", "Yes, and this is its answer."),
    ("ELECTRA trains a discriminator to detect replaced tokens instead of predicting masked ones.", None),
    ("I loved this movie; the acting was superb and the story kept me hooked until the very end.", None),
    ("Terrible service. We waited an hour and the food was cold.", None),
    ("A man is playing a guitar on stage.", "Someone is performing music."),
    ("Prices rose 3.5% in March, the fastest increase since 2019, according to official figures.", None),
    ("Why?", None),
    ("The cat sat on the mat.", "The dog slept on the rug."),
    ("Colourless green ideas sleep furiously.", None),
    ("Please send the report by Friday, or call me if anything is unclear.", None),
    (
        "Where was the treaty signed?",
        "The treaty was signed in Paris in 1783 after years of negotiation between the delegations.",
    ),
    ("It's not bad at all - actually, it's rather good!", None),
    (
        "The committee, having considered all of the evidence presented over the course of three long days "
        "of hearings, concluded that no further action was required at this time.",
        None,
    ),
    ("Book a table for two at eight tonight.", "Reserve dinner for a pair this evening."),
)


# ----------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------


def export_bundle(
    model_dir: Path,
    out: Path,
    precision: Precision = "fp32",
    opset: int = 17,
    max_seq_len: int | None = None,
    overwrite: bool = False,
    parity_texts: list[str] | None = None,
    dev_set: tuple[list[Example], list[int]] | None = None,
) -> dict[str, Any]:
    """Export `model_dir` (a discriminator or classifier directory with its tokenizer) to a bundle at `out`.

    Returns the bundle.json content. Raises InputError for unusable input and ElectraError when the export
    itself fails (attention not fused, fp32 parity above 1e-4); in both cases nothing is left at `out`.
    parity_texts: texts for the parity batch (default: DEFAULT_PARITY_TEXTS, singles and pairs).
    dev_set: (examples, gold labels) for a classifier: accuracy of PyTorch vs the exported model is stored.
    """
    model_dir, out = Path(model_dir), Path(out)
    # Everything cheap is checked before loading anything, so a typo fails in milliseconds.
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if not isinstance(opset, int) or isinstance(opset, bool) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise InputError(
            f"opset {opset!r} is not supported; use {MIN_OPSET}..{MAX_OPSET} (the TorchScript exporter's)"
        )
    check_output_dir(out, overwrite)
    if out.resolve() == model_dir.resolve():
        raise InputError(f"{out} is the model directory itself; choose another output directory")
    if parity_texts is not None and (
        not parity_texts or not all(isinstance(t, str) and t.strip() for t in parity_texts)
    ):
        raise InputError("parity_texts must be a non-empty list of non-empty strings")

    model, weights_file, raw_config = _load_model(model_dir)
    cfg = model.config
    tokenizer = _load_tokenizer(model_dir, cfg)
    seq_len = _check_max_seq_len(max_seq_len, cfg)
    texts = list(DEFAULT_PARITY_TEXTS) if parity_texts is None else [(t, None) for t in parity_texts]
    if dev_set is not None:
        _check_dev_set(dev_set, model)

    import onnx  # heavy: the server imports this module without them
    import onnxruntime
    import torch

    from electra.tokenizer import save_tokenizer

    with atomic_dir(out, overwrite) as tmp, tempfile.TemporaryDirectory(prefix="electra-onnx-") as work:
        work_dir = Path(work)
        raw_path = work_dir / "exported.onnx"
        model_path = tmp / MODEL_ONNX
        _export_torchscript(model, raw_path, opset)

        fused = _optimize(raw_path, cfg)
        _check_attention_fused(_count(fused), cfg.num_hidden_layers, "after optimize_model", model_dir)
        _finish_precision(fused, precision, work_dir, model_path)
        counts = count_fused_operators(model_path)
        _check_attention_fused(counts, cfg.num_hidden_layers, f"in the {precision} model", model_dir)

        session = _cpu_session(model_path)
        parity = _parity(model, session, tokenizer, texts, seq_len, precision)
        if precision == "fp32" and not parity["max_abs_diff"] < FP32_TOLERANCE:
            raise ElectraError(
                f"{model_dir}: fp32 ONNX logits differ from PyTorch by {parity['max_abs_diff']:.3g} "
                f"(limit {FP32_TOLERANCE:g}) on the parity batch; the export is wrong, not exported"
            )
        dev = _dev_accuracy(model, session, tokenizer, dev_set, seq_len, precision) if dev_set else None

        save_tokenizer(tokenizer, tmp)
        (tmp / CONFIG_JSON).write_text(raw_config, encoding="utf-8")
        metadata: dict[str, Any] = {
            "format": BUNDLE_FORMAT,
            "version": BUNDLE_VERSION,
            "kind": model.kind,
            "labels": (
                {str(i): label for i, label in sorted((cfg.id2label or {}).items())}
                if model.kind == "classifier"
                else None
            ),
            "problem_type": cfg.problem_type if model.kind == "classifier" else None,
            "max_seq_len": seq_len,
            "precision": precision,
            "opset": opset,
            "inputs": list(INPUT_NAMES),
            "output": OUTPUT_NAME,
            "padding_side": PADDING_SIDE,
            "type_vocab_size": cfg.type_vocab_size,
            "num_hidden_layers": cfg.num_hidden_layers,
            "hidden_size": cfg.hidden_size,
            "num_attention_heads": cfg.num_attention_heads,
            "fused_operators": counts,
            "export": {
                "exporter": "torch.onnx.export (TorchScript, dynamo=False)",
                "attention_impl": "math",
                "optimizer": "onnxruntime.transformers.optimizer.optimize_model",
                "model_type": OPTIMIZER_MODEL_TYPE,
                "opt_level": OPT_LEVEL,
                "use_gpu": False,
                "attention_mask_format": ATTENTION_MASK_FORMAT,
                "quantization": (
                    {"method": "quantize_dynamic", "weight_type": "QInt8", "op_types": INT8_OP_TYPES}
                    if precision == "int8"
                    else None
                ),
            },
            "parity": parity,
            "dev_accuracy": dev,
            "source": {
                "model_dir": str(model_dir),
                "weights_file": weights_file.name,
                "sha256": _sha256(weights_file),
            },
            "versions": {
                "onnxruntime": onnxruntime.__version__,
                "torch": torch.__version__,
                "onnx": onnx.__version__,
            },
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (tmp / BUNDLE_JSON).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    log.info("exported %s (%s, %s) to %s: %s", model_dir, model.kind, precision, out, counts)
    return metadata


def count_fused_operators(onnx_path: Path) -> dict[str, int]:
    """How many of each fused or quantised operator (FUSED_OPS) the graph at `onnx_path` holds, zeros too."""
    import onnx

    onnx_path = Path(onnx_path)
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and onnx's own errors share no useful base class
        raise InputError(f"{onnx_path}: not a readable ONNX model ({_one_line(e)}); re-export it") from None
    return _count(model)


def load_bundle_metadata(bundle_dir: Path) -> dict[str, Any]:
    """bundle.json of an exported bundle, validated (InputError naming the file when missing or corrupt)."""
    bundle_dir = Path(bundle_dir)
    fix = "re-export the model into a fresh bundle"
    if not bundle_dir.is_dir():
        raise InputError(f"{bundle_dir}: not a directory; pass an exported ONNX bundle directory")
    path = bundle_dir / BUNDLE_JSON
    if not path.is_file():
        raise InputError(f"{bundle_dir}: no {BUNDLE_JSON}; this is not an exported ONNX bundle ({fix})")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not readable JSON ({_one_line(e)}); {fix}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: expected a JSON object; {fix}")
    if meta.get("format") != BUNDLE_FORMAT:
        raise InputError(f"{path}: format is {meta.get('format')!r}, not {BUNDLE_FORMAT!r}; {fix}")
    if meta.get("version") != BUNDLE_VERSION:
        raise InputError(
            f"{path}: bundle version {meta.get('version')!r} is not supported (this tool reads "
            f"{BUNDLE_VERSION}); {fix}"
        )
    problems = _metadata_problems(meta)
    if problems:
        raise InputError(f"{path}: {'; '.join(problems)}; {fix}")
    if not (bundle_dir / MODEL_ONNX).is_file():
        raise InputError(f"{bundle_dir}: {MODEL_ONNX} is missing; {fix}")
    return meta


# ----------------------------------------------------------------------------------------------------------
# Loading and checking the input
# ----------------------------------------------------------------------------------------------------------


def _load_model(model_dir: Path) -> tuple[ElectraHeadModel, Path, str]:
    """The model (fp32, eval), its weights file, and config.json's text (copied into the bundle verbatim)."""
    from electra.hf_format import load_hf_dir_with_report

    model, report = load_hf_dir_with_report(model_dir)
    if model.kind not in EXPORTABLE_KINDS:
        raise InputError(
            f"{model_dir / CONFIG_JSON}: a {model.kind} ({report.source_architecture}) cannot be exported; "
            "export the discriminator or a fine-tuned classifier"
        )
    if report.newly_initialized:
        # The head would be random: an export of it would pass parity and still be useless.
        raise InputError(
            f"{report.weights_file}: has no weights for {', '.join(report.newly_initialized[:3])}; "
            f"the {model.kind} head is untrained -- fine-tune it first"
        )
    return model, report.weights_file, (model_dir / CONFIG_JSON).read_text(encoding="utf-8")


def _load_tokenizer(model_dir: Path, cfg: ElectraConfig) -> tokenizers.Tokenizer:
    from electra.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    n = tokenizer.get_vocab_size(with_added_tokens=True)
    if n > cfg.vocab_size:
        raise InputError(
            f"{model_dir}: the tokenizer has {n} tokens but the model's vocab_size is {cfg.vocab_size}; "
            "put the tokenizer the model was trained with next to it"
        )
    return tokenizer


def _check_max_seq_len(max_seq_len: int | None, cfg: ElectraConfig) -> int:
    if max_seq_len is None:
        return cfg.max_position_embeddings
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 2:
        raise InputError(f"max_seq_len must be an integer >= 2 ([CLS] and [SEP]), got {max_seq_len!r}")
    if max_seq_len > cfg.max_position_embeddings:
        raise InputError(
            f"max_seq_len {max_seq_len} exceeds the model's max_position_embeddings "
            f"({cfg.max_position_embeddings}); pass at most that"
        )
    return max_seq_len


def _check_dev_set(dev_set: tuple[list[Example], list[int]], model: ElectraHeadModel) -> None:
    if model.kind != "classifier":
        raise InputError("dev_set is only for classifiers; a discriminator has no labels to score")
    if _prediction_kind(model.config) != "single_label":
        raise InputError(
            f"dev_set accuracy needs a single-label classifier, this one is {model.config.problem_type}"
        )
    examples, labels = dev_set
    if not examples or len(examples) != len(labels):
        raise InputError(
            f"dev_set needs as many labels as examples (got {len(examples)} examples, {len(labels)} labels)"
        )
    bad = [y for y in labels if not isinstance(y, int) or not 0 <= y < model.config.num_labels]
    if bad:
        raise InputError(f"dev_set label {bad[0]!r} is not in 0..{model.config.num_labels - 1}")


# ----------------------------------------------------------------------------------------------------------
# Export, optimisation, precision
# ----------------------------------------------------------------------------------------------------------


def _export_torchscript(model: ElectraHeadModel, path: Path, opset: int) -> None:
    import torch

    batch, length = 2, 16
    input_ids = torch.full((batch, length), 5, dtype=torch.long)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, length // 2 :] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    axes = {0: "batch_size", 1: "sequence_length"}
    dynamic_axes: dict[str, dict[int, str]] = {name: axes for name in INPUT_NAMES}
    dynamic_axes[OUTPUT_NAME] = axes if model.kind == "discriminator" else {0: "batch_size"}

    model.set_attention_impl("math")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of dynamo; we choose it on purpose (the module
            # docstring says why), so its DeprecationWarnings are noise here.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                model,
                (input_ids, attention_mask, token_type_ids),
                str(path),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as e:  # the exporter raises many types (RuntimeError, OnnxExporterError, ...)
        raise ElectraError(f"torch.onnx.export (TorchScript) failed at opset {opset}: {_one_line(e)}") from e
    finally:
        model.set_attention_impl("sdpa")


def _optimize(onnx_path: Path, cfg: ElectraConfig) -> onnx.ModelProto:
    """ORT's BERT fusions on the exported graph (the step tests replace to simulate a failed fusion)."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions(OPTIMIZER_MODEL_TYPE)
    options.use_raw_attention_mask(False)  # mask index (ATTENTION_MASK_FORMAT), stated rather than defaulted
    try:
        optimized = optimize_model(
            str(onnx_path),
            model_type=OPTIMIZER_MODEL_TYPE,
            num_heads=cfg.num_attention_heads,
            hidden_size=cfg.hidden_size,
            optimization_options=options,
            opt_level=OPT_LEVEL,
            use_gpu=False,
        )
    except Exception as e:  # fusion code asserts and raises freely on graphs it does not expect
        raise ElectraError(
            f"onnxruntime's transformer optimizer failed on {onnx_path.name}: {_one_line(e)}"
        ) from e
    return optimized.model


def _finish_precision(fused: onnx.ModelProto, precision: Precision, work_dir: Path, out_path: Path) -> None:
    """Write the fused graph at the requested precision to out_path."""
    import onnx
    from onnxruntime.transformers.onnx_model import OnnxModel

    if precision == "fp32":
        OnnxModel(fused).save_model_to_file(str(out_path))
    elif precision == "fp16":
        # Converted after fusion: the fusion patterns are written for fp32 graphs. keep_io_types leaves int64
        # ids in and fp32 logits out, so callers never see half floats.
        half = OnnxModel(fused)
        try:
            half.convert_float_to_float16(keep_io_types=True)
        except Exception as e:
            raise ElectraError(f"fp16 conversion of the fused graph failed: {_one_line(e)}") from e
        half.save_model_to_file(str(out_path))
    else:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        fp32_path = work_dir / "fused_fp32.onnx"
        OnnxModel(fused).save_model_to_file(str(fp32_path))
        try:
            with _quiet_quantizer():
                quantize_dynamic(
                    fp32_path,
                    out_path,
                    op_types_to_quantize=INT8_OP_TYPES,
                    weight_type=QuantType.QInt8,
                    # The fused contrib ops (SkipLayerNormalization, ...) have no ONNX type inference; without
                    # a default the quantizer cannot type their outputs and refuses the graph.
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                )
        except Exception as e:
            raise ElectraError(f"int8 dynamic quantisation of the fused graph failed: {_one_line(e)}") from e


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """Drop quantize_dynamic's advice to run its pre-processing: it targets unfused graphs, not ours."""

    def keep(record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def _count(model: onnx.ModelProto) -> dict[str, int]:
    counts = dict.fromkeys(FUSED_OPS, 0)
    for node in model.graph.node:
        if node.op_type in counts:
            counts[node.op_type] += 1
    return counts


def _check_attention_fused(counts: dict[str, int], layers: int, stage: str, model_dir: Path) -> None:
    fused = sum(counts.get(op, 0) for op in ATTENTION_OPS)
    if fused != layers:
        nonzero = {k: v for k, v in counts.items() if v}
        raise ElectraError(
            f"{model_dir}: attention fused in {fused} of {layers} layers {stage} (fused ops: {nonzero}); "
            "onnxruntime's optimizer no longer recognises the exported attention -- check the torch and "
            "onnxruntime versions against the tested ones"
        )


# ----------------------------------------------------------------------------------------------------------
# Parity and dev accuracy
# ----------------------------------------------------------------------------------------------------------


def _cpu_session(path: Path) -> Any:
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()
    # ORT ignores OMP_NUM_THREADS; follow torch's thread budget so an export takes no more cores than asked.
    options.intra_op_num_threads = torch.get_num_threads()
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ElectraError(f"onnxruntime cannot load the exported {path.name}: {_one_line(e)}") from e


def encode_batch(
    tokenizer: tokenizers.Tokenizer, examples: Sequence[Example], max_seq_len: int, pair_types: bool = True
) -> dict[str, np.ndarray]:
    """Right-padded int64 model inputs for `examples`, truncated to max_seq_len (the server's encoding)."""
    import numpy as np
    import tokenizers as tk

    from electra.tokenizer import special_ids

    # Padding and truncation are per call: set them on a copy, never on the caller's tokenizer.
    tok = tk.Tokenizer.from_str(tokenizer.to_str())
    tok.enable_truncation(max_length=max_seq_len)
    tok.enable_padding(direction="right", pad_id=special_ids(tok).pad, pad_token="[PAD]")
    inputs = [a if b is None else (a, b) for a, b in examples]
    if not pair_types:
        # A model with one token type cannot embed segment 1: feed pairs as one joined text instead.
        inputs = [a if b is None else f"{a} {b}" for a, b in examples]
    encodings = tok.encode_batch(inputs)
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


def _run_both(model: ElectraHeadModel, session: Any, batch: dict[str, np.ndarray]) -> tuple[Any, Any]:
    import torch

    with torch.no_grad():
        reference = model(*(torch.from_numpy(batch[name]) for name in INPUT_NAMES)).float().numpy()
    onnx_logits = session.run([OUTPUT_NAME], {name: batch[name] for name in INPUT_NAMES})[0]
    return reference, onnx_logits


def _prediction_kind(cfg: ElectraConfig) -> str:
    if cfg.problem_type == "regression" or cfg.num_labels == 1:
        return "regression"
    if cfg.problem_type == "multi_label_classification":
        return "multi_label"
    return "single_label"


def _predictions(kind: str, logits: np.ndarray) -> np.ndarray | None:
    if kind == "single_label":
        return logits.argmax(-1)
    if kind in ("multi_label", "discriminator"):
        return logits > 0
    return None


def _parity(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    texts: list[Example],
    max_seq_len: int,
    precision: str,
) -> dict[str, Any]:
    import numpy as np

    batch = encode_batch(tokenizer, texts, max_seq_len, pair_types=model.config.type_vocab_size > 1)
    reference, exported = _run_both(model, session, batch)
    if reference.shape != exported.shape:
        raise ElectraError(
            f"ONNX logits are {exported.shape}, PyTorch's {reference.shape}; the export is broken"
        )
    if not np.isfinite(exported).all():
        raise ElectraError(
            f"the {precision} ONNX model produced non-finite logits on the parity batch; it is unusable"
        )
    if model.kind == "discriminator":
        # Positions past a row's length are padding: their logits are never read, so they are not compared.
        real = batch["attention_mask"].astype(bool)
        reference, exported = reference[real], exported[real]
        pred_kind, compared = "discriminator", "replaced flags (logit > 0) over real tokens"
    else:
        pred_kind = _prediction_kind(model.config)
        compared = {
            "single_label": "argmax label",
            "multi_label": "labels with logit > 0",
            "regression": "none (regression)",
        }[pred_kind]
    ref_pred, onnx_pred = _predictions(pred_kind, reference), _predictions(pred_kind, exported)
    agreement = None if ref_pred is None else float((ref_pred == onnx_pred).mean())
    return {
        "texts": len(texts),
        "batch_shape": list(batch["input_ids"].shape),
        "real_tokens": int(batch["attention_mask"].sum()),
        "max_abs_diff": float(np.abs(reference - exported).max()),
        "mean_abs_diff": float(np.abs(reference - exported).mean()),
        "agreement": agreement,
        "compared": compared,
        "tolerance": FP32_TOLERANCE if precision == "fp32" else None,
        "provider": "CPUExecutionProvider",
    }


def _dev_accuracy(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    dev_set: tuple[list[Example], list[int]],
    max_seq_len: int,
    precision: str,
) -> dict[str, Any]:
    import numpy as np

    examples, labels = dev_set
    gold = np.asarray(labels)
    torch_pred, onnx_pred = [], []
    for start in range(0, len(examples), DEV_BATCH_SIZE):
        chunk = examples[start : start + DEV_BATCH_SIZE]
        batch = encode_batch(tokenizer, chunk, max_seq_len, pair_types=model.config.type_vocab_size > 1)
        reference, exported = _run_both(model, session, batch)
        torch_pred.append(reference.argmax(-1))
        onnx_pred.append(exported.argmax(-1))
    acc_torch = float((np.concatenate(torch_pred) == gold).mean())
    acc_onnx = float((np.concatenate(onnx_pred) == gold).mean())
    drop = 100.0 * (acc_torch - acc_onnx)
    if precision == "int8" and drop > INT8_ACCURACY_DROP_TARGET:
        log.warning(
            "int8 export loses %.2f accuracy points on the dev set (target <= %.1f)",
            drop,
            INT8_ACCURACY_DROP_TARGET,
        )
    return {
        "examples": len(examples),
        "accuracy_pytorch": acc_torch,
        "accuracy_onnx": acc_onnx,
        "drop_points": drop,
        "prediction_agreement": float((np.concatenate(torch_pred) == np.concatenate(onnx_pred)).mean()),
    }


# ----------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _metadata_problems(meta: dict[str, Any]) -> list[str]:
    problems = []
    if meta.get("kind") not in EXPORTABLE_KINDS:
        problems.append(f"kind {meta.get('kind')!r} is not one of {', '.join(EXPORTABLE_KINDS)}")
    if meta.get("precision") not in PRECISIONS:
        problems.append(f"precision {meta.get('precision')!r} is not one of {', '.join(PRECISIONS)}")
    for key in ("max_seq_len", "opset"):
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"{key} {value!r} is not a positive integer")
    labels = meta.get("labels")
    if meta.get("kind") == "classifier":
        if not isinstance(labels, dict) or not labels or not all(isinstance(v, str) for v in labels.values()):
            problems.append("a classifier needs labels (an id -> name object)")
        elif set(labels) != {str(i) for i in range(len(labels))}:
            problems.append(f"label ids must be 0..{len(labels) - 1}")
    elif labels is not None:
        problems.append("a discriminator has no labels")
    if not isinstance(meta.get("fused_operators"), dict):
        problems.append("fused_operators is missing")
    if not isinstance(meta.get("parity"), dict):
        problems.append("parity is missing")
    return problems


__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_JSON",
    "BUNDLE_VERSION",
    "DEFAULT_PARITY_TEXTS",
    "MODEL_ONNX",
    "PRECISIONS",
    "count_fused_operators",
    "encode_batch",
    "export_bundle",
    "load_bundle_metadata",
]
