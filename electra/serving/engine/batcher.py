"""Dynamic batching: a bounded queue per model and one task that turns it into padded model calls.

Requests enqueue their tokenized inputs and await futures. The batching task takes inputs in arrival order
while the padded batch (rows x longest row) stays under the token budget and the row limit; when the batch
is not full and other requests are still tokenizing, it waits up to max_wait_ms for them. ONNX Runtime runs
in a worker thread so the event loop keeps serving HTTP; while one batch runs, the next one fills, which is
where the throughput comes from. The exception is a server with nothing else to do (see Batcher._runs_inline):
a short call then runs on the event loop itself, saving the two thread hand-offs.

A lone input does not skip the queue, even on an idle server: requests whose bytes came in the same pass of
the event loop have tasks that have not run yet, which no count can see, and an input run at once would run
alone while they wait. Tried (commit cd4e5ce): at concurrency 1 a request took 596 us of CPU in process
against 653 us through the queue, and at 64 and 256 clients every model call ran a single input
(bench/results/serve_tail_cpu_tiny.json, commit 946c3eb).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from electra.serving.engine.call_times import CallTimes
from electra.serving.engine.errors import InferenceFailed, QueueFull, ShuttingDown

if TYPE_CHECKING:
    from electra.serving.engine.encoded import Encoded
    from electra.serving.engine.metadata import RequestMetadata
    from electra.serving.engine.metrics import ModelMetrics

log = logging.getLogger(__name__)


class Runner(Protocol):
    """What the batcher needs of a model (ModelRunner in the server)."""

    name: str

    def infer(self, batch: list[Encoded]) -> list[np.ndarray]:
        """One row per input, in order; blocks (the batcher calls it in a worker thread)."""
        ...


# A batch's rows are at least this fraction of its longest row (see take_batch). On a 2-core CPU, ONNX Runtime
# gains only ~1.1-1.5x texts/s from batches of 4-16 equal lengths, so padding eats it: with 0.5 the server
# ran 0.82x the RPS of --max-batch-size 1 at concurrency 32, with 0.8 1.22x and with 0.9 1.12x (fewer rows
# per batch); bench/serve_throughput.py, alternating rounds, median of per-round ratios.
MIN_FILL = 0.8
# How far into the queue a batch looks for inputs of a similar length.
WINDOW = 256


@dataclass(slots=True, eq=False)
class _Item:
    encoded: Encoded
    future: asyncio.Future[np.ndarray]
    enqueued: float = field(default_factory=time.perf_counter)
    # Set when its batch ran, for the request's Server-Timing: seconds queued, and (call number, seconds)
    # of the model call it was in.
    waited: float = 0.0
    call: tuple[int, float] = (0, 0.0)


class Arrivals:
    """Requests on their way to a queue (received, not yet enqueued), and model calls running, shared by a
    server's batchers.

    A batch that is not full waits (up to max_wait) only while `count` is non-zero: those requests are
    microseconds to milliseconds away, and when nothing is coming waiting would only add latency. With
    nothing coming and no other model call running, a short call may run on the event loop (see
    Batcher._runs_inline).
    """

    def __init__(self) -> None:
        self.count = 0
        self.running = 0
        self._listeners: list[Callable[[], None]] = []

    def listen(self, arrived: Callable[[], None]) -> None:
        self._listeners.append(arrived)

    def expect(self) -> None:
        self.count += 1

    def arrived(self) -> None:
        self.count -= 1
        for arrived in self._listeners:
            arrived()


def take_batch(
    queue: deque[_Item],
    max_batch_size: int,
    max_batch_tokens: int,
    padded: Callable[[int], int] = lambda length: length,
    order: str = "length",
) -> list[_Item]:
    """The next batch, removed from `queue`: the oldest input and the queued inputs closest to its length,
    under the row and token limits (rows x padded width <= max_batch_tokens; `padded`: the width a batch
    whose longest row has that many tokens is padded to, the model's length bucket).

    Every row is padded to the width, and attention on CPU computes the padding too, so a batch in arrival
    order of mixed lengths can cost more than running its inputs one by one. Company for the oldest input is
    therefore drawn from the first WINDOW queued inputs that fit its width and fill at least MIN_FILL of it
    (or lie in its length bucket, which pads them to the same width anyway), longest first (arrival order
    among equals). The oldest input always goes (so nothing starves, and one input over the token budget
    still runs, alone); the others wait for a batch of their own length. Inputs whose request went away (a
    done future) are dropped, never run.

    That order lets later inputs of a common length pass an earlier one of a rarer length again and again: at
    256 clients on a 2-core CPU p99 latency was 2.8-2.9x p50 (bench/results/serve_batch_order_cpu_tiny.json).
    `order` "arrival" takes the next inputs in arrival order instead, while the batch padded to its longest
    stays under the limits (take_in_arrival_order): more padding (0.71-0.79x the requests/s there), and no
    input waits behind a later one (p99 1.3-1.4x p50).
    """
    while queue and queue[0].future.done():  # cancelled by departed clients
        queue.popleft()
    if not queue:
        return []
    if order == "arrival":
        return take_in_arrival_order(queue, max_batch_size, max_batch_tokens, padded)
    head = queue.popleft()
    width = padded(head.encoded.length)
    room = min(max_batch_size, max_batch_tokens // width) - 1
    if room <= 0 or not queue:
        return [head]
    fill = MIN_FILL * width
    fits = [
        item
        for item in itertools.islice(queue, WINDOW)
        if not item.future.done()
        and item.encoded.length <= width
        and (item.encoded.length >= fill or padded(item.encoded.length) == width)
    ]
    fits.sort(key=lambda item: -item.encoded.length)
    chosen = fits[:room]
    if chosen:
        taken = {id(item) for item in chosen}
        rest = [item for item in queue if id(item) not in taken]
        queue.clear()
        queue.extend(rest)
    return [head, *chosen]


def take_in_arrival_order(
    queue: deque[_Item], max_batch_size: int, max_batch_tokens: int, padded: Callable[[int], int]
) -> list[_Item]:
    """The oldest inputs, removed from `queue` in arrival order while the batch, padded to its longest,
    stays within the row and token limits; the first always goes (alone when it is over the budget)."""
    batch = [queue.popleft()]
    width = padded(batch[0].encoded.length)
    while queue and len(batch) < max_batch_size:
        item = queue[0]
        if item.future.done():  # its client went away
            queue.popleft()
            continue
        wider = max(width, padded(item.encoded.length))
        if wider * (len(batch) + 1) > max_batch_tokens:
            break
        width = wider
        batch.append(queue.popleft())
    return batch


class Batcher:
    """One model's queue and the task that runs it in batches (see the module's docstring)."""

    def __init__(
        self,
        runner: Runner,
        metrics: ModelMetrics,
        max_batch_tokens: int,
        max_batch_size: int,
        max_wait_ms: float,
        max_queue: int,
        arrivals: Arrivals | None = None,
        inline_max_ms: float = 0.0,
        padded: Callable[[int], int] | None = None,
        order: str = "length",
    ) -> None:
        self.runner = runner
        # The width a batch is padded to from its longest row (the runner's length buckets; default: that).
        self.padded: Callable[[int], int] = padded or (lambda length: length)
        self.metrics = metrics
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.order = order  # which inputs join the oldest in a batch (take_batch)
        self._queue: deque[_Item] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        # One thread per model: ONNX Runtime parallelises inside a call, and two concurrent calls on one CPU
        # session only fight over the same cores.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ort-{runner.name}")
        self._recent_batch_s = 0.05
        self.inline_max_s = inline_max_ms / 1000.0
        # Recent calls' times against their padded tokens: a call is predicted from them (see CallTimes);
        # the first call, with nothing to predict from, never runs inline.
        self._times = CallTimes()
        self._calls = 0
        self.arrivals = arrivals or Arrivals()
        self._collecting = False  # waiting in _collect for requests on their way
        self.arrivals.listen(self._arrived)

    @property
    def waiting(self) -> int:
        """Inputs queued, not yet taken into a batch."""
        return len(self._queue)

    async def warm_up(self, calls: Sequence[Callable[[], object]]) -> int:
        """The warm-up `calls` (one model call each) on every thread that calls the model: the batcher's
        thread and, when calls may run inline, the event loop's, one call at a time so that health probes
        are answered between them. How many calls it made.

        On the first H100 run of bench.serve_warmup (bench/results/gpu/2026-11-28-h100/serve_warmup.json),
        warm-up ran on a thread of its own and each length bucket's first request afterwards still took
        45-99 ms of model time against 2 ms warm. ONNX Runtime's CUDA provider keeps state per calling thread
        (its cuBLAS and cuDNN handles among it), which may be why; warming the threads that serve requests
        holds whatever the cause is per thread, and the next GPU run's serve_warmup says whether it was."""
        await asyncio.get_running_loop().run_in_executor(self._executor, _call_each, calls)
        if self.inline_max_s <= 0:
            return len(calls)
        for call in calls:  # where inline calls run
            call()
            await asyncio.sleep(0)
        return 2 * len(calls)

    def _arrived(self) -> None:
        # Only a batch that waits for company needs to hear of an arrival: waking the idle task would cost
        # a pass of the event loop on every request, to find its queue empty.
        if self._collecting:
            self._wakeup.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.runner.name}")

    async def submit(self, inputs: list[Encoded], meta: RequestMetadata | None = None) -> list[np.ndarray]:
        """Logits rows for `inputs`, in order. QueueFull when they do not fit; all or none are queued. `meta`
        learns the request's queue and model time."""
        if self._closing:
            raise ShuttingDown(f"model {self.runner.name!r} is shutting down")
        if self.waiting + len(inputs) > self.max_queue:
            self.metrics.rejected.inc()
            raise QueueFull(self.runner.name, self.waiting, self.max_queue, self._retry_after())
        loop = asyncio.get_running_loop()
        items = [_Item(e, loop.create_future()) for e in inputs]
        self._queue.extend(items)
        self.metrics.queue_size.set(self.waiting)
        self._wakeup.set()
        try:
            if len(items) == 1:  # the common case: one text, no gathering future around its future
                rows = [await items[0].future]
            else:
                rows = list(await asyncio.gather(*(item.future for item in items)))
        except asyncio.CancelledError:
            # The client went away (client_gone.py cancels its request): drop what has not started, so a
            # disconnect costs no model time, and take it out of the queue now, so the queue's size (its
            # gauge, and the room QueueFull checks) no longer counts it. Rows of a batch already running
            # are thrown away when it ends; the other requests in that batch get theirs.
            for item in items:
                item.future.cancel()
            self._forget(items)
            raise
        if meta is not None:
            meta.add("queue", max(item.waited for item in items))
            meta.add("model", sum(dict(item.call for item in items).values()))
        return rows

    def _forget(self, items: list[_Item]) -> None:
        """Take `items` out of the queue (those a batch has taken are no longer in it)."""
        gone = {id(item) for item in items}
        kept = [item for item in self._queue if id(item) not in gone]
        if len(kept) != len(self._queue):
            self._queue.clear()
            self._queue.extend(kept)
            self.metrics.queue_size.set(self.waiting)

    def _retry_after(self) -> int:
        # Roughly how long the current backlog takes to clear, in whole seconds (at least 1).
        batches = self.waiting / max(1, self.max_batch_size)
        return max(1, int(batches * self._recent_batch_s + 0.999))

    async def close(self) -> None:
        """Finish everything queued, then stop the task and the worker thread."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            while not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            batch = await self._collect()
            if batch:
                await self._run(batch)

    async def _run(self, batch: list[_Item]) -> None:
        """One model call for `batch`, in the worker thread (or inline, see _runs_inline); every item's
        future gets its row or the error."""
        now = time.perf_counter()
        for item in batch:
            item.waited = now - item.enqueued
            self.metrics.queue_wait.observe(item.waited)
        width = self.padded(max(item.encoded.length for item in batch))
        padded = width * len(batch)
        self.metrics.batch_size.observe(len(batch))
        self.metrics.batch_tokens.observe(padded)
        self.metrics.tokens.inc(sum(item.encoded.length for item in batch))
        inputs = [i.encoded for i in batch]
        self.arrivals.running += 1
        try:
            if self._runs_inline(padded):
                rows, elapsed = self._infer(inputs, padded)
            else:
                loop = asyncio.get_running_loop()
                rows, elapsed = await loop.run_in_executor(self._executor, self._infer, inputs, padded)
        except Exception as e:  # A failed model call fails its requests, never the batching task.
            log.exception("model %s: inference failed on a batch of %d", self.runner.name, len(batch))
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(InferenceFailed(f"model {self.runner.name!r}: {e}"))
            return
        finally:
            self.arrivals.running -= 1
        self._calls += 1
        for item, row in zip(batch, rows, strict=True):
            item.call = (self._calls, elapsed)
            if not item.future.done():
                item.future.set_result(row)

    def _runs_inline(self, padded_tokens: int) -> bool:
        """Whether this call runs on the event loop rather than in the worker thread.

        Handing a call to the worker thread and its result back wakes a sleeping thread twice; on a 2-core
        VM the two cost 0.2-0.5 ms of a short request's latency (measured at concurrency 1 against the same
        server with inline_max_ms 0). When nothing else is queued or on its way and no other model call
        runs, no one needs the event loop meanwhile, so a call predicted from recent calls
        (electra.serving.engine.call_times) to take at most inline_max_ms blocks it instead: requests that
        arrive meanwhile wait in the socket for at most that long, as they would wait for the model anyway,
        and the next call goes to the thread.
        """
        return (
            not self._queue
            and self.arrivals.count == 0
            and self.arrivals.running == 1  # this call only
            and self._short(padded_tokens)
        )

    def _short(self, padded_tokens: int) -> bool:
        """Whether a call of `padded_tokens` is predicted to take at most inline_max."""
        predicted = self._times.predict(padded_tokens)
        return predicted is not None and predicted <= self.inline_max_s

    def _infer(self, inputs: list[Encoded], padded_tokens: int) -> tuple[list[np.ndarray], float]:
        start = time.perf_counter()
        rows = self.runner.infer(inputs)
        elapsed = time.perf_counter() - start
        self._recent_batch_s = 0.8 * self._recent_batch_s + 0.2 * elapsed
        self._times.add(padded_tokens, elapsed)
        self.metrics.inference.observe(elapsed)
        return rows, elapsed

    async def _collect(self) -> list[_Item]:
        """The next batch, after waiting up to max_wait for requests that are still tokenizing."""
        deadline = time.perf_counter() + self.max_wait_s
        self._collecting = True
        # Wait only for requests known to be on their way: when nothing is, waiting would add max_wait to
        # a lone request's latency and batch nothing.
        while self.waiting < self.max_batch_size and self.arrivals.count > 0 and not self._closing:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), remaining)
        self._collecting = False
        batch = take_batch(self._queue, self.max_batch_size, self.max_batch_tokens, self.padded, self.order)
        self.metrics.queue_size.set(self.waiting)
        return batch


def _call_each(calls: Sequence[Callable[[], object]]) -> None:
    for call in calls:
        call()
