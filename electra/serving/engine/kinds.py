"""The registry of model kinds: one entry per kind of work the server does, holding everything the server
branches on for it: the JSON route, the engine's request and result, the Open Inference Protocol v2 tensors,
the request parameters v2 passes on, and the Hugging Face task. A new kind is one module (its request's
checks and post-processing, as electra.serving.engine.embedding is the embedder's) plus its entry here; the
core picks models, the runner trims logits, and the HTTP layer lists routes, tensors and tasks from these
entries, never from kind names written elsewhere (tests/test_kinds.py checks both).

A kind is served by the bundles whose bundle.json `kind` is in its `bundles`: a bundle kind's own work
(detecting, classifying, tagging), and the embedder's, which every encoder bundle can do.

v2 tensors are batch-first: n texts in, n rows out; `dims` are after the batch dimension, -1 a dimension as
long as the request makes it (electra.serving.http.model_config writes them as the protocol's metadata and
Triton's model configuration).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from electra.bundle import EXPORTABLE_KINDS
from electra.serving.engine.requests import Classified, Classify, Detect, Embed, Embedded, Tag
from electra.serving.engine.results import DetectResult
from electra.serving.engine.windows import TokenLogits

if TYPE_CHECKING:
    from electra.serving.engine.runtime import ModelRunner

# The kinds' names: the three a bundle is (bundle.json's `kind`) and the embedder, which any of them is too.
DETECTOR = "discriminator"
CLASSIFIER = "classifier"
TAGGER = "tagger"
EMBEDDER = "embedder"


@dataclass(frozen=True)
class Tensor:
    """One v2 tensor: its name, wire datatype and dimensions after the batch dimension."""

    name: str
    datatype: str
    dims: tuple[int, ...]
    optional: bool = False
    reshape: tuple[int, ...] | None = None  # the shape the model reads, when not dims


TOKENS = -1  # a per-token dimension: as long as the longest text of the request
SUGGESTIONS = -1  # a per-suggestion dimension: the request's `suggest`


def _per_token(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, (TOKENS,))


def _per_text(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, ())


def _per_suggestion(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, (TOKENS, SUGGESTIONS))


# A text is one element of its row: [n, 1], as Triton declares a scalar per batch item.
TEXT = Tensor("text", "BYTES", (1,), reshape=())
TEXT_PAIR = Tensor("text_pair", "BYTES", (1,), optional=True, reshape=())
_OFFSETS = [_per_token("starts", "INT64"), _per_token("ends", "INT64"), _per_token("tokens", "BYTES")]
_PER_TEXT = [_per_text("lengths", "INT64"), _per_text("windows", "INT64"), _per_text("truncated", "BOOL")]
DETECTOR_OUTPUTS = [_per_token("scores", "FP32"), _per_token("replaced", "BOOL"), *_OFFSETS, *_PER_TEXT]
# A detector with a generator, answered when the request sends `suggest` (electra.serving.http.protocols).
SUGGESTION_OUTPUTS = [
    _per_suggestion("suggestions", "BYTES"),
    _per_suggestion("suggestion_scores", "FP32"),
    _per_suggestion("suggestion_texts", "BYTES"),
    _per_suggestion("suggestion_starts", "INT64"),
    _per_suggestion("suggestion_ends", "INT64"),
    _per_text("suggested_text", "BYTES"),
]
TAGGER_OUTPUTS = [_per_token("labels", "BYTES"), _per_token("scores", "FP32"), *_OFFSETS, *_PER_TEXT]


def _detector_outputs(runner: ModelRunner) -> list[Tensor]:
    return DETECTOR_OUTPUTS + (SUGGESTION_OUTPUTS if runner.generator is not None else [])


def _classifier_outputs(runner: ModelRunner) -> list[Tensor]:
    if runner.regression:
        return [_per_text("score", "FP32"), _per_text("truncated", "BOOL")]
    return [
        Tensor("probabilities", "FP32", (len(runner.labels),)),
        _per_text("label", "BYTES"),
        _per_text("truncated", "BOOL"),
    ]


def _classifier_classes(runner: ModelRunner) -> dict[str, list[str] | None]:
    return {} if runner.regression else {"probabilities": list(runner.labels)}


def _embedder_outputs(runner: ModelRunner) -> list[Tensor]:
    return [Tensor("embeddings", "FP32", (runner.bundle.hidden_size,)), _per_text("truncated", "BOOL")]


@dataclass(frozen=True)
class ModelKind:
    """One kind of work: which bundles do it, and how every protocol asks for it and answers.

    per_token: the model's logits are a row per token (trimmed to each input's length), not one vector;
    v2_classes: the outputs Triton's classification extension may answer as top classes, with their labels;
    hf_ignore_labels: a token classifier's labels its Hugging Face answer leaves out by default."""

    name: str
    bundles: tuple[str, ...]
    route: str
    request: type
    result: type
    hf_task: str
    v2_outputs: Callable[[ModelRunner], list[Tensor]]
    v2_inputs: tuple[Tensor, ...] = (TEXT,)
    v2_parameters: frozenset[str] = frozenset()
    v2_classes: Callable[[ModelRunner], dict[str, list[str] | None]] = field(default=lambda _: {})
    per_token: bool = False
    hf_ignore_labels: tuple[str, ...] = ()


