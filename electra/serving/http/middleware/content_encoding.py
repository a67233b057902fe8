"""Compressed request bodies: `Content-Encoding: gzip` or `deflate` (what tritonclient sends with
`request_compression_algorithm`), decoded before any route reads the body.

The body is inflated as the route reads it, at most CHUNK bytes per step, so --max-body-bytes limits the
decoded body as it grows: a small body that inflates past the limit is cut off there (413), never held whole.
The wire bytes count against the same limit. `deflate` is the zlib format (RFC 9110, section 8.4.1.2); a raw
deflate stream, which some clients send instead, is accepted too. Other codings answer 415 with the
`Accept-Encoding` the server does take (RFC 7694).
"""

from __future__ import annotations

import zlib
from typing import Any

from litestar.exceptions import HTTPException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

# Decoded bytes handed to the route per read: what a body can cost in memory beyond the limit itself.
CHUNK = 64 * 1024
# gzip members in one body (RFC 1952 allows several; a client compresses a body as one). Each new member
# restarts the decoder on the input left over, a copy of it, so a body of many empty members (20 bytes each)
# would cost time quadratic in its size.
MAX_MEMBERS = 64
SUPPORTED = "gzip, deflate"
# Set in the ASGI scope of a request whose body was decoded: the coding, for error messages.
SCOPE_KEY = "electra.content_encoding"
_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for the gzip format
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS


class BadEncoding(Exception):
    """A body that is not what its Content-Encoding says; `str()` says why (error_response answers 400)."""


def coding_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The one content coding to undo (None: the body is as sent); HTTPException 415 for any other."""
    codings = []
    for name, value in headers:
        if name.lower() == b"content-encoding":
            codings += [c.strip().lower() for c in value.decode("latin-1").split(",")]
    codings = ["gzip" if c == "x-gzip" else c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1:
        why = f"Content-Encoding {', '.join(codings)!r} is several codings; send the body compressed once"
    elif codings[0] not in ("gzip", "deflate"):
        why = f"Content-Encoding {codings[0]!r} is not supported; send the body as it is, or compressed"
    else:
        return codings[0]
    raise HTTPException(
        status_code=415, detail=f"{why}, with gzip or deflate", headers={"Accept-Encoding": SUPPORTED}
    )


def decode_content(max_body_bytes: int) -> Any:
    """Litestar middleware: bodies with a Content-Encoding reach the routes decoded (see the module)."""

    def middleware(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            try:
                coding = coding_of(scope["headers"]) if scope["type"] == "http" else None
            except HTTPException as e:
                # Raised when the route reads the body, inside the route's exception handling: raised here
                # it would be answered outside every middleware, which would not see the answer (metrics,
                # the drain of the unread body in request_body.py).
                await app(scope, _refusing(e), send)
                return
            if coding is None:
                await app(scope, receive, send)
                return
            # The route sees the decoded body: its length and coding headers described the wire bytes.
            wire_only = (b"content-encoding", b"content-length")
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() not in wire_only]
            scope[SCOPE_KEY] = coding
            await app(scope, Inflating(receive, coding, max_body_bytes), send)

        return wrapped

    return middleware


def _refusing(error: HTTPException) -> Any:
    """An ASGI `receive` that raises `error`: the route's first read of the body answers it."""

    async def receive() -> Any:
        raise error

    return receive


class Inflating:
    """An ASGI `receive` that answers with the decoded body, CHUNK bytes at a time."""

    def __init__(self, receive: Any, coding: str, limit: int) -> None:
        self.receive = receive
        self.coding = coding
        self.limit = limit
        self.wire = 0  # compressed bytes received
        self.members = 0  # gzip members begun
        self.pending = b""  # compressed bytes not decoded yet
        self.more = True  # the client has more body to send
        self.decoder: Any = None
        self.done = False

    async def __call__(self) -> dict[str, Any]:
        while not self.done:
            if self.pending and self._can_start():
                out = self._inflate()
                if out:
                    return {"type": "http.request", "body": out, "more_body": True}
                continue  # the input was a header, or ended a gzip member: go on with what is left
            if not self.more:
                self._finish()
                break
            message = await self.receive()
            if message["type"] != "http.request":
                return message  # a disconnect: the route sees it as such
            body = message.get("body", b"")
            self.pending += body
            self.more = message.get("more_body", False)
            self.wire += len(body)
            if self.wire > self.limit:
                raise RequestEntityTooLarge
        return {"type": "http.request", "body": b"", "more_body": False}

    def _can_start(self) -> bool:
        # Whether deflate means zlib or raw shows in its first two bytes.
        return self.decoder is not None or self.coding == "gzip" or len(self.pending) >= 2 or not self.more

    def _inflate(self) -> bytes:
        """Up to CHUNK decoded bytes; each call decodes some input or ends a stream, so the loop ends."""
        if self.decoder is None:
            self.members += 1
            if self.members > MAX_MEMBERS:
                raise BadEncoding(f"the body has more than {MAX_MEMBERS} gzip members; send it as one")
            self.decoder = zlib.decompressobj(self._window_bits())
        try:
            out = self.decoder.decompress(self.pending, CHUNK)
        except zlib.error as e:
            raise BadEncoding(f"the body is not valid {self.coding} data ({e})") from None
        if self.decoder.eof:
            rest = self.decoder.unused_data
            if rest and self.coding == "deflate":
                raise BadEncoding(f"{len(rest)} bytes follow the end of the deflate stream")
            if rest:
                self.decoder = None  # another gzip member follows (RFC 1952, section 2.2)
            self.pending = rest
        else:
            self.pending = self.decoder.unconsumed_tail
        return out

    def _window_bits(self) -> int:
        if self.coding == "gzip":
            return _GZIP
        cmf, flg = self.pending[0], self.pending[1] if len(self.pending) > 1 else 0
        is_zlib = cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        return _ZLIB if is_zlib else _RAW

    def _finish(self) -> None:
        self.done = True
        if self.wire and (self.decoder is None or not self.decoder.eof):
            raise BadEncoding(f"the {self.coding} data ends before its stream does (cut off?)")
