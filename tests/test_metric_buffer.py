"""Buffered metric updates (electra.serving.engine.metric_buffer) against prometheus_client's own: the same
samples once applied; applied when the process is idle, when its flush time has passed or when a registry is
read; at once off an event loop; buffered only in multiprocess mode."""

from __future__ import annotations

import asyncio
import math
import random
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary

from electra.serving.engine import metric_buffer
from electra.serving.engine.metric_buffer import (
    BufferedCounter,
    BufferedGauge,
    BufferedHistogram,
    BufferedSummary,
    MetricBuffer,
    fast_path,
)

BOUNDS = (0.001, 0.01, 0.1, 1.0, 10.0)


def families(registry: CollectorRegistry) -> dict[str, Any]:
    kw: dict[str, Any] = {"labelnames": ("model",), "registry": registry}
    return {
        "histogram": Histogram("h", "h", buckets=BOUNDS, **kw).labels("m"),
        "summary": Summary("s", "s", **kw).labels("m"),
        "counter": Counter("c", "c", **kw).labels("m"),
        "gauge": Gauge("g", "g", **kw).labels("m"),
    }


def buffered(children: dict[str, Any], buffer: MetricBuffer) -> dict[str, Any]:
    return {
        "histogram": BufferedHistogram(children["histogram"], buffer),
        "summary": BufferedSummary(children["summary"], buffer),
        "counter": BufferedCounter(children["counter"], buffer),
        "gauge": BufferedGauge(children["gauge"], buffer),
    }


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def updates(seed: int) -> list[tuple[str, str, float]]:
    """(metric, method, amount): amounts on every bucket bound, between, beyond the last, zero and below."""
    rng = random.Random(seed)
    amounts = [*BOUNDS, 0.0, -0.5, 1e6, math.inf, *(rng.uniform(0, 20) for _ in range(200))]
    out: list[tuple[str, str, float]] = []
    for amount in amounts:
        out.append(("histogram", "observe", amount))
        out.append(("summary", "observe", amount))
        out.append(("counter", "inc", abs(amount) if math.isfinite(amount) else 1.0))
        method = rng.choice(["inc", "dec", "set"])
        out.append(("gauge", method, round(rng.uniform(-5, 5), 3)))
    return out


def apply(metrics: dict[str, Any], todo: list[tuple[str, str, float]]) -> None:
    for name, method, amount in todo:
        getattr(metrics[name], method)(amount)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_buffered_updates_read_as_prometheus_clients_own(seed: int) -> None:
    todo = updates(seed)
    direct = CollectorRegistry()
    apply(families(direct), todo)

    buffer = MetricBuffer(flush_s=60.0)
    registry = CollectorRegistry()
    buffer.attach(registry)  # ahead of the families: reading the registry applies the waiting updates
    children = families(registry)
    metrics = buffered(children, buffer)

    half = len(todo) // 2

    async def on_a_loop() -> None:
        buffer.opened()  # a request in flight: nothing is applied until a read
        apply(metrics, todo[:half])
        assert children["histogram"]._sum.get() == 0.0  # waiting, not applied
        samples(registry)  # a read between the halves: each update is applied once, not again
        apply(metrics, todo[half:])

    asyncio.run(on_a_loop())
    # Sums added in another order may differ in the last bit; counts and buckets are exact.
    assert samples(registry) == pytest.approx(samples(direct), rel=1e-12)
    assert samples(registry) == pytest.approx(samples(direct), rel=1e-12)


def test_updates_wait_while_a_request_is_in_flight_and_go_when_the_last_ends() -> None:
    buffer = MetricBuffer(flush_s=60.0)
    registry = CollectorRegistry()  # not attached: reading it applies nothing
    child = families(registry)["histogram"]
    histogram = BufferedHistogram(child, buffer)

    def count() -> float | None:
        return registry.get_sample_value("h_count", {"model": "m"})

    async def requests() -> None:
        buffer.opened()
        buffer.opened()
        histogram.observe(0.05)
        buffer.closed()
        assert count() == 0  # the other request is still in flight
        buffer.closed()
        assert count() == 1
        assert registry.get_sample_value("h_bucket", {"model": "m", "le": "0.1"}) == 1

    asyncio.run(requests())


