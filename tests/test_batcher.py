"""The batching policy and the batcher, with a stub runner: no bundle, no ONNX Runtime, no sleeps deciding
the order.

`take_batch` (which inputs form the next batch) is a pure function over the queue and is tested directly; the
Batcher tests cover what happens around it: waiting for company, max_wait, the bounded queue, shutdown,
failures and routing rows back to their callers. A stub runner records the batches it is given and answers
rows that name their input, so a row that reaches the wrong caller shows.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from electra.serving.engine.batcher import (
    MIN_FILL,
    WINDOW,
    Arrivals,
    Batcher,
    InferenceFailed,
    QueueFull,
    ShuttingDown,
    _Item,
    take_batch,
)
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metrics import ModelMetrics

GATE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Enc:
    """What the batcher reads of an Encoded (its length), plus a tag that names the input."""

    tag: int
    length: int


class StubRunner:
    """ModelRunner's side the batcher uses: `name` and `infer(batch) -> one row per input`.

    Rows are [tag, length], so every caller can check it got its own. With `gate`, infer waits for it (the
    model is "busy"); `entered` is set when a call starts; a batch holding the tag `fail_on` raises.
    """

    name = "stub"

    def __init__(self, gate: threading.Event | None = None, fail_on: int | None = None) -> None:
        self.gate = gate
        self.fail_on = fail_on
        self.entered = threading.Event()
        self.batches: list[list[int]] = []
        self.threads: list[str] = []  # the thread each call ran on

    def infer(self, batch: list[Any]) -> list[np.ndarray]:
        self.batches.append([e.tag for e in batch])
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(GATE_TIMEOUT_S), "the test never opened the gate"
        if self.fail_on is not None and any(e.tag == self.fail_on for e in batch):
            raise RuntimeError("boom: the model call failed")
        return [np.array([e.tag, e.length], dtype=np.float32) for e in batch]


def metrics(registry: CollectorRegistry | None = None) -> ModelMetrics:
    return ModelMetrics.for_model("stub", registry or CollectorRegistry())


def sample(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"model": "stub"})


def batcher(runner: StubRunner, **overrides: Any) -> Batcher:
    """A Batcher with roomy limits; max_wait 0 unless the test is about waiting."""
    options: dict[str, Any] = dict(max_batch_tokens=8192, max_batch_size=32, max_wait_ms=0.0, max_queue=100)
    options.update(overrides)
    return Batcher(runner, metrics(), **options)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30.0))


def encs(*lengths: int, start: int = 0) -> list[Enc]:
    return [Enc(start + i, n) for i, n in enumerate(lengths)]


def assert_own_rows(inputs: list[Enc], rows: list[np.ndarray]) -> None:
    assert [(int(r[0]), int(r[1])) for r in rows] == [(e.tag, e.length) for e in inputs]


# ----------------------------------------------------------------------------------------------------------
# take_batch: the policy, on a queue
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def loop() -> Any:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def queue_of(loop: asyncio.AbstractEventLoop, *lengths: int) -> deque[_Item]:
    return deque(_Item(e, loop.create_future()) for e in encs(*lengths))


def drain(queue: deque[_Item], size: int = 32, tokens: int = 8192) -> list[list[int]]:
    """Every batch take_batch makes of `queue`, as lists of tags."""
    batches = []
    while batch := take_batch(queue, size, tokens):
        batches.append([item.encoded.tag for item in batch])
    return batches


def test_an_empty_queue_gives_no_batch(loop: Any) -> None:
    assert take_batch(deque(), 32, 8192) == []


def test_equal_lengths_go_in_arrival_order(loop: Any) -> None:
    queue = queue_of(loop, 10, 10, 10, 10)
    assert drain(queue) == [[0, 1, 2, 3]]
    assert not queue


def test_the_token_budget_bounds_rows_times_the_longest_row(loop: Any) -> None:
    # 50 padded tokens allow two rows of 20.
    assert drain(queue_of(loop, *[20] * 6), tokens=50) == [[0, 1], [2, 3], [4, 5]]
    # 70 allow three; the budget is rows x longest row, not the sum of lengths (20 + 16 + 16 + 16 = 68).
    assert drain(queue_of(loop, 20, 16, 16, 16), tokens=70) == [[0, 1, 2], [3]]


def test_max_batch_size_bounds_the_rows(loop: Any) -> None:
    assert drain(queue_of(loop, *[5] * 10), size=4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert drain(queue_of(loop, 5, 5, 5), size=1) == [[0], [1], [2]]  # 1 turns batching off


def test_an_input_over_the_budget_still_runs_alone(loop: Any) -> None:
    assert drain(queue_of(loop, 100, 100, 10), tokens=50) == [[0], [1], [2]]


def test_company_is_between_min_fill_and_all_of_the_oldest_inputs_length(loop: Any) -> None:
    # The oldest (20) takes 17 and 16 (exactly MIN_FILL of 20); 5 and 4 are under it and wait for a batch of
    # short inputs; 22 is longer than the oldest and waits too.
    assert MIN_FILL == 0.8
    queue = queue_of(loop, 20, 5, 17, 4, 22, 16)
    lengths = {item.encoded.tag: item.encoded.length for item in queue}
    batches = drain(queue)
    assert [[lengths[t] for t in b] for b in batches] == [[20, 17, 16], [5, 4], [22]]
    assert drain(queue_of(loop, 20, 15)) == [[0], [1]]  # 15 < 16: under MIN_FILL


def test_company_is_taken_longest_first_when_room_is_short(loop: Any) -> None:
    # Room for two more rows next to the oldest (16): the longest that fit, 15 and 14; ties by arrival.
    assert drain(queue_of(loop, 16, 9, 15, 14, 14), size=3) == [[0, 2, 3], [1], [4]]


def test_company_comes_from_the_first_window_of_the_queue(loop: Any) -> None:
    queue = queue_of(loop, 10, *[2] * WINDOW, 10)  # the second 10 is past the window
    first = take_batch(queue, 32, 8192)
    assert [item.encoded.tag for item in first] == [0]


def test_inputs_of_departed_clients_are_dropped(loop: Any) -> None:
    queue = queue_of(loop, 10, 10, 10, 10)
    queue[0].future.cancel()  # at the head: dropped
    queue[2].future.cancel()  # in the window: not chosen
    batch = take_batch(queue, 32, 8192)
    assert [item.encoded.tag for item in batch] == [1, 3]
    assert [item.encoded.tag for item in queue] == [2]  # dropped once it reaches the head
    assert take_batch(queue, 32, 8192) == [] and not queue


def test_every_batch_respects_the_limits_and_nothing_is_lost(loop: Any) -> None:
    rng = random.Random(0)
    for _ in range(200):
        lengths = [rng.randint(2, 64) for _ in range(rng.randint(1, 40))]
        size, tokens = rng.randint(1, 8), rng.choice([32, 64, 128, 512])
        queue = queue_of(loop, *lengths)
        batches = drain(queue, size, tokens)
        assert sorted(itertools.chain(*batches)) == list(range(len(lengths)))
        taken: set[int] = set()
        for batch in batches:
            head, width = batch[0], lengths[batch[0]]
            assert head == min(set(range(len(lengths))) - taken), "the oldest waiting input leads"
            assert len(batch) <= size
            assert len(batch) == 1 or len(batch) * width <= tokens
            assert all(MIN_FILL * width <= lengths[t] <= width for t in batch)
            taken.update(batch)


def test_with_length_buckets_the_budget_counts_padded_rows_and_a_bucket_batches_together(loop: Any) -> None:
    from electra.serving.engine.shapes import padded_length

    def by_16(length: int) -> int:
        return padded_length(length, 16, 64)

    # 20 pads to 32, so 64 tokens hold two rows, not the three they hold unpadded.
    assert drain(queue_of(loop, 20, 20, 20), tokens=64) == [[0, 1, 2]]
    queue = queue_of(loop, 20, 20, 20)
    assert [item.encoded.tag for item in take_batch(queue, 32, 64, by_16)] == [0, 1]
    # 18 and 30 are under MIN_FILL of 20's padded width (32 x 0.8 = 25.6) but in its bucket (17..32): they pad
    # to 32 whatever company they keep, so they join; 16 is in the bucket below and 33 above.
    queue = queue_of(loop, 20, 16, 18, 33, 30)
    assert [item.encoded.tag for item in take_batch(queue, 32, 8192, by_16)] == [0, 4, 2]
    assert [item.encoded.tag for item in queue] == [1, 3]


def test_in_arrival_order_the_next_inputs_join_whatever_their_length(loop: Any) -> None:
    queue = queue_of(loop, 10, 40, 12, 10, 30)
    batch = take_batch(queue, 32, 8192, order="arrival")
    assert [item.encoded.tag for item in batch] == [0, 1, 2, 3, 4]  # the length order would take [0, 3]


def test_in_arrival_order_the_batch_ends_where_its_padded_rows_pass_a_limit(loop: Any) -> None:
    # 10, 10, 10: 30 padded tokens; the 40 would make 4 rows of 40 = 160 > 100; it leads the next batch.
    queue = queue_of(loop, 10, 10, 10, 40, 10)
    assert [item.encoded.tag for item in take_batch(queue, 32, 100, order="arrival")] == [0, 1, 2]
    assert [item.encoded.tag for item in take_batch(queue, 32, 100, order="arrival")] == [3, 4]
    queue = queue_of(loop, 10, 10, 10)
    assert [item.encoded.tag for item in take_batch(queue, 2, 8192, order="arrival")] == [0, 1]
    queue = queue_of(loop, 500, 10)  # over the budget alone: it still runs, alone
    assert [item.encoded.tag for item in take_batch(queue, 32, 100, order="arrival")] == [0]


def test_in_arrival_order_inputs_of_departed_clients_are_dropped(loop: Any) -> None:
    queue = queue_of(loop, 10, 10, 10, 10)
    queue[0].future.cancel()
    queue[2].future.cancel()
    assert [item.encoded.tag for item in take_batch(queue, 32, 8192, order="arrival")] == [1, 3]
    assert not queue


def test_in_arrival_order_every_batch_is_the_oldest_inputs_within_the_limits(loop: Any) -> None:
    from electra.serving.engine.shapes import padded_length

    rng = random.Random(1)
    for _ in range(200):
        lengths = [rng.randint(2, 64) for _ in range(rng.randint(1, 40))]
        size, tokens = rng.randint(1, 8), rng.choice([32, 64, 128, 512])
        multiple = rng.choice([1, 16])

        def padded(n: int, multiple: int = multiple) -> int:
            return padded_length(n, multiple, 64)

        queue = queue_of(loop, *lengths)
        batches = []
        while batch := take_batch(queue, size, tokens, padded, order="arrival"):
            batches.append([item.encoded.tag for item in batch])
        assert list(itertools.chain(*batches)) == list(range(len(lengths)))  # arrival order, nothing lost
        for batch, following in itertools.zip_longest(batches, batches[1:]):
            width = max(padded(lengths[t]) for t in batch)
            assert len(batch) <= size and (len(batch) == 1 or len(batch) * width <= tokens)
            if following and len(batch) < size:  # it stopped because the next one would not fit
                wider = max(width, padded(lengths[following[0]]))
                assert (len(batch) + 1) * wider > tokens


def test_a_batcher_takes_inputs_in_the_order_it_is_given() -> None:
    for order, expected in (("length", [[0], [1, 3], [2]]), ("arrival", [[0], [1, 2, 3]])):
        gate = threading.Event()
        runner = StubRunner(gate=gate)

        async def scenario(
            order: str = order, runner: StubRunner = runner, gate: threading.Event = gate
        ) -> None:
            b = Batcher(runner, metrics(), 8192, 32, 0.0, 100, order=order)
            b.start()
            first = asyncio.create_task(b.submit(encs(10)))
            await asyncio.to_thread(runner.entered.wait, GATE_TIMEOUT_S)  # the model is busy with it
            later = [asyncio.create_task(b.submit(encs(n, start=i))) for i, n in ((1, 30), (2, 5), (3, 28))]
            await asyncio.sleep(0.01)
            gate.set()
            await asyncio.gather(first, *later)
            await b.close()

        run(scenario())
        assert runner.batches == expected, order


# ----------------------------------------------------------------------------------------------------------
# Batcher: around the policy
# ----------------------------------------------------------------------------------------------------------


def test_rows_go_back_to_their_callers_in_order() -> None:
    runner = StubRunner()
    requests = [encs(7, 9, 8, start=0), encs(5, start=10), encs(10, 6, start=20)]

    async def scenario() -> list[list[np.ndarray]]:
        b = batcher(runner)
        # Everything queued before the batching task starts, so the first batch sees the whole queue.
        futures = [asyncio.ensure_future(b.submit(r)) for r in requests]
        await asyncio.sleep(0)
        assert b.waiting == 6
        b.start()
        results = await asyncio.gather(*futures)
        await b.close()
        return results

    results = run(scenario())
    for inputs, rows in zip(requests, results, strict=True):
        assert_own_rows(inputs, rows)
    # The oldest (7 tokens) with the inputs of 5.6..7 tokens (6); then 9 with 8; then 5 and 10 alone.
    assert runner.batches == [[0, 21], [1, 2], [10], [20]]


def test_batches_do_not_wait_for_company_when_nothing_is_on_its_way() -> None:
    runner = StubRunner()

    async def scenario() -> None:
        b = batcher(runner, max_wait_ms=60_000.0)  # a minute: the test would time out if it waited
        b.start()
        assert_own_rows(encs(5), await b.submit(encs(5)))
        await b.close()

    run(scenario())
    assert runner.batches == [[0]]


def test_batches_wait_for_requests_on_their_way() -> None:
    runner = StubRunner()

    async def scenario() -> None:
        arrivals = Arrivals()
        b = Batcher(runner, metrics(), 8192, 32, 60_000.0, 100, arrivals)
        b.start()
        for _ in range(3):
            arrivals.expect()  # three requests still being read or tokenized
        first = asyncio.create_task(b.submit(encs(5, start=0)))
        rest = []
        for i in range(1, 4):
            await asyncio.sleep(0)  # let the batching task run: it must keep waiting
            assert runner.batches == []
            arrivals.arrived()
            rest.append(asyncio.create_task(b.submit(encs(5, start=i))))
        await asyncio.gather(first, *rest)
        await b.close()

    run(scenario())
    assert runner.batches == [[0, 1, 2, 3]]


def test_a_full_batch_does_not_wait_for_more() -> None:
    runner = StubRunner()

    async def scenario() -> None:
        arrivals = Arrivals()
        arrivals.expect()  # on its way, never arrives
        b = Batcher(runner, metrics(), 8192, 2, 60_000.0, 100, arrivals)
        b.start()
        await b.submit(encs(5, 5))
        await b.close()

    run(scenario())
    assert runner.batches == [[0, 1]]


def test_a_batch_waits_at_most_max_wait() -> None:
    runner = StubRunner()

    async def scenario() -> float:
        arrivals = Arrivals()
        arrivals.expect()  # on its way, never arrives
        b = Batcher(runner, metrics(), 8192, 32, 50.0, 100, arrivals)
        b.start()
        start = time.perf_counter()
        await b.submit(encs(5))
        elapsed = time.perf_counter() - start
        await b.close()
        return elapsed

    assert run(scenario()) >= 0.05
    assert runner.batches == [[0]]


async def busy_batcher(runner: StubRunner, registry: CollectorRegistry) -> tuple[Batcher, asyncio.Task]:
    """A started Batcher of 4 rows a batch and 4 queued inputs at most, and the task of its first request
    (input 0), which the gated `runner` has taken: the model is busy until the test opens the gate."""
    b = Batcher(runner, metrics(registry), 8192, 4, 0.0, 4)
    b.start()
    first = asyncio.create_task(b.submit(encs(5, start=0)))
    assert await asyncio.to_thread(runner.entered.wait, GATE_TIMEOUT_S)  # taken, busy in the model
    return b, first


def test_a_full_queue_rejects_requests_whole_while_the_model_is_busy() -> None:
    gate = threading.Event()
    runner = StubRunner(gate=gate)
    registry = CollectorRegistry()

    async def scenario() -> None:
        b, first = await busy_batcher(runner, registry)
        waiting = [asyncio.create_task(b.submit(encs(5, start=i))) for i in (1, 2, 3)]
        await asyncio.sleep(0)
        assert b.waiting == 3
        with pytest.raises(QueueFull) as full:
            await b.submit(encs(5, 5, start=4))  # 3 + 2 > 4: neither input is queued
        assert full.value.retry_after_s >= 1
        assert "'stub' is busy: 3 inputs are waiting (limit 4)" in str(full.value)
        assert b.waiting == 3
        last = asyncio.create_task(b.submit(encs(5, start=6)))  # 3 + 1 fits
        await asyncio.sleep(0)
        assert b.waiting == 4
        gate.set()
        results = await asyncio.gather(first, *waiting, last)
        for tag, rows in zip((0, 1, 2, 3, 6), results, strict=True):
            assert_own_rows([Enc(tag, 5)], rows)
        await b.close()

    run(scenario())
    assert runner.batches == [[0], [1, 2, 3, 6]]
    assert sample(registry, "electra_queue_rejections_total") == 1


def test_close_finishes_queued_work_then_refuses_new_work() -> None:
    gate = threading.Event()
    runner = StubRunner(gate=gate)

    async def scenario() -> None:
        b = batcher(runner, max_batch_size=2)
        b.start()
        queued = [asyncio.create_task(b.submit(encs(5, start=i))) for i in range(5)]
        assert await asyncio.to_thread(runner.entered.wait, GATE_TIMEOUT_S)
        closing = asyncio.create_task(b.close())
        await asyncio.sleep(0)
        with pytest.raises(ShuttingDown, match="'stub' is shutting down"):
            await b.submit(encs(5, start=9))
        gate.set()
        await closing
        for i, rows in enumerate(await asyncio.gather(*queued)):
            assert_own_rows([Enc(i, 5)], rows)
        with pytest.raises(ShuttingDown):
            await b.submit(encs(5))

    run(scenario())
    assert sorted(itertools.chain(*runner.batches)) == [0, 1, 2, 3, 4]
    assert all(len(batch) <= 2 for batch in runner.batches)


def test_a_failed_model_call_fails_its_batch_only() -> None:
    runner = StubRunner(fail_on=1)

    async def scenario() -> None:
        b = batcher(runner, max_batch_size=2)
        futures = [asyncio.ensure_future(b.submit(encs(5, start=i))) for i in range(4)]
        await asyncio.sleep(0)
        b.start()
        results = await asyncio.gather(*futures, return_exceptions=True)
        for i in (0, 1):  # the batch [0, 1] holds the input the model fails on
            assert isinstance(results[i], InferenceFailed), results[i]
            assert "'stub'" in str(results[i]) and "boom" in str(results[i])
        for i in (2, 3):
            assert_own_rows([Enc(i, 5)], results[i])
        # The batching task survived: later requests are answered.
        assert_own_rows(encs(5, start=7), await b.submit(encs(5, start=7)))
        await b.close()

    run(scenario())
    assert runner.batches == [[0, 1], [2, 3], [7]]


def test_inputs_of_a_departed_client_never_reach_the_model() -> None:
    gate = threading.Event()
    runner = StubRunner(gate=gate)

    async def scenario() -> None:
        b = batcher(runner)
        b.start()
        first = asyncio.create_task(b.submit(encs(5, start=0)))
        assert await asyncio.to_thread(runner.entered.wait, GATE_TIMEOUT_S)
        gone = asyncio.create_task(b.submit(encs(5, 5, start=1)))
        stays = asyncio.create_task(b.submit(encs(5, start=3)))
        await asyncio.sleep(0)
        gone.cancel()
        gate.set()
        await asyncio.gather(first, stays)
        assert gone.cancelled()
        await b.close()

    run(scenario())
    assert runner.batches == [[0], [3]]


def test_a_departed_clients_inputs_leave_the_queue_at_once() -> None:
    """Not only skipped when a batch is taken: the queue's room and its gauge no longer count them, so a
    client that leaves while the model is busy does not keep others out with a 503."""
    gate = threading.Event()
    runner = StubRunner(gate=gate)
    registry = CollectorRegistry()

    async def scenario() -> None:
        b, first = await busy_batcher(runner, registry)
        gone = asyncio.create_task(b.submit(encs(5, 5, 5, start=1)))
        await asyncio.sleep(0)
        assert b.waiting == 3 and sample(registry, "electra_queue_size") == 3
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert b.waiting == 0 and sample(registry, "electra_queue_size") == 0
        later = asyncio.create_task(b.submit(encs(5, 5, 5, 5, start=4)))  # would not fit beside the 3
        await asyncio.sleep(0)
        gate.set()
        assert_own_rows(encs(5, start=0), await first)
        assert_own_rows(encs(5, 5, 5, 5, start=4), await later)
        await b.close()

    run(scenario())
    assert runner.batches == [[0], [4, 5, 6, 7]]


def test_batch_metrics_count_rows_and_padded_tokens() -> None:
    runner = StubRunner()
    registry = CollectorRegistry()

    async def scenario() -> None:
        b = Batcher(runner, metrics(registry), 8192, 32, 0.0, 100)
        futures = [asyncio.ensure_future(b.submit(encs(8, 7, 7)))]
        await asyncio.sleep(0)
        b.start()
        await asyncio.gather(*futures)
        await b.close()

    run(scenario())
    assert runner.batches == [[0, 1, 2]]
    assert sample(registry, "electra_batch_size_sum") == 3
    assert sample(registry, "electra_batch_tokens_sum") == 3 * 8  # padded: rows x longest row
    assert sample(registry, "electra_tokens_processed_total") == 8 + 7 + 7  # real tokens
    assert sample(registry, "electra_queue_size") == 0
    assert sample(registry, "electra_inference_seconds_count") == 1


# ----------------------------------------------------------------------------------------------------------
# Short calls on the event loop when nothing else is going on
# ----------------------------------------------------------------------------------------------------------


def test_a_lone_short_call_runs_on_the_event_loop_once_calls_are_timed() -> None:
    runner = StubRunner()

    async def scenario() -> None:
        b = batcher(runner, inline_max_ms=1000.0)
        b.start()
        for i in range(3):
            assert_own_rows(encs(5, start=i), await b.submit(encs(5, start=i)))
        await b.close()

    run(scenario())
    loop_thread = threading.main_thread().name
    # The first call has no timing to predict from, so it goes to the model's thread.
    assert runner.threads[0] != loop_thread and runner.threads[1:] == [loop_thread, loop_thread]


def test_calls_go_to_the_model_thread_when_inline_is_off_or_predicted_too_long() -> None:
    for inline_max_ms, lengths in ((0.0, (5, 5, 5)), (1000.0, (5, 5, 10**9))):
        runner = StubRunner()

        async def scenario() -> None:
            b = batcher(runner, inline_max_ms=inline_max_ms, max_batch_tokens=2 * 10**9)  # noqa: B023
            b.start()
            for i, n in enumerate(lengths):  # noqa: B023
                await b.submit(encs(n, start=i))
            await b.close()

        run(scenario())
        assert threading.main_thread().name not in runner.threads[::2], (inline_max_ms, runner.threads)


def test_calls_go_to_the_model_thread_while_other_work_is_queued_or_on_its_way() -> None:
    gate = threading.Event()
    runner = StubRunner(gate=gate)

    async def scenario() -> None:
        arrivals = Arrivals()
        b = Batcher(runner, metrics(), 8192, 1, 0.0, 100, arrivals, inline_max_ms=60_000.0)
        b.start()
        gate.set()
        await b.submit(encs(5))  # timed: lone calls may now run inline
        gate.clear()
        runner.entered.clear()
        # Two requests at once, each on its way from its first byte as the server counts them: the first
        # call must leave the event loop free for the second one (a gated call on the event loop would
        # block it, and this test, for good).
        arrivals.expect()
        arrivals.expect()
        first = asyncio.create_task(arrive_and_submit(arrivals, b, encs(5, start=1)))
        second = asyncio.create_task(arrive_and_submit(arrivals, b, encs(5, start=2)))
        await asyncio.to_thread(runner.entered.wait, GATE_TIMEOUT_S)
        arrivals.expect()  # and one more on its way
        gate.set()
        await asyncio.gather(first, second)
        arrivals.arrived()
        await b.close()

    run(scenario())
    assert runner.batches == [[0], [1], [2]]
    assert threading.main_thread().name not in runner.threads


async def arrive_and_submit(arrivals: Arrivals, b: Batcher, inputs: list[Enc]) -> list[np.ndarray]:
    """What the server's backend does with a request counted on its way: it arrives, then submits."""
    arrivals.arrived()
    return await b.submit(inputs)


