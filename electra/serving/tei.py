"""text-embeddings-inference's (TEI's) routes for classifiers: `POST /rerank` and `POST /predict`, in the
shapes of its OpenAPI document (docs/openapi.json of release 1.9.3; tests/fixtures/tei/ holds it) and its
router (router/src/http/server.rs), translated to the inference core's requests, so a TEI client talks to this
server unchanged.

As TEI: /rerank scores each text against the query with a cross-encoder (a classifier of one output) and
answers index and score per text, best first (`raw_scores`: the logit, else its sigmoid; `return_text`: the
text too); /predict takes one text, a pair `[a, b]` or a batch of both (`[[a], [a, b], ...]`) and answers
every label's score, best first (`raw_scores`: logits, else softmax over the labels, or a sigmoid for a model
of one output). `truncate` absent or null refuses an input over the model's length (TEI's default without
--auto-truncate) with an error naming the limit; `truncation_direction` says which end a truncated input
loses. Beyond TEI, which serves one model: `model` names one when the server has several, and a multi-label
classifier scores each label with its own sigmoid, as it was trained. Errors answer TEI's
`{"error", "error_type"}` (electra.serving.error_responses).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from litestar import post
from litestar.openapi import ResponseSpec
from litestar.params import JSONBody

from electra.serving.core import Classify, Rerank
from electra.serving.json_body import read_json_body
from electra.serving.open_inference import ProtocolError
from electra.serving.postprocess import class_probabilities
from electra.serving.rounding import rounded
from electra.serving.schemas import Prediction, PredictRequest, Rank, RerankRequest, TEIError
from electra.serving.state import ServerState

TEI_PATHS = frozenset({"/rerank", "/predict"})
TAGS = ["text-embeddings-inference"]
# TEI refuses an input over the model's length unless the server runs with --auto-truncate (off by default).
TRUNCATE_BY_DEFAULT = False


def _errors(*codes: int) -> dict[int, ResponseSpec]:
    return {
        c: ResponseSpec(data_container=TEIError, description="error", generate_examples=False) for c in codes
    }


def tei_routes(state: ServerState, guards: list[Any]) -> list[Any]:
    @post(
        "/rerank",
        status_code=200,
        guards=guards,
        before_request=read_json_body,
        tags=TAGS,
        responses=_errors(400, 401, 404, 413, 503),
    )
    async def rerank(data: JSONBody[RerankRequest]) -> list[Rank]:
        """Every text scored against the query by a cross-encoder, best first (TEI's /rerank)."""
        request = Rerank(
            data.query,
            data.texts,
            _truncate(data.truncate),
            data.truncation_direction.lower(),
            data.raw_scores,
        )
        _, ranked = await state.inference.rerank(request, model=data.model)
        if data.return_text:
            return [Rank(i, score, data.texts[i]) for i, score in ranked]
        return [Rank(i, score) for i, score in ranked]

    @post(
        "/predict",
        status_code=200,
        guards=guards,
        before_request=read_json_body,
        tags=TAGS,
        responses=_errors(400, 401, 404, 413, 503),
    )
    async def predict(data: JSONBody[PredictRequest]) -> list[Prediction] | list[list[Prediction]]:
        """Every label's score for one input, or for each of a batch, best first (TEI's /predict)."""
        single, pairs = predict_inputs(data.inputs)
        request = Classify(
            pairs, _truncate(data.truncate), "inputs", data.truncation_direction.lower(), raw_scores=True
        )
        runner, classified = await state.inference.classify(request, model=data.model)
        labels = runner.labels or ["LABEL_0"]
        out = [predictions(row, labels, runner.multi_label, data.raw_scores) for row in classified.logits]
        return out[0] if single else out

    return [rerank, predict]


def _truncate(given: bool | None) -> bool:
    return TRUNCATE_BY_DEFAULT if given is None else given


def predict_inputs(inputs: str | list[str | list[str]]) -> tuple[bool, list[tuple[str, str | None]]]:
    """TEI's PredictInput read as TEI reads it: a string, or an array whose first element is a string (one
    input of one or two texts), else a batch of arrays of one or two texts. (single?, the pairs)."""
    if isinstance(inputs, str):
        return True, [(inputs, None)]
    if not inputs:
        raise ProtocolError("'inputs' is empty; send a text, a pair [text, text] or a batch of them")
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
    """Every label with its score, the highest first (ties in the labels' order)."""
    scores = rounded(logits if raw else class_probabilities(logits, multi_label))
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [Prediction(scores[i], labels[i]) for i in order]
