"""Step 1 of an export: `torch.onnx.export(..., dynamo=False)` (the TorchScript exporter) of the model on its
"math" attention path, whose matmul -> add mask -> softmax -> matmul sequence is BERT's op for op: the graph
ONNX Runtime's transformer optimizer recognises (electra.onnx.fusion)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from electra.bundle import GENERATOR_INPUT_NAMES, INPUT_NAMES, MASKED_POSITIONS, OUTPUT_NAME
from electra.errors import ElectraError
from electra.onnx import one_line

if TYPE_CHECKING:
    from electra.model import ElectraHeadModel

# The TorchScript exporter stops at opset 20; below 14 some of our ops have no exact ONNX form.
MIN_OPSET, MAX_OPSET = 14, 20
EXPORTER = "torch.onnx.export (TorchScript, dynamo=False)"
ATTENTION_IMPL = "math"


def export_torchscript(model: ElectraHeadModel, path: Path, opset: int) -> None:
    """Write `model` (fp32, eval) as an ONNX graph with dynamic batch and sequence axes to `path`.

    A generator's graph also takes MASKED_POSITIONS (flat indices into batch x sequence) and answers logits
    for those positions only (electra.model.ElectraGenerator's 1-D masked_positions)."""
    import torch

    batch, length = 2, 16
    input_ids = torch.full((batch, length), 5, dtype=torch.long)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, length // 2 :] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    axes = {0: "batch_size", 1: "sequence_length"}
    args: tuple[torch.Tensor, ...] = (input_ids, attention_mask, token_type_ids)
    names = list(INPUT_NAMES)
    dynamic_axes: dict[str, dict[int, str]] = {name: axes for name in INPUT_NAMES}
    if model.kind == "generator":
        # A position in each row, the second row's in its padding-free part.
        args = (*args, torch.tensor([1, length + 3], dtype=torch.long))
        names = list(GENERATOR_INPUT_NAMES)
        dynamic_axes[MASKED_POSITIONS] = dynamic_axes[OUTPUT_NAME] = {0: "masked_positions"}
    else:
        dynamic_axes[OUTPUT_NAME] = {0: "batch_size"} if model.kind == "classifier" else axes

    model.set_attention_impl(ATTENTION_IMPL)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of dynamo; we choose it on purpose (the module
            # docstring says why), so its DeprecationWarnings are noise here.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                model,
                args,
                str(path),
                input_names=names,
                output_names=[OUTPUT_NAME],
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as e:  # the exporter raises many types (RuntimeError, OnnxExporterError, ...)
        raise ElectraError(f"torch.onnx.export (TorchScript) failed at opset {opset}: {one_line(e)}") from e
    finally:
        model.set_attention_impl("sdpa")
