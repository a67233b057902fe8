"""Step 1 of an export: `torch.onnx.export(..., dynamo=False)` (the TorchScript exporter) of the model on its
"math" attention path, whose matmul -> add mask -> softmax -> matmul sequence is BERT's op for op: the graph
ONNX Runtime's transformer optimizer recognises (electra.onnx.fusion). An encoder's graph (a discriminator,
classifier or tagger) answers its last hidden state too (HIDDEN_OUTPUT), which the server pools into sentence
vectors."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from electra.bundle import GENERATOR_INPUT_NAMES, HIDDEN_OUTPUT, INPUT_NAMES, MASKED_POSITIONS, OUTPUT_NAME
from electra.errors import ElectraError
from electra.onnx import one_line

if TYPE_CHECKING:
    import torch

    from electra.model import ElectraHeadModel

# The TorchScript exporter stops at opset 20; below 14 some of our ops have no exact ONNX form.
MIN_OPSET, MAX_OPSET = 14, 20
EXPORTER = "torch.onnx.export (TorchScript, dynamo=False)"
ATTENTION_IMPL = "math"


def export_torchscript(model: ElectraHeadModel, path: Path, opset: int) -> None:
    """Write `model` (fp32, eval) as an ONNX graph with dynamic batch and sequence axes to `path`.

    A generator's graph also takes MASKED_POSITIONS (flat indices into batch x sequence) and answers logits
    for those positions only (electra.model.ElectraGenerator's 1-D masked_positions). Any other model's graph
    answers the backbone's output, HIDDEN_OUTPUT, after its logits."""
    import torch

    batch, length = 2, 16
    input_ids = torch.full((batch, length), 5, dtype=torch.long)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, length // 2 :] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    axes = {0: "batch_size", 1: "sequence_length"}
    args: tuple[torch.Tensor, ...] = (input_ids, attention_mask, token_type_ids)
    names = list(INPUT_NAMES)
    outputs = [OUTPUT_NAME]
    dynamic_axes: dict[str, dict[int, str]] = {name: axes for name in INPUT_NAMES}
    exported: torch.nn.Module = model
    if model.kind == "generator":
        # A position in each row, the second row's in its padding-free part.
        args = (*args, torch.tensor([1, length + 3], dtype=torch.long))
        names = list(GENERATOR_INPUT_NAMES)
        dynamic_axes[MASKED_POSITIONS] = dynamic_axes[OUTPUT_NAME] = {0: "masked_positions"}
    else:
        dynamic_axes[OUTPUT_NAME] = {0: "batch_size"} if model.kind == "classifier" else axes
        exported = with_hidden_state(model)
        outputs.append(HIDDEN_OUTPUT)
        dynamic_axes[HIDDEN_OUTPUT] = axes

    model.set_attention_impl(ATTENTION_IMPL)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The TorchScript exporter is deprecated in favour of dynamo; we choose it on purpose (the module
            # docstring says why), so its DeprecationWarnings are noise here.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                exported,
                args,
                str(path),
                input_names=names,
                output_names=outputs,
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as e:  # the exporter raises many types (RuntimeError, OnnxExporterError, ...)
        raise ElectraError(f"torch.onnx.export (TorchScript) failed at opset {opset}: {one_line(e)}") from e
    finally:
        model.set_attention_impl("sdpa")


def with_hidden_state(model: ElectraHeadModel) -> torch.nn.Module:
    """`model` as a module whose forward answers (logits, last hidden state): what an encoder's graph answers,
    and what parity compares it with.

    The backbone's output is caught by a forward hook rather than by calling the backbone and the head apart,
    so the head runs exactly as the model's own forward runs it, whatever the kind."""
    import torch

    class WithHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            caught: list[torch.Tensor] = []
            hook = self.model.electra.register_forward_hook(lambda _m, _i, out: caught.append(out))
            try:
                logits = self.model(*inputs)
            finally:
                hook.remove()
            return logits, caught[0]

    # In the model's own mode: torch.onnx.export puts the exported module back in its mode afterwards, and a
    # new module's (training) would leave the model training, its dropout on.
    return WithHiddenState().train(model.training)
