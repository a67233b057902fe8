"""The JSON API's common request answered in one ASGI function over the engine, without the framework.

A POST to /detect, /classify or /tag whose body has a Content-Length within --max-body-bytes, no content
coding, no `Expect`, no CORS `Origin`, an accepted API key (when the server has keys), and JSON that decodes
strictly into the route's body type, is read, run and answered here. Everything else goes to the Litestar
app as it came (a body already read is handed on as it was received), so every refusal of a malformed or
invalid body, every protocol and every other route keeps the one implementation the app has. Errors raised
once the request is the engine's (its typed refusals, a bug) are answered by the app's one exception handler
(error_responses.py), as Litestar would call it.

Why: per request, the Litestar route (request object, guards, body parsing, dependency injection, response)
and the five middlewares cost about as much again as everything else the server does beyond the model
(bench/serve_layers.py; docs/serving.md has the figures), and a server's overhead is held to a bare ASGI
app's (bench/serve_throughput.py). What the middlewares do, it does in one place with the same objects: the
request counts among the arrivals a batch waits for from its first byte (request_metadata.py), body reads are
bounded by --body-timeout (request_body.py), a client that leaves is watched for and counted 499
(client_gone.py), the HTTP metrics (http_metrics.py), the Server-Timing header and Triton's statistics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from litestar import Litestar

from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metric_buffer import BUFFER
from electra.serving.http.error_responses import error_response
from electra.serving.http.middleware.client_gone import CLIENT_CLOSED_REQUEST, Watched, went_away
from electra.serving.http.middleware.http_metrics import RouteMetrics
from electra.serving.http.middleware.request_body import Body, BodyTimeout
from electra.serving.http.middleware.request_metadata import TimedSend
from electra.serving.http.server_timing import HEADER, header_value
from electra.serving.http.state import ServerState

Handler = Callable[[ServerState, Any, RequestMetadata], Awaitable[msgspec.Struct]]


class _Route:
    __slots__ = ("decode", "handler")

    def __init__(self, body: type[msgspec.Struct], handler: Handler) -> None:
        # Strict: a body that only Litestar's lenient conversion accepts ("true" for true) goes to the app.
        self.decode = msgspec.json.Decoder(body).decode
        self.handler = handler


_JSON = (b"content-type", b"application/json")


class HotPath:
    """ASGI: the common case of `routes` answered here, the rest by `app`'s own handler (see the module).
    Installed as the Litestar app's `asgi_handler`, so Litestar's own entry (scope set-up, lifespan) stays in
    front of it and the app object, its state and its test client are unchanged."""

    def __init__(
        self, app: Litestar, state: ServerState, routes: dict[str, tuple[type[Any], Handler]]
    ) -> None:
        self.app = app
        self.inner = app.asgi_handler
        self.state = state
        self.routes = {path: _Route(body, handler) for path, (body, handler) in routes.items()}
        self.metrics = RouteMetrics()
        self.arrivals = state.engine.arrivals
        self.max_body = state.settings.max_body_bytes
        self.timeout = state.settings.body_timeout_s
        self.keyed = bool(state.settings.api_keys)
        self.encode = msgspec.json.Encoder().encode

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        route = (
            self.routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        )
        if route is None or not self._plain(scope):
            await self.inner(scope, receive, send)
            return
        meta = RequestMetadata(arrivals=self.arrivals)
        self.arrivals.expect()  # from its first byte, as request_metadata.py counts it
        watched = Watched(scope, receive, send)
        BUFFER.opened()
        try:
            replay = await self._answer(route, meta, scope, watched, receive)
        finally:
            watched.stop_watching()
            meta.enqueued()
            BUFFER.closed()  # the answer is out: metric updates go now, unless others are in flight
        if replay is not None:  # not the common case after all: the app answers (and counts) it
            await self.inner(scope, replay, send)

    def _plain(self, scope: Any) -> bool:
        """Whether the request is the common case: a body of known length within the limit, no coding, no
        Expect, no Origin, no root path, and an accepted key."""
        declared = 0
        authorization = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit():
                    return False
                declared = int(value)
            elif name in _NOT_PLAIN:
                return False
            elif name == b"authorization":
                authorization = value.decode("latin-1")
        if not 0 < declared <= self.max_body or scope.get("root_path"):
            return False
        return not self.keyed or self.state.authorize(authorization)

    async def _answer(
        self, route: _Route, meta: RequestMetadata, scope: Any, watched: Watched, receive: Any
    ) -> Callable[[], Awaitable[Any]] | None:
        """The request answered, counted in the HTTP metrics; or, when its body is not the common case, the
        receive that gives the app the request as it came."""
        start = time.perf_counter()
        path = scope["path"]
        in_progress = self.metrics.in_progress("POST", path)
        in_progress.inc()
        status: int | None = 500  # what a client sees when this fails before it answers
        try:
            messages: list[Any] = []
            try:
                body = await self._read(watched, messages)
            except BodyTimeout as e:
                status = await self._error(e, meta, scope, watched, start)
                return None
            data = self._decode(route, body)
            if data is None:
                status = None
                return _replay(messages, receive)
            status = await self._respond(route, data, meta, scope, watched, start)
            return None
        except asyncio.CancelledError:
            if not watched.stopped_by_us():
                raise
            return None
        finally:
            in_progress.dec()
            if status is not None:
                if went_away(scope):
                    status = CLIENT_CLOSED_REQUEST
                self.metrics.record("POST", path, status, time.perf_counter() - start)

    @staticmethod
    def _decode(route: _Route, body: bytes | None) -> Any:
        """The body as the route's type; None when it is not one (the app says what is wrong with it)."""
        if body is None:
            return None
        try:
            return route.decode(body)
        except (msgspec.DecodeError, ValueError, RecursionError):  # ValueError: not UTF-8 in a string
            return None

    async def _respond(
        self, route: _Route, data: Any, meta: RequestMetadata, scope: Any, watched: Watched, start: float
    ) -> int:
        """The engine's answer to `data`, sent; its status."""
        try:
            answer = self.encode(await route.handler(self.state, data, meta))
        except Exception as e:  # every refusal, and any bug, goes to the app's one exception handler
            return await self._error(e, meta, scope, watched, start)
        headers = [_JSON, (b"content-length", str(len(answer)).encode())]
        if meta.stages:
            headers.append((HEADER, header_value(meta.stages)))
        await watched.send({"type": "http.response.start", "status": 200, "headers": headers})
        answered_at = time.perf_counter()
        await watched.send({"type": "http.response.body", "body": answer})
        if meta.model is not None and not went_away(scope):
            self.state.statistics.record(meta, start, 200, answered_at)
        return 200

    async def _read(self, watched: Watched, messages: list[Any]) -> bytes | None:
        """The whole body, each read bounded by --body-timeout (BodyTimeout, as request_body's Body reads);
        None when the client went away before it was complete (the app then sees what the client did). Every
        message is kept in `messages`, for the app if it is to answer."""
        body = Body(watched.receive, self.timeout, declared=None, expects_continue=False)
        chunks: list[bytes] = []
        while True:
            message = await body.receive()
            messages.append(message)
            if message["type"] != "http.request":
                return None
            chunks.append(message.get("body", b""))
            if body.complete:
                return b"".join(chunks)

    async def _error(
        self, exc: Exception, meta: RequestMetadata, scope: Any, watched: Watched, start: float
    ) -> int:
        """`exc` answered by the app's exception handler, as Litestar's exception middleware calls it; its
        status. A request that reached a model counts in its statistics, as a failure."""
        send = TimedSend(watched.send, meta)
        request = self.app.request_class(scope=scope, receive=watched.receive, send=send)
        response = error_response(request, exc)
        asgi = response.to_asgi_response(app=None, request=request, type_encoders=self.app.type_encoders)
        await asgi(scope, watched.receive, send)
        if meta.model is not None and not went_away(scope):
            self.state.statistics.record(meta, start, send.status, send.started)
        return send.status


# Headers that make a request something only the app handles.
_NOT_PLAIN = frozenset({b"transfer-encoding", b"content-encoding", b"expect", b"origin"})


def _replay(messages: list[Any], receive: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """A receive that gives `messages` first (what was read already), then the connection's."""
    pending = list(messages)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
