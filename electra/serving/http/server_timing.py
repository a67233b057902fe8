"""Server-Timing (W3C): where a request's time went, in its response's headers.

    Server-Timing: tokenize;dur=0.061, queue;dur=0.004, model;dur=5.412

(milliseconds; `model` is the ONNX Runtime call(s) the request's inputs were in, shared with the rest of their
batch; `queue` the wait before the first one). Browsers show it in their developer tools; the serve benchmark
takes latency minus `model` as the server's overhead, request by request. The stages are the request's
metadata (electra.serving.engine.metadata); the request-metadata middleware writes them.
"""

from __future__ import annotations

HEADER = b"server-timing"


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