KINDS: dict[str, ModelKind] = {}


def register(kind: ModelKind) -> ModelKind:
    """Add `kind` to the registry (ValueError for a name or route already taken)."""
    if kind.name in KINDS or any(k.route == kind.route for k in KINDS.values()):
        raise ValueError(f"model kind {kind.name!r} or its route {kind.route} is already registered")
    KINDS[kind.name] = kind
    return kind


register(
    ModelKind(
        name=DETECTOR,
        bundles=(DETECTOR,),
        route="/detect",
        request=Detect,
        result=DetectResult,
        hf_task="token-classification",
        v2_outputs=_detector_outputs,
        v2_parameters=frozenset({"threshold", "level", "stride", "truncate", "suggest"}),
        per_token=True,
        # Its tokens that were not replaced.
        hf_ignore_labels=("original",),
    )
)
register(
    ModelKind(
        name=CLASSIFIER,
        bundles=(CLASSIFIER,),
        route="/classify",
        request=Classify,
        result=Classified,
        hf_task="text-classification",
        v2_outputs=_classifier_outputs,
        v2_inputs=(TEXT, TEXT_PAIR),
        v2_parameters=frozenset({"truncate"}),
        v2_classes=_classifier_classes,
    )
)
register(
    ModelKind(
        name=TAGGER,
        bundles=(TAGGER,),
        route="/tag",
        request=Tag,
        result=TokenLogits,
        hf_task="token-classification",
        v2_outputs=lambda _: TAGGER_OUTPUTS,
        v2_parameters=frozenset({"stride", "truncate"}),
        per_token=True,
        # The pipeline's default.
        hf_ignore_labels=("O",),
    )
)
# Every encoder bundle embeds, beside its own kind's work: on /embed, on /v2 when a request asks for the
# output `embeddings` (a model answers its bundle's own kind otherwise), and on /hf's feature-extraction
# path (/hf/NAME answers the bundle's own kind).
register(
    ModelKind(
        name=EMBEDDER,
        bundles=EXPORTABLE_KINDS,
        route="/embed",
        request=Embed,
        result=Embedded,
        hf_task="feature-extraction",
        v2_outputs=_embedder_outputs,
        v2_parameters=frozenset({"truncate", "normalize"}),
    )
)


def kind_of(name: str) -> ModelKind:
    """The registered kind called `name` (a bundle's `kind` names its own)."""
    return KINDS[name]


def served_by(bundle_kind: str) -> list[ModelKind]:
    """Every kind a bundle of `bundle_kind` serves: its own first."""
    kinds = [k for k in KINDS.values() if bundle_kind in k.bundles]
    return sorted(kinds, key=lambda k: k.name != bundle_kind)
