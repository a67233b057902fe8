"""uvicorn's HTTP/1.1 protocol (httptools) with the limits it lacks, against clients that crawl or flood.

uvicorn bounds neither how long a client may take to send its request headers nor how large they may be
(httptools buffers a header of any size), nor how many connections are open at once (its limit_concurrency
answers 503 without Retry-After, only once a request's headers are in, and counts running tasks too). So:

- header_timeout_s: a connection that has not sent a complete request head within that many seconds of
  connecting, or of the first byte of its next request, gets 408 (nginx's client_header_timeout: a deadline
  for the whole head, so a byte every few seconds does not keep a slow-loris connection open);
- max_header_bytes: a request line and headers larger than that get 431, as soon as the excess arrives;
- max_connections: a connection beyond that many open ones gets 503 with Retry-After at once, before its
  request is read, and never reaches the app.

It also tells every request in flight on a connection that its client left: uvicorn tells only the newest,
so with pipelined requests the one running (an older one) would answer into the closed socket, which uvloop
raises as an error in the app.

Each answer is JSON, {"status_code", "detail"} as the app's, with `Connection: close`. Then the server
half-closes (FIN) and reads and throws away what the client still sends, until it closes too or LINGER_S
pass: closing a socket with unread bytes in it would make the kernel send RST, and the client's kernel would
drop the answer unread (RFC 9112, section 9.6). The answers are counted in electra_http_rejected_total.

This builds on uvicorn's HttpToolsProtocol attributes (cycle, pipeline, flow, parser, transport); the fault
suite (tests/test_hostile_clients.py) drives every path on real sockets, so an uvicorn that changes them
fails there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
import msgspec
from prometheus_client import REGISTRY, CollectorRegistry
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from electra.serving.http.middleware.http_metrics import families

log = logging.getLogger("electra.serving")

# How long a connection answered here is read (and the bytes dropped) for the client to close it first;
# at most LINGER_BYTES. Long enough for a client to finish the write it was in and read the answer.
LINGER_S = 2.0
LINGER_BYTES = 1024 * 1024
RETRY_AFTER_S = 1
# One warning per reason per this many seconds: a flood must not flood the log too (the metric counts all).
WARN_EVERY_S = 60.0


@dataclass(frozen=True)
class Limits:
    """The settings this protocol enforces (ServeSettings' fields of the same names)."""

    header_timeout_s: float
    max_header_bytes: int
    max_connections: int


def guarded_protocol(limits: Limits, registry: CollectorRegistry = REGISTRY) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn.Config(http=...): HttpToolsProtocol under `limits`."""
    f = families(registry)
    attrs = {
        "limits": limits,
        "open_gauge": f.http_connections,
        "rejected": {
            reason: f.http_rejected.labels(str(status), reason) for status, reason in _REASONS.values()
        },
        "warned": {},
    }
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), attrs)


# kind -> (status, the reason label)
_REASONS = {
    "slow": (408, "header_timeout"),
    "large": (431, "header_too_large"),
    "full": (503, "too_many_connections"),
}


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop httptools at once; data_received answers 431."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with a header deadline, a header size limit and a connection cap (see the module)."""

    limits: ClassVar[Limits]
    open_gauge: ClassVar[Any]
    rejected: ClassVar[dict[str, Any]]
    warned: ClassVar[dict[str, float]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._admitted = False
        self._in_head = False  # a request's head has begun and is not complete
        self._head_bytes = 0  # request line and headers parsed so far (from the parser's callbacks)
        self._head_wire = 0  # bytes received since the head began (bounds what httptools buffers)
        self._head_timer: asyncio.TimerHandle | None = None
        self._pending: str | None = None  # an answer to send once the response being written is done
        self._lingering = False
        self._discarded = 0
        self._linger_timer: asyncio.TimerHandle | None = None
        self._in_flight: list[Any] = []  # request cycles not answered yet, running or pipelined

    # --- connections ----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self.transport = transport  # not admitted: not among uvicorn's connections
            self._answer("full")
            return
        super().connection_made(transport)
        self._admitted = True
        self.open_gauge.inc()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._linger_timer):
            if timer is not None:
                timer.cancel()
        if self._admitted:
            self._admitted = False
            self.open_gauge.dec()
        super().connection_lost(exc)
        for cycle in self._in_flight:
            if not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
        self._in_flight.clear()

    def data_received(self, data: bytes) -> None:
        if self._lingering or self._pending is not None:
            self._discard(len(data))
            return
        # uvicorn's data_received, with the head's size checked as it arrives.
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as e:
            if isinstance(e.__context__, _HeadTooLarge):
                self._answer("large")
            else:
                self._bad_request()
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            self._bad_request()
            return
        if self._in_head:
            # A head still incomplete: everything since it began is head, whatever the parser holds back.
            self._head_wire += len(data)
            if self._head_wire > self.limits.max_header_bytes:
                self._answer("large")

    def _bad_request(self) -> None:
        message = "Invalid HTTP request received."
        self.logger.warning(message)
        self.send_400_response(message)

    # --- the request head -----------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = self._head_wire = 0
        self._arm_head_timer()  # the next request's first byte on a kept-alive connection

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()
        self._in_flight = [c for c in self._in_flight if not c.response_complete]
        if self.cycle is not None:
            self._in_flight.append(self.cycle)

    def _count(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self.limits.max_header_bytes:
            raise _HeadTooLarge

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._lingering or self.transport.is_closing():
            return
        if self._busy():
            # The server is still answering earlier requests on this connection and reads nothing
            # meanwhile: the client is not the slow one. Its time starts again.
            self._arm_head_timer()
            return
        self._answer("slow")

    # --- answers of this layer ------------------------------------------------------------------------

    def _busy(self) -> bool:
        """A response is being written on this connection, or pipelined requests wait for theirs."""
        return (self.cycle is not None and not self.cycle.response_complete) or bool(self.pipeline)

    def on_response_complete(self) -> None:
        if self._pending is not None and not self.pipeline:
            self.server_state.total_requests += 1
            if self.transport.is_closing():  # that response closed the connection: nobody to answer
                return
            kind, self._pending = self._pending, None
            self._answer(kind)
            return
        super().on_response_complete()

    def _answer(self, kind: str) -> None:
        """Answer `kind` (see _REASONS) with Connection: close, then linger (see the module)."""
        if self._admitted and self._busy():
            self._pending = kind  # after the response being written; what arrives meanwhile is dropped
            return
        if self.transport.is_closing():
            return
        status, reason = _REASONS[kind]
        detail, extra = self._detail(kind)
        body = msgspec.json.encode({"status_code": status, "detail": detail})
        head = [STATUS_LINE[status]]
        for name, value in [
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *extra,
        ]:
            head += [name, b": ", value, b"\r\n"]
        self.transport.write(b"".join([*head, b"\r\n", body]))
        self.rejected[reason].inc()
        self._warn(reason, detail)
        self._linger()

    def _detail(self, kind: str) -> tuple[str, list[tuple[bytes, bytes]]]:
        limits = self.limits
        if kind == "slow":
            seconds = limits.header_timeout_s
            return f"the request headers did not arrive within {seconds:g} s (--header-timeout)", []
        if kind == "large":
            size = limits.max_header_bytes
            return f"the request line and headers exceed the limit of {size:,} bytes (--max-header-bytes)", []
        detail = (
            f"the server has {limits.max_connections:,} connections open, its limit (--max-connections); "
            f"retry in {RETRY_AFTER_S} s"
        )
        return detail, [(b"retry-after", str(RETRY_AFTER_S).encode())]

    def _warn(self, reason: str, detail: str) -> None:
        now = time.monotonic()
        if now - self.warned.get(reason, -WARN_EVERY_S) >= WARN_EVERY_S:
            self.warned[reason] = now
            log.warning("%s (answered %s; electra_http_rejected_total counts each)", detail, reason)

    def _linger(self) -> None:
        self._lingering = True
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._unset_keepalive_if_required()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self.flow is not None:
            self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_S, self._close)

    def _discard(self, n: int) -> None:
        self._discarded += n
        if self._discarded > LINGER_BYTES:
            self._close()

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()
