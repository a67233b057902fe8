"""Request and response bodies (msgspec Structs: validated on decode, and the OpenAPI schema at /schema)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from electra.serving.engine.results import (
    DEFAULT_THRESHOLD,
    Aggregation,
    ClassifyResult,
    DetectResult,
    TagResult,
)

Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
ModelName = Annotated[str, Meta(min_length=1, max_length=200)]


class DetectRequest(Struct, forbid_unknown_fields=True):
    """One text (`text`) or several (`texts`, or `inputs`: the same list under the name /classify also
    takes); every token is scored replaced (1) vs original (0).

    A text longer than the model is scored whole, through windows of the model's length that overlap by
    `stride` tokens (default: a quarter of a window); `truncate: true` scores only its first window.
    `suggest: k` (a model exported with its generator): each flagged token (or word) also gets the
    generator's k most probable replacements, and each result the text with the best ones applied."""

    text: str | None = None
    texts: list[str] | None = None
    inputs: list[str] | None = None
    threshold: Probability = DEFAULT_THRESHOLD
    level: Literal["token", "word"] = "token"
    model: ModelName | None = None
    truncate: bool = False
    stride: Annotated[int, Meta(ge=0)] | None = None
    suggest: Annotated[int, Meta(ge=1)] | None = None


class DetectResponse(Struct):
    model: str
    results: list[DetectResult]


class PairInput(Struct, forbid_unknown_fields=True):
    """A text and the text it is paired with, in a batch of /classify."""

    text: str
    text_pair: str | None = None


class ClassifyRequest(Struct, forbid_unknown_fields=True):
    """One input (`text`, optional `text_pair`) or several (`texts` or `inputs`, one list under either
    name: a text as a string, a pair as {"text", "text_pair"}). An input longer than the model is truncated
    (its result says `truncated: true`); `truncate: false` refuses it with 413 instead."""

    text: str | None = None
    text_pair: str | None = None
    texts: list[str | PairInput] | None = None
    inputs: list[str | PairInput] | None = None
    model: ModelName | None = None
    truncate: bool = True
    # Logits in `scores` (or `score`) instead of probabilities, as text-embeddings-inference's raw_scores.
    raw_scores: bool = False


class ClassifyResponse(Struct):
    model: str
    results: list[ClassifyResult]


class TagRequest(Struct, forbid_unknown_fields=True):
    """One text (`text`) or several (`texts`, or `inputs`) for a tagger (token classifier): its entities.

    `aggregation_strategy` is transformers' TokenClassificationPipeline's: "none" answers every token with its
    tag, "simple" groups adjacent tokens of one entity, "first"/"average"/"max" first give each word one tag
    (its first token's, its tokens' mean probabilities, its most confident token's), then group. Entities
    labelled in `ignore_labels` are left out. Long texts go through windows as on /detect."""

    text: str | None = None
    texts: list[str] | None = None
    inputs: list[str] | None = None
    model: ModelName | None = None
    aggregation_strategy: Aggregation = "simple"
    ignore_labels: list[str] = msgspec.field(default_factory=lambda: ["O"])
    truncate: bool = False
    stride: Annotated[int, Meta(ge=0)] | None = None


class TagResponse(Struct):
    model: str
    results: list[TagResult]


class ModelInfo(Struct):
    name: str
    kind: str
    labels: list[str] | None
    problem_type: str | None
    max_seq_len: int
    precision: str | None
    device: str
    providers: list[str]
    num_hidden_layers: int | None
    hidden_size: int | None
    fused_operators: dict[str, int]
    parity: dict[str, object] | None
    dev_accuracy: dict[str, object] | None
    created: str | None
    # The generator beside a detector (what /detect's suggest runs); None: no suggestions from this model.
    generator: dict[str, object] | None = None
    # What /embed answers with this model (pooling, dimensions); None: exported before graphs answered their
    # hidden state, so it cannot embed until exported again.
    embedding: dict[str, object] | None = None


class ModelsResponse(Struct):
    models: list[ModelInfo]


class Status(Struct, omit_defaults=True):
    status: str
    detail: str | None = None


class ErrorBody(Struct, omit_defaults=True):
    """Every 4xx/5xx answer: the status again and a message that says what to change."""

    status_code: int
    detail: str
    extra: list[dict[str, object]] | dict[str, object] | None = None


def to_model_info(described: dict[str, object]) -> ModelInfo:
    return msgspec.convert(described, ModelInfo)


# --- text-embeddings-inference's shapes (its OpenAPI document, docs/openapi.json of release 1.9.3) ---------

Direction = Literal["left", "Left", "right", "Right"]


class RerankRequest(Struct):
    """TEI's POST /rerank: every text scored against the query by a cross-encoder (one output), best first.
    `truncate` null or absent: the server's --auto-truncate (true unless the server says otherwise), as
    TEI's. Other fields are ignored, as TEI ignores them, and named in the Electra-Ignored-Fields header.
    `model` is ours (which cross-encoder, when the server has several)."""

    query: str
    texts: list[str]
    truncate: bool | None = None
    truncation_direction: Direction = "right"
    raw_scores: bool = False
    return_text: bool = False
    model: ModelName | None = None


class Rank(Struct, omit_defaults=True):
    index: int
    score: float
    text: str | None = None


class PredictRequest(Struct):
    """TEI's POST /predict: one text, a pair [text, text], or a batch of both ([[text], [text, text], ...])
    through a classifier; every label's score, best first. `truncate` and other fields: as /rerank's."""

    inputs: str | list[str | list[str]]
    truncate: bool | None = None
    truncation_direction: Direction = "right"
    raw_scores: bool = False
    model: ModelName | None = None


class EmbedRequest(Struct):
    """TEI's POST /embed: one text or a list of them through any encoder bundle; each one's pooled sentence
    vector ([CLS] or mean, as the bundle says), of unit length unless `normalize` is false. `truncate` and
    other fields: as /rerank's. `prompt_name` (a sentence-transformers prompt) and `dimensions` (a Matryoshka
    model's shorter vector) are TEI's; a bundle has neither, so only null, or the model's own size, passes.
    TEI's token-id inputs are refused: send the text."""

    inputs: str | list[str | list[int]]
    normalize: bool = True
    truncate: bool | None = None
    truncation_direction: Direction = "right"
    prompt_name: str | None = None
    dimensions: Annotated[int, Meta(ge=0)] | None = None
    model: ModelName | None = None


class Prediction(Struct):
    score: float
    label: str


class TEIError(Struct):
    """TEI's error answer."""

    error: str
    error_type: str
