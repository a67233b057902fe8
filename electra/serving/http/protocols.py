"""The standard protocols' routes: Open Inference Protocol v2 (`/v2/...`) and Hugging Face task shapes
(`/hf/{name}`), answered by the same batching, limits, API keys and metrics as `/detect` and `/classify`.

v2 tensors of a detector (n texts, padded to the most tokens m; positions past `lengths` are padding):
`scores` FP32 [n, m] (probability each token was replaced), `replaced` BOOL [n, m], `starts`/`ends` INT64
[n, m] (character offsets, -1 in padding), `tokens` BYTES [n, m] (the text each token spans), `lengths`,
`windows` INT64 [n] and `truncated` BOOL [n]; with the parameter `suggest: k` (a detector with a generator)
also, per replaced token, its k suggestions (k padded with "", 0 and -1 elsewhere): `suggestions` BYTES
[n, m, k] (the vocabulary's tokens), `suggestion_scores` FP32, `suggestion_texts` BYTES and
`suggestion_starts`/`suggestion_ends` INT64 (the edit: text[start:end] becomes the text), and
`suggested_text` BYTES [n]. Of a tagger: `labels` BYTES [n, m] (each token's most
probable tag) and `scores` FP32 [n, m] (its probability) instead of `scores` and `replaced`, the rest alike.
Of a classifier: `probabilities` FP32 [n, labels] and `label` BYTES [n] (a regression model: `score` FP32
[n]), and `truncated`. Request parameters are /detect's, /tag's and /classify's (`threshold`, `level`,
`stride`, `truncate`, `suggest`; a tagger takes `stride` and `truncate`); other keys are ignored and named
back in the answer (electra.serving.http.open_inference). Each model's tensors, its Triton model configuration
and its statistics: electra.serving.http.model_config, electra.serving.http.statistics. fill-mask on /hf:
electra.serving.http.fill_mask.

Any model that embeds also answers `embeddings` FP32 [n, hidden] (with `truncated`), /embed's vectors, to a v2
request that asks for that output and no other of its kind's (parameters `normalize`, `truncate`), and
Hugging Face's feature-extraction at /hf/{name}/pipeline/feature-extraction (/embed's body and answer).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import numpy as np
from litestar import Request, Response, get, post
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody
from litestar.types import Scope
from msgspec import Meta

from electra import __version__
from electra.serving.engine.errors import TooLarge
from electra.serving.engine.kinds import CLASSIFIER, DETECTOR, EMBEDDER, TAGGER, kind_of
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.requests import Classify, Detect, Embed, Tag
from electra.serving.engine.results import DetectResult
from electra.serving.engine.tagging import document_entities, label_probabilities, softmax
from electra.serving.http.fill_mask import fill_mask
from electra.serving.http.hf_tasks import (
    FillMaskElement,
    HFRequest,
    LabelScore,
    TextClassificationParameters,
    TextPairInput,
    TokenClassificationParameters,
    TokenEntity,
    default_function,
    fill_mask_conflict,
    hf_entity,
    is_fill_mask,
    is_token_classifier,
    label_scores,
    wrong_task,
)
from electra.serving.http.json_body import read_json_body
from electra.serving.http.middleware.request_metadata import request_meta
from electra.serving.http.model_config import (
    SUGGESTION_OUTPUTS,
    VERSION,
    classes,
    config_of,
    metadata_of,
    outputs,
)
from electra.serving.http.open_inference import (
    HEADER_LENGTH,
    ModelMetadata,
    ProtocolError,
    ProtocolErrorBody,
    RequestOutput,
    ServerMetadata,
    check_outputs,
    encode_response,
    parse_request,
)
from electra.serving.http.schemas import ClassifyRequest, DetectRequest, EmbedRequest
from electra.serving.http.state import Server, ServerState
from electra.serving.http.tei_bodies import auto_truncate, embed_vectors, read_body

if TYPE_CHECKING:
    from electra.serving.engine.runtime import ModelRunner

V2_PREFIX = "/v2"
HF_PREFIX = "/hf/"
# The protocol extensions implemented (Triton's names, listed in the server metadata; clients such as
# perf_analyzer look here before they use one).
EXTENSIONS = ["binary_tensor_data", "classification", "model_configuration", "parameters", "statistics"]
# The request parameters a model uses are its kind's (electra.serving.engine.kinds: /detect's, /tag's and
# /classify's options); the rest are ignored and named back. binary_data_output is the codec's
# (electra.serving.http.open_inference).
CODEC_PARAMETERS = {"binary_data_output"}
# A v2 answer pads every text's tokens to the longest text's, and each token's suggestions to k: one long text
# among many short ones would make tensors of texts x longest x k elements, out of proportion to the request
# (128 empty texts beside one of 50,000 commas: 6.4M elements a tensor, 20 times that with 20 suggestions).
# Over this many elements in one tensor the request is refused before the tensors are made.
MAX_TENSOR_ELEMENTS = 1 << 22


def uses_protocol_errors(path: str) -> bool:
    """Whether errors on `path` answer in the protocols' `{"error": message}` shape."""
    return path == V2_PREFIX or path.startswith((V2_PREFIX + "/", HF_PREFIX))


