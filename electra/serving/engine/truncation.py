"""Model inputs from texts and text pairs at a cost linear in their length, however long they are.

The tokenizers library's own truncation is not linear for a pair: when both sides are over the model's
length it keeps every piece it cut off as an "overflowing" encoding, and for a pair it builds every
combination of the two sides' pieces (9,800 encodings for one pair of 25,000 tokens a side at 512 tokens:
docs/serving.md, "Long inputs", has what that cost a server). Here instead:

1. `measure`: each distinct text of a request (a query shared by every pair counts once) is tokenized once,
   whole, without special tokens, in one `encode_batch` (which leaves the GIL to the event loop). Its
   length is then known before anything is cut, so a caller can refuse an input over the model (truncate
   off) with its exact length and no further work.
2. `keep_lengths`: how many tokens of each side an input keeps, by the library's own longest-first rule
   (tokenizers' `truncate_encodings`); a side keeps its first tokens (direction "right") or its last
   ("left"). Each text is cut once to the most any input keeps of it, so what is held per text is bounded by
   the model's length, not the text's.
3. `Measured.encoded`: each input put together from its sides' kept tokens and the tokenizer's own template
   of special tokens (`Template`, read from the tokenizer itself: `[CLS] A [SEP] B [SEP]` for BERT's), so it
   equals the library's truncating encode token for token, with the same ids, type ids, offsets, special
   tokens mask and word ids (tests/test_truncation.py checks it against the library).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tokenizers

from electra.serving.engine.encoded import Encoded

DIRECTIONS = ("right", "left")
# A text of this one character tokenizes to one token or more with any WordPiece vocabulary ([UNK] at worst):
# what the template is read from.
_PROBE = "a"


@dataclass(frozen=True, slots=True)
class Special:
    """A special token the template puts around the sequences."""

    id: int
    type_id: int


@dataclass(frozen=True, slots=True)
class Slot:
    """Where the template puts sequence `index` (0: the text, 1: its pair), with its type id."""

    index: int
    type_id: int


Part = Special | Slot


@dataclass(frozen=True)
class Template:
    """The tokenizer's post-processing template for one text and for a pair, as parts in order."""

    single: tuple[Part, ...]
    pair: tuple[Part, ...]

    @classmethod
    def of(cls, tokenizer: tokenizers.Tokenizer) -> Template:
        """Read from the tokenizer: a probe text (and pair) encoded with special tokens, each run of one
        sequence's tokens a sequence part, each token of no sequence a special one."""
        return cls(_parts(tokenizer.encode(_PROBE)), _parts(tokenizer.encode(_PROBE, _PROBE)))

    def specials(self, pair: bool) -> int:
        """Special tokens the template adds to one text (or to a pair)."""
        return sum(isinstance(p, Special) for p in (self.pair if pair else self.single))


def _parts(probe: tokenizers.Encoding) -> tuple[Part, ...]:
    parts: list[Part] = []
    for token_id, type_id, sequence in zip(probe.ids, probe.type_ids, probe.sequence_ids, strict=True):
        if sequence is None:
            parts.append(Special(token_id, type_id))
        elif not (parts and isinstance(parts[-1], Slot) and parts[-1].index == sequence):
            parts.append(Slot(sequence, type_id))
    return tuple(parts)


def keep_lengths(first: int, second: int | None, budget: int) -> tuple[int, int | None]:
    """Tokens each side keeps within `budget` (the model's length less the template's special tokens): the
    tokenizers library's longest-first rule. A text alone keeps up to the budget. Of a pair over it, the
    shorter side is kept whole when the longer still gets as much; otherwise each keeps half, the second
    side (or the longer one) the odd token."""
    if second is None:
        return min(first, budget), None
    if first + second <= budget:
        return first, second
    n1, n2 = min(first, second), max(first, second)
    n2 = n1 if n1 > budget else max(n1, budget - n1)
    if n1 + n2 > budget:
        n1 = budget // 2
        n2 = n1 + budget % 2
    return (n2, n1) if first > second else (n1, n2)


