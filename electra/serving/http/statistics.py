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

Each statistic is a Prometheus summary (`electra_triton_statistic_seconds{model, statistic}`: its count and
its sum), and the last inference a gauge, so that with `--workers` the answer counts every worker's requests
(prometheus_client's multiprocess mode, read back through its collector), as /metrics does.

Triton's perf_analyzer reads these to split a request's latency into server-side parts. There is no
response cache, so cache_hit and cache_miss stay zero.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Summary

from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metric_buffer import BUFFER, MULTIPROC_ENV, gauge, summary
from electra.serving.engine.metrics import NAMESPACE

# Triton's names, in its order; each request that succeeds adds to every one but `fail`.
STATISTICS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
# Where a succeeded request's stages come from: its metadata's stages.
_STAGES = {"queue": "queue", "compute_input": "tokenize", "compute_infer": "model"}
SECONDS = f"{NAMESPACE}_triton_statistic_seconds"
LAST_INFERENCE = f"{NAMESPACE}_triton_last_inference_ms"


class _Families:
    def __init__(self, registry: CollectorRegistry) -> None:
        BUFFER.attach(registry)  # ahead of the families, so a read applies what is waiting first
        self.seconds = Summary(
            "triton_statistic_seconds",
            "Triton's statistics extension per model: requests that succeeded or failed, and the succeeded "
            "ones' queue, tokenization (compute_input), model (compute_infer) and post-processing "
            "(compute_output) time",
            labelnames=("model", "statistic"),
            namespace=NAMESPACE,
            registry=registry,
        )
        self.last = Gauge(
            "triton_last_inference_ms",
            "When the model last answered a request, in milliseconds since the epoch",
            labelnames=("model",),
            namespace=NAMESPACE,
            registry=registry,
            multiprocess_mode="max",
        )


_families: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def _families_of(registry: CollectorRegistry) -> _Families:
    if registry not in _families:
        _families[registry] = _Families(registry)
    return _families[registry]


def readable(registry: CollectorRegistry) -> CollectorRegistry:
    """What to read the samples from: `registry`, or under --workers (prometheus_client's multiprocess mode)
    every worker's files, summed."""
    if registry is not REGISTRY or MULTIPROC_ENV not in os.environ:
        return registry
    from prometheus_client import multiprocess

    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged)
    return merged


class Statistics:
    """Per-model request statistics of one server."""

    def __init__(self, models: Iterable[str], registry: CollectorRegistry = REGISTRY) -> None:
        families = _families_of(registry)
        self.models = set(models)
        self.registry = registry
        # Bound once per model, so recording a request does no label lookups (buffered under --workers).
        self._seconds = {
            m: {s: summary(families.seconds.labels(m, s)) for s in STATISTICS} for m in self.models
        }
        self._last = {m: gauge(families.last.labels(m)) for m in self.models}

    def record(self, meta: RequestMetadata, start: float, status: int, answered_at: float | None) -> None:
        """One request whose work was a model's (`meta.model`), from `start` to now: a success or a failure
        by its `status`, its stages from `meta`."""
        seconds = self._seconds.get(meta.model or "")
        if seconds is None:
            return
        end = time.perf_counter()
        if status >= 400:
            seconds["fail"].observe(end - start)
            return
        seconds["success"].observe(end - start)
        self._last[meta.model or ""].set(int(time.time() * 1000))
        for statistic, stage in _STAGES.items():
            seconds[statistic].observe(meta.stages.get(stage, 0.0))
        output = 0.0
        if meta.rows_at is not None and answered_at is not None:
            output = max(answered_at - meta.rows_at, 0.0)
        seconds["compute_output"].observe(output)

    def json(self, names: Iterable[str], version: str) -> list[dict[str, Any]]:
        """The answer's `model_stats`, one entry per model, as Triton writes them."""
        BUFFER.flush()  # this worker's; under --workers the others' come from their files
        samples = _samples(readable(self.registry))
        return [self._entry(name, version, samples) for name in names]

    def _entry(self, name: str, version: str, samples: dict[tuple[str, str, str], float]) -> dict[str, Any]:
        def duration(statistic: str) -> dict[str, int]:
            return {
                "count": int(samples.get((f"{SECONDS}_count", name, statistic), 0)),
                "ns": round(samples.get((f"{SECONDS}_sum", name, statistic), 0.0) * 1e9),
            }

        zero = {"count": 0, "ns": 0}
        return {
            "name": name,
            "version": version,
            "last_inference": int(samples.get((LAST_INFERENCE, name, ""), 0)),
            "inference_count": int(samples.get((f"{NAMESPACE}_inputs_processed_total", name, ""), 0)),
            "execution_count": int(samples.get((f"{NAMESPACE}_batch_size_count", name, ""), 0)),
            "inference_stats": {
                **{statistic: duration(statistic) for statistic in STATISTICS},
                "cache_hit": zero,
                "cache_miss": zero,
            },
            "response_stats": {},
            "batch_stats": [],
            "memory_usage": [],
        }


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """Every sample with a `model` label: (sample name, model, statistic or "") -> value."""
    out: dict[tuple[str, str, str], float] = {}
    for family in registry.collect():
        for sample in family.samples:
            model = sample.labels.get("model")
            if model is not None:
                out[sample.name, model, sample.labels.get("statistic", "")] = sample.value
    return out
