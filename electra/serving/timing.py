"""Server-Timing (W3C): where a request's time went, in its response's headers.

    Server-Timing: tokenize;dur=0.061, queue;dur=0.004, model;dur=5.412

(milliseconds; `model` is the ONNX Runtime call(s) the request's inputs were in, shared with the rest of their
batch; `queue` the wait before the first one). Browsers show it in their developer tools; the serve benchmark
takes latency minus `model` as the server's overhead, request by request.
"""

from __future__ import annotations

import contextvars
from typing import Any

HEADER = b"server-timing"
_STAGES = contextvars.ContextVar[dict[str, float] | None]("electra_server_timing", default=None)


def add(stage: str, seconds: float) -> None:
    """Count `seconds` towards `stage` of the request being served (nothing outside a request)."""
    stages = _STAGES.get()
    if stages is not None:
        stages[stage] = stages.get(stage, 0.0) + seconds


def current() -> dict[str, float] | None:
    """The stages recorded so far for the request being served (None outside a request)."""
    return _STAGES.get()


def header_value(stages: dict[str, float]) -> bytes:
    return ", ".join(f"{name};dur={1e3 * s:.3f}" for name, s in stages.items()).encode()


def parse(value: str) -> dict[str, float]:
    """A Server-Timing header's durations by name, in milliseconds (entries without dur are skipped)."""
    out = {}
    for entry in value.split(","):
        name, *params = (p.strip() for p in entry.split(";"))
        for param in params:
            key, _, number = param.partition("=")
            if key.strip() == "dur" and name:
                out[name] = float(number)
    return out


def server_timing(app: Any) -> Any:
    """Litestar middleware: the stages `add` recorded while a request ran, as its Server-Timing header."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        stages: dict[str, float] = {}
        token = _STAGES.set(stages)

        async def send_with_timing(message: Any) -> None:
            if message["type"] == "http.response.start" and stages:
                message["headers"] = [*message.get("headers", ()), (HEADER, header_value(stages))]
            await send(message)

        try:
            await app(scope, receive, send_with_timing)
        finally:
            _STAGES.reset(token)

    return wrapped
