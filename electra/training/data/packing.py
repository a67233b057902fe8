"""Packing tokenized sentences into pre-training examples, as the official ELECTRA data builder does.

google-research/electra `build_pretraining_dataset.py` (ExampleBuilder) accumulates consecutive sentences of
a document until they reach a target length, then splits them into segment A and B at a sentence boundary:
`[CLS] A [SEP] B [SEP]`. 10% of examples are single-segment (A only, like classification inputs), and after
5% of examples the next target length is drawn uniformly from [5, max_len] so that the model also sees short
inputs. No example crosses a document.

Where we deliberately differ from the official code:
- Once a sentence has gone to segment B, every later sentence of the example goes to B too. The official
  loop can put a short later sentence back into A, so A would be two non-adjacent pieces of text.
- A sentence longer than `max_len - 2` tokens is cut into pieces of that size first, instead of being
  truncated to fit; with paragraph-per-line corpora the official truncation silently drops whole paragraphs.

Everything here works on integers (sentence starts and lengths into one flat token array), so that the
sequential decisions are a cheap loop and building the arrays is vectorised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

SINGLE_SEGMENT_PROB = 0.1
SHORT_SEQ_PROB = 0.05
MIN_RANDOM_TARGET = 5


@dataclass(frozen=True)
class Packed:
    """Examples as spans of the flat token array: segment A = [a_start, a_start + a_len), B likewise."""

    a_start: np.ndarray
    a_len: np.ndarray
    b_start: np.ndarray
    b_len: np.ndarray
    truncated_tokens: int
    random_target_examples: int

    def __len__(self) -> int:
        return len(self.a_len)


def cut_long_sentences(
    starts: np.ndarray, lengths: np.ndarray, doc_ids: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop empty sentences and cut those over `cap` tokens into consecutive pieces of at most `cap`."""
    keep = lengths > 0
    starts, lengths, doc_ids = starts[keep], lengths[keep], doc_ids[keep]
    pieces = (lengths + cap - 1) // cap
    if len(pieces) == 0 or pieces.max(initial=1) == 1:
        return starts, lengths, doc_ids
    total = int(pieces.sum())
    owner = np.repeat(np.arange(len(pieces)), pieces)
    first_piece = np.cumsum(pieces) - pieces
    k = np.arange(total) - first_piece[owner]  # which piece of its sentence each piece is
    new_starts = starts[owner] + k * cap
    new_lengths = np.minimum(cap, lengths[owner] - k * cap)
    return new_starts, new_lengths, doc_ids[owner]


class ExampleBuilder:
    """The official builder's state machine over sentence lengths. The target length carries across calls."""

    def __init__(self, max_len: int, rng: random.Random) -> None:
        if max_len < 8:
            raise ValueError("max_len must be at least 8")
        self.max_len = max_len
        self.rng = rng
        self.target = max_len
        self.a_start: list[int] = []
        self.a_len: list[int] = []
        self.b_start: list[int] = []
        self.b_len: list[int] = []
        self.truncated = 0
        self.random_targets = 0

    def add_document(self, starts: list[int], lengths: list[int]) -> None:
        """Pack one document's sentences (consecutive in the flat token array)."""
        first = 0
        total = 0
        for i, n in enumerate(lengths):
            total += n
            if total >= self.target:
                self._emit(starts, lengths, first, i + 1, total)
                first, total = i + 1, 0
        if total:
            self._emit(starts, lengths, first, len(lengths), total)

    def _emit(self, starts: list[int], lengths: list[int], lo: int, hi: int, total: int) -> None:
        rng, max_len = self.rng, self.max_len
        a_target = 100_000 if rng.random() < SINGLE_SEGMENT_PROB else (self.target - 3) // 2
        a = 0
        split = hi
        for i in range(lo, hi):
            n = lengths[i]
            # Sentence i joins A if A is empty, if it fits under A's target, or half the time when it would
            # overshoot A while A is still short (official rule); otherwise it and all later ones go to B.
            if a == 0 or a + n < a_target or (a < a_target and rng.random() < 0.5):
                a += n
            else:
                split = i
                break
        b = total - a
        a_kept = min(a, max_len - 2)
        b_kept = min(b, max(0, max_len - a_kept - 3))
        self.truncated += (a - a_kept) + (b - b_kept)
        self.a_start.append(starts[lo])
        self.a_len.append(a_kept)
        self.b_start.append(starts[split] if split < hi else 0)
        self.b_len.append(b_kept)
        if rng.random() < SHORT_SEQ_PROB:
            self.target = rng.randint(MIN_RANDOM_TARGET, max_len)
            self.random_targets += 1
        else:
            self.target = max_len

    def result(self) -> Packed:
        return Packed(
            a_start=np.asarray(self.a_start, dtype=np.int64),
            a_len=np.asarray(self.a_len, dtype=np.int64),
            b_start=np.asarray(self.b_start, dtype=np.int64),
            b_len=np.asarray(self.b_len, dtype=np.int64),
            truncated_tokens=self.truncated,
            random_target_examples=self.random_targets,
        )


def _scatter_spans(
    out: np.ndarray, tokens: np.ndarray, rows: np.ndarray, col0: np.ndarray, src0: np.ndarray, n: np.ndarray
) -> None:
    """out[rows[i], col0[i] + k] = tokens[src0[i] + k] for k < n[i], for all i at once."""
    total = int(n.sum())
    if total == 0:
        return
    owner = np.repeat(np.arange(len(n)), n)
    k = np.arange(total) - (np.cumsum(n) - n)[owner]
    out[rows[owner], col0[owner] + k] = tokens[src0[owner] + k]


def build_arrays(
    packed: Packed, tokens: np.ndarray, max_len: int, cls_id: int, sep_id: int, pad_id: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Materialise examples as fixed-width arrays: input_ids [N, L], segment_ids [N, L] uint8, lengths [N]."""
    n = len(packed)
    rows = np.arange(n)
    a_len, b_len = packed.a_len, packed.b_len
    has_b = b_len > 0
    lengths = 2 + a_len + np.where(has_b, b_len + 1, 0)
    input_ids = np.full((n, max_len), pad_id, dtype=dtype)
    input_ids[:, 0] = cls_id
    _scatter_spans(input_ids, tokens, rows, np.ones(n, dtype=np.int64), packed.a_start, a_len)
    input_ids[rows, a_len + 1] = sep_id
    _scatter_spans(input_ids, tokens, rows, a_len + 2, packed.b_start, np.where(has_b, b_len, 0))
    input_ids[rows[has_b], lengths[has_b] - 1] = sep_id
    cols = np.arange(max_len)[None, :]
    segment_ids = ((cols >= (a_len + 2)[:, None]) & (cols < lengths[:, None]) & has_b[:, None]).astype(
        np.uint8
    )
    return input_ids, segment_ids, lengths.astype(np.uint16 if max_len < 65536 else np.uint32)
