"""Tagged sentences as model inputs: word pieces, one label per word on its first piece.

As in the official tagging tasks (google-research/electra finetune/tagging/tagging_tasks.py) and
transformers' run_ner, a word's label trains and predicts on its first word piece; the other pieces, [CLS]
and [SEP] carry IGNORE, which the loss skips. A word whose first piece falls past the length limit has no
prediction: it counts as "O" (and a missed entity if it had one), so a limit that is too short shows in
the metrics instead of hiding the words it cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from electra.padding import pad_rows
from electra.training.finetune.tagging_data import OUTSIDE, TaggedSentence, repair_iob2

IGNORE = -100  # torch's cross_entropy ignore_index default, and transformers' label padding
# Dev, test and predicted sentences are encoded up to the model's own limit (at most this), whatever the
# training length: CoNLL has sentences over 128 word pieces, and a word cut off is only ever "O".
EVAL_MAX_LEN = 512

log = logging.getLogger(__name__)


@dataclass
class EncodedSentences:
    """Tokenized sentences, unpadded; `labels` None when unlabeled."""

    ids: list[list[int]]
    type_ids: list[list[int]]
    first_piece: list[np.ndarray]  # per sentence: each word's first-piece position, -1 when cut off
    labels: list[np.ndarray] | None  # per sentence: a label id per token, IGNORE where none

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, idx: np.ndarray, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
        arrays = pad_rows([self.ids[i] for i in idx], [self.type_ids[i] for i in idx], pad_id)
        return {name: torch.from_numpy(array).to(device) for name, array in arrays.items()}

    def label_batch(self, idx: np.ndarray, device: torch.device) -> torch.Tensor:
        """(batch, longest) label ids, IGNORE in padding: the targets of `batch(idx)`."""
        assert self.labels is not None
        rows = [self.labels[i] for i in idx]
        out = np.full((len(rows), max(len(r) for r in rows)), IGNORE, dtype=np.int64)
        for k, row in enumerate(rows):
            out[k, : len(row)] = row
        return torch.from_numpy(out).to(device)


def encode_sentences(
    tok: Any, sentences: list[TaggedSentence], labels: tuple[str, ...] | None, max_len: int
) -> EncodedSentences:
    """Word pieces of every sentence (truncated to max_len) and, with `labels`, their label ids."""
    tok.enable_truncation(max_length=max_len)
    try:
        encodings = tok.encode_batch([s.words for s in sentences], is_pretokenized=True)
    finally:
        # Leave the tokenizer as found: it is saved next to the model and would keep the setting.
        tok.no_truncation()
    index = {tag: i for i, tag in enumerate(labels)} if labels is not None else None
    first_piece, label_rows, cut = [], [], 0
    for sentence, enc in zip(sentences, encodings, strict=True):
        first = np.full(len(sentence.words), -1, dtype=np.int64)
        for position, word in enumerate(enc.word_ids):
            if word is not None and first[word] < 0:
                first[word] = position
        cut += int((first < 0).sum())
        first_piece.append(first)
        if index is not None and sentence.tags is not None:
            row = np.full(len(enc.ids), IGNORE, dtype=np.int64)
            kept = first >= 0
            row[first[kept]] = [index[t] for t, k in zip(sentence.tags, kept, strict=True) if k]
            label_rows.append(row)
    if cut:
        log.warning(
            "%d words of %d sentences have no word piece within --max-seq-len %d (cut off, or empty "
            "after tokenization); they count as %s",
            cut,
            len(sentences),
            max_len,
            OUTSIDE,
        )
    labeled = index is not None and all(s.tags is not None for s in sentences)
    return EncodedSentences(
        [e.ids for e in encodings],
        [e.type_ids for e in encodings],
        first_piece,
        label_rows if labeled else None,
    )


def eval_max_len(max_position_embeddings: int, requested: int) -> int:
    """The length sentences are encoded to for predictions: `requested`, or more if the model takes it."""
    return max(requested, min(EVAL_MAX_LEN, max_position_embeddings))


def word_tags(logits: list[np.ndarray], data: EncodedSentences, labels: tuple[str, ...]) -> list[list[str]]:
    """Each word's predicted tag: the argmax of its first piece's logits ("O" for a word without one).

    An I-X that continues no X entity is read as the start of one, as conlleval and the served aggregation
    (Hugging Face's grouping) read it, so the metrics score the entities a user of the model gets.
    """
    out = []
    for rows, first in zip(logits, data.first_piece, strict=True):
        ids = rows.argmax(-1)
        out.append(repair_iob2([labels[int(ids[p])] if p >= 0 else OUTSIDE for p in first]))
    return out
