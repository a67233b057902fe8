"""Step 3 of an export: the fused graph at the bundle's precision.

fp32 as fused; fp16: `convert_float_to_float16(keep_io_types=True)` of the fused graph (inputs int64, logits
fp32); int8: `quantize_dynamic` (QInt8 weights) of the fused graph.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from electra.bundle import Precision, Quantization
from electra.errors import ElectraError
from electra.onnx import one_line

if TYPE_CHECKING:
    import onnx

# Only the compute-heavy ops: quantising the embedding Gathers saves disk but costs accuracy and no time.
INT8_OP_TYPES = ["MatMul", "Attention"]


def quantization(precision: Precision) -> Quantization | None:
    """What bundle.json records about the quantisation of a graph at `precision` (None: not quantised)."""
    if precision != "int8":
        return None
    return Quantization(method="quantize_dynamic", weight_type="QInt8", op_types=list(INT8_OP_TYPES))


def write_precision(fused: onnx.ModelProto, precision: Precision, work_dir: Path, out_path: Path) -> None:
    """Write the fused graph at `precision` to out_path (work_dir: room for an intermediate file)."""
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
            raise ElectraError(f"fp16 conversion of the fused graph failed: {one_line(e)}") from e
        half.save_model_to_file(str(out_path))
    else:
        fp32_path = work_dir / "fused_fp32.onnx"
        untie_shared_weights(fused)
        OnnxModel(fused).save_model_to_file(str(fp32_path))
        _quantize_int8(fp32_path, out_path)


def untie_shared_weights(model: onnx.ModelProto) -> None:
    """Give every node after the first that reads a shared initializer a copy of its own, in place.

    A generator's output layer reads its word embeddings (tied weights): the fused graph's
    EmbedLayerNormalization and the vocabulary Gemm share one initializer. quantize_dynamic turns that Gemm
    into a MatMul and transposes the weight in place, which leaves EmbedLayerNormalization with a transposed
    table the graph then fails to load with; with its own copy each node keeps the layout it expects.
    """
    from onnx import numpy_helper

    initializers = {init.name: init for init in model.graph.initializer}
    seen: set[str] = set()
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name not in initializers:
                continue
            if name not in seen:
                seen.add(name)
                continue
            copy = numpy_helper.from_array(numpy_helper.to_array(initializers[name]), f"{name}.{node.name}")
            model.graph.initializer.append(copy)
            node.input[i] = copy.name


def _quantize_int8(fp32_path: Path, out_path: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    try:
        with _quiet_quantizer():
            quantize_dynamic(
                fp32_path,
                out_path,
                op_types_to_quantize=INT8_OP_TYPES,
                weight_type=QuantType.QInt8,
                # The fused contrib ops (SkipLayerNormalization, ...) have no ONNX type inference; without a
                # default the quantizer cannot type their outputs and refuses the graph.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    except Exception as e:
        raise ElectraError(f"int8 dynamic quantisation of the fused graph failed: {one_line(e)}") from e


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
