"""Triton's statistics extension: `GET /v2/models/{name}[/versions/1]/stats` and `GET /v2/models/stats`.

Specification: triton-inference-server/server `docs/protocol/extension_statistics.md`. Built from what the
server already measures: the Prometheus counters of electra.serving.engine.metrics (`inference_count`: texts
answered; `execution_count`: model calls) and each request's metadata (electra.serving.engine.metadata), which
the request-metadata middleware (electra.serving.http.middleware.request_metadata) hands to `record` when the
answer is done:

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

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metrics import NAMESPACE


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


class Statistics:
    """Per-model request statistics of one server."""

    def __init__(self, models: Iterable[str], registry: CollectorRegistry = REGISTRY) -> None:
        self.models = {name: ModelStats() for name in models}
        self.registry = registry

    def record(self, meta: RequestMetadata, start: float, status: int, answered_at: float | None) -> None:
        """One request whose work was a model's (`meta.model`), from `start` to now: a success or a failure
        by its `status`, its stages from `meta`."""
        stats = self.models.get(meta.model or "")
        if stats is None:
            return
        end = time.perf_counter()
        if status >= 400:
            stats.fail.add(end - start)
            return
        stats.success.add(end - start)
        stats.last_inference_ms = int(time.time() * 1000)
        stages = meta.stages
        stats.queue.add(stages.get("queue", 0.0))
        stats.compute_input.add(stages.get("tokenize", 0.0))
        stats.compute_infer.add(stages.get("model", 0.0))
        if meta.rows_at is not None and answered_at is not None:
            stats.compute_output.add(max(answered_at - meta.rows_at, 0.0))

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
