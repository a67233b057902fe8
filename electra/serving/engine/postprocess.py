"""From logits to answers: per-token (or per-word) replaced scores with offsets, and label probabilities."""

from __future__ import annotations

import unicodedata
from bisect import bisect_left

import numpy as np

from electra.serving.engine.encoded import Encoded
from electra.serving.engine.results import ClassifyResult, DetectResult, Token
from electra.serving.engine.rounding import rounded, rounded_one

# A multi-label model's label is chosen at this probability unless its bundle gives the label its own.
DEFAULT_LABEL_THRESHOLD = 0.5


def sigmoid(x: np.ndarray) -> np.ndarray:
    # tanh form: no overflow warning for large negative logits, unlike 1 / (1 + exp(-x)).
    return 0.5 * (1.0 + np.tanh(0.5 * x.astype(np.float64)))


def detect_result(text: str, enc: Encoded, logits: np.ndarray, threshold: float, level: str) -> DetectResult:
    """Scores of the real tokens of `text` (not [CLS]/[SEP]); level "word" merges pieces (max score)."""
    scores = rounded(sigmoid(logits))
    offsets = with_marks(text, enc.offsets)
    tokens: list[Token] = []
    if level == "word":
        for pieces in units(enc, level):
            start, end = min(offsets[i][0] for i in pieces), max(offsets[i][1] for i in pieces)
            score = max(scores[i] for i in pieces)
            tokens.append(Token(text[start:end], start, end, score, score >= threshold))
    else:  # the common case, kept to one pass
        special = enc.special
        for i, (start, end) in enumerate(offsets):
            if not special[i]:
                score = scores[i]
                tokens.append(Token(text[start:end], start, end, score, score >= threshold))
    replaced = sum(t.replaced for t in tokens)
    return DetectResult(
        tokens=tokens,
        replaced_fraction=rounded_one(replaced / len(tokens)) if tokens else 0.0,
        truncated=enc.truncated,
    )


def units(enc: Encoded, level: str) -> list[list[int]]:
    """The token indices of each unit /detect answers, in its order: every real token (level "token"), or
    the pieces of every word, in order of their first piece (level "word")."""
    special = enc.special
    if level != "word":
        return [[i] for i in range(len(special)) if not special[i]]
    words: dict[int, list[int]] = {}
    for i, word in enumerate(enc.word_ids):
        if word is not None and not special[i]:
            words.setdefault(word, []).append(i)
    return list(words.values())


# Below this code point no character is a combining mark (category M*), so most tokens skip the lookup.
FIRST_MARK = "\u0300"


def with_marks(text: str, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Offsets extended over the combining marks that follow a token (the normalizer strips accents, so
    "cafe\u0301" tokenizes to "cafe" and the mark would be left outside every token)."""
    out = list(offsets)
    starts: list[int] | None = None  # sorted token starts, built only when some token is followed by a mark
    n = len(text)
    for i, (start, end) in enumerate(offsets):
        if end <= start or end >= n or text[end] < FIRST_MARK:
            continue
        if not unicodedata.category(text[end]).startswith("M"):
            continue
        if starts is None:
            starts = sorted(s for s, e in offsets if e > s)
        # By bisection: a scan per token would make a text of many marked tokens quadratic in its length.
        after = bisect_left(starts, end)
        limit = starts[after] if after < len(starts) else n
        while end < limit and unicodedata.category(text[end]).startswith("M"):
            end += 1
        out[i] = (start, end)
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def class_probabilities(logits: np.ndarray, multi_label: bool) -> np.ndarray:
    """A classifier's scores as probabilities: one sigmoid per label for a multi-label model or a model of
    one output (a cross-encoder's relevance, as sentence-transformers' CrossEncoder scores it), a softmax over
    the labels otherwise (text-embeddings-inference's /predict and /rerank do the same)."""
    x = logits.astype(np.float64)
    return sigmoid(x) if multi_label or len(x) == 1 else softmax(x)


def classify_result(
    logits: np.ndarray,
    labels: list[str],
    regression: bool,
    multi_label: bool,
    truncated: bool,
    raw: bool = False,
    thresholds: list[float] | None = None,
) -> ClassifyResult:
    """`raw`: the logits in `scores` (or `score`) instead of probabilities. A multi-label model lists in
    `labels` every label whose probability is over its threshold (`thresholds`, else 0.5 for each)."""
    if regression:
        return ClassifyResult(score=rounded_one(logits[0]), truncated=truncated)
    probs = class_probabilities(logits, multi_label)
    chosen = None
    if multi_label:
        cut = np.asarray(thresholds or [DEFAULT_LABEL_THRESHOLD] * len(labels))
        chosen = [labels[i] for i in np.flatnonzero(probs > cut)]
    shown = logits.astype(np.float64) if raw else probs
    scores = dict(zip(labels, rounded(shown), strict=True))
    return ClassifyResult(
        label=labels[int(np.argmax(probs))], scores=scores, labels=chosen, truncated=truncated
    )
