"""Each request's metadata (electra.serving.engine.metadata), from its first byte to its answer: made here
and put in the ASGI scope, where a route takes it to hand to the engine with the request; read here when the
answer goes out.

One layer does the three things that need it, because every layer costs each request its time: a POST that
runs a model counts among the requests on their way to a queue (the batchers' Arrivals, so that a batch that
is not full waits for it) until it enqueues or answers; the answer carries the stages the engine measured
as its Server-Timing header; and a request that reached a model is added to that model's Triton statistics
when its answer is done. It also marks the request in flight for the metric buffer
(electra.serving.engine.metric_buffer), which writes a worker's metric updates once none is.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from electra.serving.engine.batcher import Arrivals
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metric_buffer import BUFFER
from electra.serving.http.middleware.client_gone import went_away
from electra.serving.http.server_timing import HEADER, header_value
from electra.serving.http.statistics import Statistics

SCOPE_KEY = "electra.metadata"


def request_meta(scope: MutableMapping[str, Any]) -> RequestMetadata:
    """The metadata of the request this scope is (a fresh one outside the middleware)."""
    meta = scope.get(SCOPE_KEY)
    return meta if meta is not None else RequestMetadata()


class TimedSend:
    """A send that adds the request's Server-Timing header to its answer and notes the answer's status and
    when it started (500 and None until it starts: what a failure before answering counts as)."""

    __slots__ = ("meta", "send", "started", "status")

    def __init__(self, send: Callable[[Any], Awaitable[None]], meta: RequestMetadata) -> None:
        self.send, self.meta = send, meta
        self.status: int = 500
        self.started: float | None = None

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.status, self.started = message["status"], time.perf_counter()
            if self.meta.stages:
                message["headers"] = [*message.get("headers", ()), (HEADER, header_value(self.meta.stages))]
        await self.send(message)


def request_metadata(
    arrivals: Arrivals, runs_model: Callable[[str], bool], statistics: Statistics
) -> Callable[[Any], Any]:
    """ASGI middleware: every HTTP request gets its RequestMetadata; a POST to a path for which `runs_model`
    is true counts in `arrivals` until it enqueues (or answers without doing so)."""

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            meta = RequestMetadata()
            scope[SCOPE_KEY] = meta
            if scope["method"] == "POST" and runs_model(scope.get("path", "")):
                meta.arrivals = arrivals
                arrivals.expect()
            start = time.perf_counter()
            timed = TimedSend(send, meta)
            BUFFER.opened()
            try:
                await app(scope, receive, timed)
            finally:
                meta.enqueued()  # never enqueued (a 4xx, a disconnect): stop counting it
                # A request whose client left (client_gone.py) neither succeeded nor failed: not counted.
                if meta.model is not None and not went_away(scope):
                    statistics.record(meta, start, timed.status, timed.started)
                BUFFER.closed()  # its answer and every metric of it done (metric_buffer.py)

        return wrapped

    return middleware
