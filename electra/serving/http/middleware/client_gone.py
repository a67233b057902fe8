"""A client that goes away before its answer is not a server error: its request is cancelled where it stands
(inputs still queued for a model are dropped before the model runs, see Batcher.submit), and it is counted
with the status nginx logs for it, 499, outside the 5xx error counter.

ASGI tells of a disconnect with an `http.disconnect` message from receive(). While the app reads the body it
sees that message itself (Litestar then gives up on the request, which used to be counted as a 500); once the
body is read nothing calls receive() any more, so a watcher task does, and cancels the request's task if the
client leaves before the answer starts. uvicorn and granian both answer that receive() when the connection
closes; uvicorn also once the answer is complete, which the watcher then ignores.

TCP cannot tell a client that closed its socket from one that only shut down its sending side (half-close),
so, as nginx and Go's net/http do, an end of stream before the answer counts as the client having left.

The watcher starts WATCH_AFTER_S after the body is complete, not at once: most requests are answered sooner,
and a task started and cancelled on every one of them was the costliest layer of the request path
(bench/serve_layers.py). A client that leaves is seen that much later, which costs nothing that matters: what
a departure saves is model time still ahead, and a request that old is waiting for the model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from typing import Any

log = logging.getLogger("electra.serving")

# The status nginx logs for a request whose client closed the connection before the answer.
CLIENT_CLOSED_REQUEST = 499
# Set (True) in the ASGI scope of a request whose client went away before its answer started.
SCOPE_KEY = "electra.client_gone"
# granian hands the watcher the empty last chunk of a body before the disconnect; a server that kept
# answering http.request would otherwise keep the watcher spinning.
_MAX_MESSAGES = 3
# How long after its body a request goes unwatched (see the module).
WATCH_AFTER_S = 0.005


def went_away(scope: MutableMapping[str, Any]) -> bool:
    """Whether the client of this request left before its answer started."""
    return bool(scope.get(SCOPE_KEY, False))


def client_gone(app: Any) -> Any:
    """ASGI middleware: marks a request whose client left (SCOPE_KEY) and cancels what it was doing."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request = Watched(scope, receive, send)
        try:
            await app(scope, request.receive, request.send)
        except asyncio.CancelledError:
            if not request.stopped_by_us():
                raise
        finally:
            request.stop_watching()

    return wrapped


class Watched:
    """One request's receive and send, watched for the client leaving (this middleware's, and the hot path's:
    electra.serving.http.hot_path)."""

    __slots__ = ("_receive", "_send", "cancelled", "scope", "started", "task", "timer", "watcher")

    def __init__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self.task = asyncio.current_task()
        self.started = False  # the answer has started: from then on the status is known
        self.cancelled = False
        self.watcher: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    async def receive(self) -> Any:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._left()
        elif not message.get("more_body", False) and self.timer is None:
            # The body is complete: from here on only a disconnect can come, and nobody else listens.
            self.timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._start_watching)
        return message

    def _start_watching(self) -> None:
        if not self.started:
            self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        if went_away(self.scope):
            return  # nobody is there to read it (the app answering a disconnect it saw while reading)
        await self._send(message)

    async def _watch(self) -> None:
        for _ in range(_MAX_MESSAGES):
            message = await self._receive()
            if message["type"] == "http.disconnect":
                if not self.started and self.task is not None:
                    self._left()
                    self.cancelled = True
                    self.task.cancel()
                return

    def stopped_by_us(self) -> bool:
        """Whether a CancelledError that stopped the request was the watcher's (the client left: not an
        error); anyone else's (a shutdown) is theirs to see, and is raised on."""
        if not self.cancelled or self.task is None or self.task.uncancel() > 0:
            return False
        log.debug("%s %s: the client left before its answer (499)", self.scope["method"], self.scope["path"])
        return True

    def _left(self) -> None:
        if not self.started:
            self.scope[SCOPE_KEY] = True

    def stop_watching(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.watcher is not None and not self.watcher.done():
            self.watcher.cancel()
