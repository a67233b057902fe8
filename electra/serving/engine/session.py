"""ONNX Runtime sessions: opened for a device (CUDA libraries from pip preloaded, failures in one line) and
run for float32 logits, or any of the graph's outputs (IO binding on CUDA). Every model a bundle holds runs
through these functions."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from electra.bundle import OUTPUT_NAME
from electra.errors import InputError


def preload_cuda_libraries(ort: Any) -> str:
    """Load the CUDA and cuDNN libraries ONNX Runtime's CUDA provider needs from the nvidia-* pip packages
    (the ones PyTorch installs) when they are not on the loader's path, with onnxruntime.preload_dlls
    (1.21+); without it, a Python environment whose CUDA comes from pip, not from the system, serves on CPU.

    Returns what preload_dlls printed (the libraries it could not load; "" when all loaded), which explains a
    CUDA provider that then fails to start; it is kept off the console, where it would precede that error.
    """
    if not hasattr(ort, "preload_dlls"):
        return ""
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        try:
            ort.preload_dlls()
        except Exception as e:  # a best effort: the session's own start-up says whether CUDA works
            print(f"preload_dlls failed: {e}")
    return said.getvalue().strip()


def open_session(path: Path, device: str, threads: int) -> Any:
    """An ONNX Runtime session on `path` for `device`, "cpu" or "cuda" (InputError when it cannot be had)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3
    # Idle ORT worker threads spin by default, taking the cores the event loop needs for HTTP and
    # tokenization between batches; in a server they should sleep.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    preloaded = ""
    if device == "cuda":
        preloaded = preload_cuda_libraries(ort)
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise InputError(
                "--device cuda: this ONNX Runtime has no CUDA provider (install onnxruntime-gpu, "
                f"available: {', '.join(ort.get_available_providers())})"
            )
        providers: list[Any] = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    # ORT's own logger prints provider failures (a CUDA library missing, ...) to stderr in colour before
    # raising; the error below says it in one line instead.
    ort.set_default_logger_severity(4)
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
    except Exception as e:  # ORT raises its own exception types for corrupt or unsupported graphs.
        first = str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__
        raise InputError(f"{path}: ONNX Runtime cannot load it ({first})") from None
    if device == "cuda" and "CUDAExecutionProvider" not in session.get_providers():
        why = f" ({preloaded.splitlines()[0]})" if preloaded else ""
        raise InputError(
            f"{path.parent}: ONNX Runtime fell back to CPU; the CUDA provider failed to start{why}"
        )
    return session


def run_session(session: Any, feeds: dict[str, np.ndarray], device: str) -> np.ndarray:
    """The session's float32 logits for `feeds`."""
    return run_outputs(session, feeds, device, (OUTPUT_NAME,))[0]


def run_outputs(
    session: Any, feeds: dict[str, np.ndarray], device: str, names: tuple[str, ...]
) -> list[np.ndarray]:
    """The session's float32 outputs called `names`, in that order; only those are copied back."""
    if device == "cuda":
        # IO binding: inputs copied once, the outputs allocated on the device and copied back once,
        # instead of ORT staging every tensor through its default path.
        binding = session.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name in names:
            binding.bind_output(name, "cuda")
        session.run_with_iobinding(binding)
        return [np.asarray(out, dtype=np.float32) for out in binding.copy_outputs_to_cpu()]
    return [np.asarray(out, dtype=np.float32) for out in session.run(list(names), feeds)]
