"""The Litestar application: routes, limits, API keys, readiness, metrics and the page at `/`.

`create_app(settings)` loads every bundle (a bad one fails here, before the port opens); warm-up runs in the
background after start-up, and /health/ready turns 200 only when it is done, so Kubernetes sends no traffic
to a pod whose first requests would pay ONNX Runtime's lazy initialisation.

ServerState holds what the routes do; the routes only decode bodies and delegate. Every error answer is made
in one place, `error_response`, which also maps the batcher's and the runtime's exceptions (which know
nothing of HTTP) onto status codes.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hmac
import importlib.util
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from litestar import Litestar, MediaType, Request, Response, Router, get, post
from litestar.config.cors import CORSConfig
from litestar.connection import ASGIConnection
from litestar.datastructures import CacheControlHeader
from litestar.enums import RequestEncodingType
from litestar.exceptions import (
    ClientException,
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    SerializationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)
from litestar.params import Body
from litestar.plugins.prometheus import PrometheusController

from electra import __version__
from electra.errors import InputError
from electra.serving import timing
from electra.serving.batcher import Arrivals, Batcher, InferenceFailed, QueueFull, ShuttingDown
from electra.serving.json_body import NOT_JSON, TOO_DEEP, MalformedBody, why_not_json
from electra.serving.metrics import ModelMetrics, http_metrics
from electra.serving.open_inference import ProtocolError
from electra.serving.openapi_bodies import document_infer_body
from electra.serving.postprocess import classify_result, detect_result
from electra.serving.protocols import is_inference, protocol_routes, uses_protocol_errors
from electra.serving.runtime import Encoded, ModelRunner, TooLong
from electra.serving.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    ClassifyResult,
    DetectRequest,
    DetectResponse,
    DetectResult,
    ErrorBody,
    ModelsResponse,
    PairInput,
    Status,
    TagRequest,
    TagResponse,
    to_model_info,
)
from electra.serving.settings import ServeSettings
from electra.serving.tagging import tag_result
from electra.serving.timing import server_timing
from electra.serving.windows import TokenLogits, default_stride, first_window, max_stride, merge, split

log = logging.getLogger("electra.serving")

# Requests with more characters than this are tokenized in a worker thread rather than on the event loop.
INLINE_TOKENIZE_CHARS = 4096
KIND_ROUTE = {"discriminator": "/detect", "classifier": "/classify", "tagger": "/tag"}


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


def load_runners(settings: ServeSettings) -> dict[str, ModelRunner]:
    """Every bundle of the settings, loaded (InputError naming the bundle on the first bad one)."""
    runners = {}
    for spec in settings.models:
        try:
            runners[spec.name] = ModelRunner(spec.name, spec.path, settings.device, settings.threads)
        except InputError as e:
            raise InputError(f"model {spec.name!r}: {e}") from None
    return runners


class ServerState:
    """Runners, their batchers, and readiness; shared by the route handlers of one app."""

    def __init__(
        self,
        settings: ServeSettings,
        runners: dict[str, ModelRunner],
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.runners = runners
        self.by_kind = {k: {n: r for n, r in runners.items() if r.kind == k} for k in KIND_ROUTE}
        self.metrics = {name: ModelMetrics.for_model(name) for name in runners}
        self.batchers: dict[str, Batcher] = {}
        self.arrivals = Arrivals()
        self.ready = False
        self.failure: str | None = None
        self.on_ready = on_ready
        self._keys = [k.encode() for k in settings.api_keys]

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        for name, runner in self.runners.items():
            batcher = Batcher(
                runner,
                self.metrics[name],
                s.max_batch_tokens,
                s.max_batch_size,
                s.max_wait_ms,
                s.max_queue,
                self.arrivals,
                s.inline_max_ms,
            )
            batcher.start()
            self.batchers[name] = batcher

    async def warm_up(self) -> None:
        try:
            for runner in self.runners.values():
                await asyncio.to_thread(runner.warm_up)
        except Exception as e:  # a model that cannot run keeps the pod unready, with the reason visible
            self.failure = f"warm-up failed: {e.__class__.__name__}: {e}"
            log.exception("warm-up failed")
            return
        self.ready = True
        if self.on_ready is not None:
            self.on_ready()
        log.info("ready: %s", ", ".join(f"{n} ({r.kind})" for n, r in self.runners.items()))

    async def stop(self) -> None:
        self.ready = False
        await asyncio.gather(*(b.close() for b in self.batchers.values()))

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        """The app's lifespan: batchers start, warm-up runs in the background; on shutdown they drain."""
        self.start()
        warm = asyncio.create_task(self.warm_up(), name="warm-up")
        try:
            yield
        finally:
            if not warm.done():
                warm.cancel()
            await self.stop()

    # --- routes -----------------------------------------------------------------------------------------

    async def detect(self, data: DetectRequest) -> DetectResponse:
        texts = _one_or_many(data.text, data.texts, "text", "texts")
        self.check_sizes(texts, "texts")
        runner = self.pick(data.model, "discriminator")
        stride = self.check_stride(runner, data.stride, data.truncate)
        self.check_ready()
        results = await self.score_tokens(runner, texts, data.threshold, data.level, stride)
        return DetectResponse(model=runner.name, results=results)

    async def score_tokens(
        self, runner: ModelRunner, texts: list[str], threshold: float, level: str, stride: int | None
    ) -> list[DetectResult]:
        """Every token of every text scored through windows (`stride` None: the first window only)."""
        out = []
        for text, scored in zip(texts, await self.token_logits(runner, texts, stride), strict=True):
            result = detect_result(text, scored.encoded, scored.logits, threshold, level)
            result.windows = scored.windows
            out.append(result)
        return out

    async def tag(self, data: TagRequest) -> TagResponse:
        texts = _one_or_many(data.text, data.texts, "text", "texts")
        self.check_sizes(texts, "texts")
        runner = self.pick(data.model, "tagger")
        stride = self.check_stride(runner, data.stride, data.truncate)
        self.check_ready()
        scored = await self.token_logits(runner, texts, stride)
        aggregation, ignore = data.aggregation_strategy, data.ignore_labels
        results = [
            tag_result(text, s, runner.labels, aggregation, ignore)
            for text, s in zip(texts, scored, strict=True)
        ]
        return TagResponse(model=runner.name, results=results)

    async def token_logits(
        self, runner: ModelRunner, texts: list[str], stride: int | None
    ) -> list[TokenLogits]:
        """Each text's per-token logits, from windows that overlap by `stride` tokens merged into one
        document (see electra.serving.windows), or with `stride` None from its first window only."""
        whole = await self.tokenize(runner, runner.encode_whole, texts)
        if stride is None:
            encoded = [first_window(enc, runner.max_seq_len) for enc in whole]
            self.check_fits(len(encoded), "model windows")
            rows = await self.run(runner, encoded, len(texts))
            return [TokenLogits(enc, row, 1) for enc, row in zip(encoded, rows, strict=True)]
        docs = [split(enc, runner.max_seq_len, stride) for enc in whole]
        self.check_fits(sum(len(doc.windows) for doc in docs), "model windows")
        rows = iter(await self.run(runner, [w for doc in docs for w in doc.windows], len(texts)))
        return [
            TokenLogits(doc.full, merge(doc, [next(rows) for _ in doc.windows]), len(doc.windows))
            for doc in docs
        ]

    async def classify(self, data: ClassifyRequest) -> ClassifyResponse:
        if data.inputs is not None and data.text_pair is not None:
            raise HTTPException(
                status_code=400, detail="'text_pair' goes with 'text'; inside 'inputs' use items"
            )
        _one_or_many(data.text, data.inputs, "text", "inputs")
        if data.inputs is None:
            pairs = [(data.text, data.text_pair)]
        else:
            pairs = [(x.text, x.text_pair) for x in data.inputs]
        runner = self.pick(data.model, "classifier")
        results = await self.classify_pairs(runner, pairs, data.truncate)
        return ClassifyResponse(model=runner.name, results=results)

    async def classify_pairs(
        self, runner: ModelRunner, pairs: list[tuple[str, str | None]], truncate: bool
    ) -> list[ClassifyResult]:
        encoded, rows = await self.classify_logits(runner, pairs, truncate)
        return [
            classify_result(row, runner.labels, runner.regression, runner.multi_label, enc.truncated)
            for enc, row in zip(encoded, rows, strict=True)
        ]

    async def classify_logits(
        self, runner: ModelRunner, pairs: list[tuple[str, str | None]], truncate: bool
    ) -> tuple[list[Encoded], list[np.ndarray]]:
        """Checked, tokenized (TooLong over the model with truncate off) and run: each input's logits."""
        self.check_sizes([a for a, _ in pairs], "inputs")
        self.check_chars([b for _, b in pairs if b is not None])
        self.check_fits(len(pairs), "model inputs")
        self.check_ready()
        encoded = await self.tokenize(runner, functools.partial(runner.encode, truncate=truncate), pairs)
        return encoded, await self.run(runner, encoded, len(encoded))

    def readiness(self) -> Response[Status]:
        if self.ready:
            return Response(Status(status="ready"))
        if self.failure:
            return Response(Status(status="failed", detail=self.failure), status_code=503)
        return Response(Status(status="loading"), status_code=503, headers={"Retry-After": "1"})

    # --- request checks ------------------------------------------------------------------------------

    def authorize(self, header: str | None) -> bool:
        if not self._keys:
            return True
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = token.strip().encode()
        # Compare against every key, so the time taken says nothing about which key (or prefix) matched.
        return any([hmac.compare_digest(given, key) for key in self._keys])

    def pick(self, name: str | None, kind: str) -> ModelRunner:
        candidates = self.by_kind[kind]
        route = KIND_ROUTE[kind]
        if name is not None:
            runner = self.runners.get(name)
            if runner is None:
                raise HTTPException(
                    status_code=404,
                    detail=f"model {name!r} is not loaded; loaded for {route}: {_names(candidates)}",
                )
            if runner.kind != kind:
                raise HTTPException(
                    status_code=400,
                    detail=f"model {name!r} is a {runner.kind}; send it to {KIND_ROUTE[runner.kind]}",
                )
            return runner
        if not candidates:
            raise HTTPException(
                status_code=404, detail=f"no {kind} model is loaded, so {route} has nothing to run"
            )
        if len(candidates) > 1:
            raise HTTPException(
                status_code=400,
                detail=f"several models serve {route}; name one in 'model': {_names(candidates)}",
            )
        return next(iter(candidates.values()))

    def check_ready(self) -> None:
        if not self.ready:
            detail = self.failure or "models are still loading; retry shortly (see /health/ready)"
            raise HTTPException(status_code=503, detail=detail, headers={"Retry-After": "1"})

    def check_sizes(self, texts: Sequence[str], field: str) -> None:
        if not texts:
            raise HTTPException(status_code=400, detail=f"'{field}' is empty; send at least one input")
        if len(texts) > self.settings.max_texts:
            raise HTTPException(
                status_code=413,
                detail=f"{len(texts)} inputs in one request; the limit is {self.settings.max_texts}",
            )
        self.check_chars(texts)

    def check_chars(self, texts: Sequence[str]) -> None:
        s = self.settings
        for i, text in enumerate(texts):
            if len(text) > s.max_chars:
                raise HTTPException(
                    status_code=413,
                    detail=f"input {i} has {len(text):,} characters; the limit is {s.max_chars:,} per text",
                )

    def check_stride(self, runner: ModelRunner, stride: int | None, truncate: bool) -> int | None:
        """The overlap of `runner`'s windows for this request; None when truncate asks for one window."""
        if truncate:
            if stride is not None:
                raise HTTPException(
                    status_code=400,
                    detail="'stride' is the overlap of windows over a long text; truncate=true scores only "
                    "the first window, so send one or the other",
                )
            return None
        if stride is None:
            return default_stride(runner.max_seq_len)
        limit = max_stride(runner.max_seq_len)
        if stride > limit:
            raise HTTPException(
                status_code=400,
                detail=f"'stride' is {stride}; model {runner.name!r} takes windows of {runner.max_seq_len} "
                f"tokens, so the overlap can be at most {limit}",
            )
        return stride

    def check_fits(self, inputs: int, what: str) -> None:
        # The queue takes a request's inputs all at once or not at all: more than it holds could never
        # run, and a 503 would send the client into retrying forever.
        limit = self.settings.max_queue
        if inputs > limit:
            raise HTTPException(
                status_code=413,
                detail=f"the request needs {inputs:,} {what}; at most {limit:,} fit in the model's queue "
                "(--max-queue): send fewer or shorter texts per request",
            )

    async def tokenize(
        self, runner: ModelRunner, encode: Callable[[list[Any]], list[Encoded]], items: list[Any]
    ) -> list[Encoded]:
        """`encode(items)`, off the event loop when the texts are long (TooLong: see error_response)."""
        start = time.perf_counter()
        chars = sum(len(x) if isinstance(x, str) else len(x[0]) + len(x[1] or "") for x in items)
        if chars <= INLINE_TOKENIZE_CHARS:
            encoded = encode(items)
        else:
            encoded = await asyncio.to_thread(encode, items)
        elapsed = time.perf_counter() - start
        self.metrics[runner.name].tokenization.observe(elapsed)
        timing.add("tokenize", elapsed)
        return encoded

    async def run(self, runner: ModelRunner, encoded: list[Encoded], inputs: int) -> list[Any]:
        """Rows from the model's batcher (QueueFull, ShuttingDown or InferenceFailed: see error_response);
        `inputs` is how many texts the rows answer (a long text's windows are one input)."""
        arrived()
        rows = await self.batchers[runner.name].submit(encoded)
        self.metrics[runner.name].inputs.inc(inputs)
        return rows


