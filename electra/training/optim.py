"""Adam with ELECTRA's weight-decay exclusions, in the official (uncorrected) or torch's (bias-corrected)
form, and the two warmup + linear-decay learning-rate schedules.

The official code is google-research/electra `model/optimization.py`: `create_optimizer` (schedule, clipping)
and `AdamWeightDecayOptimizer` (the update).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

import torch
from torch import nn

# The official code excludes these from weight decay: biases and LayerNorm parameters.
NO_WEIGHT_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias")

Adam = Literal["official", "torch"]
ADAMS: tuple[Adam, ...] = ("official", "torch")
Schedule = Literal["official", "hf"]
SCHEDULES: tuple[Schedule, ...] = ("official", "hf")


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


class AdamWeightDecay(torch.optim.Optimizer):
    """The official `AdamWeightDecayOptimizer._apply_gradients`, step for step.

    m and v are the plain moving averages, never bias-corrected, so the first updates are up to ~6x those of
    torch's AdamW (the ratio is (1 - b1^t) / sqrt(1 - b2^t): 3.2 at step 1, 6.5 at step 10, 1.26 at 1,000);
    update = m / (sqrt(v) + eps) + weight_decay * param, param -= lr * update. The state keys are AdamW's
    (step, exp_avg, exp_avg_sq), so a state dict of one loads into the other.
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter] | Iterable[dict],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                state = self.state[p]
                if not state:
                    # On the parameter's device, so that a step replayed as a CUDA graph counts too.
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
            grads = [p.grad for p in params]
            m = [self.state[p]["exp_avg"] for p in params]
            v = [self.state[p]["exp_avg_sq"] for p in params]
            # Multi-tensor ops (one kernel per op for the whole group, as torch's own optimizers use them).
            torch._foreach_mul_(m, b1)
            torch._foreach_add_(m, grads, alpha=1 - b1)
            torch._foreach_mul_(v, b2)
            torch._foreach_addcmul_(v, grads, grads, value=1 - b2)
            denom = torch._foreach_sqrt(v)
            torch._foreach_add_(denom, eps)
            update = torch._foreach_div(m, denom)
            if wd:
                torch._foreach_add_(update, params, alpha=wd)
            if isinstance(lr, torch.Tensor):
                # A learning rate held on the device (device_learning_rates) is read there, with no sync.
                torch._foreach_mul_(update, lr)
                torch._foreach_sub_(params, update)
            else:
                torch._foreach_add_(params, update, alpha=-lr)
        return loss


def adam(
    groups: list[dict],
    lr: float,
    kind: Adam,
    eps: float,
    fused: bool | None = None,
    capturable: bool = False,
) -> torch.optim.Optimizer:
    """The official uncorrected Adam or torch's AdamW: its fused kernel when every parameter is on one device
    type that has it (CUDA, and the CPU since torch 2.4), as Hugging Face's Trainer defaults to
    (`adamw_torch_fused`); on small models the per-tensor loop otherwise costs as much as a layer.
    `capturable`: AdamW's state stays on the device, so that its step can be captured in a CUDA graph (the
    official Adam's always does)."""
    if kind not in ADAMS:
        raise ValueError(f"adam must be one of {ADAMS}, got {kind!r}")
    if kind == "official":
        return AdamWeightDecay(groups, lr=lr, betas=(0.9, 0.999), eps=eps)
    if fused is None:
        fused = _fused_available([p for g in groups for p in g["params"]])
    return torch.optim.AdamW(
        groups, lr=lr, betas=(0.9, 0.999), eps=eps, fused=fused or None, capturable=capturable
    )


