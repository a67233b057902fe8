"""Batches of pre-training examples from a memory-mapped split, identical whatever the number of GPUs.

Each epoch is a permutation of the examples seeded by (seed, epoch). An optimizer step consumes the next
`global_batch` examples of it; that global batch is the same for any world size and gradient accumulation, and
each (rank, micro-step) takes its own slice: slice `micro * world + rank`. Only the slice is read from disk.
The position (epoch, offset) is all a checkpoint needs to resume exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from electra.training.data.dataset import SplitArrays
from electra.training.pretrain.objective import num_predictions


@dataclass
class DataPosition:
    epoch: int = 0
    offset: int = 0  # examples of this epoch's permutation already consumed

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> DataPosition:
        return cls(epoch=int(d["epoch"]), offset=int(d["offset"]))


class GlobalBatchOrder:
    """Global batches of example indices; an epoch's tail shorter than a batch is skipped (fixed shapes).

    Checkpointable like the other training parts: its state is the data position.
    """

    def __init__(
        self, num_examples: int, global_batch: int, seed: int, position: DataPosition | None = None
    ) -> None:
        if num_examples < global_batch:
            raise ValueError(f"{num_examples} examples cannot fill one batch of {global_batch}")
        self.num_examples = num_examples
        self.global_batch = global_batch
        self.seed = seed
        self.position = position or DataPosition()
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)
            self._perm_epoch = epoch
        return self._perm

    def next_global_batch(self) -> np.ndarray:
        pos = self.position
        if pos.offset + self.global_batch > self.num_examples:
            pos.epoch, pos.offset = pos.epoch + 1, 0
        idx = self._permutation(pos.epoch)[pos.offset : pos.offset + self.global_batch]
        pos.offset += self.global_batch
        return idx

    def state_dict(self) -> dict[str, int]:
        return self.position.to_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = DataPosition.from_dict(state)


def load_rows(split: SplitArrays, indices: np.ndarray, device: torch.device | str) -> dict[str, torch.Tensor]:
    """Read rows (sorted for locality on disk, then put back in order) into model-ready tensors."""
    order = np.argsort(indices, kind="stable")
    sorted_idx = indices[order]
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    input_ids = np.asarray(split.input_ids[sorted_idx], dtype=np.int64)[inverse]
    segment_ids = np.asarray(split.segment_ids[sorted_idx], dtype=np.int64)[inverse]
    lengths = np.asarray(split.lengths[sorted_idx], dtype=np.int64)[inverse]
    attention_mask = np.arange(input_ids.shape[1])[None, :] < lengths[:, None]
    pin = torch.device(device).type == "cuda"
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "token_type_ids": torch.from_numpy(segment_ids),
        "attention_mask": torch.from_numpy(attention_mask.astype(np.int64)),
    }
    if pin:
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return batch


def micro_slice(
    global_indices: np.ndarray, micro: int, rank: int, world: int, micro_batch: int
) -> np.ndarray:
    start = (micro * world + rank) * micro_batch
    return global_indices[start : start + micro_batch]


def batch_counts(
    split: SplitArrays, rows: np.ndarray, special_ids: tuple[int, ...], p: float
) -> tuple[int, int]:
    """(real tokens, masked predictions) of a global batch, by the objective's own counting rule.

    Known from the data alone, before any forward pass: the losses are normalised by them so that a step's
    gradient does not depend on how the batch is split over ranks and micro-steps.
    """
    rows = np.sort(rows)  # ascending indices read the memmap sequentially
    input_ids = np.asarray(split.input_ids[rows])
    lengths = np.asarray(split.lengths[rows], dtype=np.int64)
    valid = np.arange(input_ids.shape[1])[None, :] < lengths[:, None]
    candidates = (valid & ~np.isin(input_ids, special_ids)).sum(axis=1)
    # Read back through numpy: a host value, never a tensor read (the step reads nothing from tensors).
    return int(lengths.sum()), int(num_predictions(torch.from_numpy(candidates), p).numpy().sum())