def is_inference(path: str) -> bool:
    """A POST to `path` runs a model (see electra.serving.http.middleware.request_metadata)."""
    return path.startswith(HF_PREFIX) or (path.startswith(V2_PREFIX + "/models/") and path.endswith("/infer"))


def _errors(*codes: int) -> dict[int, ResponseSpec]:
    return {
        code: ResponseSpec(data_container=ProtocolErrorBody, description="error", generate_examples=False)
        for code in codes
    }


# --- Open Inference Protocol v2 ---------------------------------------------------------------------------


V2_TAGS = ["open inference protocol v2"]
_MODEL = "/v2/models/{name:str}"
_VERSIONED = "/v2/models/{name:str}/versions/{version:str}"
_READY_ERRORS = {**_errors(404), 503: ResponseSpec(data_container=dict[str, Any])}
_INFER_ERRORS = _errors(400, 401, 404, 413, 503)


@get("/v2", tags=V2_TAGS, responses=_errors(401))
async def server_metadata() -> ServerMetadata:
    """Server name, version and the protocol extensions it implements (Triton's names)."""
    return ServerMetadata(name="electra", version=__version__, extensions=EXTENSIONS)


@get("/v2/models/stats", tags=V2_TAGS, responses=_errors(401))
async def all_statistics(server: Server) -> dict[str, list[dict[str, Any]]]:
    """Triton's statistics extension for every model."""
    return {"model_stats": server.statistics.json(server.runners, VERSION)}


@get("/v2/health/live", tags=V2_TAGS)
async def live() -> dict[str, bool]:
    """200 while the process serves HTTP."""
    return {"live": True}


@get("/v2/health/ready", tags=V2_TAGS, responses={503: ResponseSpec(data_container=dict[str, bool])})
async def ready(server: Server) -> Response[dict[str, bool]]:
    """200 once every model is loaded and warmed up, 503 before."""
    return Response({"ready": server.ready}, status_code=200 if server.ready else 503)


# Per model, each also under /versions/1 (a bundle is version 1): metadata, configuration, statistics,
# readiness, infer.


@get(_MODEL, tags=V2_TAGS, responses=_errors(401, 404))
async def model_metadata(name: FromPath[str], server: Server) -> ModelMetadata:
    """The model's input and output tensors."""
    return metadata_of(_model(server, name, None))


@get(_VERSIONED, tags=V2_TAGS, responses=_errors(401, 404))
async def model_version_metadata(
    name: FromPath[str], version: FromPath[str], server: Server
) -> ModelMetadata:
    """The model's input and output tensors (a bundle is version 1)."""
    return metadata_of(_model(server, name, version))


@get(_MODEL + "/config", tags=V2_TAGS, responses=_errors(401, 404))
async def model_configuration(name: FromPath[str], server: Server) -> dict[str, Any]:
    """Triton's model configuration (ModelConfig): tensors with data_type and dims after the batch
    dimension, optional inputs, max_batch_size (--max-texts), dynamic batching."""
    return config_of(_model(server, name, None), server.settings)


