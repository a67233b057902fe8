"""Tokenized example sets, and their batches as model inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from electra.padding import pad_rows
from electra.training.finetune.tasks import Example, TaskSpec


@dataclass
class EncodedExamples:
    """Tokenized examples, unpadded, so that each batch is padded only to its own longest sequence.

    `labels` are label ids (int64) for classification, floats (float32) for regression, None if unlabeled.
    """

    ids: list[list[int]]
    type_ids: list[list[int]]
    labels: np.ndarray | None

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, idx: np.ndarray, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
        arrays = pad_rows([self.ids[i] for i in idx], [self.type_ids[i] for i in idx], pad_id)
        return {name: torch.from_numpy(array).to(device) for name, array in arrays.items()}


def encode(tok: Any, examples: list[Example], task: TaskSpec, max_len: int) -> EncodedExamples:
    """Tokenize (pairs truncated longest-first to max_len) and map labels to the task's label ids."""
    tok.enable_truncation(max_length=max_len, strategy="longest_first")
    try:
        inputs = [(e.text, e.text_pair) if e.text_pair is not None else e.text for e in examples]
        encodings = tok.encode_batch(inputs)
    finally:
        # Leave the tokenizer as found: it is saved next to the model and would keep the setting.
        tok.no_truncation()
    labels = None
    if examples and examples[0].label is not None:
        if task.labels is None:
            labels = np.asarray([float(e.label) for e in examples], dtype=np.float32)
        else:
            index = {name: i for i, name in enumerate(task.labels)}
            labels = np.asarray([index[str(e.label)] for e in examples], dtype=np.int64)
    return EncodedExamples([e.ids for e in encodings], [e.type_ids for e in encodings], labels)