# Per request: the Arrivals it still counts in, until it enqueues (see count_arrivals).
_PENDING = contextvars.ContextVar[list[Arrivals]]("electra_pending")


def arrived() -> None:
    """This request is about to enqueue: it no longer holds up a batch that waits for company."""
    pending = _PENDING.get(None)
    if pending:
        pending.pop().arrived()


def count_arrivals(arrivals: Arrivals, paths: tuple[str, ...]) -> Callable[[Any], Any]:
    """ASGI middleware: a POST to an inference route counts as on its way from its first byte until it
    enqueues, so a batch that is not full waits for requests still being read, parsed or tokenized."""

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            path = scope.get("path", "")
            if (
                scope["type"] != "http"
                or scope["method"] != "POST"
                or not (path in paths or is_inference(path))
            ):
                await app(scope, receive, send)
                return
            arrivals.expect()
            pending = [arrivals]
            token = _PENDING.set(pending)
            try:
                await app(scope, receive, send)
            finally:
                _PENDING.reset(token)
                if pending:  # never enqueued (a 4xx, a disconnect): stop counting it
                    pending.pop().arrived()

        return wrapped

    return middleware


def _names(runners: dict[str, ModelRunner]) -> str:
    return ", ".join(sorted(runners)) or "none"


def _one_or_many(single: Any, many: list[Any] | None, single_name: str, many_name: str) -> list[Any]:
    if (single is None) == (many is None):
        raise HTTPException(
            status_code=400,
            detail=f"send exactly one of '{single_name}' (one input) or '{many_name}' (a list)",
        )
    return [single] if many is None else many


