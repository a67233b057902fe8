"""text-embeddings-inference's (TEI's) routes: `POST /rerank` and `POST /predict` for classifiers, and `POST
/embed` for any encoder bundle, in the shapes of its OpenAPI document (docs/openapi.json of release 1.9.3;
tests/fixtures/tei/ holds it) and with the behaviours of its router (router/src/http/server.rs,
core/src/tokenization.rs), translated to the inference core's requests, so a TEI client talks to this server
unchanged.

As TEI: /rerank scores each text against the query with a cross-encoder (a classifier of one output) and
answers index and score per text, best first (`raw_scores`: the logit, else its sigmoid; `return_text`: the
text too); /predict takes one text, a pair `[a, b]` or a batch of both (`[[a], [a, b], ...]`) and answers
every label's score, best first (`raw_scores`: logits, else softmax over the labels, or a sigmoid for a model
of one output); /embed takes one text or a list and answers a list of sentence vectors, the last hidden state
pooled as the bundle says ([CLS] or mean; electra.serving.engine.embedding), of unit length unless `normalize`
is false. Scores and vector components are float32 values, written as TEI writes them (the shortest decimal
that reads back as the same float32), and ordered unrounded, of equal scores the later first (TEI's sort).
`truncate` absent or null takes the server's --auto-truncate (TEI's, true by default); false refuses an input
over the model's length with an error naming the limit (and the query, when the query alone is too long);
`truncation_direction` says which end a truncated input loses. An input with no text (a pair: neither side) is
refused, 400 `Empty`, as is an empty list of inputs. Fields are read strictly (`raw_scores` is a JSON boolean,
not "true" or 1); fields TEI's types do not have are ignored, as TEI ignores them, and named in the
`Electra-Ignored-Fields` header. Beyond TEI, which serves one model: `model` names one when the server has
several, and a multi-label classifier scores each label with its own sigmoid, as it was trained. Errors answer
TEI's `{"error", "error_type"}` (electra.serving.http.error_responses).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np
from litestar import Request, Response, post
from litestar.openapi import ResponseSpec

from electra.serving.engine.core import ranked
from electra.serving.engine.errors import EmptyInput
from electra.serving.engine.postprocess import class_probabilities
from electra.serving.engine.requests import Classify, Rerank
from electra.serving.engine.rounding import as_float32
from electra.serving.http.json_body import read_json_body
from electra.serving.http.middleware.request_metadata import request_meta
from electra.serving.http.open_inference import ProtocolError
from electra.serving.http.schemas import (
    EmbedRequest,
    Prediction,
    PredictRequest,
    Rank,
    RerankRequest,
    TEIError,
)
from electra.serving.http.state import Server
from electra.serving.http.tei_bodies import auto_truncate, embed_vectors, read_body

log = logging.getLogger("electra.serving")

TEI_PATHS = frozenset({"/rerank", "/predict", "/embed"})
TAGS = ["text-embeddings-inference"]
IGNORED_HEADER = "Electra-Ignored-Fields"


def _errors(*codes: int) -> dict[int, ResponseSpec]:
    return {
        c: ResponseSpec(data_container=TEIError, description="error", generate_examples=False) for c in codes
    }


# Every TEI route: a JSON body (read first, one wording for a malformed one), TEI's error shape.
_tei = functools.partial(
    post,
    status_code=200,
    before_request=read_json_body,
    tags=TAGS,
    responses=_errors(400, 401, 404, 413, 503),
)


@_tei("/rerank")
async def rerank(request: Request[Any, Any, Any], server: Server) -> Response[list[Rank]]:
    """Every text scored against the query by a cross-encoder, best first (TEI's /rerank)."""
    data, ignored = await read_body(request, RerankRequest)
    asked = Rerank(
        data.query,
        data.texts,
        auto_truncate(server, data.truncate),
        data.truncation_direction.lower(),
        data.raw_scores,
        allow_empty=False,
    )
    _, scored = await server.inference.rerank(asked, model=data.model, meta=request_meta(request.scope))
    scores = as_float32([score for _, score in scored])
    if data.return_text:
        ranks = [Rank(i, s, data.texts[i]) for (i, _), s in zip(scored, scores, strict=True)]
    else:
        ranks = [Rank(i, s) for (i, _), s in zip(scored, scores, strict=True)]
    return Response(ranks, headers=_named(ignored))


@_tei("/predict")
async def predict(
    request: Request[Any, Any, Any], server: Server
) -> Response[list[Prediction] | list[list[Prediction]]]:
    """Every label's score for one input, or for each of a batch, best first (TEI's /predict)."""
    data, ignored = await read_body(request, PredictRequest)
    single, pairs = predict_inputs(data.inputs)
    classify = Classify(
        pairs,
        auto_truncate(server, data.truncate),
        "inputs",
        data.truncation_direction.lower(),
        raw_scores=True,
        allow_empty=False,
    )
    meta = request_meta(request.scope)
    runner, classified = await server.inference.classify(classify, model=data.model, meta=meta)
    labels = runner.labels or ["LABEL_0"]
    out = [predictions(row, labels, runner.multi_label, data.raw_scores) for row in classified.logits]
    return Response(out[0] if single else out, headers=_named(ignored))


@_tei("/embed")
async def embed(request: Request[Any, Any, Any], server: Server) -> Response[list[list[float]]]:
    """Each input's sentence vector, pooled from the encoder's last hidden state (TEI's /embed)."""
    data, ignored = await read_body(request, EmbedRequest)
    vectors = await embed_vectors(server, data, data.model, request_meta(request.scope))
    return Response(vectors, headers=_named(ignored))


# TEI's routes, behind the API keys when the server has some.
KEYED_ROUTES = [rerank, predict, embed]


def _named(ignored: list[str]) -> dict[str, str]:
    return {IGNORED_HEADER: ", ".join(ignored)} if ignored else {}


def predict_inputs(inputs: str | list[str | list[str]]) -> tuple[bool, list[tuple[str, str | None]]]:
    """TEI's PredictInput read as TEI reads it: a string, or an array whose first element is a string (one
    input of one or two texts), else a batch of arrays of one or two texts. (single?, the pairs)."""
    if isinstance(inputs, str):
        return True, [(inputs, None)]
    if not inputs:
        raise EmptyInput("'inputs' is empty; send a text, a pair [text, text] or a batch of them")
    if isinstance(inputs[0], str):
        return True, [_sequence(inputs, "inputs")]
    return False, [_sequence(item, f"inputs[{i}]") for i, item in enumerate(inputs)]


def _sequence(item: Any, where: str) -> tuple[str, str | None]:
    if not isinstance(item, list) or not all(isinstance(x, str) for x in item) or len(item) not in (1, 2):
        raise ProtocolError(
            f"{where} must be a text or a pair of texts, [text] or [text, text]: "
            "'inputs' is a string, a pair [string, string] or a batch [[string], [string, string], ...]"
        )
    return (item[0], item[1] if len(item) == 2 else None)


def predictions(logits: np.ndarray, labels: list[str], multi_label: bool, raw: bool) -> list[Prediction]:
    """Every label with its score, the highest first (of equal scores the later label first, as TEI)."""
    scores = (logits if raw else class_probabilities(logits, multi_label)).tolist()
    order = ranked(scores)
    written = as_float32([scores[i] for i in order])
    return [Prediction(score, labels[i]) for i, score in zip(order, written, strict=True)]