@dataclass(frozen=True, slots=True)
class Side:
    """One distinct text tokenized whole (`length` tokens, no special tokens), holding only the tokens some
    input keeps: its first `len(ids)` (direction "right") or its last."""

    length: int
    ids: list[int]
    offsets: list[tuple[int, int]]
    special: list[int]
    word_ids: list[int | None]

    def kept(self, count: int, direction: str) -> slice:
        """The slice of the held tokens an input keeping `count` of them takes."""
        held = len(self.ids)
        return slice(0, count) if direction == "right" else slice(held - count, held)


@dataclass(frozen=True)
class Measured:
    """A request's inputs, each text tokenized whole once: every input's length, and the inputs cut to the
    model's length (`encoded`)."""

    template: Template
    direction: str
    sides: list[Side]
    inputs: list[tuple[int, int | None]]  # each input's text and pair, as indices into `sides`
    keep: list[tuple[int, int | None]]  # tokens each input keeps of its text and of its pair

    def side_lengths(self, i: int) -> tuple[int, int | None]:
        """Tokens of input i's text and of its pair (None: no pair), without special tokens."""
        first, second = self.inputs[i]
        return self.sides[first].length, None if second is None else self.sides[second].length

    def length(self, i: int) -> int:
        """Input i's tokens whole, special tokens included: over the model's length means truncated."""
        first, second = self.side_lengths(i)
        return first + (second or 0) + self.template.specials(second is not None)

    def encoded(self) -> list[Encoded]:
        """Every input as the model takes it: cut to the model's length, `truncated` where it was."""
        return [self._one(i) for i in range(len(self.inputs))]

    def _one(self, i: int) -> Encoded:
        indices = self.inputs[i]
        pair = indices[1] is not None
        ids: list[int] = []
        type_ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        special: list[int] = []
        word_ids: list[int | None] = []
        for part in self.template.pair if pair else self.template.single:
            if isinstance(part, Special):
                ids.append(part.id)
                type_ids.append(part.type_id)
                offsets.append((0, 0))
                special.append(1)
                word_ids.append(None)
                continue
            side = self.sides[indices[part.index]]  # type: ignore[index]
            cut = side.kept(self.keep[i][part.index], self.direction)  # type: ignore[arg-type]
            kept = side.ids[cut]
            ids += kept
            type_ids += [part.type_id] * len(kept)
            offsets += side.offsets[cut]
            special += side.special[cut]
            word_ids += side.word_ids[cut]
        truncated = any(
            k is not None and k < self.sides[s].length
            for s, k in zip(indices, self.keep[i], strict=True)
            if s is not None
        )
        return Encoded(
            ids=np.asarray(ids, dtype=np.int64),
            type_ids=np.asarray(type_ids, dtype=np.int64),
            offsets=offsets,
            special=special,
            word_ids=word_ids,
            truncated=truncated,
        )


def measure(
    tokenizer: tokenizers.Tokenizer,
    template: Template,
    items: Sequence[tuple[str, str | None]],
    max_len: int,
    direction: str = "right",
) -> Measured:
    """`items` (text, pair or None) tokenized by `tokenizer` (which must not truncate), each distinct text
    once; each text held only as far as some input keeps it within `max_len` tokens, special ones included."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    index: dict[str, int] = {}
    inputs: list[tuple[int, int | None]] = []
    for text, pair in items:
        first = index.setdefault(text, len(index))
        inputs.append((first, None if pair is None else index.setdefault(pair, len(index))))
    whole = tokenizer.encode_batch(list(index), add_special_tokens=False)
    lengths = [len(enc) for enc in whole]
    keep = []
    held = [0] * len(whole)
    for first, second in inputs:
        budget = max(0, max_len - template.specials(second is not None))
        kept = keep_lengths(lengths[first], None if second is None else lengths[second], budget)
        keep.append(kept)
        for s, k in zip((first, second), kept, strict=True):
            if s is not None and k is not None:
                held[s] = max(held[s], k)
    sides = []
    for enc, length, count in zip(whole, lengths, held, strict=True):
        if count < length:
            enc.truncate(count, 0, direction)  # in place: the getters below copy `count` tokens, not all
        sides.append(Side(length, enc.ids, enc.offsets, enc.special_tokens_mask, enc.word_ids))
    return Measured(template, direction, sides, inputs, keep)
