"""Device, precision and autocast for every PyTorch stage (pre-training, fine-tuning, export parity).

CUDA runs in bf16 autocast with TF32 matmuls by default; CPU runs in fp32 (CPU autocast is slower for these
sizes, and fp16 has no CPU kernels worth using).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from electra.errors import InputError

if TYPE_CHECKING:  # torch is imported where it is used, so the CLI can read the choices below cheaply
    import torch

DEVICES = ("cpu", "cuda")
PRECISIONS = ("bf16", "fp16", "fp32")


def resolve_device(name: str | None) -> torch.device:
    """The asked-for device, or CUDA when available, else CPU; a one-line error for CUDA without a GPU."""
    import torch

    if name is not None and name not in DEVICES and not name.startswith("cuda:"):
        raise InputError(f"--device {name!r} is not one of {', '.join(DEVICES)}")
    device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return device


def resolve_precision(precision: str | None, device: torch.device) -> str:
    """bf16 on CUDA and fp32 on CPU unless asked otherwise; fp16 only where it has kernels (CUDA)."""
    if precision is None:
        return "bf16" if device.type == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "fp16" and device.type != "cuda":
        raise InputError("--precision fp16 needs a CUDA device; use fp32 (or bf16) on CPU")
    return precision


def autocast(device: torch.device, precision: str, cache: bool = True) -> AbstractContextManager:
    """The autocast context for a precision (a no-op for fp32). Reusable: enter it once per forward pass.

    `cache` False: no cache of the weights' low-precision copies, as a pass captured in a CUDA graph needs
    (PyTorch's CUDA-graph notes ask for cache_enabled=False under autocast)."""
    if precision == "fp32":
        return nullcontext()
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype, cache_enabled=cache)


def enable_tf32(device: torch.device) -> None:
    """TF32 matmuls and convolutions on CUDA: the paper-scale speed at no measurable cost to ELECTRA."""
    if device.type == "cuda":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
