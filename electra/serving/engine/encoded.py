"""One tokenized input as the batcher and post-processing see it, with no model attached: the discriminator,
tagger, classifier and generator runners all take it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tokenizers


@dataclass(frozen=True, slots=True)
class Encoded:
    """One tokenized input: what the batcher needs (ids, type ids) and what post-processing needs."""

    ids: np.ndarray  # int64, with [CLS]/[SEP]
    type_ids: np.ndarray  # int64
    offsets: list[tuple[int, int]]
    special: list[int]  # 1 for [CLS]/[SEP]
    word_ids: list[int | None]
    truncated: bool

    @property
    def length(self) -> int:
        return len(self.ids)


def from_encoding(enc: tokenizers.Encoding, truncated: bool) -> Encoded:
    return Encoded(
        ids=np.asarray(enc.ids, dtype=np.int64),
        type_ids=np.asarray(enc.type_ids, dtype=np.int64),
        offsets=enc.offsets,
        special=enc.special_tokens_mask,
        word_ids=enc.word_ids,
        truncated=truncated,
    )
