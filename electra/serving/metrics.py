"""Prometheus metrics: per route and status (electra_http_*, from http_metrics below), and behind the routes
per model, named per stage as in text-embeddings-inference: tokenization, queueing, batching, inference.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from litestar.exceptions import HTTPException
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from electra.serving.client_gone import CLIENT_CLOSED_REQUEST, went_away

NAMESPACE = "electra"
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_TOKENS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class _Families:
    """The metric families, created once per registry (prometheus_client refuses duplicates)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        kw = {"namespace": NAMESPACE, "labelnames": ("model",), "registry": registry}
        self.queue_size = Gauge("queue_size", "Inputs waiting for a batch", **kw)
        self.batch_size = Histogram("batch_size", "Inputs per model call", buckets=_SIZES, **kw)
        self.batch_tokens = Histogram(
            "batch_tokens", "Padded tokens per model call (rows x longest row)", buckets=_TOKENS, **kw
        )
        self.tokenization = Histogram(
            "tokenization_seconds", "Time to tokenize one request", buckets=_SECONDS, **kw
        )
        self.queue_wait = Histogram(
            "queue_wait_seconds", "Time an input waits before its batch starts", buckets=_SECONDS, **kw
        )
        self.inference = Histogram(
            "inference_seconds", "Time of one ONNX Runtime call (a batch)", buckets=_SECONDS, **kw
        )
        self.tokens = Counter("tokens_processed", "Real (unpadded) tokens run through the model", **kw)
        self.inputs = Counter("inputs_processed", "Texts (or text pairs) answered", **kw)
        self.rejected = Counter("queue_rejections", "Requests answered 503 because the queue was full", **kw)
        # The names and labels Litestar's Prometheus middleware gave them (prefix electra_http).
        http = {"namespace": NAMESPACE, "subsystem": "http", "registry": registry}
        route = ("method", "path", "app_name")
        answered = (*route, "status_code")
        self.http_requests = Counter("requests", "Total requests", labelnames=answered, **http)
        self.http_errors = Counter("requests_error", "Total errors in requests", labelnames=answered, **http)
        self.http_duration = Histogram(
            "request_duration_seconds", "Request duration, in seconds", labelnames=answered, **http
        )
        self.http_in_progress = Gauge(
            "requests_in_progress", "Total requests currently in progress", labelnames=route, **http
        )
        # The HTTP layer's own answers, which never reach the app (uvicorn; see uvicorn_protocol.py).
        self.http_connections = Gauge("connections", "Client connections open (uvicorn)", **http)
        self.http_rejected = Counter(
            "rejected",
            "Connections answered by the HTTP layer before any route: 408 (headers too slow), 431 (headers "
            "too large), 503 (too many connections)",
            labelnames=("status_code", "reason"),
            **http,
        )


# Keyed by the registry itself, weakly: an id() could be reused by a new registry once the old one is gone.
_families: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def families(registry: CollectorRegistry = REGISTRY) -> _Families:
    if registry not in _families:
        _families[registry] = _Families(registry)
    return _families[registry]


@dataclass(frozen=True)
class ModelMetrics:
    """The families' children for one model, bound once so the hot path does no label lookups."""

    queue_size: Gauge
    batch_size: Histogram
    batch_tokens: Histogram
    tokenization: Histogram
    queue_wait: Histogram
    inference: Histogram
    tokens: Counter
    inputs: Counter
    rejected: Counter

    @classmethod
    def for_model(cls, model: str, registry: CollectorRegistry = REGISTRY) -> ModelMetrics:
        f = families(registry)
        return cls(
            queue_size=f.queue_size.labels(model),
            batch_size=f.batch_size.labels(model),
            batch_tokens=f.batch_tokens.labels(model),
            tokenization=f.tokenization.labels(model),
            queue_wait=f.queue_wait.labels(model),
            inference=f.inference.labels(model),
            tokens=f.tokens.labels(model),
            inputs=f.inputs.labels(model),
            rejected=f.rejected.labels(model),
        )


APP_NAME = "electra"
# Scrapes of /metrics are not counted, as with Litestar's middleware before.
NOT_COUNTED = frozenset({"/metrics"})


def http_metrics(registry: CollectorRegistry = REGISTRY) -> Callable[[Any], Any]:
    """Litestar middleware: requests, errors (5xx), durations and requests in progress per route (its path
    template) and status. A request whose client left before its answer counts as 499 (client_gone.py), not
    as an error; one whose middleware raised an HTTPException (answered by the app's handler, outside this
    one) counts with that exception's status.

    Litestar's PrometheusMiddleware records the same, but builds a Request, a label dict and four label
    lookups per request, about 50 us on a 2-core VM, a tenth of a short /detect's own server time; this
    looks each route's metric children up once and keeps them.
    """
    f = families(registry)
    # (method, path) -> in-progress gauge; (method, path, status) -> (count, duration, errors or None)
    routes: dict[tuple[str, str], Gauge] = {}
    outcomes: dict[tuple[str, str, int], tuple[Counter, Histogram, Counter | None]] = {}

    def outcome(method: str, path: str, status: int) -> tuple[Counter, Histogram, Counter | None]:
        key = (method, path, status)
        if key not in outcomes:
            labels = (method, path, APP_NAME, str(status))
            errors = f.http_errors.labels(*labels) if status >= 500 else None
            outcomes[key] = (f.http_requests.labels(*labels), f.http_duration.labels(*labels), errors)
        return outcomes[key]

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            path = scope.get("path_template") or scope["path"]
            if scope["type"] != "http" or path in NOT_COUNTED:
                await app(scope, receive, send)
                return
            method = scope["method"]
            if (method, path) not in routes:
                routes[method, path] = f.http_in_progress.labels(method, path, APP_NAME)
            in_progress = routes[method, path]
            status = [500]  # what a client sees when the app fails before it answers

            async def send_status(message: Any) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            start = time.perf_counter()
            in_progress.inc()
            try:
                await app(scope, receive, send_status)
            except HTTPException as e:
                status[0] = e.status_code
                raise
            finally:
                if went_away(scope):
                    status[0] = CLIENT_CLOSED_REQUEST
                in_progress.dec()
                count, duration, errors = outcome(method, path, status[0])
                count.inc()
                duration.observe(time.perf_counter() - start)
                if errors is not None:
                    errors.inc()

        return wrapped

    return middleware