@get(_VERSIONED + "/config", tags=V2_TAGS, responses=_errors(401, 404))
async def model_version_configuration(
    name: FromPath[str], version: FromPath[str], server: Server
) -> dict[str, Any]:
    """Triton's model configuration (a bundle is version 1)."""
    return config_of(_model(server, name, version), server.settings)


@get(_MODEL + "/stats", tags=V2_TAGS, responses=_errors(401, 404))
async def model_statistics(name: FromPath[str], server: Server) -> dict[str, list[dict[str, Any]]]:
    """Triton's statistics extension: request counts and durations, queue, tokenization (compute_input),
    model calls (compute_infer) and post-processing (compute_output)."""
    return _statistics(server, name, None)


@get(_VERSIONED + "/stats", tags=V2_TAGS, responses=_errors(401, 404))
async def model_version_statistics(
    name: FromPath[str], version: FromPath[str], server: Server
) -> dict[str, list[dict[str, Any]]]:
    """Triton's statistics extension (a bundle is version 1)."""
    return _statistics(server, name, version)


@get(_MODEL + "/ready", tags=V2_TAGS, responses=_READY_ERRORS)
async def model_ready(name: FromPath[str], server: Server) -> Response[dict[str, Any]]:
    """200 when the model can answer, 503 while it warms up; open, as the health probes are."""
    return _readiness(server, name, None)


@get(_VERSIONED + "/ready", tags=V2_TAGS, responses=_READY_ERRORS)
async def model_version_ready(
    name: FromPath[str], version: FromPath[str], server: Server
) -> Response[dict[str, Any]]:
    """200 when the model can answer, 503 while it warms up."""
    return _readiness(server, name, version)


@post(_MODEL + "/infer", status_code=200, tags=V2_TAGS, responses=_INFER_ERRORS)
async def model_infer(
    name: FromPath[str], request: Request[Any, Any, Any], server: Server
) -> Response[bytes]:
    """Texts in, tensors out: JSON, or Triton's binary tensor data extension (tritonclient's default)."""
    return await _infer(server, _model(server, name, None), request)


@post(_VERSIONED + "/infer", status_code=200, tags=V2_TAGS, responses=_INFER_ERRORS)
async def model_version_infer(
    name: FromPath[str], version: FromPath[str], request: Request[Any, Any, Any], server: Server
) -> Response[bytes]:
    """Texts in, tensors out (a bundle is version 1)."""
    return await _infer(server, _model(server, name, version), request)


def _statistics(server: ServerState, name: str, version: str | None) -> dict[str, list[dict[str, Any]]]:
    return {"model_stats": server.statistics.json([_model(server, name, version).name], VERSION)}


def _readiness(server: ServerState, name: str, version: str | None) -> Response[dict[str, Any]]:
    runner = _model(server, name, version)
    return Response({"name": runner.name, "ready": server.ready}, status_code=200 if server.ready else 503)


async def _infer(state: ServerState, runner: ModelRunner, request: Request[Any, Any, Any]) -> Response[bytes]:
    meta = request_meta(request.scope)
    parsed = parse_request(await request.body(), request.headers.get(HEADER_LENGTH))
    check_outputs(parsed, [t.name for t in outputs(runner)], classes(runner))
    # The embedder's work, when the request asks for the embeddings: the model's own kind's otherwise.
    kind = EMBEDDER if _asks_for_embeddings(parsed.outputs, runner) else runner.kind
    used = kind_of(kind).v2_parameters
    parameters = {k: v for k, v in parsed.parameters.items() if k in used}
    ignored = [k for k in parsed.parameters if k not in used and k not in CODEC_PARAMETERS]
    if parameters.get("suggest") is None:
        asked = [o.name for o in parsed.outputs or [] if o.name in {t.name for t in SUGGESTION_OUTPUTS}]
        if asked:
            raise ProtocolError(f"output {asked[0]!r} needs the parameter 'suggest' (suggestions per token)")
    tensors = await V2_TENSORS[kind](state, runner, parsed.inputs, parameters, meta)
    body, headers = encode_response(runner.name, VERSION, parsed, tensors, ignored, classes(runner))
    return Response(body, headers=headers, media_type=headers.pop("Content-Type"))


