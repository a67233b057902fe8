"""Training FLOPs as our counter counts them (electra.training.pretrain.diagnostics.flops, generator
included), replayed over a run's own batch order, so that arms of different cost can be given the same
compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def row_counts(data_dir: Path, mask_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Per training row: real tokens, and masked predictions by the objective's own rule."""
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.trainer import data_tokenizer

    data = PretrainingData.open(data_dir)
    _, sp = data_tokenizer(data)
    lengths = np.asarray(data.train.lengths, dtype=np.int64)
    ids = np.asarray(data.train.input_ids)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    candidates = (valid & ~np.isin(ids, (sp.pad, sp.cls, sp.sep))).sum(axis=1)
    masked = np.where(candidates > 0, np.maximum(1, np.round(candidates * mask_prob)), 0).astype(np.int64)
    return lengths, masked


def flops_by_step(
    data_dir: Path,
    size: str,
    objective: str,
    steps: int,
    batch_size: int,
    seed: int = 0,
    mask_prob: float | None = None,
    generator_size: float | None = None,
) -> np.ndarray:
    """Cumulative training FLOPs after each step (index s-1 for step s), replaying the run's batch order."""
    from electra.config import ElectraConfig, generator_config
    from electra.sizes import SIZES
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.diagnostics.flops import electra_step_flops
    from electra.training.pretrain.state.loader import GlobalBatchOrder

    data = PretrainingData.open(data_dir)
    lengths, masked = row_counts(data_dir, SIZES[size].mask_prob if mask_prob is None else mask_prob)
    disc = ElectraConfig.from_size(size, vocab_size=data.manifest["tokenizer"]["vocab_size"])
    gen = generator_config(disc, generator_size) if objective == "electra" else None
    order = GlobalBatchOrder(len(lengths), batch_size, seed)
    per_step = []
    for _ in range(steps):
        idx = order.next_global_batch()
        per_step.append(
            electra_step_flops(disc, gen, int(lengths[idx].sum()), data.max_seq_len, int(masked[idx].sum()))
        )
    return np.cumsum(per_step)


def steps_within(curve: np.ndarray, budget: float) -> int:
    """The steps a run with this cumulative-FLOPs curve takes to spend `budget` (the step that reaches it)."""
    if curve[-1] < budget:
        raise ValueError(f"the curve ends at {curve[-1]:.3g} FLOPs, short of {budget:.3g}")
    return int(np.searchsorted(curve, budget) + 1)