def test_a_process_that_is_never_idle_applies_its_updates_within_its_flush_time() -> None:
    buffer = MetricBuffer(flush_s=0.05)
    registry = CollectorRegistry()
    counter = BufferedCounter(families(registry)["counter"], buffer)

    async def busy() -> None:
        buffer.opened()
        counter.inc(3)
        assert registry.get_sample_value("c_total", {"model": "m"}) == 0
        await asyncio.sleep(0.3)
        assert registry.get_sample_value("c_total", {"model": "m"}) == 3
        counter.inc(2)  # and again after the first flush: a timer is set anew
        await asyncio.sleep(0.3)
        assert registry.get_sample_value("c_total", {"model": "m"}) == 5

    asyncio.run(busy())


def test_updates_off_an_event_loop_are_applied_at_once() -> None:
    buffer = MetricBuffer(flush_s=60.0)
    registry = CollectorRegistry()
    metrics = buffered(families(registry), buffer)
    buffer.opened()
    metrics["histogram"].observe(0.5)
    metrics["summary"].observe(0.5)
    metrics["counter"].inc()
    metrics["gauge"].set(7)
    assert registry.get_sample_value("h_count", {"model": "m"}) == 1
    assert registry.get_sample_value("s_count", {"model": "m"}) == 1
    assert registry.get_sample_value("c_total", {"model": "m"}) == 1
    assert registry.get_sample_value("g", {"model": "m"}) == 7


def test_nan_falls_in_no_bucket_as_prometheus_client_puts_it() -> None:
    direct = CollectorRegistry()
    families(direct)["histogram"].observe(math.nan)
    buffer = MetricBuffer(flush_s=60.0)
    registry = CollectorRegistry()
    histogram = BufferedHistogram(families(registry)["histogram"], buffer)

    async def observe() -> None:
        histogram.observe(math.nan)

    asyncio.run(observe())
    buffer.flush()
    for le in ("0.001", "+Inf"):
        labels = {"model": "m", "le": le}
        assert registry.get_sample_value("h_bucket", labels) == direct.get_sample_value("h_bucket", labels)
    assert math.isnan(registry.get_sample_value("h_sum", {"model": "m"}) or 0.0)


def test_a_counter_refuses_a_negative_amount_at_once() -> None:
    counter = BufferedCounter(families(CollectorRegistry())["counter"], MetricBuffer())

    async def inc() -> None:
        counter.inc(-1)

    with pytest.raises(ValueError, match="non-negative"):
        asyncio.run(inc())


def test_reads_from_another_thread_lose_no_update() -> None:
    """A scrape in another thread applies the updates while the loop adds more: every one is counted once."""
    buffer = MetricBuffer(flush_s=60.0)
    registry = CollectorRegistry()
    buffer.attach(registry)
    histogram = BufferedHistogram(families(registry)["histogram"], buffer)
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            registry.get_sample_value("h_count", {"model": "m"})

    async def observe() -> None:
        buffer.opened()
        for i in range(20_000):
            histogram.observe(0.002)
            if i % 500 == 0:
                await asyncio.sleep(0)

    reader = threading.Thread(target=scrape)
    reader.start()
    try:
        asyncio.run(observe())
    finally:
        stop.set()
        reader.join()
    assert registry.get_sample_value("h_count", {"model": "m"}) == 20_000
    assert registry.get_sample_value("h_sum", {"model": "m"}) == pytest.approx(40.0)


def test_the_installed_prometheus_client_has_the_values_buffering_adds_to() -> None:
    """Without them every update would go to prometheus_client one by one, correct but unbuffered."""
    children = families(CollectorRegistry())
    assert fast_path(children["histogram"]) and fast_path(children["summary"])


def test_only_a_worker_in_multiprocess_mode_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A single process keeps prometheus_client's children: gathering would cost what their update does."""
    buffer = metric_buffer.BUFFER
    monkeypatch.setattr(buffer, "enabled", buffer.enabled)
    monkeypatch.setattr(buffer, "flush_s", buffer.flush_s)
    child = families(CollectorRegistry())["histogram"]
    monkeypatch.delenv(metric_buffer.MULTIPROC_ENV, raising=False)
    buffer.configure(0.1)
    assert metric_buffer.histogram(child) is child
    monkeypatch.setenv(metric_buffer.MULTIPROC_ENV, "/nonexistent")
    buffer.configure(0.0)  # --metrics-flush-ms 0: every update at once
    assert metric_buffer.histogram(child) is child
    buffer.configure(0.1)
    assert isinstance(metric_buffer.histogram(child), BufferedHistogram)
    assert isinstance(metric_buffer.summary(child), BufferedSummary)
    assert isinstance(metric_buffer.counter(child), BufferedCounter)
    assert isinstance(metric_buffer.gauge(child), BufferedGauge)