def _asks_for_embeddings(requested: list[RequestOutput] | None, runner: ModelRunner) -> bool:
    """Whether the request asks for the embedder's own outputs (`embeddings`), which come from another pass
    of the model than its kind's (ProtocolError when it asks for both)."""
    names = [o.name for o in requested or []]
    embedder = {t.name for t in kind_of(EMBEDDER).v2_outputs(runner)}
    if not embedder - {t.name for t in kind_of(runner.kind).v2_outputs(runner)} & set(names):
        return False
    others = [n for n in names if n not in embedder]
    if others:
        raise ProtocolError(
            f"output {others[0]!r} and 'embeddings' come from different passes of the model: ask for "
            f"{' and '.join(repr(n) for n in sorted(embedder))} in a request of their own"
        )
    return True


def _model(state: ServerState, name: str, version: str | None) -> ModelRunner:
    return state.inference.named(name, version, VERSION)


class TagTensorRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A tagger's v2 parameters: its tensors are per token, so /tag's aggregation has no place here."""

    texts: list[str]
    truncate: bool = False
    stride: Annotated[int, Meta(ge=0)] | None = None


def _texts(inputs: dict[str, Any], name: str, allowed: set[str]) -> list[str]:
    unknown = set(inputs) - allowed
    if unknown:
        raise ProtocolError(
            f"unknown input {sorted(unknown)[0]!r}; this model takes {', '.join(sorted(allowed))}"
        )
    tensor = inputs.get(name)
    if tensor is None:
        raise ProtocolError(f"input {name!r} (BYTES, one text per element) is missing")
    if tensor.datatype != "BYTES":
        raise ProtocolError(f"input {name!r} must be BYTES (texts), got {tensor.datatype}")
    return [str(x) for x in tensor.data]


def _route_parameters(parameters: dict[str, Any], into: type[Any], fields: dict[str, Any]) -> Any:
    """/detect's, /tag's or /classify's request from the protocol's inputs and the parameters the model uses
    (the route's checks and limits)."""
    try:
        return msgspec.convert({**parameters, **fields}, into)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"parameters: {e}") from None