def _page(example: str | None = None) -> str:
    """The page at `/`, with `example` (the text its box starts with) when there is one."""
    try:
        page = resources.files("electra.serving").joinpath("static/index.html").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return "<!doctype html><title>electra</title><p>The page is missing from this install; see /schema."
    if example is None:
        return page
    # JSON inside a <script> element that the browser never runs: '<', '>' and '&' as \u escapes cannot end
    # the element or start markup, whatever the text holds (ensure_ascii also escapes U+2028/U+2029).
    data = json.dumps(example, ensure_ascii=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    tag = f'<script type="application/json" id="server-example">{data}</script>\n'
    return page.replace("</head>", tag + "</head>", 1)


# ----------------------------------------------------------------------------------------------------------
# Request bodies: read and decoded before the handler, so that every malformed one gets the same answer
# ----------------------------------------------------------------------------------------------------------


async def read_json_body(request: Request[Any, Any, Any]) -> None:
    """before_request of the JSON routes: reads the body (RequestEntityTooLarge over --max-body-bytes) and
    decodes it (MalformedBody); Litestar keeps both, so the handler's `data` does not decode it again."""
    body = await request.body()
    if not body.strip():
        raise MalformedBody("it is empty")
    try:
        await request.json()
    except (SerializationException, UnicodeDecodeError) as e:
        raise MalformedBody(why_not_json(body, e)) from None
    except RecursionError:  # msgspec's decoder recurses per level, and stops at Python's recursion limit
        raise MalformedBody(TOO_DEEP) from None


# ----------------------------------------------------------------------------------------------------------
# Errors: every 4xx/5xx answer is made here
# ----------------------------------------------------------------------------------------------------------


def _status_of(exc: Exception) -> tuple[int, dict[str, str] | None] | None:
    """Status and headers for the exceptions of the layers below HTTP; None: not a known one (a bug)."""
    if isinstance(exc, MalformedBody):
        return 400, None
    if isinstance(exc, TooLong):
        return 413, None  # over the model's token limit with truncate=false
    if isinstance(exc, ProtocolError):
        return 400, None
    if isinstance(exc, QueueFull):
        return 503, {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, ShuttingDown | InferenceFailed):
        return 503, {"Retry-After": "1"}
    return None


def error_response(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """The app's one exception handler: `{"status_code", "detail"}` (and "extra" for validation details);
    on the standard protocols' routes (/v2, /hf) their `{"error": message}` with the same status.

    A body over --max-body-bytes answers 413 naming the limit (whether Content-Length declared it or a chunked
    body outgrew it); a body that is not JSON answers 400 starting with NOT_JSON, whatever broke it.
    HTTPException (invalid bodies, limits, API keys, unknown models, not ready) answers its own status; the
    batcher's and the runtime's exceptions are mapped by _status_of; anything else is a bug, logged with
    its traceback and answered 500 without internals.
    """
    response = _error_body(request, exc)
    if uses_protocol_errors(request.url.path):
        body = response.content
        message = body["detail"]
        if body.get("extra"):
            message = f"{message}: {_validation_details(body['extra'])}"
        return Response({"error": message}, status_code=response.status_code, headers=response.headers)
    return response


def _validation_details(extra: Any) -> str:
    items = extra if isinstance(extra, list) else [extra]
    return "; ".join(
        f"{item.get('key')}: {item.get('message')}"
        if isinstance(item, dict) and item.get("key")
        else str(item)
        for item in items
    )


def _error_body(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    if isinstance(exc, RequestEntityTooLarge):  # Litestar's, raised while the body is read
        return _error(413, _too_large(request))
    if isinstance(exc, ClientException) and isinstance(exc.__cause__, SerializationException):
        # A body Litestar decoded itself (a route without read_json_body): the same wording.
        exc = MalformedBody(str(exc.__cause__).removeprefix("JSON is malformed: "))
    if isinstance(exc, MalformedBody):
        return _error(400, f"{NOT_JSON}: {exc}{_content_type_hint(request)}")
    if isinstance(exc, HTTPException):
        body: dict[str, Any] = {"status_code": exc.status_code, "detail": exc.detail}
        if exc.extra:
            body["extra"] = exc.extra
        return Response(body, status_code=exc.status_code, headers=exc.headers)
    mapped = _status_of(exc)
    if mapped is None:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return Response({"status_code": 500, "detail": "internal server error (logged)"}, status_code=500)
    status, headers = mapped
    return _error(status, str(exc), headers)


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    return Response({"status_code": status, "detail": detail}, status_code=status, headers=headers)


def _too_large(request: Request[Any, Any, Any]) -> str:
    try:
        limit = request.route_handler.resolve_request_max_body_size()
    except Exception:  # no route (cannot happen for a body being read): say it without the number
        limit = None
    size = ""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        size = f" ({int(declared):,} bytes)"
    if limit is None:
        return f"the request body{size} is larger than the server's limit (--max-body-bytes)"
    return f"the request body{size} is larger than the limit of {limit:,} bytes (--max-body-bytes)"


def _content_type_hint(request: Request[Any, Any, Any]) -> str:
    """For a body sent as a form or as text: what to send instead (JSON is accepted whatever the type)."""
    content_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if not content_type or content_type == "application/json" or content_type.endswith("+json"):
        return ""
    return f'; it was sent as {content_type}: send a JSON object such as {{"text": "..."}}'


# ----------------------------------------------------------------------------------------------------------
# The app
# ----------------------------------------------------------------------------------------------------------


def create_app(
    settings: ServeSettings,
    runners: dict[str, ModelRunner] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> Litestar:
    """The ASGI app. `runners` (models already loaded) is for tests and embedding; default: load them."""
    settings = settings.with_keys()
    state = ServerState(settings, runners if runners is not None else load_runners(settings), on_ready)
    # Without keys no guard at all: Litestar copies the handler for every guard call on every request.
    guards = [_key_guard(state)] if settings.api_keys else []
    app = Litestar(
        route_handlers=[
            *_keyed_routes(state, guards),
            *protocol_routes(state, guards, read_json_body),
            *_open_routes(state),
            PrometheusController,
        ],
        lifespan=[state.lifespan],
        middleware=[
            count_arrivals(state.arrivals, tuple(KIND_ROUTE.values())),
            http_metrics(),
            server_timing,
        ],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=_openapi_config(),
        cors_config=CORSConfig(allow_origins=["*"], allow_headers=["Authorization", "Content-Type"]),
        exception_handlers={Exception: error_response},
        # Logging is electra.logs' (one format, set by the CLI); Litestar's default config would put a
        # handler of its own on the root logger and print every record twice, in another format.
        logging_config=None,
        debug=False,
    )
    app.state.electra = state
    _document_closed_bodies(app)
    document_infer_body(app)
    return app


def _key_guard(state: ServerState) -> Callable[..., Awaitable[None]]:
    """The guard of every route that reaches a model: the API keys, when the server has some. A coroutine:
    Litestar runs a plain function guard through a worker thread, one thread hop per request."""

    async def require_key(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        if not state.authorize(connection.headers.get("authorization")):
            raise NotAuthorizedException(
                detail="missing or wrong API key: send 'Authorization: Bearer <key>'",
                headers={"WWW-Authenticate": 'Bearer realm="electra"'},
            )

    return require_key


def _keyed_routes(state: ServerState, guards: list[Any]) -> list[Any]:
    """/detect, /classify, /tag and /models: behind the API keys when the server has some."""
    inference = functools.partial(
        post,
        status_code=200,
        guards=guards,
        before_request=read_json_body,
        tags=["inference"],
        responses=INFERENCE_ERRORS,
    )

    @inference("/detect")
    async def detect(
        data: Annotated[DetectRequest, Body(media_type=RequestEncodingType.JSON)],
    ) -> DetectResponse:
        """Score every token of each text: probability that it was replaced (ELECTRA's discriminator)."""
        return await state.detect(data)

    @inference("/classify")
    async def classify(
        data: Annotated[ClassifyRequest, Body(media_type=RequestEncodingType.JSON)],
    ) -> ClassifyResponse:
        """Label each input (or text pair) with a fine-tuned classifier; regression answers a score."""
        return await state.classify(data)

    @inference("/tag")
    async def tag(
        data: Annotated[TagRequest, Body(media_type=RequestEncodingType.JSON)],
    ) -> TagResponse:
        """The entities of each text (token classification with a tagger), grouped as transformers'
        TokenClassificationPipeline does; long texts through overlapping windows, as on /detect."""
        return await state.tag(data)

    @get("/models", guards=guards, tags=["models"], responses=_errors(401))
    async def models() -> ModelsResponse:
        """The loaded bundles and their metadata (kind, labels, limits, precision, fused ops, parity)."""
        return ModelsResponse(models=[to_model_info(r.describe()) for r in state.runners.values()])

    return [detect, classify, tag, models]


def _open_routes(state: ServerState) -> list[Any]:
    """Health probes and the page: open even when the server has API keys."""
    page = _page(state.settings.example)

    @get("/health/live", tags=["health"])
    async def live() -> Status:
        """200 while the process serves HTTP."""
        return Status(status="live")

    @get(
        "/health/ready",
        tags=["health"],
        responses={
            503: ResponseSpec(data_container=Status, description="not ready", generate_examples=False)
        },
    )
    async def ready() -> Response[Status]:
        """200 once every model is loaded and warmed up; 503 before (and during shutdown)."""
        return state.readiness()

    @get("/", media_type=MediaType.HTML, include_in_schema=False)
    async def index() -> str:
        return page

    return [live, ready, index]


SCHEMA_PATH = "/schema"


def _openapi_config() -> OpenAPIConfig:
    """/schema: Swagger UI served with its own assets (no CDN, so it works offline), the schema as JSON (and
    YAML when PyYAML is installed)."""
    plugins: list[OpenAPIRenderPlugin] = [LocalSwaggerUI(_swagger_ui_dir()), JsonRenderPlugin()]
    if importlib.util.find_spec("yaml") is not None:
        plugins.append(YamlRenderPlugin())
    return OpenAPIConfig(
        title="electra",
        version=__version__,
        description="Replaced-token detection, classification and token classification (tagging) with "
        "ELECTRA models (ONNX Runtime).",
        path=SCHEMA_PATH,
        render_plugins=plugins,
    )


# Swagger UI's files the docs page loads, served at /schema/assets/NAME from the swagger-ui-py package (its
# static/ folder is Swagger UI's dist build; 25.7 ships Swagger UI 5.24, which renders OpenAPI 3.1, what
# Litestar writes: pyproject.toml asks for that version or newer).
SWAGGER_ASSETS = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "favicon-32x32.png": "image/png",
}
SWAGGER_PACKAGE = "swagger-ui-py"


def _swagger_ui_dir() -> Path | None:
    """Swagger UI's dist folder from the installed swagger-ui-py (module swagger_ui); None when missing.

    Found without importing the module: its __init__ wires Swagger UI into other web frameworks, which the
    server does not need."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "static"
    if not all((path / name).is_file() for name in SWAGGER_ASSETS):
        return None
    return path


@functools.cache
def _asset(path: Path) -> bytes:
    return path.read_bytes()


class LocalSwaggerUI(SwaggerRenderPlugin):
    """Litestar's Swagger UI page at /schema and /schema/swagger, its <script>/<link> URLs pointing at this
    server (/schema/assets/...) rather than a CDN, so the docs render on a host without internet."""

    def __init__(self, assets: Path | None) -> None:
        base = f"{SCHEMA_PATH}/assets"
        super().__init__(
            js_url=f"{base}/swagger-ui-bundle.js",
            css_url=f"{base}/swagger-ui.css",
            standalone_preset_js_url=f"{base}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{base}/favicon-32x32.png'>",
            path=["/", "/swagger"],
        )
        self.assets = assets

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self.assets is None:
            return (
                "<!doctype html><html><head><meta charset='utf-8'><title>electra API</title></head><body>"
                f"<p>The API docs page needs Swagger UI 5, from the {SWAGGER_PACKAGE} package, which is not "
                f"installed: <code>pip install {SWAGGER_PACKAGE}</code> (part of the serve extra).</p>"
                f"<p>The schema itself: <a href='{SCHEMA_PATH}/openapi.json'>openapi.json</a>.</p>"
                "</body></html>"
            ).encode()
        return super().render(request, openapi_schema)

    def receive_router(self, router: Router) -> None:
        super().receive_router(router)
        assets = self.assets

        @get(
            [f"/assets/{name}" for name in SWAGGER_ASSETS],  # these files only (anything else: 404)
            include_in_schema=False,
            sync_to_thread=False,
            cache_control=CacheControlHeader(public=True, max_age=86400),
        )
        def swagger_asset(request: Request[Any, Any, Any]) -> Response[bytes]:
            name = request.url.path.rpartition("/")[2]
            if assets is None:
                raise NotFoundException(detail=f"Swagger UI is not installed (pip install {SWAGGER_PACKAGE})")
            return Response(_asset(assets / name), media_type=SWAGGER_ASSETS[name])

        router.register(swagger_asset)


def _document_closed_bodies(app: Litestar) -> None:
    """Request bodies reject unknown fields (a typo such as "treshold" must not pass silently); Litestar's
    generated schema does not say so, which would make schema-driven clients and fuzzers expect a 200."""
    closed = {cls.__name__ for cls in (DetectRequest, ClassifyRequest, PairInput, TagRequest)}
    for name, schema in (app.openapi_schema.components.schemas or {}).items():
        if name.split("_")[-1] in closed:
            schema.additional_properties = False
