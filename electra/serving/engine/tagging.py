"""Token classification: per-token label probabilities to entities, for /tag and for token-classification
on /hf (taggers and detectors alike).

Computed as transformers' `TokenClassificationPipeline` computes them (`postprocess`, `aggregate`,
`aggregate_words`, `group_entities`, `get_tag`); tests/test_tagging_serving.py feeds both the same logits.
A detector is a token classifier with two labels, `original` and `replaced`: a token's probability of
`replaced` is the sigmoid of its logit, which is the softmax of the two logits (0, logit).

Differences, on purpose: words are the tokenizer's words (its `word_ids`), where the pipeline guesses them
from the length of each token against its text; offsets include the combining marks that follow a token
(see postprocess.with_marks), so `text[start:end]` is what the reader sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from electra.serving.engine.encoded import Encoded
from electra.serving.engine.kinds import DETECTOR
from electra.serving.engine.postprocess import sigmoid, with_marks
from electra.serving.engine.results import Aggregation, TagEntity, TagResult
from electra.serving.engine.rounding import rounded_one
from electra.serving.engine.windows import TokenLogits

DETECTOR_LABELS = ("original", "replaced")


@dataclass(frozen=True, slots=True)
class Entity:
    """A token's or word's tag (`B-PER`), or with `grouped` a run's entity type (`PER`)."""

    label: str
    score: float
    start: int
    end: int
    index: int | None = None  # the token's position in the model input (tokens, not words or groups)
    grouped: bool = False


def softmax(logits: np.ndarray) -> np.ndarray:
    """Probabilities over the last axis, in float64 (the pipeline's shift by the maximum, so no overflow)."""
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def label_probabilities(kind: str, labels: Sequence[str], logits: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Every token's probability of every label, and the labels: a tagger's softmax over its tags, a
    detector's (original, replaced) pair."""
    if kind == DETECTOR:
        replaced = sigmoid(logits)
        return np.stack([1.0 - replaced, replaced], axis=-1), list(DETECTOR_LABELS)
    return softmax(logits), list(labels)


def document_entities(
    text: str,
    enc: Encoded,
    probs: np.ndarray,
    labels: Sequence[str],
    aggregation: Aggregation,
    ignore_labels: Sequence[str],
) -> list[Entity]:
    """Entities of `text` from its encoding and its tokens' probabilities (rows of [CLS]/[SEP] included:
    the pipeline skips special tokens too)."""
    offsets = with_marks(text, enc.offsets)
    real = [i for i, special in enumerate(enc.special) if not special]
    return entities(
        probs[real],
        labels,
        [offsets[i] for i in real],
        real,
        [enc.word_ids[i] for i in real],
        aggregation,
        ignore_labels,
    )


def tag_result(
    text: str,
    scored: TokenLogits,
    labels: Sequence[str],
    aggregation: Aggregation,
    ignore_labels: Sequence[str],
) -> TagResult:
    """/tag's answer for one text from a tagger's per-token logits (tokens x labels)."""
    enc = scored.encoded
    found = document_entities(text, enc, softmax(scored.logits), labels, aggregation, ignore_labels)
    return TagResult(
        entities=[
            TagEntity(e.label, e.score, text[e.start : e.end], e.start, e.end, index=e.index) for e in found
        ],
        windows=scored.windows,
        truncated=enc.truncated,
    )


def entities(
    probs: np.ndarray,
    labels: Sequence[str],
    spans: Sequence[tuple[int, int]],
    indices: Sequence[int],
    word_ids: Sequence[int | None],
    aggregation: Aggregation,
    ignore_labels: Sequence[str],
) -> list[Entity]:
    """The pipeline's `aggregate` and filter over real tokens: `probs` (tokens x labels), each token's
    character span, position in the model input and word."""
    if aggregation in ("none", "simple"):
        found = [_entity(p, labels, s, i) for p, s, i in zip(probs, spans, indices, strict=True)]
    else:
        found = [
            _word_entity(probs[group], labels, (spans[group[0]][0], spans[group[-1]][1]), aggregation)
            for group in words(word_ids)
        ]
    if aggregation != "none":
        found = group_entities(found)
    ignored = set(ignore_labels)
    return [e for e in found if e.label not in ignored]


def _entity(probs: np.ndarray, labels: Sequence[str], span: tuple[int, int], index: int | None) -> Entity:
    best = int(probs.argmax())  # ties go to the first label, as numpy's argmax in the pipeline
    return Entity(labels[best], rounded_one(probs[best]), span[0], span[1], index)


def words(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Consecutive tokens of one word, as runs of positions (a token without a word is a word alone)."""
    groups: list[list[int]] = []
    for k, word in enumerate(word_ids):
        if groups and word is not None and word_ids[groups[-1][-1]] == word:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


def _word_entity(
    probs: np.ndarray, labels: Sequence[str], span: tuple[int, int], aggregation: Aggregation
) -> Entity:
    """The pipeline's `aggregate_word`: one tag for a word's tokens (`probs`, tokens x labels)."""
    if aggregation == "first":
        chosen = probs[0]
    elif aggregation == "max":
        chosen = probs[int(probs.max(axis=1).argmax())]  # the first of equal maxima, as Python's max
    else:  # average
        chosen = probs.mean(axis=0)
    return _entity(chosen, labels, span, None)


def get_tag(label: str) -> tuple[str, str]:
    """(B or I, entity type); a label without a B-/I- prefix continues a run of the same label."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def group_entities(found: list[Entity]) -> list[Entity]:
    """Adjacent entities of one type merged, a B- tag starting a new one (the pipeline's `group_entities`):
    mean score, from the first's start to the last's end."""
    out: list[Entity] = []
    run: list[Entity] = []
    for e in found:
        if run:
            bi, tag = get_tag(e.label)
            if tag != get_tag(run[-1].label)[1] or bi == "B":
                out.append(_group(run))
                run = []
        run.append(e)
    if run:
        out.append(_group(run))
    return out


def _group(run: list[Entity]) -> Entity:
    label = run[0].label.split("-", 1)[-1]  # the pipeline's group_sub_entities, prefix or not
    score = rounded_one(np.mean([e.score for e in run]))
    return Entity(label, score, run[0].start, run[-1].end, grouped=True)
