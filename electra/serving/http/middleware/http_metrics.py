"""Prometheus metrics of the HTTP layer: requests, errors, durations and requests in progress per route and
status (electra_http_*), and the connections the HTTP server answers itself (uvicorn_protocol.py). Per model:
electra.serving.engine.metrics.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

from litestar.exceptions import HTTPException
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from electra.serving.engine.metric_buffer import BUFFER, counter, histogram
from electra.serving.engine.metric_buffer import gauge as gauge_of
from electra.serving.engine.metrics import NAMESPACE
from electra.serving.http.middleware.client_gone import CLIENT_CLOSED_REQUEST, went_away


class _Families:
    """The HTTP metric families, created once per registry (prometheus_client refuses duplicates)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        BUFFER.attach(registry)  # ahead of the families, so a read applies what is waiting first
        # The names and labels Litestar's Prometheus middleware gave them (prefix electra_http).
        http = {"namespace": NAMESPACE, "subsystem": "http", "registry": registry}
        route = ("method", "path", "app_name")
        answered = (*route, "status_code")
        self.http_requests = Counter("requests", "Total requests", labelnames=answered, **http)
        self.http_errors = Counter("requests_error", "Total errors in requests", labelnames=answered, **http)
        self.http_duration = Histogram(
            "request_duration_seconds", "Request duration, in seconds", labelnames=answered, **http
        )
        # Gauges are summed over the live workers of a server with --workers (multiprocess mode).
        self.http_in_progress = Gauge(
            "requests_in_progress",
            "Total requests currently in progress",
            labelnames=route,
            multiprocess_mode="livesum",
            **http,
        )
        # The HTTP layer's own answers, which never reach the app (uvicorn; see uvicorn_protocol.py).
        self.http_connections = Gauge(
            "connections", "Client connections open (uvicorn)", multiprocess_mode="livesum", **http
        )
        self.http_rejected = Counter(
            "rejected",
            "Connections answered by the HTTP layer before any route: 408 (headers too slow), 431 (headers "
            "too large), 503 (too many connections)",
            labelnames=("status_code", "reason"),
            **http,
        )


_families: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def families(registry: CollectorRegistry = REGISTRY) -> _Families:
    if registry not in _families:
        _families[registry] = _Families(registry)
    return _families[registry]


APP_NAME = "electra"
# Scrapes of /metrics are not counted, as with Litestar's middleware before.
NOT_COUNTED = frozenset({"/metrics"})


class RouteMetrics:
    """The HTTP metrics' children per route and per outcome, each looked up once and kept (buffered under
    --workers: electra.serving.engine.metric_buffer): what the middleware and the hot path
    (electra.serving.http.hot_path) both record with."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._families = families(registry)
        # (method, path) -> in-progress gauge; (method, path, status) -> (count, duration, errors or None)
        self._routes: dict[tuple[str, str], Any] = {}
        self._outcomes: dict[tuple[str, str, int], tuple[Any, Any, Any]] = {}

    def in_progress(self, method: str, path: str) -> Any:
        gauge = self._routes.get((method, path))
        if gauge is None:
            child = self._families.http_in_progress.labels(method, path, APP_NAME)
            gauge = self._routes[method, path] = gauge_of(child)
        return gauge

    def record(self, method: str, path: str, status: int, seconds: float) -> None:
        """One answered request: its count, its duration and, for a 5xx, an error."""
        key = (method, path, status)
        outcome = self._outcomes.get(key)
        if outcome is None:
            f = self._families
            labels = (method, path, APP_NAME, str(status))
            errors = counter(f.http_errors.labels(*labels)) if status >= 500 else None
            outcome = self._outcomes[key] = (
                counter(f.http_requests.labels(*labels)),
                histogram(f.http_duration.labels(*labels)),
                errors,
            )
        count, duration, errors = outcome
        count.inc()
        duration.observe(seconds)
        if errors is not None:
            errors.inc()


def http_metrics(registry: CollectorRegistry = REGISTRY) -> Callable[[Any], Any]:
    """Litestar middleware: requests, errors (5xx), durations and requests in progress per route (its path
    template) and status. A request whose client left before its answer counts as 499 (client_gone.py), not
    as an error; one whose middleware raised an HTTPException (answered by the app's handler, outside this
    one) counts with that exception's status.

    Litestar's PrometheusMiddleware records the same, but builds a Request, a label dict and four label
    lookups per request, about 50 us on a 2-core VM, a tenth of a short /detect's own server time; this
    looks each route's metric children up once and keeps them (RouteMetrics).
    """
    metrics = RouteMetrics(registry)

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            path = scope.get("path_template") or scope["path"]
            if scope["type"] != "http" or path in NOT_COUNTED:
                await app(scope, receive, send)
                return
            method = scope["method"]
            in_progress = metrics.in_progress(method, path)
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
                metrics.record(method, path, status[0], time.perf_counter() - start)

        return wrapped

    return middleware
