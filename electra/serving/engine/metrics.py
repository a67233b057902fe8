"""Prometheus metrics per model, named per stage as in text-embeddings-inference: tokenization, queueing,
batching, inference. (Per route and status: electra.serving.http.middleware.http_metrics.) Under --workers
updated through electra.serving.engine.metric_buffer, which gathers a busy worker's updates and writes them in
one go.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from electra.serving.engine.metric_buffer import (
    BUFFER,
    BufferedCounter,
    BufferedGauge,
    BufferedHistogram,
    counter,
    gauge,
    histogram,
)

NAMESPACE = "electra"
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_TOKENS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class _Families:
    """The metric families, created once per registry (prometheus_client refuses duplicates)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        BUFFER.attach(registry)  # ahead of the families, so a read applies what is waiting first
        kw = {"namespace": NAMESPACE, "labelnames": ("model",), "registry": registry}
        # Summed over the live workers of a server with --workers (prometheus_client's multiprocess mode).
        self.queue_size = Gauge("queue_size", "Inputs waiting for a batch", multiprocess_mode="livesum", **kw)
        self.batch_size = Histogram("batch_size", "Inputs per model call", buckets=_SIZES, **kw)
        self.batch_tokens = Histogram(
            "batch_tokens", "Padded tokens per model call (rows x longest row)", buckets=_TOKENS, **kw
        )
        self.tokenization = Histogram(
            "tokenization_seconds", "Time to tokenize one request", buckets=_SECONDS, **kw
        )
        self.queue_wait = Histogram(
            "queue_wait_seconds", "Time an input waits before its batch starts", buckets=_SECONDS, **kw
        )
        self.inference = Histogram(
            "inference_seconds", "Time of one ONNX Runtime call (a batch)", buckets=_SECONDS, **kw
        )
        self.tokens = Counter("tokens_processed", "Real (unpadded) tokens run through the model", **kw)
        self.inputs = Counter("inputs_processed", "Texts (or text pairs) answered", **kw)
        self.rejected = Counter("queue_rejections", "Requests answered 503 because the queue was full", **kw)


# Keyed by the registry itself, weakly: an id() could be reused by a new registry once the old one is gone.
_families: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def families(registry: CollectorRegistry = REGISTRY) -> _Families:
    if registry not in _families:
        _families[registry] = _Families(registry)
    return _families[registry]


@dataclass(frozen=True)
class ModelMetrics:
    """The families' children for one model, bound once so the hot path does no label lookups (buffered
    under --workers: metric_buffer.py)."""

    queue_size: Gauge | BufferedGauge
    batch_size: Histogram | BufferedHistogram
    batch_tokens: Histogram | BufferedHistogram
    tokenization: Histogram | BufferedHistogram
    queue_wait: Histogram | BufferedHistogram
    inference: Histogram | BufferedHistogram
    tokens: Counter | BufferedCounter
    inputs: Counter | BufferedCounter
    rejected: Counter | BufferedCounter

    @classmethod
    def for_model(cls, model: str, registry: CollectorRegistry = REGISTRY) -> ModelMetrics:
        f = families(registry)
        return cls(
            queue_size=gauge(f.queue_size.labels(model)),
            batch_size=histogram(f.batch_size.labels(model)),
            batch_tokens=histogram(f.batch_tokens.labels(model)),
            tokenization=histogram(f.tokenization.labels(model)),
            queue_wait=histogram(f.queue_wait.labels(model)),
            inference=histogram(f.inference.labels(model)),
            tokens=counter(f.tokens.labels(model)),
            inputs=counter(f.inputs.labels(model)),
            rejected=counter(f.rejected.labels(model)),
        )
