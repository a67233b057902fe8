"""text-embeddings-inference's request bodies read as TEI reads them, and /embed's answer: shared by TEI's
routes (electra.serving.http.tei) and Hugging Face's feature-extraction (electra.serving.http.protocols),
which answers as /embed does. Routes do not import each other; what two of them share lives here."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import ValidationException

from electra.serving.engine.errors import EmptyInput
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.requests import Embed
from electra.serving.engine.rounding import as_float32
from electra.serving.http.open_inference import ProtocolError
from electra.serving.http.schemas import EmbedRequest, PredictRequest, RerankRequest
from electra.serving.http.state import ServerState

log = logging.getLogger("electra.serving")

Body = TypeVar("Body", RerankRequest, PredictRequest, EmbedRequest)


async def read_body(request: Request[Any, Any, Any], kind: type[Body]) -> tuple[Body, list[str]]:
    """The body (read_json_body decoded it) as `kind`, strictly typed, as TEI's serde reads it (a boolean is
    true or false, not "true" or 1); and the fields `kind` does not have, which are ignored, as TEI does."""
    raw = await request.json()
    try:
        data = msgspec.convert(raw, kind, strict=True)
    except msgspec.ValidationError as e:
        message, _, where = str(e).partition(" - at `$.")
        problem: dict[str, Any] = {"message": message, "source": "body"}
        if where:
            problem["key"] = where.removesuffix("`")
        raise ValidationException(
            detail=f"Validation failed for {request.method} {request.url.path}", extra=[problem]
        ) from None
    ignored = sorted(k for k in raw if k not in kind.__struct_fields__)
    if ignored:
        log.debug("%s: ignored unknown fields %s", request.url.path, ", ".join(ignored))
    return data, ignored


def auto_truncate(state: ServerState, given: bool | None) -> bool:
    """`truncate` as sent, or the server's --auto-truncate when absent or null (TEI's behaviour)."""
    return state.settings.auto_truncate if given is None else given


async def embed_vectors(
    state: ServerState, data: EmbedRequest, model: str | None, meta: RequestMetadata
) -> list[list[float]]:
    """/embed's answer to `data` from the model called `model` (None: the one that embeds): each input's
    vector, its components float32 values as TEI writes them. Also Hugging Face's feature-extraction."""
    if data.prompt_name is not None:
        raise ProtocolError(
            f"'prompt_name' is {data.prompt_name!r}, but a bundle has no sentence-transformers prompts: "
            "put the prompt in the text and send null"
        )
    embed = Embed(
        embed_inputs(data.inputs),
        data.normalize,
        auto_truncate(state, data.truncate),
        data.truncation_direction.lower(),
        allow_empty=False,
        dimensions=data.dimensions,
    )
    _, embedded = await state.inference.embed(embed, model=model, meta=meta)
    return [as_float32(v) for v in embedded.vectors]


def embed_inputs(inputs: str | list[str | list[int]]) -> list[str]:
    """TEI's /embed Input as texts: one text, or a list of them. TEI also takes token ids; this server does
    not (its truncation and pooling start from text), and says so."""
    if isinstance(inputs, str):
        return [inputs]
    if not inputs:
        raise EmptyInput("'inputs' is empty; send a text or a list of texts")
    for i, item in enumerate(inputs):
        if not isinstance(item, str):
            raise ProtocolError(f"inputs[{i}] is token ids; this server embeds texts: send the text")
    return inputs  # type: ignore[return-value]
