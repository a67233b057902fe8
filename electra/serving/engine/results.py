"""What the engine answers: each input's result, as the routes send it (msgspec Structs, so the JSON routes
write them as they are and the OpenAPI schema at /schema shows them)."""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType

# A token is flagged replaced at this probability or above: /detect's default, and what fill-mask and the
# demo flag with.
DEFAULT_THRESHOLD = 0.5


class Suggestion(Struct):
    """A replacement the generator proposes for a flagged token or word: `token` as the vocabulary has it,
    `score` its probability, and the edit that applies it: `input[start:end]` becomes `text`.

    The span is the token's own, except for a WordPiece continuation ("##ed") proposed for a token that
    starts a word: it joins the word before, so the span also covers the space between. With a lower-casing
    tokenizer, `text` takes the case of the text it replaces ("River" -> "Lake")."""

    token: str
    score: float
    text: str
    start: int
    end: int


class Token(Struct):
    """A token (or a word with level=word): `text == input[start:end]`, offsets in characters.
    `suggestions`: with `suggest`, on every replaced token, best first."""

    text: str
    start: int
    end: int
    score: float
    replaced: bool
    suggestions: list[Suggestion] | UnsetType = UNSET


class DetectResult(Struct):
    """`truncated`: only the first window was scored (truncate=true); `windows`: model inputs it took.
    `suggested_text`: with `suggest`, the text with each replaced token's best suggestion applied."""

    tokens: list[Token]
    replaced_fraction: float
    truncated: bool
    windows: int = 1
    suggested_text: str | UnsetType = UNSET


class ClassifyResult(Struct, omit_defaults=True):
    """`label` and every label's probability in `scores` (its logit with raw_scores); a regression model
    answers `score` instead. A multi-label model also lists in `labels` every label over its threshold
    (0.5 unless its bundle says otherwise)."""

    label: str | None = None
    scores: dict[str, float] | None = None
    labels: list[str] | None = None
    score: float | None = None
    truncated: bool = False


Aggregation = Literal["none", "simple", "first", "average", "max"]


class TagEntity(Struct, omit_defaults=True):
    """An entity (or a token with aggregation "none": its tag, and `index`, its position in the text's
    tokens counting [CLS] as 0). `text == input[start:end]`, offsets in characters."""

    label: str
    score: float
    text: str
    start: int
    end: int
    index: int | None = None


class TagResult(Struct):
    """`truncated`: only the first window was tagged (truncate=true); `windows`: model inputs it took."""

    entities: list[TagEntity]
    windows: int
    truncated: bool
