"""This process's place in a torchrun job (or a single process), and the few collectives the trainer needs.

Every collective is a no-op for a single process, so the trainer reads the same for one GPU and many.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from electra.training.device import resolve_device


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        """Rank 0, the one that logs and writes the run directory."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on one: a stop request must end every rank at the same step."""
        if self.world == 1:
            return flag
        t = torch.tensor(float(flag), device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """Sum over ranks, in place."""
        if self.world > 1:
            dist.all_reduce(t)
        return t

    def reduce_sums(self, acc: dict[str, torch.Tensor]) -> dict[str, float]:
        """Sum accumulated statistics over ranks in one all-reduce, then one host sync for all of them."""
        keys = sorted(acc)
        values = torch.stack([torch.as_tensor(acc[k], dtype=torch.float32, device=self.device) for k in keys])
        return dict(zip(keys, self.sum_(values).tolist(), strict=True))


def init_distributed(device: str | None) -> Dist:
    """Join the torchrun job described by the environment, if any. Under torchrun each process takes the
    GPU of its local rank whatever --device names, since torchrun starts one process per GPU."""
    resolved = resolve_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist(device=resolved)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if resolved.type == "cuda":
        resolved = torch.device("cuda", local_rank)
        torch.cuda.set_device(resolved)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if resolved.type == "cuda" else "gloo")
    return Dist(rank, world, local_rank, resolved)


def leave_distributed() -> None:
    """Tear the process group down before the interpreter exits: left to process exit, gloo's threads can be
    destroyed while still joinable, and the rank dies with SIGABRT ("terminate called without an active
    exception") after a run that finished."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
