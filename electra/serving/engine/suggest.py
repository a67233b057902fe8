"""Suggestions: what the generator proposes should stand where the detector flags a token (/detect's
`suggest`, fill-mask on /hf), as edits of the caller's text.

1. Targets: the flagged units of a result, a token or (level "word") all the pieces of a word.
2. Generator inputs (`plan`): a target is predicted in the window of the document where it has the most
   context, the window its detection score came from (electra.serving.engine.windows). Each target is
   predicted one at a time, in an input of its own with only that target masked, everything else as the caller
   wrote it; but a window that owns more than ALONE_MAX targets masks them all at once, one input, so that the
   generator's work per window stays bounded. Measured (experiments/suggest_masking.py,
   experiments/README.md): masking every flagged word at once hides the flagged word's neighbours that the
   detector flagged too without cause, the very words that say what the original was; one at a time restored
   more originals.
   (`alone_from` and `alone_max` also give the other strategies the benchmark compares.) At word level a
   word's pieces become one [MASK] and only tokens that start a word are proposed
   (electra.serving.engine.generator), so a suggestion is a whole word.
3. Edits (`edit`): a suggestion replaces the span of the token (or word) it is for. A WordPiece continuation
   ("##ed") proposed for a token that starts a word joins the word before it, taking the space between;
   a word-start token proposed for a continuation gets a space before it unless it is punctuation. With a
   lower-casing tokenizer a suggestion takes the case of what it replaces.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from electra.serving.engine.encoded import Encoded
from electra.serving.engine.generator import MaskedInput, masked_input
from electra.serving.engine.postprocess import units, with_marks
from electra.serving.engine.results import DetectResult, Suggestion
from electra.serving.engine.rounding import rounded_one
from electra.serving.engine.windows import Document

# Runs of this many adjacent flagged targets or more are predicted one at a time (1: every target; None:
# none, all at once)...
ALONE_FROM: int | None = 1
# ... unless a window owns more targets than this: then all of them at once, in one input. A window of a
# text the detector finds riddled with replacements costs at most this many generator inputs.
ALONE_MAX: int | None = 8


@dataclass(frozen=True, slots=True)
class Target:
    """A unit to suggest for: `unit` is its index among the result's tokens (or words); `first`..`last` are
    its token indices in the document's encoding ([CLS] is 0), both included."""

    unit: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Plan:
    """Generator inputs for one document, and for each input the target every masked position answers."""

    inputs: list[MaskedInput]
    answers: list[list[int]]  # per input, indices into the targets, in the order of its masked positions


def flagged(result: DetectResult, enc: Encoded, level: str) -> list[Target]:
    """The targets of a /detect result: its replaced tokens (or words)."""
    return [
        Target(u, pieces[0], pieces[-1])
        for u, (pieces, token) in enumerate(zip(units(enc, level), result.tokens, strict=True))
        if token.replaced
    ]


def mask_targets(enc: Encoded, mask_id: int) -> list[Target]:
    """Every [MASK] the text itself holds, as a target (fill-mask's masks)."""
    return [Target(u, i, i) for u, i in enumerate(np.flatnonzero(enc.ids == mask_id).tolist())]


