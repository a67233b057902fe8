"""Export of discriminators and classifiers to fused ONNX bundles (the format itself: electra.bundle).

Modules, in the order an export runs them: `source` (the model directory and the export's arguments),
`torchscript` (torch.onnx.export), `fusion` (ONNX Runtime's transformer optimizer and the fused-operator
check), `precision` (fp16, int8), `parity` (PyTorch against ONNX Runtime), `export` (`export_bundle`).
"""


def one_line(e: BaseException) -> str:
    """An exception as one short line, for error messages that must fit on one."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."
