"""AdamW with ELECTRA's weight-decay exclusions and its warmup + linear-decay learning-rate schedule."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

# The official code excludes these from weight decay: biases and LayerNorm parameters.
NO_WEIGHT_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias")


def uses_weight_decay(name: str) -> bool:
    return not name.endswith(NO_WEIGHT_DECAY)


def param_groups(named: Iterable[tuple[str, nn.Parameter]], weight_decay: float) -> list[dict]:
    """Split parameters into decayed and non-decayed groups, each shared Parameter once."""
    seen: set[int] = set()
    decay, no_decay = [], []
    for name, p in named:
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (decay if uses_weight_decay(name) else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(
    module: nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    fused: bool | None = None,
) -> torch.optim.AdamW:
    """AdamW as in the paper (beta 0.9/0.999, eps 1e-6); the fused kernel when every parameter is on CUDA."""
    groups = param_groups(module.named_parameters(), weight_decay)
    if fused is None:
        fused = all(p.is_cuda for g in groups for p in g["params"])
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused or None)


def warmup_linear_decay(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Linear warmup from 0 to the peak over `warmup_steps`, then linear decay to 0 at `total_steps`."""

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The warmup + linear-decay schedule; its state_dict is plain JSON (the factor is rebuilt, not saved)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(warmup_steps, total_steps))
