"""Requests on their way to a model's queue: counted from their first byte until they enqueue, so that a batch
that is not full waits for requests still being read, parsed or tokenized (the batcher's Arrivals).

The middleware starts the count and the request's model call (ServerState.run) ends it; they meet through a
context variable, so the routes in between need not pass anything along.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from electra.serving.batcher import Arrivals

# Per request: the Arrivals it still counts in, until it enqueues.
_PENDING = contextvars.ContextVar[list[Arrivals]]("electra_pending")


def arrived() -> None:
    """This request is about to enqueue: it no longer holds up a batch that waits for company."""
    pending = _PENDING.get(None)
    if pending:
        pending.pop().arrived()


def count_arrivals(arrivals: Arrivals, runs_model: Callable[[str], bool]) -> Callable[[Any], Any]:
    """ASGI middleware: a POST to a path for which `runs_model` is true counts in `arrivals` until it
    enqueues (or answers without doing so)."""

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST" or not runs_model(scope.get("path", "")):
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
