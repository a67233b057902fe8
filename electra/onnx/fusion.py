"""Step 2 of an export: ONNX Runtime's transformer optimizer on the exported graph, and proof that it fused.

`optimize_model(model_type="bert", opt_level=1)` on the CPU provider fuses every layer's attention into one
`Attention` node, residual + LayerNorm into `SkipLayerNormalization` and bias + gelu into `BiasGelu`. The
export fails loudly when any layer's attention is left unfused: an unfused graph still computes the right
numbers, just several times slower, and nobody would notice until serving.

The fused attention reads the mask as per-row lengths (ORT's BERT default, the fast GPU path), so a bundle
expects right-padded input, as our tokenizer and server produce; bundle.json says so ("padding_side").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from electra.errors import ElectraError, InputError
from electra.onnx import one_line

if TYPE_CHECKING:
    import onnx

    from electra.config import ElectraConfig

OPTIMIZER = "onnxruntime.transformers.optimizer.optimize_model"
# Level 1 (basic: constant folding, redundant node removal) is provider-independent, so one fused graph serves
# CPU and GPU; the serving session applies the provider-specific levels itself. Higher levels, or use_gpu=True
# (which optimises inside a CUDA session), can bake Memcpy nodes into the saved graph that then fail to load
# on the CPU provider (onnxruntime#11348) -- and the parity check runs on the CPU provider.
OPT_LEVEL = 1
USE_GPU = False
OPTIMIZER_MODEL_TYPE = "bert"
# ORT's BERT default: attention takes per-row lengths (ReduceSum of the mask), which lets the GPU kernels skip
# padding. It assumes right padding, which is what our tokenizer and server produce.
ATTENTION_MASK_FORMAT = "mask_index_end"

ATTENTION_OPS = ("Attention", "MultiHeadAttention", "QAttention")
# bundle.json's fused_operators: these keys, in this order, zeros included. ORT's own statistics
# (BertOnnxModel.get_fused_operator_statistics) give every one of them except the dynamic-quantisation ops
# (QAttention, which replaces Attention in an int8 graph, MatMulInteger, DynamicQuantizeMatMul), which it
# does not count and fused_operator_counts counts itself; its other keys (SimplifiedLayerNormalization,
# RotaryEmbedding, the QOrdered* ops, ...: never produced for our graphs) are left out, so the counts mean
# what they always have.
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


def optimize(onnx_path: Path, cfg: ElectraConfig) -> onnx.ModelProto:
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
            use_gpu=USE_GPU,
        )
    except Exception as e:  # fusion code asserts and raises freely on graphs it does not expect
        raise ElectraError(
            f"onnxruntime's transformer optimizer failed on {onnx_path.name}: {one_line(e)}"
        ) from e
    return optimized.model


def fused_operator_counts(model: onnx.ModelProto) -> dict[str, int]:
    """How many of each FUSED_OPS operator `model` holds, zeros too (see FUSED_OPS for what ORT counts)."""
    from onnxruntime.transformers.onnx_model_bert import BertOnnxModel

    graph = BertOnnxModel(model)
    stats = graph.get_fused_operator_statistics()
    return {op: stats[op] if op in stats else len(graph.get_nodes_by_op_type(op)) for op in FUSED_OPS}


def fused_summary(counts: dict[str, int]) -> str:
    """The fused operators as a person reads them: "2 Attention, 1 EmbedLayerNormalization, ..." (the ones
    present; "none" for a graph the optimizer could not fuse)."""
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "none"


def count_fused_operators(onnx_path: Path) -> dict[str, int]:
    """How many of each fused or quantised operator (FUSED_OPS) the graph at `onnx_path` holds, zeros too."""
    import onnx

    onnx_path = Path(onnx_path)
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and onnx's own errors share no useful base class
        raise InputError(
            f"{onnx_path}: not a readable ONNX model: {one_line(e)} "
            "(export the model again into a fresh directory)"
        ) from None
    return fused_operator_counts(model)


def check_attention_fused(counts: dict[str, int], layers: int, stage: str, model_dir: Path) -> None:
    """ElectraError unless every one of `layers` layers has a fused attention node."""
    fused = sum(counts.get(op, 0) for op in ATTENTION_OPS)
    if fused != layers:
        nonzero = {k: v for k, v in counts.items() if v}
        raise ElectraError(
            f"{model_dir}: attention fused in {fused} of {layers} layers {stage} (fused ops: {nonzero}); "
            "onnxruntime's optimizer no longer recognises the exported attention -- check the torch and "
            "onnxruntime versions against the tested ones"
        )