async def _detect_tensors(
    state: ServerState,
    runner: ModelRunner,
    inputs: dict[str, Any],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> dict[str, tuple[str, np.ndarray]]:
    texts = _texts(inputs, "text", {"text"})
    data: DetectRequest = _route_parameters(parameters, DetectRequest, {"texts": texts})
    request = Detect(texts, data.threshold, data.level, data.stride, data.truncate, data.suggest, "text")
    _, results = await state.inference.detect(request, runner, meta=meta)
    _check_padded(len(results), max((len(r.tokens) for r in results), default=0), data.suggest or 1)
    tensors = _detector_outputs(results)
    if data.suggest is not None:
        tensors.update(_suggestion_outputs(results, data.suggest))
    return tensors


def _check_padded(n: int, m: int, k: int = 1) -> None:
    """Tensors of `n` texts padded to `m` tokens (and `k` suggestions each) within MAX_TENSOR_ELEMENTS."""
    if n * m * k > MAX_TENSOR_ELEMENTS:
        per = f" x {k} suggestions" if k > 1 else ""
        raise TooLarge(
            f"the answer's tensors would hold {n * m * k:,} elements ({n} texts x {m} tokens, the longest "
            f"text's{per}); at most {MAX_TENSOR_ELEMENTS:,}: send long texts in requests of their own"
        )


def _suggestion_outputs(results: list[DetectResult], k: int) -> dict[str, tuple[str, np.ndarray]]:
    n = len(results)
    m = max((len(r.tokens) for r in results), default=0)
    tokens = np.full((n, m, k), "", dtype=object)
    scores = np.zeros((n, m, k), dtype=np.float32)
    texts = np.full((n, m, k), "", dtype=object)
    starts = np.full((n, m, k), -1, dtype=np.int64)
    ends = np.full((n, m, k), -1, dtype=np.int64)
    for i, r in enumerate(results):
        for j, t in enumerate(r.tokens):
            for q, s in enumerate(t.suggestions or []):
                tokens[i, j, q], scores[i, j, q], texts[i, j, q] = s.token, s.score, s.text
                starts[i, j, q], ends[i, j, q] = s.start, s.end
    suggested = np.array([r.suggested_text or "" for r in results], dtype=object)
    return {
        "suggestions": ("BYTES", tokens),
        "suggestion_scores": ("FP32", scores),
        "suggestion_texts": ("BYTES", texts),
        "suggestion_starts": ("INT64", starts),
        "suggestion_ends": ("INT64", ends),
        "suggested_text": ("BYTES", suggested),
    }


def _detector_outputs(results: list[DetectResult]) -> dict[str, tuple[str, np.ndarray]]:
    n = len(results)
    m = max((len(r.tokens) for r in results), default=0)
    scores = np.zeros((n, m), dtype=np.float32)
    replaced = np.zeros((n, m), dtype=np.bool_)
    starts = np.full((n, m), -1, dtype=np.int64)
    ends = np.full((n, m), -1, dtype=np.int64)
    tokens = np.full((n, m), "", dtype=object)
    for i, r in enumerate(results):
        for j, t in enumerate(r.tokens):
            scores[i, j], replaced[i, j], starts[i, j], ends[i, j], tokens[i, j] = (
                t.score,
                t.replaced,
                t.start,
                t.end,
                t.text,
            )
    return {
        "scores": ("FP32", scores),
        "replaced": ("BOOL", replaced),
        "starts": ("INT64", starts),
        "ends": ("INT64", ends),
        "tokens": ("BYTES", tokens),
        "lengths": ("INT64", np.array([len(r.tokens) for r in results], dtype=np.int64)),
        "windows": ("INT64", np.array([r.windows for r in results], dtype=np.int64)),
        "truncated": ("BOOL", np.array([r.truncated for r in results], dtype=np.bool_)),
    }


async def _tag_tensors(
    state: ServerState,
    runner: ModelRunner,
    inputs: dict[str, Any],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> dict[str, tuple[str, np.ndarray]]:
    texts = _texts(inputs, "text", {"text"})
    data: TagTensorRequest = _route_parameters(parameters, TagTensorRequest, {"texts": texts})
    request = Tag(texts, data.stride, data.truncate, "text")
    _, scored = await state.inference.tag(request, runner, meta=meta)
    # Aggregation "none" with nothing ignored: every real token with its most probable tag.
    found = [
        document_entities(text, s.encoded, softmax(s.logits), runner.labels, "none", ())
        for text, s in zip(texts, scored, strict=True)
    ]
    n, m = len(texts), max((len(f) for f in found), default=0)
    _check_padded(n, m)
    labels = np.full((n, m), "", dtype=object)
    scores = np.zeros((n, m), dtype=np.float32)
    starts = np.full((n, m), -1, dtype=np.int64)
    ends = np.full((n, m), -1, dtype=np.int64)
    tokens = np.full((n, m), "", dtype=object)
    for i, (text, row) in enumerate(zip(texts, found, strict=True)):
        for j, e in enumerate(row):
            labels[i, j], scores[i, j], starts[i, j], ends[i, j] = e.label, e.score, e.start, e.end
            tokens[i, j] = text[e.start : e.end]
    return {
        "labels": ("BYTES", labels),
        "scores": ("FP32", scores),
        "starts": ("INT64", starts),
        "ends": ("INT64", ends),
        "tokens": ("BYTES", tokens),
        "lengths": ("INT64", np.array([len(f) for f in found], dtype=np.int64)),
        "windows": ("INT64", np.array([s.windows for s in scored], dtype=np.int64)),
        "truncated": ("BOOL", np.array([s.encoded.truncated for s in scored], dtype=np.bool_)),
    }


async def _classify_tensors(
    state: ServerState,
    runner: ModelRunner,
    inputs: dict[str, Any],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> dict[str, tuple[str, np.ndarray]]:
    texts = _texts(inputs, "text", {"text", "text_pair"})
    pairs: list[str | None] = [None] * len(texts)
    if "text_pair" in inputs:
        pairs = list(_texts(inputs, "text_pair", {"text", "text_pair"}))
        if len(pairs) != len(texts):
            raise ProtocolError(
                f"'text' has {len(texts)} elements and 'text_pair' {len(pairs)}: one pair per text"
            )
    items = [{"text": a, "text_pair": b} for a, b in zip(texts, pairs, strict=True)]
    data: ClassifyRequest = _route_parameters(parameters, ClassifyRequest, {"inputs": items})
    request = Classify([(a, b) for a, b in zip(texts, pairs, strict=True)], data.truncate)
    _, classified = await state.inference.classify(request, runner, meta=meta)
    results = classified.results
    truncated = ("BOOL", np.array([r.truncated for r in results], dtype=np.bool_))
    if runner.regression:
        return {
            "score": ("FP32", np.array([r.score for r in results], dtype=np.float32)),
            "truncated": truncated,
        }
    probabilities = np.array(
        [[r.scores[label] for label in runner.labels] for r in results], dtype=np.float32
    )
    labels = np.array([runner.labels[int(row.argmax())] for row in probabilities], dtype=object)
    return {"probabilities": ("FP32", probabilities), "label": ("BYTES", labels), "truncated": truncated}


class EmbedTensorRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The embeddings' v2 parameters: /embed's (None: the server's --auto-truncate)."""

    texts: list[str]
    normalize: bool = True
    truncate: bool | None = None


async def _embed_tensors(
    state: ServerState,
    runner: ModelRunner,
    inputs: dict[str, Any],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> dict[str, tuple[str, np.ndarray]]:
    texts = _texts(inputs, "text", {"text"})
    data: EmbedTensorRequest = _route_parameters(parameters, EmbedTensorRequest, {"texts": texts})
    request = Embed(texts, data.normalize, auto_truncate(state, data.truncate), field="text")
    _, embedded = await state.inference.embed(request, runner, meta=meta)  # no text: refused before
    return {
        "embeddings": ("FP32", np.stack(embedded.vectors).astype(np.float32, copy=False)),
        "truncated": ("BOOL", np.array(embedded.truncated, dtype=np.bool_)),
    }


# Each kind's v2 answer: its request from the tensors, run, and its result as tensors (the registry's
# v2_outputs, electra.serving.engine.kinds, say which). A model answers its bundle's own kind, and the
# embedder's when a request asks for `embeddings`.
V2_TENSORS = {
    DETECTOR: _detect_tensors,
    TAGGER: _tag_tensors,
    CLASSIFIER: _classify_tensors,
    EMBEDDER: _embed_tensors,
}


# --- Hugging Face task shapes -----------------------------------------------------------------------------


# Both /hf routes: a JSON body, the protocols' error shape.
_hf = functools.partial(
    post,
    before_request=read_json_body,
    status_code=200,
    tags=["hugging face inference api"],
    responses=_errors(400, 401, 404, 413, 503),
)


@_hf("/hf/{name:str}")
async def hf_task(
    name: FromPath[str], data: JSONBody[HFRequest], scope: Scope, server: Server
) -> (
    list[list[LabelScore]]
    | list[list[TokenEntity]]
    | list[TokenEntity]
    | list[FillMaskElement]
    | list[list[FillMaskElement]]
    | list[list[list[FillMaskElement]]]
):
    """A classifier answers text-classification (`top_k`, `function_to_apply`), a tagger or a detector
    token-classification (`aggregation_strategy`, `ignore_labels`, `stride`), and a detector with a
    generator fill-mask too (`top_k`, `targets`; when a text holds [MASK] or the request sends those):
    what `huggingface_hub.InferenceClient(model=URL)` sends and reads."""
    runner = _model(server, name, None)
    meta = request_meta(scope)
    single = not isinstance(data.inputs, list)
    items = [data.inputs] if single else list(data.inputs)  # type: ignore[list-item]
    parameters = data.parameters or {}
    generator = runner.generator
    if generator is not None and is_fill_mask(parameters, items, generator.token(runner.mask_id)):
        conflict = fill_mask_conflict(runner.name, parameters)
        if conflict is not None:
            raise ProtocolError(conflict)
        filled = await fill_mask(server.inference, runner, items, parameters, meta)
        return filled[0] if single else filled
    mismatch = wrong_task(runner.name, runner.kind, parameters)
    if mismatch is not None:
        raise ProtocolError(mismatch)
    if is_token_classifier(runner.kind):
        entities = await _token_classification(server, runner, items, parameters, meta)
        return entities[0] if single else entities
    return await _text_classification(server, runner, items, parameters, meta)


@_hf("/hf/{name:str}/pipeline/feature-extraction")
async def feature_extraction(
    name: FromPath[str], request: Request[Any, Any, Any], server: Server
) -> list[list[float]]:
    """Any encoder's sentence vectors, as /embed answers them (`normalize`, `truncate`,
    `truncation_direction`, at the body's top level): what `InferenceClient.feature_extraction` sends to a
    URL, and the path the hosted API serves it on (`/models/NAME/pipeline/feature-extraction`)."""
    data, _ = await read_body(request, EmbedRequest)
    if data.model not in (None, name):
        raise ProtocolError(f"'model' is {data.model!r} but the path names {name!r}: send one of them")
    return await embed_vectors(server, data, _model(server, name, None).name, request_meta(request.scope))


# Behind the API keys when the server has some, and open (readiness, as the health probes are).
KEYED_ROUTES = [
    server_metadata,
    all_statistics,
    model_metadata,
    model_version_metadata,
    model_configuration,
    model_version_configuration,
    model_statistics,
    model_version_statistics,
    model_infer,
    model_version_infer,
    hf_task,
    feature_extraction,
]
OPEN_ROUTES = [live, ready, model_ready, model_version_ready]


def _parameters(parameters: dict[str, Any], into: type[Any]) -> Any:
    try:
        return msgspec.convert(parameters, into)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"parameters: {e}") from None


async def _text_classification(
    state: ServerState,
    runner: ModelRunner,
    items: list[str | TextPairInput],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> list[list[LabelScore]]:
    p: TextClassificationParameters = _parameters(parameters, TextClassificationParameters)
    pairs = [(x, None) if isinstance(x, str) else (x.text, x.text_pair) for x in items]
    _, classified = await state.inference.classify(Classify(pairs, p.truncate), runner, meta=meta)
    rows = classified.logits
    labels = runner.labels or ["score"]
    function = p.function_to_apply or default_function(len(labels), runner.problem_type)
    return [label_scores(row, labels, function, p.top_k) for row in rows]


async def _token_classification(
    state: ServerState,
    runner: ModelRunner,
    items: list[str | TextPairInput],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> list[list[TokenEntity]]:
    p: TokenClassificationParameters = _parameters(parameters, TokenClassificationParameters)
    if not all(isinstance(x, str) for x in items):
        raise ProtocolError(f"model {runner.name!r} is a token classifier: 'inputs' are texts, not pairs")
    texts: list[str] = items  # type: ignore[assignment]
    _, scored_texts = await state.inference.tag(Tag(texts, p.stride, False, "inputs"), runner, meta=meta)
    ignore = kind_of(runner.kind).hf_ignore_labels if p.ignore_labels is None else p.ignore_labels
    out = []
    for text, scored in zip(texts, scored_texts, strict=True):
        probs, labels = label_probabilities(runner.kind, runner.labels, scored.logits)
        found = document_entities(text, scored.encoded, probs, labels, p.aggregation_strategy, ignore)
        out.append([hf_entity(e, text) for e in found])
    return out
