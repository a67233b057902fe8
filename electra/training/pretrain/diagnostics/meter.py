"""Training metrics over a logging window: the objective's sums, gradient norms, throughput, memory, MFU.

The step adds its statistics into one device vector (add_stats, add_grad_norm: in place, inside a compiled or
CUDA-graphed step too); nothing is read on the host until a record is due, when one all-reduce and one host
sync turn the window's sums into its ratios: the steps between two records never wait for the device.
"""

from __future__ import annotations

import resource
import time
from typing import Any

import torch

from electra.training.pretrain.objective import STAT_KEYS, ratios
from electra.training.pretrain.state.distributed import Dist

# The device vector's entries: the objective's statistics, then the sum of the steps' gradient norms.
KEYS = (*STAT_KEYS, "grad_norm_sum")


class TrainMeter:
    def __init__(self, dist: Dist, peak_flops: float | None) -> None:
        self.dist = dist
        self.peak_flops = peak_flops  # of one device; None where unknown (CPU): no MFU then
        # Allocated once and zeroed in place: a captured step keeps adding into this very tensor.
        self.sums = torch.zeros(len(KEYS), device=dist.device)
        self.start_window()

    def start_window(self) -> None:
        self.sums.zero_()
        self.start, self.steps, self.tokens, self.flops = time.perf_counter(), 0, 0, 0.0

    def add_stats(self, stats: dict[str, torch.Tensor]) -> None:
        """A micro-batch's sums (STAT_KEYS), added on the device."""
        self.sums[: len(STAT_KEYS)] += torch.stack([stats[k].detach().float() for k in STAT_KEYS])

    def add_grad_norm(self, grad_norm: torch.Tensor) -> None:
        self.sums[len(STAT_KEYS)] += grad_norm.detach().float()

    def add_step(self, tokens: int, flops: float) -> None:
        """Host-side counts of a finished step (known from the data: no device value is read)."""
        self.steps += 1
        self.tokens += tokens
        self.flops += flops

    def record(self, step: int, tokens_seen: int, lr: float) -> dict[str, Any]:
        """The window's train record, the same on every rank (sums reduced over ranks); starts a new one."""
        world = self.dist.world
        # The reduction waits for the device, so the window's time below counts the work it queued.
        s = self.dist.reduce_sums(dict(zip(KEYS, self.sums.unbind(), strict=True)))
        elapsed = time.perf_counter() - self.start
        steps = max(self.steps, 1)
        rec: dict[str, Any] = {
            "split": "train",
            "step": step,
            "tokens": tokens_seen,
            "lr": lr,
            "grad_norm": s.pop("grad_norm_sum") / world / steps,
        }
        rec.update(ratios(s))
        rec["tokens_per_s"] = self.tokens / elapsed
        rec["peak_memory_bytes"] = peak_memory_bytes(self.dist.device)
        if self.peak_flops is not None:
            rec["mfu"] = self.flops / elapsed / (self.peak_flops * world)
        self.start_window()
        return rec


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def progress_postfix(r: dict[str, Any]) -> str:
    """The progress bar's summary of a train record."""
    parts = [f"mlm {r['mlm_loss']:.3f}"]
    if "disc_loss" in r:
        parts += [
            f"disc {r['disc_loss']:.3f}",
            f"acc {r['disc_accuracy']:.3f}",
            f"rec {r['disc_recall']:.2f}",
        ]
    parts.append(f"{r['tokens_per_s']:,.0f} tok/s")
    return " ".join(parts)
