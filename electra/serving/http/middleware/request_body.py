"""The request body as it comes off the wire: every read bounded in time, and a body the answer did not need
read and thrown away before the answer goes out, so the client gets to read it.

A body that stops arriving for body_timeout_s seconds between two reads (nginx's client_body_timeout) answers
408 with `Connection: close`; a body that trickles in slower than that is bounded by the connection cap.

An answer that leaves before its body was read whole (a 413 on Content-Length, a 401, a 415) would reach
most clients as a connection reset: urllib, requests and most SDKs send the whole body before they read, and
a server that closes a socket with unread bytes in it makes the kernel send RST, which destroys the answer in
the client's buffer. So the rest of the body is read and discarded first, at most DRAIN_BYTES, each read
under the same timeout, and the connection stays usable. Past that bound, after a timeout, or when the client
waits for `100 Continue` before it sends (the server never said it, so the body will not come), the answer
goes out at once with `Connection: close`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from litestar.exceptions import HTTPException

# The most body bytes read and discarded to let an early answer through: at 100 Mbit/s about 5 s of
# upload. A client sending more than 64 MiB to an API whose limit is a few megabytes gets the answer with
# the connection closed, without the server reading on for it.
DRAIN_BYTES = 64 * 1024 * 1024
_CLOSE = (b"connection", b"close")


class BodyTimeout(HTTPException):
    """No byte of the request body arrived for body_timeout_s (error_response answers 408)."""

    status_code = 408

    @classmethod
    def after(cls, timeout_s: float) -> BodyTimeout:
        return cls(
            detail=f"no byte of the request body arrived for {timeout_s:g} s (--body-timeout); "
            "send the body without pausing",
            headers={"Connection": "close"},
        )


def request_body(body_timeout_s: float) -> Any:
    """ASGI middleware: body reads bounded by `body_timeout_s`, early answers after the body is drained."""

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            body = Body.of(scope, receive, body_timeout_s)
            if body is None:  # no body to read (a GET, Content-Length: 0)
                await app(scope, receive, send)
                return

            async def send_after_body(message: Any) -> None:
                if message["type"] == "http.response.start" and not body.complete and not await body.drain():
                    message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
                await send(message)

            await app(scope, body.receive, send_after_body)

        return wrapped

    return middleware


class Body:
    """One request's body reads: how much came, whether it is complete, and the rest drained on demand."""

    __slots__ = (
        "_receive",
        "complete",
        "declared",
        "expects_continue",
        "read",
        "received",
        "timed_out",
        "timeout",
        "waiting",
    )

    def __init__(self, receive: Any, timeout: float, declared: int | None, expects_continue: bool) -> None:
        self._receive = receive
        self.timeout = timeout
        self.waiting: asyncio.Task[Any] | None = None  # the task in receive(), while its timer runs
        self.declared = declared  # Content-Length; None for a chunked body
        self.expects_continue = expects_continue
        self.received = 0
        self.read = False  # receive() was called: a waiting client has been told 100 Continue
        self.complete = False
        self.timed_out = False

    @classmethod
    def of(cls, scope: Any, receive: Any, timeout: float) -> Body | None:
        """The body of the request in `scope`, or None when it has none."""
        declared: int | None = None
        chunked = expects_continue = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = int(value) if value.isdigit() else None  # the server refused malformed ones
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"expect":
                expects_continue = value.lower() == b"100-continue"
        if not chunked and not declared:
            return None
        return cls(receive, timeout, None if chunked else declared, expects_continue)

    async def receive(self) -> Any:
        if self.complete:  # after the body: only a disconnect can come, whenever it comes
            return await self._receive()
        self.read = True
        # What asyncio.timeout() does, at a fifth of its cost (a few microseconds on every request).
        task = self.waiting = asyncio.current_task()
        timer = asyncio.get_running_loop().call_later(self.timeout, self._expire)
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            if not self.timed_out or task is None or task.uncancel() > 0:
                raise
            raise BodyTimeout.after(self.timeout) from None
        finally:
            timer.cancel()
            self.waiting = None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.complete = not message.get("more_body", False)
        else:  # a disconnect: nothing more will come
            self.complete = True
        return message

    def _expire(self) -> None:
        if self.waiting is not None:
            self.timed_out = self.complete = True
            self.waiting.cancel()

    async def drain(self) -> bool:
        """Read and discard the rest of the body (see the module); whether it was read whole."""
        if self.timed_out or (self.expects_continue and not self.read):
            return False
        if self.declared is not None and self.declared - self.received > DRAIN_BYTES:
            return False
        limit = self.received + DRAIN_BYTES
        try:
            while not self.complete:
                message = await self.receive()
                if message["type"] != "http.request" or self.received > limit:
                    return False
        except BodyTimeout:
            return False
        return True
