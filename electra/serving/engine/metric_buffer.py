"""Metric updates of a worker under --workers gathered as plain sums and written to prometheus_client's files
in one go.

Why: under --workers (prometheus_client's multiprocess mode) every value a metric update touches is written
to a memory-mapped file under a lock, 30 of them for one /detect request (a histogram's bucket and sum, a
counter, ...). Gathered here as sums under one lock, a busy worker writes each value it touched once per
flush, not once per request: on a 2-core VM a request's updates took 52 us of CPU written at once, 34 us
gathered for a lone request, 19 us on a busy worker (bench/results/metric_updates_cpu.json). A single
process keeps prometheus_client's in-memory values, which gathering would not make cheaper (17 us at once,
24 us gathered for a lone request): there the children are used as they are (`counter`, `gauge`, ...).

When the gathered updates reach prometheus_client:
- when the process has no request in flight (the last one's answer has gone out), so a client that reads
  /metrics after its answer finds its request counted;
- at the latest --metrics-flush-ms after the first update waiting, so a worker that is never idle is never
  further behind than that;
- before any read of a registry the metrics live in (`attach`: a collector registered ahead of them), and
  before /metrics or Triton's statistics read every worker's files;
- when the engine stops, and at exit.
Updates made off an event loop (the model's worker thread) are applied at once.

What this costs a reader: a scrape answered by one worker may miss another worker's updates of the last
--metrics-flush-ms while that one is busy; a worker killed without warning (SIGKILL, OOM) loses those.

Buffered histograms and summaries add to the child's own bucket, count and sum values (its `_buckets`, `_sum`,
`_count`), which prometheus_client has no public call for in bulk; `fast_path` says whether the installed
version has them (tests check it), and without them every update goes to the child as it came.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import threading
import weakref
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry

from electra.serving.settings import ServeSettings

# Set for prometheus_client's multiprocess mode (by `electra serve --workers`).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# asyncio's own check for a running loop in this thread (None when there is none); get_running_loop() raises
# instead, which costs more off a loop.
_on_loop = asyncio._get_running_loop


class MetricBuffer:
    """The process's waiting updates (see the module): each buffered metric registers here when it first has
    one, and `flush` applies them all."""

    def __init__(self, flush_s: float = ServeSettings.metrics_flush_ms / 1000) -> None:
        self.flush_s = flush_s
        self.enabled = False  # whether the factories below buffer (`configure`)
        self.lock = threading.Lock()
        self._pending: list[_Buffered] = []
        self._armed: asyncio.AbstractEventLoop | None = None  # the loop whose flush timer is set
        self._in_flight = 0
        self._attached: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()

    def configure(self, flush_s: float) -> None:
        """Buffer the metrics created from now on when this process is a worker in multiprocess mode and
        `flush_s` > 0; otherwise the factories return prometheus_client's children as they are."""
        self.flush_s = flush_s
        self.enabled = flush_s > 0 and MULTIPROC_ENV in os.environ

    # --- updates -----------------------------------------------------------------------------------------

    def waiting(self, metric: _Buffered, loop: asyncio.AbstractEventLoop) -> None:
        """`metric` has its first update since the last flush (called under `lock`)."""
        self._pending.append(metric)
        if self._armed is not loop:
            self._armed = loop
            loop.call_later(self.flush_s, self._timer)

    def _timer(self) -> None:
        self._armed = None
        self.flush()

    def flush(self) -> None:
        """Every waiting update applied to prometheus_client's values."""
        with self.lock:
            pending, self._pending = self._pending, []
            for metric in pending:
                metric.apply()

    # --- requests ----------------------------------------------------------------------------------------

    def opened(self) -> None:
        """A request has begun (on the event loop)."""
        self._in_flight += 1

    def closed(self) -> None:
        """A request has ended, its answer sent: with none left in flight, the updates are applied."""
        self._in_flight -= 1
        if self._in_flight <= 0:
            self._in_flight = 0
            if self._pending:
                self.flush()

    # --- readers -----------------------------------------------------------------------------------------

    def attach(self, registry: CollectorRegistry) -> None:
        """Flush before every read of `registry`. Call it before the buffered metrics' families are
        registered there: a registry reads its collectors in the order they came."""
        if registry not in self._attached:
            self._attached.add(registry)
            registry.register(_Flusher(self))


class _Flusher:
    """A collector with no metrics of its own: collecting it applies the waiting updates."""

    def __init__(self, buffer: MetricBuffer) -> None:
        self.buffer = buffer

    def collect(self) -> Iterator[Any]:
        self.buffer.flush()
        return iter(())


BUFFER = MetricBuffer()
atexit.register(BUFFER.flush)


def counter(child: Any) -> Any:
    """A counter child, buffered when BUFFER is enabled."""
    return BufferedCounter(child) if BUFFER.enabled else child


