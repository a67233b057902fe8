"""Hugging Face Inference API task shapes: text-classification and token-classification answers.

What `huggingface_hub.InferenceClient.text_classification` / `.token_classification` post to a URL
(`{"inputs", "parameters"}`) and read back, computed as transformers' `TextClassificationPipeline` and
`TokenClassificationPipeline` compute them (tests/test_protocols.py checks ours against those pipelines).
A detector is a token classifier with two labels, `original` and `replaced`: a token's probability of
`replaced` is the sigmoid of its logit, which is the softmax of the two logits (0, logit).

Differences, on purpose: an entity's `word` is the text it spans (`text[start:end]`), not tokens joined
back into a lowercased string; words are the tokenizer's words (its `word_ids`), where the pipeline guesses
them from the length of each token against its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from msgspec import Meta, Struct

from electra.serving.schemas import Token

DETECTOR_LABELS = ("original", "replaced")
Aggregation = Literal["none", "simple", "first", "average", "max"]
Function = Literal["sigmoid", "softmax", "none"]


class TextPairInput(Struct, forbid_unknown_fields=True):
    text: str
    text_pair: str | None = None


class HFRequest(Struct, forbid_unknown_fields=True):
    """`inputs`: one text, a `{"text", "text_pair"}` pair, or a list of them; `parameters` by task.
    `options` (the old API's `wait_for_model`, `use_cache`) is accepted and has nothing to do here."""

    inputs: str | TextPairInput | list[str | TextPairInput]
    parameters: dict[str, Any] | None = None
    options: dict[str, Any] | None = None


class TextClassificationParameters(Struct, forbid_unknown_fields=True):
    top_k: Annotated[int, Meta(ge=1)] | None = None
    function_to_apply: Function | None = None
    truncate: bool = True


class TokenClassificationParameters(Struct, forbid_unknown_fields=True):
    # The hosted API's default: groups of adjacent tokens (the pipeline's own default is "none").
    aggregation_strategy: Aggregation = "simple"
    ignore_labels: list[str] | None = None
    stride: Annotated[int, Meta(ge=0)] | None = None


class LabelScore(Struct):
    label: str
    score: float


class TokenEntity(Struct, omit_defaults=True):
    """`entity` and `index` with aggregation "none"; `entity_group` otherwise."""

    score: float
    word: str
    start: int
    end: int
    entity: str | None = None
    entity_group: str | None = None
    index: int | None = None


# --- text-classification ----------------------------------------------------------------------------------


def default_function(labels: int, problem_type: str | None) -> Function:
    """The pipeline's choice when the request names none."""
    if problem_type == "regression":
        return "none"
    if problem_type == "multi_label_classification" or labels == 1:
        return "sigmoid"
    return "softmax"


def label_scores(
    logits: np.ndarray, labels: Sequence[str], function: Function, top_k: int | None
) -> list[LabelScore]:
    """Every label's score, highest first, `top_k` of them (all by default)."""
    x = logits.astype(np.float64)
    if function == "sigmoid":
        scores = 1.0 / (1.0 + np.exp(-x))
    elif function == "softmax":
        e = np.exp(x - x.max())
        scores = e / e.sum()
    else:
        scores = x
    order = sorted(range(len(labels)), key=lambda i: -scores[i])
    return [LabelScore(labels[i], float(scores[i])) for i in order[: top_k or len(labels)]]


# --- token-classification ---------------------------------------------------------------------------------


def token_entities(
    tokens: list[Token],
    indices: list[int],
    word_ids: list[int | None],
    text: str,
    aggregation: Aggregation,
    ignore_labels: Sequence[str],
) -> list[TokenEntity]:
    """Entities of one text from its scored tokens (`indices`: each token's position in the model input,
    `word_ids`: its word), aggregated and filtered as the pipeline does."""
    probs = [np.array([1.0 - t.score, t.score]) for t in tokens]
    if aggregation in ("none", "simple"):
        entities = [
            _entity(p, t.start, t.end, text, index=i) for p, t, i in zip(probs, tokens, indices, strict=True)
        ]
    else:
        entities = [
            _word_entity(
                [probs[k] for k in group], tokens[group[0]].start, tokens[group[-1]].end, text, aggregation
            )
            for group in _words(word_ids)
        ]
    if aggregation != "none":
        entities = _group(entities, text)
    ignored = set(ignore_labels)
    return [e for e in entities if (e.entity or e.entity_group) not in ignored]


def _entity(probs: np.ndarray, start: int, end: int, text: str, index: int | None = None) -> TokenEntity:
    label = int(probs.argmax())  # ties go to the first label, as numpy's argmax in the pipeline
    return TokenEntity(
        float(probs[label]), text[start:end], start, end, entity=DETECTOR_LABELS[label], index=index
    )


def _words(word_ids: list[int | None]) -> list[list[int]]:
    """Consecutive tokens of one word, as runs of positions (a token without a word is a word alone)."""
    groups: list[list[int]] = []
    for k, word in enumerate(word_ids):
        if groups and word is not None and word_ids[groups[-1][-1]] == word:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


def _word_entity(
    probs: list[np.ndarray], start: int, end: int, text: str, aggregation: Aggregation
) -> TokenEntity:
    if aggregation == "first":
        chosen = probs[0]
    elif aggregation == "max":
        chosen = max(probs, key=lambda p: p.max())  # the first of equal maxima, as Python's max
    else:  # average
        chosen = np.mean(np.stack(probs), axis=0)
    return _entity(chosen, start, end, text)


def _group(entities: list[TokenEntity], text: str) -> list[TokenEntity]:
    """Adjacent entities of one label merged: mean score, from the first's start to the last's end."""
    out: list[TokenEntity] = []
    run: list[TokenEntity] = []
    for e in [*entities, None]:
        if run and (e is None or e.entity != run[-1].entity):
            start, end = run[0].start, run[-1].end
            score = float(np.mean([r.score for r in run]))
            out.append(TokenEntity(score, text[start:end], start, end, entity_group=run[0].entity))
            run = []
        if e is not None:
            run.append(e)
    return out