def device_learning_rates(optimizer: torch.optim.Optimizer) -> None:
    """Hold each group's learning rate in a 0-d float32 tensor on its parameters' device, from now on.

    A step that is compiled or replayed as a CUDA graph cannot read a Python float that changes every step
    (compiled, each new value recompiles; captured, the first value stays forever); a tensor is read where it
    lies, and the scheduler writes each new value into it in place (fill_, no host sync). The tensors
    survive load_state_dict, which also puts back the kernel this optimizer was built with (fused,
    capturable: the machine decides them, not the checkpoint); state_dict saves plain floats, so checkpoints
    read the same either way. Build the scheduler before calling this: its base rates must stay floats.
    """
    _lr_tensors(optimizer)
    optimizer.register_load_state_dict_post_hook(_lr_tensors)
    optimizer.register_state_dict_post_hook(_lr_floats)


def _lr_tensors(optimizer: torch.optim.Optimizer) -> None:
    kernel = {k: optimizer.defaults[k] for k in ("fused", "capturable", "foreach") if k in optimizer.defaults}
    on_device = isinstance(optimizer, AdamWeightDecay) or kernel.get("fused") or kernel.get("capturable")
    for group in optimizer.param_groups:
        device = group["params"][0].device
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
        group.update(kernel)
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if on_device and isinstance(state.get("step"), torch.Tensor):
                state["step"] = state["step"].to(dtype=torch.float32, device=p.device)


def _lr_floats(optimizer: torch.optim.Optimizer, state: dict) -> dict:
    for group in state["param_groups"]:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"] = float(group["lr"])
    return state


def _fused_available(params: list[nn.Parameter]) -> bool:
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    types = {p.device.type for p in params}
    floating = all(p.is_floating_point() for p in params)
    return len(types) == 1 and types <= set(_get_fused_kernels_supported_devices()) and floating


def build_optimizer(
    module: nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    eps: float = 1e-6,
    kind: Adam = "torch",
    fused: bool | None = None,
) -> torch.optim.Optimizer:
    """Adam as in the paper (beta 0.9/0.999, eps 1e-6), weight decay off for biases and LayerNorm."""
    return adam(param_groups(module.named_parameters(), weight_decay), lr, kind, eps, fused)


def warmup_linear_decay(warmup_steps: float, total_steps: int) -> Callable[[int], float]:
    """Hugging Face's get_linear_schedule_with_warmup: linear warmup from 0 to the peak over `warmup_steps`,
    then linear decay to 0 over the remaining total - warmup steps."""

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1.0, total_steps - warmup_steps))

    return factor


def official_warmup_decay(warmup_steps: float, total_steps: int) -> Callable[[int], float]:
    """The official `create_optimizer`: polynomial_decay (power 1) from the peak to 0 over all total steps,
    multiplied by min(1, step / warmup). Same peak and end as the HF shape, which is up to 1 / (1 - w) times
    higher in between (w the warmup fraction: 1.11x at 10%)."""

    def factor(step: int) -> float:
        decay = 1.0 - min(step, total_steps) / max(1, total_steps)
        return decay * (min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0)

    return factor


SCHEDULE_FACTORS: dict[Schedule, Callable[[float, int], Callable[[int], float]]] = {
    "official": official_warmup_decay,
    "hf": warmup_linear_decay,
}


def warmup_steps_for(schedule: Schedule, fraction: float, total_steps: int) -> float:
    """Warmup length from a fraction of the run, rounded as each side does: the official code keeps
    `num_train_steps * warmup_proportion` as a float; HF's Trainer takes math.ceil of it."""
    exact = fraction * total_steps
    return exact if schedule == "official" else float(math.ceil(exact))


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: float, total_steps: int, shape: Schedule = "hf"
) -> torch.optim.lr_scheduler.LambdaLR:
    """A warmup + linear-decay schedule; its state_dict is plain JSON (the factor is rebuilt, not saved).

    Step k's update uses factor(k), k from 0 (so the first update has lr 0 during warmup), as in both
    official code (global_step before the increment) and transformers."""
    if shape not in SCHEDULE_FACTORS:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {shape!r}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, SCHEDULE_FACTORS[shape](warmup_steps, total_steps))
