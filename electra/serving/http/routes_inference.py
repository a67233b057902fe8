"""The JSON API: /detect, /classify and /tag run a model, /models lists what they can run; all of them behind
the API keys when the server has some.

Each route reads its body into one of the engine's requests (electra.serving.engine.requests), which the core
checks and runs as it does the standard protocols' routes, and writes the result back.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from litestar import get, post
from litestar.enums import RequestEncodingType
from litestar.exceptions import HTTPException
from litestar.openapi import ResponseSpec
from litestar.params import Body
from litestar.types import Scope

from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.requests import Classify, Detect, Tag
from electra.serving.engine.tagging import tag_result
from electra.serving.http.json_body import read_json_body
from electra.serving.http.middleware.request_metadata import request_meta
from electra.serving.http.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    DetectRequest,
    DetectResponse,
    ErrorBody,
    ModelsResponse,
    TagRequest,
    TagResponse,
    to_model_info,
)
from electra.serving.http.state import Server, ServerState


def _errors(*codes: int) -> dict[int, ResponseSpec]:
    why = {
        400: "malformed or invalid request",
        401: "missing or wrong API key (when the server has keys)",
        404: "no such model",
        413: "over a size limit (body, inputs, characters, tokens with truncate=false)",
        503: "queue full or models still loading (see Retry-After)",
    }
    return {
        c: ResponseSpec(data_container=ErrorBody, description=why[c], generate_examples=False) for c in codes
    }


INFERENCE_ERRORS = _errors(400, 401, 404, 413, 503)


_inference = functools.partial(
    post,
    status_code=200,
    before_request=read_json_body,
    tags=["inference"],
    responses=INFERENCE_ERRORS,
)


@_inference("/detect")
async def detect(
    data: Annotated[DetectRequest, Body(media_type=RequestEncodingType.JSON)],
    scope: Scope,
    server: Server,
) -> DetectResponse:
    """Score every token of each text: probability that it was replaced (ELECTRA's discriminator); with
    `suggest`, what the generator proposes in place of each replaced token."""
    return await _detect(server, data, request_meta(scope))


@_inference("/classify")
async def classify(
    data: Annotated[ClassifyRequest, Body(media_type=RequestEncodingType.JSON)],
    scope: Scope,
    server: Server,
) -> ClassifyResponse:
    """Label each input (or text pair) with a fine-tuned classifier; regression answers a score."""
    return await _classify(server, data, request_meta(scope))


@_inference("/tag")
async def tag(
    data: Annotated[TagRequest, Body(media_type=RequestEncodingType.JSON)], scope: Scope, server: Server
) -> TagResponse:
    """The entities of each text (token classification with a tagger), grouped as transformers'
    TokenClassificationPipeline does; long texts through overlapping windows, as on /detect."""
    return await _tag(server, data, request_meta(scope))


@get("/models", tags=["models"], responses=_errors(401))
async def models(server: Server) -> ModelsResponse:
    """The loaded bundles and their metadata (kind, labels, limits, precision, fused ops, parity)."""
    return ModelsResponse(models=[to_model_info(r.describe()) for r in server.runners.values()])


# /detect, /classify, /tag and /models: behind the API keys when the server has some.
KEYED_ROUTES = [detect, classify, tag, models]


async def _detect(state: ServerState, data: DetectRequest, meta: RequestMetadata) -> DetectResponse:
    field, texts = _batch(data.text, data.texts, data.inputs)
    request = Detect(texts, data.threshold, data.level, data.stride, data.truncate, data.suggest, field)
    runner, results = await state.inference.detect(request, model=data.model, meta=meta)
    return DetectResponse(model=runner.name, results=results)


async def _tag(state: ServerState, data: TagRequest, meta: RequestMetadata) -> TagResponse:
    field, texts = _batch(data.text, data.texts, data.inputs)
    request = Tag(texts, data.stride, data.truncate, field)
    runner, scored = await state.inference.tag(request, model=data.model, meta=meta)
    aggregation, ignore = data.aggregation_strategy, data.ignore_labels
    results = [
        tag_result(text, s, runner.labels, aggregation, ignore) for text, s in zip(texts, scored, strict=True)
    ]
    return TagResponse(model=runner.name, results=results)


async def _classify(state: ServerState, data: ClassifyRequest, meta: RequestMetadata) -> ClassifyResponse:
    field, items = _batch(data.text, data.texts, data.inputs, "; a pair as {'text', 'text_pair'}")
    if data.text_pair is not None and field != "text":
        raise HTTPException(
            status_code=400,
            detail=f"'text_pair' goes with 'text'; in '{field}' send a pair as {{'text', 'text_pair'}}",
        )
    if field == "text":
        pairs = [(data.text, data.text_pair)]
    else:
        pairs = [(x, None) if isinstance(x, str) else (x.text, x.text_pair) for x in items]
    request = Classify(pairs, data.truncate, field, raw_scores=data.raw_scores)
    runner, classified = await state.inference.classify(request, model=data.model, meta=meta)
    return ClassifyResponse(model=runner.name, results=classified.results)


# The routes whose common request electra.serving.http.hot_path answers without the framework: each one's
# body type and the function that answers it, the one its Litestar route calls.
HOT_ROUTES: dict[str, tuple[type[Any], Callable[[ServerState, Any, RequestMetadata], Awaitable[Any]]]] = {
    "/detect": (DetectRequest, _detect),
    "/classify": (ClassifyRequest, _classify),
    "/tag": (TagRequest, _tag),
}


def _batch(
    text: Any, texts: list[Any] | None, inputs: list[Any] | None, pairs: str = ""
) -> tuple[str, list[Any]]:
    """The one of `text` (one input), `texts` or `inputs` (a batch, the same list under either name) a
    body sends, as (its name, its inputs)."""
    given = [
        (name, value)
        for name, value in (("text", text), ("texts", texts), ("inputs", inputs))
        if value is not None
    ]
    if len(given) != 1:
        raise HTTPException(
            status_code=400,
            detail="send exactly one of 'text' (one input), 'texts' or 'inputs' (a list of them: a text as "
            f"a string{pairs})",
        )
    name, value = given[0]
    return name, [value] if name == "text" else value
