"""Saving and restoring the whole state of a pre-training run in one call each.

Every stateful part of a run (model, optimizer, scheduler, grad scaler, global RNGs, data position, step and
token counters) follows torch's state_dict / load_state_dict protocol. TrainState gathers them and decides
where each lands in a checkpoint (checkpoint.py, the storage format); CheckpointManager owns the run's
checkpoints directory, picks the newest valid checkpoint and refuses one from an incompatible run. A part
added to TrainState is saved and resumed without touching the trainer's loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from electra.errors import InputError
from electra.files import CHECKPOINTS_DIR
from electra.training.pretrain.config import (
    DEFAULT_EMBEDDING_SHARING,
    DEFAULT_GENERATOR_LR_SCALE,
    DEFAULT_GENERATOR_LR_SCOPE,
)
from electra.training.pretrain.diagnostics.collapse import CollapseWatch
from electra.training.pretrain.state.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    log_message,
    save_checkpoint,
)
from electra.training.pretrain.state.rng import GlobalRng

# Keys of a TrainState's state_dict that get files of their own; every other key goes to trainer_state.json.
MODEL_STATE = "model"  # -> model.safetensors
OPTIMIZER_STATE = "optimizer"  # -> optimizer.pt
RNG_STATE = "rng"  # -> rng.pt
# What a checkpoint written before a run setting existed was trained with.
RUN_DEFAULTS = {
    "embedding_sharing": DEFAULT_EMBEDDING_SHARING,
    "generator_lr_scale": DEFAULT_GENERATOR_LR_SCALE,
    "generator_lr_scope": DEFAULT_GENERATOR_LR_SCOPE,
}


class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any], /) -> Any: ...


@dataclass
class Progress:
    """Optimizer steps taken and real tokens seen."""

    step: int = 0
    tokens: int = 0

    def state_dict(self) -> dict[str, int]:
        return {"step": self.step, "tokens": self.tokens}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.tokens = int(state["step"]), int(state["tokens"])


@dataclass
class TrainState:
    """Every part of a run that a checkpoint holds, laid out as checkpoints have always been laid out."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler | None
    data: Stateful  # the data position
    progress: Progress
    rng: Stateful = field(default_factory=GlobalRng)
    collapse: Stateful = field(default_factory=CollapseWatch)

    def state_dict(self) -> dict[str, Any]:
        return {
            MODEL_STATE: dict(self.model.state_dict()),
            OPTIMIZER_STATE: self.optimizer.state_dict(),
            RNG_STATE: self.rng.state_dict(),
            **self.progress.state_dict(),
            "data_position": self.data.state_dict(),
            "scheduler": _plain(self.scheduler.state_dict()),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "collapse_watch": self.collapse.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state[MODEL_STATE], strict=True)
        self.optimizer.load_state_dict(state[OPTIMIZER_STATE])
        self.scheduler.load_state_dict(state["scheduler"])
        # A checkpoint of an fp32 run resumed in fp16 has no scaler state: the scaler starts fresh.
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.progress.load_state_dict(state)
        self.data.load_state_dict(state["data_position"])
        if state.get(RNG_STATE) is not None:
            self.rng.load_state_dict(state[RNG_STATE])
        # Checkpoints written before the watch existed: it starts afresh.
        if state.get("collapse_watch") is not None:
            self.collapse.load_state_dict(state["collapse_watch"])


def _plain(value: Any) -> Any:
    """A state as JSON values: a scheduler over learning rates held on the device
    (optim.device_learning_rates) keeps its last rates as 0-d tensors; trainer_state.json holds the floats it
    always has."""
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class CheckpointManager:
    """RUN/checkpoints of one run. `run` holds what a resumed run must share with the saved one (it sets the
    meaning of the weights and of the data position); `config` is recorded with every checkpoint."""

    def __init__(
        self,
        run_dir: Path,
        run: dict[str, Any],
        config: dict[str, Any],
        keep_last: int,
        log: Callable[[str], None] = log_message,
    ) -> None:
        self.run_dir, self.run, self.config = Path(run_dir), run, config
        self.keep_last, self.log = keep_last, log

    def save(self, step: int, state: Stateful) -> Path:
        """Write step-N atomically, then prune to the newest `keep_last`; returns its path."""
        parts = dict(state.state_dict())
        tensors = parts.pop(MODEL_STATE)
        optimizer = parts.pop(OPTIMIZER_STATE, None)
        rng = parts.pop(RNG_STATE, None)
        trainer_state = {**parts, "run": self.run, "config": self.config}
        return save_checkpoint(
            self.run_dir, step, tensors, optimizer, trainer_state, rng, keep_last=self.keep_last
        )

    def restore(self, state: Stateful) -> Path | None:
        """Load the newest valid checkpoint into `state` (a corrupt newer one is logged and skipped), return
        its path; None, leaving `state` as it is, when the run has no valid checkpoint."""
        path = latest_checkpoint(self.run_dir, log=self.log)
        if path is None:
            self.log(f"no checkpoint in {self.run_dir / CHECKPOINTS_DIR}; starting from scratch")
            return None
        ckpt = load_checkpoint(path)
        saved = ckpt.trainer_state
        self._check_same_run(path, saved["run"])
        state.load_state_dict(
            {**saved, MODEL_STATE: ckpt.tensors, OPTIMIZER_STATE: ckpt.optimizer, RNG_STATE: ckpt.rng}
        )
        self.log(f"resumed from {path} at step {int(saved['step'])}")
        return path

    def _check_same_run(self, path: Path, saved: dict[str, Any]) -> None:
        for key, mine in self.run.items():
            theirs = saved.get(key, RUN_DEFAULTS.get(key))
            if theirs != mine:
                raise InputError(
                    f"cannot resume {path}: it was trained with {key}={theirs}, now {mine}; "
                    "use the original settings or another --out"
                )
