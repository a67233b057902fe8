"""The engine's requests: what a route asks of the core (electra.serving.engine.core), typed, one class per
kind of work, and what some of them answer. A route builds one from its protocol's body; the core checks it
and runs it the same way whichever protocol it came from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from electra.serving.engine.encoded import Encoded
from electra.serving.engine.results import DEFAULT_THRESHOLD, ClassifyResult
from electra.serving.engine.suggest import Target
from electra.serving.engine.windows import Document


@dataclass(frozen=True)
class Detect:
    """Score every token of each text (probability it was replaced); with `suggest`, the generator's best
    replacements for each flagged one. `field` is what the protocol calls the texts, for its errors."""

    texts: list[str]
    threshold: float = DEFAULT_THRESHOLD
    level: str = "token"
    stride: int | None = None
    truncate: bool = False
    suggest: int | None = None
    field: str = "texts"


@dataclass(frozen=True)
class Tag:
    """Each token's logits of a per-token model (a tagger, or a detector for token-classification)."""

    texts: list[str]
    stride: int | None = None
    truncate: bool = False
    field: str = "texts"


@dataclass(frozen=True)
class Classify:
    """Texts or text pairs through a classifier. `direction`: where a long input loses tokens ("right": its
    end); `raw_scores`: logits in the results instead of probabilities; `query`: the pairs' first texts are
    one query (a rerank), named as such when it is what makes an input too long; `allow_empty` false: an
    input with no text (a text, or both of a pair, "") is refused (text-embeddings-inference's Empty)."""

    pairs: list[tuple[str, str | None]]
    truncate: bool = False
    field: str = "inputs"
    direction: str = "right"
    raw_scores: bool = False
    query: bool = False
    allow_empty: bool = True


@dataclass(frozen=True)
class Rerank:
    """Every text scored against the query by a cross-encoder (a classifier of one output), best first:
    sigmoid of its logit, as sentence-transformers' CrossEncoder scores it, or the logit with `raw_scores`.
    `allow_empty` false: a text that is "" with the query "" too is refused, as Classify's."""

    query: str
    texts: list[str]
    truncate: bool = False
    direction: str = "right"
    raw_scores: bool = False
    field: str = "texts"
    allow_empty: bool = True


@dataclass(frozen=True)
class FillMask:
    """fill-mask's proposals for each text: its [MASK]s filled by the generator, or where it holds none, the
    tokens the detector flags; `targets` (words) limits what may be proposed."""

    texts: list[str]
    top_k: int
    targets: str | list[str] | None = None
    field: str = "inputs"


@dataclass(frozen=True)
class Embed:
    """Each text's sentence vector from an encoder (any bundle exported with its last hidden state), pooled as
    its bundle says and, with `normalize`, of unit length. `truncate` false: an input over the model's length
    is refused (TooLong); `direction`: which end a truncated one loses; `allow_empty` false: "" is refused
    (text-embeddings-inference's Empty); `dimensions`: the length asked for, which only the model's own passes
    (None: not asked)."""

    texts: list[str]
    normalize: bool = True
    truncate: bool = False
    direction: str = "right"
    field: str = "inputs"
    allow_empty: bool = True
    dimensions: int | None = None


@dataclass(frozen=True)
class Embedded:
    """Per text, its vector (float32, the model's hidden size) and whether its input was cut to fit."""

    vectors: list[np.ndarray]
    truncated: list[bool]


@dataclass(frozen=True)
class Filled:
    """Per text: its document, its targets (masks or flagged tokens), whether they were [MASK]s, and each
    target's top tokens (TOP_TOKENS rows)."""

    docs: list[Document]
    targets: list[list[Target]]
    masked: list[bool]
    rows: list[list[np.ndarray]]


@dataclass(frozen=True)
class Classified:
    encoded: list[Encoded]
    logits: list[np.ndarray]
    results: list[ClassifyResult]