def plan(
    doc: Document,
    targets: Sequence[Target],
    mask_id: int,
    top_k: int,
    whole_words: bool,
    alone_from: int | None = ALONE_FROM,
    alone_max: int | None = ALONE_MAX,
    candidates: tuple[int, ...] | None = None,
) -> Plan:
    """The generator inputs that predict every target of `doc` (see the module's docstring).

    whole_words: a target's pieces collapse into one [MASK] and only word-start tokens are ranked (level
    "word"); otherwise every target is one token. alone_from: runs of at least this many adjacent targets
    are predicted one at a time (None: none); alone_max: not in a window that owns more targets than this
    (None: no limit). candidates: rank only these ids (fill-mask's targets).
    """
    owner = [_owner(doc, t) for t in targets]
    alone = _in_long_runs(targets, alone_from)
    if alone_max is not None:
        owned = Counter(owner)
        alone = [a and owned[owner[i]] <= alone_max for i, a in enumerate(alone)]
    inputs: list[MaskedInput] = []
    answers: list[list[int]] = []

    def add(window: int, masked: list[int], answered: list[int]) -> None:
        ids, types, positions = _masked_window(doc, window, [targets[i] for i in masked], mask_id)
        at = {targets[i].first: p for i, p in zip(masked, positions, strict=True)}
        inputs.append(
            masked_input(
                ids,
                types,
                tuple(at[targets[i].first] for i in answered),
                top_k,
                whole_words,
                candidates,
            )
        )
        answers.append(answered)

    together = [i for i in range(len(targets)) if not alone[i]]
    owned: dict[int, list[int]] = {}
    for i in together:
        owned.setdefault(owner[i], []).append(i)
    # Targets do not overlap one another, so by their first token their last ones are in order too, and the
    # targets a window overlaps are one run of them, found by bisection (not a scan per window).
    by_first = sorted(together, key=lambda i: targets[i].first)
    firsts = [targets[i].first - 1 for i in by_first]  # content indices
    lasts = [targets[i].last - 1 for i in by_first]
    for window in sorted(owned):
        start = doc.starts[window]
        # Every other target of the group the window holds is masked too: the generator never sees a token
        # the detector doubts, whichever window predicts it.
        masked = sorted(by_first[bisect_left(lasts, start) : bisect_left(firsts, start + doc.span)])
        add(window, masked, owned[window])
    for i in range(len(targets)):
        if alone[i]:
            add(owner[i], [i], [i])
    return Plan(inputs, answers)


def _owner(doc: Document, target: Target) -> int:
    """The window where `target` has the most context on both sides (ties: the earlier window)."""
    tokens, span = doc.full.length - 2, doc.span
    first, last = target.first - 1, target.last - 1  # content indices
    best, best_context = 0, None
    # The windows that hold `first` (starts in order): start <= first < start + span. A word longer than any
    # of them has room for after its first piece (a small stride) has negative context in all of them: it
    # still goes to one of them, where its [MASK] is.
    for w in range(bisect_right(doc.starts, first - span), bisect_right(doc.starts, first)):
        start = doc.starts[w]
        before = first - start if start > 0 else tokens
        after = start + span - 1 - last if start + span < tokens else tokens
        if best_context is None or min(before, after) > best_context:
            best, best_context = w, min(before, after)
    return best


def _in_long_runs(targets: Sequence[Target], alone_from: int | None) -> list[bool]:
    """Per target, whether it is in a run of at least `alone_from` adjacent targets."""
    alone = [False] * len(targets)
    if alone_from is None:
        return alone
    order = sorted(range(len(targets)), key=lambda i: targets[i].first)
    run: list[int] = []
    for i in [*order, None]:
        if i is not None and run and targets[i].first == targets[run[-1]].last + 1:
            run.append(i)
            continue
        if len(run) >= alone_from:
            for j in run:
                alone[j] = True
        run = [] if i is None else [i]
    return alone


def _masked_window(
    doc: Document, window: int, masked: list[Target], mask_id: int
) -> tuple[list[int], list[int], list[int]]:
    """Window `window` of `doc` as token ids and type ids with each of `masked` replaced by [MASK]s (one per
    token; one per target when a target has several pieces, so a word becomes one [MASK]), and the position
    of each target's first [MASK], in the order of `masked`."""
    full = doc.full
    start, end = 1 + doc.starts[window], 1 + doc.starts[window] + doc.span  # token indices of the content
    # The window's tokens only: a document's every token per generator input would make a long document's
    # suggestions quadratic in its length.
    ids = full.ids[start:end].tolist()
    types = full.type_ids[start:end].tolist()
    by_first = {max(t.first, start): t for t in masked}
    out_ids, out_types = [int(full.ids[0])], [int(full.type_ids[0])]
    first_mask: dict[int, int] = {}
    i = start
    while i < end:
        target = by_first.get(i)
        if target is None:
            out_ids.append(ids[i - start])
            out_types.append(types[i - start])
            i += 1
            continue
        first_mask[target.first] = len(out_ids)
        out_ids.append(mask_id)
        out_types.append(types[i - start])
        i = min(target.last, end - 1) + 1
    out_ids.append(int(full.ids[full.length - 1]))
    out_types.append(int(full.type_ids[full.length - 1]))
    return out_ids, out_types, [first_mask[t.first] for t in masked]