def gauge(child: Any) -> Any:
    """A gauge child, buffered when BUFFER is enabled."""
    return BufferedGauge(child) if BUFFER.enabled else child


def histogram(child: Any) -> Any:
    """A histogram child, buffered when BUFFER is enabled."""
    return BufferedHistogram(child) if BUFFER.enabled else child


def summary(child: Any) -> Any:
    """A summary child, buffered when BUFFER is enabled."""
    return BufferedSummary(child) if BUFFER.enabled else child


def fast_path(child: Any) -> bool:
    """Whether a histogram or summary child has the values a buffered one adds to in bulk."""
    names = ("_buckets", "_sum", "_upper_bounds") if hasattr(child, "_upper_bounds") else ("_count", "_sum")
    return all(hasattr(child, name) for name in names)


class _Buffered:
    __slots__ = ("_buffer", "_child", "_dirty")

    def __init__(self, child: Any, buffer: MetricBuffer) -> None:
        self._child = child
        self._buffer = buffer
        self._dirty = False

    def _mark(self, loop: asyncio.AbstractEventLoop) -> None:
        """Under the buffer's lock: the first update since the last flush registers this metric."""
        if not self._dirty:
            self._dirty = True
            self._buffer.waiting(self, loop)

    def apply(self) -> None:
        raise NotImplementedError


class BufferedCounter(_Buffered):
    """A counter child's `inc`, gathered."""

    __slots__ = ("_amount",)

    def __init__(self, child: Any, buffer: MetricBuffer = BUFFER) -> None:
        super().__init__(child, buffer)
        self._amount = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        loop = _on_loop()
        if loop is None:
            self._child.inc(amount)
            return
        with self._buffer.lock:
            self._amount += amount
            self._mark(loop)

    def apply(self) -> None:
        amount, self._amount, self._dirty = self._amount, 0.0, False
        if amount:
            self._child.inc(amount)


class BufferedGauge(_Buffered):
    """A gauge child's `inc`, `dec` and `set`, gathered: the last value set, then what was added since."""

    __slots__ = ("_delta", "_value")

    def __init__(self, child: Any, buffer: MetricBuffer = BUFFER) -> None:
        super().__init__(child, buffer)
        self._value: float | None = None
        self._delta = 0.0

    def inc(self, amount: float = 1) -> None:
        loop = _on_loop()
        if loop is None:
            self._child.inc(amount)
            return
        with self._buffer.lock:
            self._delta += amount
            self._mark(loop)

    def dec(self, amount: float = 1) -> None:
        self.inc(-amount)

    def set(self, value: float) -> None:
        loop = _on_loop()
        if loop is None:
            self._child.set(value)
            return
        with self._buffer.lock:
            self._value, self._delta = float(value), 0.0
            self._mark(loop)

    def apply(self) -> None:
        value, delta = self._value, self._delta
        self._value, self._delta, self._dirty = None, 0.0, False
        if value is not None:
            self._child.set(value)
        if delta:
            self._child.inc(delta)


class BufferedHistogram(_Buffered):
    """A histogram child's `observe`, gathered as counts per bucket and a sum."""

    __slots__ = ("_bounds", "_counts", "_fast", "_sum")

    def __init__(self, child: Any, buffer: MetricBuffer = BUFFER) -> None:
        super().__init__(child, buffer)
        self._fast = fast_path(child)
        self._bounds: list[float] = list(getattr(child, "_upper_bounds", ()))
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        loop = _on_loop()
        # NaN falls in no bucket (prometheus_client compares it with each bound), which bisect cannot tell.
        if loop is None or not self._fast or math.isnan(amount):
            self._child.observe(amount)
            return
        i = bisect_left(self._bounds, amount)  # the first bound >= amount, as the child's own scan finds
        with self._buffer.lock:
            self._counts[i] += 1
            self._sum += amount
            self._mark(loop)

    def apply(self) -> None:
        buckets = self._child._buckets
        for i, n in enumerate(self._counts):
            if n:
                buckets[i].inc(n)
                self._counts[i] = 0
        self._child._sum.inc(self._sum)
        self._sum, self._dirty = 0.0, False


class BufferedSummary(_Buffered):
    """A summary child's `observe`, gathered as a count and a sum."""

    __slots__ = ("_count", "_fast", "_sum")

    def __init__(self, child: Any, buffer: MetricBuffer = BUFFER) -> None:
        super().__init__(child, buffer)
        self._fast = fast_path(child)
        self._count = 0
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        loop = _on_loop()
        if loop is None or not self._fast:
            self._child.observe(amount)
            return
        with self._buffer.lock:
            self._count += 1
            self._sum += amount
            self._mark(loop)

    def apply(self) -> None:
        self._child._count.inc(self._count)
        self._child._sum.inc(self._sum)
        self._count, self._sum, self._dirty = 0, 0.0, False