def test_lone_inputs_that_come_together_on_an_idle_server_share_one_call() -> None:
    """Requests whose bytes come in one pass of the event loop start as tasks that have not run yet, which
    no count sees: an input that skipped the queue when the server looked idle would run alone while they
    wait (it did, at commit cd4e5ce: one input per call at 64 and 256 clients)."""
    runner = StubRunner()

    async def scenario() -> None:
        b = batcher(runner, inline_max_ms=60_000.0)
        b.start()
        await b.submit(encs(5))  # timed: a lone call may run on the event loop
        together = [asyncio.create_task(b.submit(encs(5, start=i))) for i in range(1, 5)]
        for i, task in enumerate(together, start=1):
            assert_own_rows(encs(5, start=i), await task)
        await b.close()

    run(scenario())
    assert runner.batches == [[0], [1, 2, 3, 4]]


def test_an_arrival_wakes_only_a_batching_task_that_waits_for_company() -> None:
    runner = StubRunner()

    async def scenario() -> None:
        arrivals = Arrivals()
        b = Batcher(runner, metrics(), 8192, 32, 1000.0, 100, arrivals)
        b.start()
        await asyncio.sleep(0)
        arrivals.expect()
        arrivals.arrived()
        assert not b._wakeup.is_set()  # idle: nothing for it to do
        arrivals.expect()
        task = asyncio.create_task(b.submit(encs(5)))
        await asyncio.sleep(0.01)
        assert b.waiting == 1  # its batch waits up to max_wait for the one on its way
        started = time.perf_counter()
        arrivals.arrived()
        await task
        assert time.perf_counter() - started < 0.5  # woken by the arrival, not max_wait's end
        await b.close()

    run(scenario())


def test_each_request_learns_its_queue_and_model_time() -> None:
    runner = StubRunner()

    async def scenario() -> dict[str, float]:
        b = batcher(runner)
        b.start()
        meta = RequestMetadata()
        await b.submit(encs(5, 6), meta)
        await b.close()
        return meta.stages

    stages = run(scenario())
    assert set(stages) == {"queue", "model"} and all(v >= 0 for v in stages.values())
