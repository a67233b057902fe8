"""The Litestar application: the routes of every module wired to one ServerState (the engine behind them),
behind the API keys, limits, middlewares (electra.serving.http.middleware) and the one exception handler.

`create_app(settings)` loads every bundle (a bad one fails here, before the port opens); warm-up runs in the
background after start-up, and /health/ready turns 200 only when it is done, so Kubernetes sends no traffic
to a pod whose first requests would pay ONNX Runtime's lazy initialisation.

The routes live in modules of their own (routes_inference, protocols, tei, routes_health, routes_page) as
module-level handlers that get the state they share (electra.serving.http.state) by dependency injection;
this module is the only one that knows them all. Each app registers them through Routers, which Litestar
copies per app, so the apps a process builds (tests build many) never share a handler object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Litestar, Router
from litestar.config.cors import CORSConfig
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from electra.serving.engine.backend import load_runners
from electra.serving.engine.kinds import KINDS
from electra.serving.engine.metric_buffer import BUFFER
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http import protocols, routes_health, routes_inference, tei
from electra.serving.http.api_docs import openapi_config
from electra.serving.http.error_responses import error_response
from electra.serving.http.hot_path import HotPath
from electra.serving.http.metrics_route import MetricsController
from electra.serving.http.middleware.client_gone import client_gone
from electra.serving.http.middleware.content_encoding import decode_content
from electra.serving.http.middleware.http_metrics import http_metrics
from electra.serving.http.middleware.request_body import request_body
from electra.serving.http.middleware.request_metadata import request_metadata
from electra.serving.http.openapi_bodies import (
    document_closed_bodies,
    document_infer_body,
    document_tei_bodies,
)
from electra.serving.http.protocols import is_inference
from electra.serving.http.routes_inference import HOT_ROUTES
from electra.serving.http.routes_page import page_routes
from electra.serving.http.siblings import Siblings
from electra.serving.http.state import ServerState, dependencies
from electra.serving.http.tei import TEI_PATHS
from electra.serving.settings import ServeSettings

_JSON_INFERENCE_PATHS = frozenset(kind.route for kind in KINDS.values()) | TEI_PATHS


def create_app(
    settings: ServeSettings,
    runners: dict[str, ModelRunner] | None = None,
    on_ready: Callable[[], None] | None = None,
    siblings: Siblings | None = None,
) -> Litestar:
    """The ASGI app. `runners` (models already loaded) is for tests and embedding; default: load them.
    `siblings`: the other workers' readiness, in a worker of a server with --workers."""
    settings = settings.with_keys()
    BUFFER.configure(settings.metrics_flush_ms / 1000)  # before the metrics the app records with are made
    loaded = runners if runners is not None else load_runners(settings)
    state = ServerState(settings, loaded, on_ready, siblings)
    # Without keys no guard at all: Litestar copies the handler for every guard call on every request.
    guards = [require_key] if settings.api_keys else []
    keyed = [*routes_inference.KEYED_ROUTES, *protocols.KEYED_ROUTES, *tei.KEYED_ROUTES]
    app = Litestar(
        route_handlers=[
            Router("/", route_handlers=keyed, guards=guards),
            Router("/", route_handlers=[*protocols.OPEN_ROUTES, *routes_health.OPEN_ROUTES]),
            *page_routes(settings.example),
            MetricsController,
        ],
        dependencies=dependencies(state),
        lifespan=[state.lifespan],
        middleware=[
            # Outermost: a request counts among those on their way to a queue from its first byte, and its
            # statistics see whether client_gone found its client gone.
            request_metadata(state.engine.arrivals, _runs_model, state.statistics),
            http_metrics(),
            # Inside the metrics, which count a request whose client left as 499; outside everything that
            # reads the body, so its disconnect and its timeout are seen whoever reads.
            client_gone,
            request_body(settings.body_timeout_s),
            decode_content(settings.max_body_bytes),
        ],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(),
        cors_config=CORSConfig(allow_origins=["*"], allow_headers=["Authorization", "Content-Type"]),
        exception_handlers={Exception: error_response},
        # Logging is electra.logs' (one format, set by the CLI); Litestar's default config would put a
        # handler of its own on the root logger and print every record twice, in another format.
        logging_config=None,
        debug=False,
    )
    app.state.electra = state
    if settings.hot_path:
        # Behind Litestar's own entry, in front of its routing: the JSON API's common request (hot_path.py).
        app.asgi_handler = HotPath(app, state, HOT_ROUTES)
    document_closed_bodies(app)
    document_infer_body(app)
    document_tei_bodies(app)
    return app


def _runs_model(path: str) -> bool:
    """A POST to `path` reaches a model's queue: what count_arrivals counts."""
    return path in _JSON_INFERENCE_PATHS or is_inference(path)


async def require_key(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The guard of every route that reaches a model: the API keys, when the server has some. A coroutine:
    Litestar runs a plain function guard through a worker thread, one thread hop per request."""
    state: ServerState = connection.app.state.electra
    if not state.authorize(connection.headers.get("authorization")):
        raise NotAuthorizedException(
            detail="missing or wrong API key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": 'Bearer realm="electra"'},
        )
