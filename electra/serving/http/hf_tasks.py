"""Hugging Face Inference API task shapes: text-classification, token-classification and fill-mask answers.

What `huggingface_hub.InferenceClient.text_classification` / `.token_classification` / `.fill_mask` post to a
URL (`{"inputs", "parameters"}`) and read back, computed as transformers' `TextClassificationPipeline`,
`TokenClassificationPipeline` and `FillMaskPipeline` compute them (tests/test_protocols.py,
tests/test_tagging_serving.py and tests/test_suggest.py check ours against those pipelines). The token
aggregation itself is electra.serving.engine.tagging's, shared with /tag; fill-mask's suggestions are
electra.serving.engine.suggest's, shared with /detect.

Differences, on purpose: an entity's `word` is the text it spans (`text[start:end]`), not tokens joined
back into a lowercased string (and see electra.serving.engine.tagging on words and offsets); a fill-mask
`sequence` is the caller's text with the one suggestion applied, not the tokens decoded back into a
lowercased string, and special tokens are never proposed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from msgspec import Meta, Struct

from electra.serving.engine.kinds import DETECTOR, kind_of
from electra.serving.engine.results import Aggregation
from electra.serving.engine.rounding import rounded_one
from electra.serving.engine.tagging import Entity

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


class FillMaskParameters(Struct, forbid_unknown_fields=True):
    top_k: Annotated[int, Meta(ge=1)] = 5  # the pipeline's default
    targets: str | list[str] | None = None


class FillMaskElement(Struct):
    """One proposal for one mask: `token` its id, `token_str` the vocabulary's token, `sequence` the input
    with it in place of the mask."""

    score: float
    token: int
    token_str: str
    sequence: str


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
    return [LabelScore(labels[i], rounded_one(scores[i])) for i in order[: top_k or len(labels)]]


# --- token-classification ---------------------------------------------------------------------------------


def hf_entity(entity: Entity, text: str) -> TokenEntity:
    """The pipeline's dict for one entity: `entity` (and `index`) for a token or word, `entity_group` for a
    group."""
    word = text[entity.start : entity.end]
    if entity.grouped:
        return TokenEntity(entity.score, word, entity.start, entity.end, entity_group=entity.label)
    return TokenEntity(entity.score, word, entity.start, entity.end, entity=entity.label, index=entity.index)


TOKEN_CLASSIFICATION = "token-classification"
TEXT_ONLY = frozenset(TextClassificationParameters.__struct_fields__)
TOKEN_ONLY = frozenset(TokenClassificationParameters.__struct_fields__)
FILL_MASK_ONLY = frozenset(FillMaskParameters.__struct_fields__)


def is_token_classifier(kind: str) -> bool:
    """Whether a bundle kind answers token-classification (its registered task, electra.serving.engine.kinds;
    the labels it leaves out by default are there too)."""
    return kind_of(kind).hf_task == TOKEN_CLASSIFICATION


def is_fill_mask(parameters: dict[str, Any], texts: Sequence[Any], mask_token: str) -> bool:
    """Whether a request to a detector with a generator asks for fill-mask rather than token-classification:
    it sends fill-mask's parameters, or a text holds the mask token (fill-mask's inputs must)."""
    if set(parameters) & FILL_MASK_ONLY:
        return True
    return any(isinstance(t, str) and mask_token in t for t in texts)


def fill_mask_conflict(name: str, parameters: dict[str, Any]) -> str | None:
    """A fill-mask request that also sends another task's parameters: what to say (None: it does not)."""
    foreign = sorted(set(parameters) - FILL_MASK_ONLY)
    if not foreign:
        return None
    return (
        f"model {name!r} answers fill-mask here (parameters {', '.join(sorted(FILL_MASK_ONLY))}); "
        f"{', '.join(foreign)} belong to another task: send them without top_k, targets or a [MASK]"
    )


def wrong_task(name: str, kind: str, parameters: dict[str, Any]) -> str | None:
    """What to say when the parameters are another task's than the model answers; None when they fit.
    (The body does not name its task: its parameters are the only sign of what the client expects.)"""
    token = is_token_classifier(kind)
    foreign = sorted(set(parameters) & (TEXT_ONLY if token else TOKEN_ONLY))
    if not foreign:
        return None
    task, other, own = (
        ("token-classification", "text-classification", TOKEN_ONLY)
        if token
        else ("text-classification", "token-classification", TEXT_ONLY)
    )
    hint = ""
    if kind == DETECTOR and set(parameters) & FILL_MASK_ONLY:
        hint = "; fill-mask needs a detector exported with its generator (electra export --generator)"
    return (
        f"model {name!r} is a {kind}: it answers {task} (parameters {', '.join(sorted(own))}), not "
        f"{other} (parameters {', '.join(foreign)}){hint}"
    )
