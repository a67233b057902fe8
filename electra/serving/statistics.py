"""Triton's statistics extension: `GET /v2/models/{name}[/versions/1]/stats` and `GET /v2/models/stats`.

Specification: triton-inference-server/server `docs/protocol/extension_statistics.md`. Built from what the
server already measures: the Prometheus counters of electra.serving.metrics (`inference_count`: texts
answered; `execution_count`: model calls) and each request's Server-Timing stages (electra.serving.timing),
which this module's middleware adds up per model when the answer is sent:

| Triton's statistic | here, per request that reached the model |
|---|---|
| success / fail | from its first byte to the end of its answer; fail: an error after tokenization began |
| queue | `queue`: the wait before its first model call |
| compute_input | `tokenize` |
| compute_infer | `model`: the model calls its inputs were in (shared with the rest of their batch) |
| compute_output | from the model's rows to the start of the answer (post-processing, encoding) |

Triton's perf_analyzer reads these to split a request's latency into server-side parts. There is no
response cache, so cache_hit and cache_miss stay zero.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from electra.serving import timing
from electra.serving.client_gone import went_away
from electra.serving.metrics import NAMESPACE


@dataclass
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.ns += round(seconds * 1e9)

    def json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class ModelStats:
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)
    last_inference_ms: int = 0


@dataclass
class _Request:
    """What the request being served did with a model (set by `entered` and `answered`)."""

    model: str | None = None
    rows_at: float | None = None


_CURRENT = contextvars.ContextVar[_Request | None]("electra_statistics", default=None)


def entered(model: str) -> None:
    """The request being served starts `model`'s work, tokenization first (it counts as success or fail)."""
    request = _CURRENT.get()
    if request is not None:
        request.model = model


def answered() -> None:
    """The model's rows for the request being served are back; what follows is compute_output."""
    request = _CURRENT.get()
    if request is not None:
        request.rows_at = time.perf_counter()


class Statistics:
    """Per-model request statistics of one server, and the middleware that gathers them."""

    def __init__(self, models: Iterable[str], registry: CollectorRegistry = REGISTRY) -> None:
        self.models = {name: ModelStats() for name in models}
        self.registry = registry

    def middleware(self, app: Any) -> Any:
        """ASGI middleware: must run inside timing.server_timing, whose stages it reads at the end."""

        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            request = _Request()
            token = _CURRENT.set(request)
            start = time.perf_counter()
            answer: list[Any] = [500, None]  # status, and when the answer started

            async def send_status(message: Any) -> None:
                if message["type"] == "http.response.start":
                    answer[:] = [message["status"], time.perf_counter()]
                await send(message)

            try:
                await app(scope, receive, send_status)
            finally:
                _CURRENT.reset(token)
                # A request whose client left (client_gone.py) neither succeeded nor failed: not counted.
                if request.model in self.models and not went_away(scope):
                    self._record(request, start, answer[0], answer[1])

        return wrapped

    def _record(self, request: _Request, start: float, status: int, answered_at: float | None) -> None:
        stats = self.models[request.model or ""]
        end = time.perf_counter()
        if status >= 400:
            stats.fail.add(end - start)
            return
        stats.success.add(end - start)
        stats.last_inference_ms = int(time.time() * 1000)
        stages = timing.current() or {}
        stats.queue.add(stages.get("queue", 0.0))
        stats.compute_input.add(stages.get("tokenize", 0.0))
        stats.compute_infer.add(stages.get("model", 0.0))
        if request.rows_at is not None and answered_at is not None:
            stats.compute_output.add(max(answered_at - request.rows_at, 0.0))

    def json(self, name: str, version: str) -> dict[str, Any]:
        """One entry of the answer's `model_stats`, as Triton writes it."""
        stats = self.models[name]
        zero = Duration().json()
        return {
            "name": name,
            "version": version,
            "last_inference": stats.last_inference_ms,
            "inference_count": self._sample(f"{NAMESPACE}_inputs_processed_total", name),
            "execution_count": self._sample(f"{NAMESPACE}_batch_size_count", name),
            "inference_stats": {
                "success": stats.success.json(),
                "fail": stats.fail.json(),
                "queue": stats.queue.json(),
                "compute_input": stats.compute_input.json(),
                "compute_infer": stats.compute_infer.json(),
                "compute_output": stats.compute_output.json(),
                "cache_hit": zero,
                "cache_miss": zero,
            },
            "response_stats": {},
            "batch_stats": [],
            "memory_usage": [],
        }

    def _sample(self, metric: str, model: str) -> int:
        return int(self.registry.get_sample_value(metric, {"model": model}) or 0)
