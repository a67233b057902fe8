"""Training metrics over a logging window: the objective's sums, gradient norms, throughput, memory, MFU.

Statistics stay on the device as running sums until a record is due, then one all-reduce and one host sync
turn them into the window's ratios: logging every step costs a sync per step, not one per statistic.
"""

from __future__ import annotations

import resource
import time
from typing import Any

import torch

from electra.training.pretrain.objective import ratios
from electra.training.pretrain.state.distributed import Dist


class TrainMeter:
    def __init__(self, dist: Dist, peak_flops: float | None) -> None:
        self.dist = dist
        self.peak_flops = peak_flops  # of one device; None where unknown (CPU): no MFU then
        self.start_window()

    def start_window(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.start, self.tokens, self.flops = time.perf_counter(), 0, 0.0

    def _add(self, key: str, value: torch.Tensor) -> None:
        self.sums[key] = self.sums.get(key, 0) + value.detach().float()

    def add_micro_batch(self, stats: dict[str, torch.Tensor]) -> None:
        for key, value in stats.items():
            self._add(key, value)

    def add_step(self, grad_norm: torch.Tensor, tokens: int, flops: float) -> None:
        self._add("grad_norm_sum", grad_norm)
        self._add("steps", torch.tensor(1.0, device=self.dist.device))
        self.tokens += tokens
        self.flops += flops

    def record(self, step: int, tokens_seen: int, lr: float) -> dict[str, Any]:
        """The window's train record, the same on every rank (sums reduced over ranks); starts a new one."""
        elapsed = time.perf_counter() - self.start
        world = self.dist.world
        s = self.dist.reduce_sums(self.sums)
        steps = max(s.pop("steps", 1.0) / world, 1.0)
        rec: dict[str, Any] = {
            "split": "train",
            "step": step,
            "tokens": tokens_seen,
            "lr": lr,
            "grad_norm": s.get("grad_norm_sum", 0.0) / world / steps,
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