# --- suggestions as edits of the text ----------------------------------------------------------------------


def attach(
    text: str,
    enc: Encoded,
    result: DetectResult,
    targets: Sequence[Target],
    rows: Sequence[np.ndarray],
    tokens: Sequence[str],
    prefix: str,
    lowercase: bool,
) -> None:
    """Each target's suggestions (its TOP_TOKENS row) onto its token of `result`, and `suggested_text`;
    targets not flagged get none, flagged ones at least an empty list."""
    offsets = with_marks(text, enc.offsets)
    for token in result.tokens:
        if token.replaced:
            token.suggestions = []
    for target, row in zip(targets, rows, strict=True):
        unit = result.tokens[target.unit]
        unit.suggestions = [
            Suggestion(
                tokens[int(t["id"])],
                rounded_one(t["prob"]),
                *edit(text, offsets, enc, target, tokens[int(t["id"])], prefix, lowercase),
            )
            for t in row
        ]
    result.suggested_text = apply_best(text, result)


def edit(
    text: str,
    offsets: Sequence[tuple[int, int]],
    enc: Encoded,
    target: Target,
    token: str,
    prefix: str,
    lowercase: bool,
) -> tuple[str, int, int]:
    """(replacement, start, end): `text[start:end]` becomes the replacement when `token` is put in place of
    `target` (offsets: the encoding's, extended over combining marks).

    The replacement stays the word (or piece) it is: a continuation joins the word before, taking the space
    between; a word gets a space on a side where it would otherwise run into a neighbouring word (not next
    to punctuation or a CJK character, which stand alone as the tokenizer reads them)."""
    start = min(offsets[i][0] for i in range(target.first, target.last + 1))
    end = max(offsets[i][1] for i in range(target.first, target.last + 1))
    continuation = token.startswith(prefix) and len(token) > len(prefix)
    surface = token[len(prefix) :] if continuation else token
    if lowercase:
        surface = _cased_like(surface, text[start:end])
    before, after = target.first - 1, target.last + 1
    has_before = before >= 0 and not enc.special[before]
    if continuation and has_before:
        start = offsets[before][1]
    elif has_before and _run_together(text[start - 1 : start], surface[:1]):
        surface = " " + surface
    next_word = after < len(enc.special) and not enc.special[after]
    next_word = next_word and enc.word_ids[after] != enc.word_ids[target.last]
    if next_word and _run_together(surface[-1:], text[end : end + 1]):
        surface += " "
    return surface, start, end


def _run_together(left: str, right: str) -> bool:
    """Whether two characters side by side would be read as one word."""
    return bool(left and right) and not any(c.isspace() or _stands_alone(c) for c in left + right)


def apply_best(text: str, result: DetectResult) -> str:
    """`text` with each token's best suggestion applied (the edits never overlap), in one pass: a copy of
    the text per edit would make a long text flagged throughout quadratic in its length."""
    best = [t.suggestions[0] for t in result.tokens if t.suggestions]
    edits = sorted((s.start, s.end, s.text) for s in best)
    pieces, at = [], 0
    for start, end, replacement in edits:
        pieces += [text[at:start], replacement]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _cased_like(surface: str, original: str) -> str:
    letters = [c for c in original if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return surface.upper()
    if letters and original[:1].isupper():
        return surface[:1].upper() + surface[1:]
    return surface


def _stands_alone(char: str) -> bool:
    """A character BERT's tokenizer makes a word of its own: punctuation (every non-letter, non-digit ASCII
    symbol and Unicode's P*) and CJK ideographs."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    if any(lo <= cp <= hi for lo, hi in _CJK):
        return True
    return unicodedata.category(char).startswith("P")


# The CJK Unified Ideographs blocks, as BERT's BasicTokenizer._is_chinese_char lists them.
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
