"""Tokenized example sets, and their batches as model inputs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from electra.padding import pad_rows
from electra.training.finetune.recipe import PairTruncation
from electra.training.finetune.tasks import Example, TaskSpec


@dataclass
class EncodedExamples:
    """Tokenized examples, unpadded, so that each batch is padded only to its own longest sequence.

    `labels` are label ids (int64) for classification, floats (float32) for regression and relevance, a
    multi-hot (examples, labels) float32 matrix for multi-label classification, None if unlabeled. `groups`:
    each example's query, for a reranker's dev set (None elsewhere).
    """

    ids: list[list[int]]
    type_ids: list[list[int]]
    labels: np.ndarray | None
    groups: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, idx: np.ndarray, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
        arrays = pad_rows([self.ids[i] for i in idx], [self.type_ids[i] for i in idx], pad_id)
        return {name: torch.from_numpy(array).to(device) for name, array in arrays.items()}


log = logging.getLogger("electra.finetune")


def max_len_for(max_len: int, positions: int) -> int:
    """`max_len`, or the model's `positions` when it has fewer: a longer input fails inside the model (its
    position embeddings end there), so inputs are cut there instead, and a line says so."""
    if max_len > positions:
        log.warning(
            "--max-seq-len %d is more than the model's %d positions: inputs are cut at %d",
            max_len,
            positions,
            positions,
        )
        return positions
    return max_len


def encode(
    tok: Any,
    examples: list[Example],
    task: TaskSpec,
    max_len: int,
    pair_truncation: PairTruncation = "official",
) -> EncodedExamples:
    """Tokenize (too-long pairs cut to max_len as `pair_truncation` says) and map labels to label ids."""
    if examples and examples[0].text_pair is not None and pair_truncation == "official":
        encodings = _encode_pairs_official(tok, examples, max_len)
    else:
        tok.enable_truncation(max_length=max_len, strategy="longest_first")
        try:
            inputs = [(e.text, e.text_pair) if e.text_pair is not None else e.text for e in examples]
            encodings = tok.encode_batch(inputs)
        finally:
            # Leave the tokenizer as found: it is saved next to the model and would keep the setting.
            tok.no_truncation()
    labels = encode_labels(examples, task)
    groups = None
    if examples and examples[0].group is not None:
        groups = np.asarray([e.group for e in examples], dtype=np.int64)
    return EncodedExamples([e.ids for e in encodings], [e.type_ids for e in encodings], labels, groups)


def encode_labels(examples: list[Example], task: TaskSpec) -> np.ndarray | None:
    """The labels as the loss takes them (see EncodedExamples); None for unlabeled examples."""
    if not examples or examples[0].label is None:
        return None
    if task.one_output:
        return np.asarray([float(e.label) for e in examples], dtype=np.float32)  # type: ignore[arg-type]
    assert task.labels is not None
    index = {name: i for i, name in enumerate(task.labels)}
    if task.kind == "multi_label":
        hot = np.zeros((len(examples), len(task.labels)), dtype=np.float32)
        for row, e in enumerate(examples):
            for name in e.label:  # type: ignore[union-attr]
                hot[row, index[name]] = 1.0
        return hot
    return np.asarray([index[str(e.label)] for e in examples], dtype=np.int64)


def truncated_pair_lengths(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """The official `_truncate_seq_pair` (finetune/classification/classification_tasks.py): one token at a
    time off the longer segment, off the second on a tie. The tokenizers library's longest_first cuts the
    first on a tie, and splits the budget differently when the second segment is the longer one."""
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def _encode_pairs_official(tok: Any, examples: list[Example], max_len: int) -> list[Any]:
    """Each segment encoded alone, cut to the official lengths, then joined by the tokenizer's own template
    ([CLS] a [SEP] b [SEP] with its type ids), so the result differs from longest_first only in the cut."""
    budget = max_len - tok.num_special_tokens_to_add(is_pair=True)
    firsts = tok.encode_batch([e.text for e in examples], add_special_tokens=False)
    seconds = tok.encode_batch([e.text_pair or "" for e in examples], add_special_tokens=False)
    joined = []
    for a, b in zip(firsts, seconds, strict=True):
        len_a, len_b = truncated_pair_lengths(len(a), len(b), budget)
        a.truncate(len_a)
        b.truncate(len_b)
        joined.append(tok.post_process(a, b, add_special_tokens=True))
    return joined
