"""The options of `electra pretrain`; `resolved()` fills in the per-size defaults of electra.sizes."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.sizes import SIZES

OBJECTIVES = ("electra", "mlm")
# How the generator and discriminator share embeddings (electra.training.pretrain.embedding_sharing).
EMBEDDING_SHARINGS = ("tied", "gdes", "none")
# The paper's: one embedding block for both models. Also what a checkpoint from before the option was.
DEFAULT_EMBEDDING_SHARING = "tied"
DEFAULT_GENERATOR_LR_SCALE = 1.0
DEFAULT_GENERATOR_LR_SCOPE = "all"
# The weight of the discriminator's loss against the generator's (the paper's lambda = 50); ObjectiveConfig's
# default too, so the objective and the option cannot disagree.
DEFAULT_DISC_WEIGHT = 50.0
# electra.training.optim.ADAMS, mirrored so the CLI's --help needs no torch (tests/test_recipes.py checks).
ADAMS = ("official", "torch")
# electra.training.optim.SCHEDULES, mirrored likewise: "hf" (warmup, then linear decay over the rest) or
# "official" (the official create_optimizer: linear decay over every step, times the warmup ramp).
SCHEDULES = ("official", "hf")
# What --generator-lr-scale slows: everything the generator owns, or its Transformer layers and head only (its
# embedding block, under gdes DeBERTaV3's shared E_G, keeps the full rate).
GENERATOR_LR_SCOPES = ("all", "layers")
# Options that count something and make no sense below one.
_AT_LEAST_ONE = (
    "steps",
    "batch_size",
    "grad_accum",
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
)


@dataclass
class PretrainConfig:
    data: Path
    out: Path
    size: str = "small"
    objective: str = "electra"
    embedding_sharing: str = DEFAULT_EMBEDDING_SHARING
    steps: int | None = None
    batch_size: int | None = None
    grad_accum: int = 1
    lr: float | None = None
    warmup_steps: int | None = None
    weight_decay: float = 0.01
    # "torch": torch.optim.AdamW, bias-corrected; "official": the official AdamWeightDecayOptimizer, without.
    # torch stays the default: a run begun before this option resumes with the optimizer it started with (the
    # checkpoint does not record it), and under the paper's 10k-step warmup the two differ only while the
    # learning rate is small (by 3% or less from step 3,000 on).
    adam: str = "torch"
    # "hf" stays the default for the same reason as torch's Adam: a run resumes with the schedule it began.
    schedule: str = "hf"
    max_grad_norm: float = 1.0
    generator_size: float | None = None
    # The generator's own parameters learn at this fraction of --lr (see models.optimizer_groups).
    generator_lr_scale: float = DEFAULT_GENERATOR_LR_SCALE
    generator_lr_scope: str = DEFAULT_GENERATOR_LR_SCOPE
    mask_prob: float | None = None
    disc_weight: float = DEFAULT_DISC_WEIGHT
    dropout: float | None = None
    stop_at: int | None = None
    precision: str | None = None
    compile: bool = False
    # On CUDA, the whole step (forward, backward, optimizer) is captured once as a CUDA graph and replayed
    # (training/pretrain/step.py); False runs it launch by launch. Where a graph cannot hold (several ranks,
    # fp16's loss scaler), the run says why in one log line and runs without.
    cuda_graphs: bool = True
    seed: int = 0
    resume: bool = False
    overwrite: bool = False
    init: Path | None = None
    device: str | None = None
    log_every: int = 10
    eval_every: int = 500
    eval_batches: int = 10
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved(self) -> PretrainConfig:
        """Fill the paper's defaults for the size; validate. Device and precision are checked where they are
        resolved (electra.training.device)."""
        if self.size not in SIZES:
            raise InputError(f"--size {self.size!r} is not one of {', '.join(SIZES)}")
        if self.objective not in OBJECTIVES:
            raise InputError(f"--objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        if self.embedding_sharing not in EMBEDDING_SHARINGS:
            choices = ", ".join(EMBEDDING_SHARINGS)
            raise InputError(f"--embedding-sharing {self.embedding_sharing!r} is not one of {choices}")
        if self.objective != "electra" and self.embedding_sharing != DEFAULT_EMBEDDING_SHARING:
            raise InputError("--embedding-sharing applies to --objective electra only (mlm has no generator)")
        if self.generator_lr_scope not in GENERATOR_LR_SCOPES:
            choices = ", ".join(GENERATOR_LR_SCOPES)
            raise InputError(f"--generator-lr-scope {self.generator_lr_scope!r} is not one of {choices}")
        if self.adam not in ADAMS:
            raise InputError(f"--adam {self.adam!r} is not one of {', '.join(ADAMS)}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"--schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        size = SIZES[self.size]
        steps = self.steps if self.steps is not None else size.pretrain_steps
        c = replace(
            self,
            data=Path(self.data),
            out=Path(self.out),
            init=Path(self.init) if self.init else None,
            steps=steps,
            batch_size=self.batch_size if self.batch_size is not None else size.pretrain_batch_size,
            lr=self.lr if self.lr is not None else size.pretrain_lr,
            mask_prob=self.mask_prob if self.mask_prob is not None else size.mask_prob,
            # The paper warms up for 10k of 1M steps; short runs warm up for their first 10%.
            warmup_steps=(
                self.warmup_steps if self.warmup_steps is not None else min(10_000, max(1, steps // 10))
            ),
            extra=dict(self.extra),
        )
        for name in _AT_LEAST_ONE:
            if getattr(c, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        if not 0 < c.mask_prob < 1:
            raise InputError(f"--mask-prob {c.mask_prob} must be in (0, 1)")
        if c.dropout is not None and not 0 <= c.dropout < 1:
            raise InputError(f"--dropout {c.dropout} must be in [0, 1)")
        if not 0 < c.generator_lr_scale <= 1:
            raise InputError(f"--generator-lr-scale {c.generator_lr_scale} must be in (0, 1]")
        if c.objective != "electra" and c.generator_lr_scale != 1.0:
            raise InputError(
                "--generator-lr-scale applies to --objective electra only (mlm has no generator)"
            )
        if not math.isfinite(c.lr) or c.lr <= 0:
            raise InputError(f"--lr {c.lr} must be a positive number")
        for name in ("weight_decay", "disc_weight", "max_grad_norm"):
            value = getattr(c, name)
            if not math.isfinite(value) or value < 0:
                raise InputError(f"--{name.replace('_', '-')} {value} must be a number >= 0")
        if c.warmup_steps < 0:
            raise InputError(f"--warmup-steps {c.warmup_steps} must be at least 0")
        if not 0 <= c.seed < 2**63:
            raise InputError(f"--seed {c.seed} must be in 0..2**63-1")
        return c

    def to_json(self) -> dict[str, Any]:
        """The options as JSON values (paths as strings), as run_config.json and checkpoints record them."""
        return json.loads(json.dumps(asdict(self), default=str))
