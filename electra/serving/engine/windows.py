"""Documents longer than the model, scored through overlapping windows of its maximum length (/detect, /tag).

A document's tokens (without [CLS]/[SEP]) are cut into windows of `span` tokens (the model's maximum less
the two specials) that overlap by at least `stride` tokens; each window is a model input of its own, so the
batcher packs and budgets windows like any input. The last window ends at the document's end rather than
running short, so every window has the full length: more context for the last tokens, and windows of one
length batch without padding.

Each token's logit (a detector's) or row of logits (a tagger's, one per label) is taken from the window
where it has the most context on both sides, the smaller of the tokens before and after it inside the
window; a window edge that is also the document's edge limits nothing, since no other window sees further.
For evenly spaced windows that splits each overlap in its middle. A document that fits is one window equal
to the single pass, so its scores are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from electra.serving.engine.encoded import Encoded


@dataclass(frozen=True, slots=True)
class Document:
    """A tokenized text (`full`, with [CLS]/[SEP], untruncated) and the model inputs that cover it."""

    full: Encoded
    windows: list[Encoded]
    starts: list[int]  # content index (0 = first token after [CLS]) where each window begins

    @property
    def span(self) -> int:
        return self.windows[0].length - 2


@dataclass(frozen=True, slots=True)
class TokenLogits:
    """A text's encoding (whole, or its first window with truncate), its per-token logits ([CLS] and [SEP]
    included), how many windows the model ran for it and, when recorded, those windows (what the generator
    reads for suggestions, electra.serving.engine.suggest)."""

    encoded: Encoded
    logits: np.ndarray
    windows: int
    document: Document | None = None

    @property
    def doc(self) -> Document:
        """The windows the logits came from (the encoding itself as one window when none were recorded)."""
        return self.document or Document(self.encoded, [self.encoded], [0])


def default_stride(max_seq_len: int) -> int:
    """A quarter of a window (127 tokens for a 512-token model): every token keeps at least an eighth of
    a window of context on each side, at about 1.3x the model calls of windows that do not overlap."""
    return max(0, (max_seq_len - 2) // 4)


def max_stride(max_seq_len: int) -> int:
    """Overlap beyond half a window puts most tokens in three windows or more for no extra context."""
    return max(0, (max_seq_len - 2) // 2)


def window_starts(tokens: int, span: int, stride: int) -> list[int]:
    """Where windows of `span` tokens begin so that consecutive ones overlap by at least `stride`."""
    if tokens <= span:
        return [0]
    step = span - stride
    starts = list(range(0, tokens - span, step))
    starts.append(tokens - span)
    return starts


def split(full: Encoded, max_seq_len: int, stride: int) -> Document:
    """The windows covering `full` (an untruncated single-text encoding: [CLS] tokens [SEP])."""
    tokens = full.length - 2
    span = max_seq_len - 2
    if tokens <= span:
        return Document(full, [full], [0])
    starts = window_starts(tokens, span, stride)
    return Document(full, [_window(full, start, start + span) for start in starts], starts)


def first_window(full: Encoded, max_seq_len: int) -> Encoded:
    """`full` truncated to the model's length, as the tokenizer's own truncation would give it."""
    if full.length <= max_seq_len:
        return full
    return _window(full, 0, max_seq_len - 2, truncated=True)


def _window(full: Encoded, start: int, end: int, truncated: bool = False) -> Encoded:
    """Content tokens [start, end) between the document's own [CLS] and [SEP]."""
    inner = slice(1 + start, 1 + end)
    last = full.length - 1
    return Encoded(
        ids=np.concatenate([full.ids[:1], full.ids[inner], full.ids[last:]]),
        type_ids=np.concatenate([full.type_ids[:1], full.type_ids[inner], full.type_ids[last:]]),
        offsets=[full.offsets[0], *full.offsets[inner], full.offsets[last]],
        special=[full.special[0], *full.special[inner], full.special[last]],
        word_ids=[full.word_ids[0], *full.word_ids[inner], full.word_ids[last]],
        truncated=truncated,
    )


def merge(doc: Document, rows: list[np.ndarray]) -> np.ndarray:
    """Per-token logits of the whole document ([CLS] and [SEP] included) from its windows' rows: one logit
    per token (tokens,) or one row of logits per token (tokens, labels)."""
    if len(doc.windows) == 1:
        return rows[0]
    tokens = doc.full.length - 2
    span = doc.span
    merged = np.empty((doc.full.length, *rows[0].shape[1:]), dtype=rows[0].dtype)
    best = np.full(tokens, -1, dtype=np.int64)
    position = np.arange(span)
    unbounded = tokens  # more context than any window has
    for start, row in zip(doc.starts, rows, strict=True):
        before = position if start > 0 else np.full(span, unbounded)
        after = span - 1 - position if start + span < tokens else np.full(span, unbounded)
        context = np.minimum(before, after)
        target = best[start : start + span]
        wins = context > target  # ties keep the earlier window
        target[wins] = context[wins]
        # A boolean mask over the first axis takes whole rows: a tagger's token keeps all its labels' logits
        # from the one window, so its probabilities stay one softmax.
        merged[1 + start : 1 + start + span][wins] = row[1 : 1 + span][wins]
    merged[0] = rows[0][0]
    merged[-1] = rows[-1][-1]
    return merged
