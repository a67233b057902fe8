"""What a request's metric updates cost, written to prometheus_client at once or gathered by
electra.serving.engine.metric_buffer, in one process and in multiprocess mode (`electra serve --workers`).

Three figures per mode, each measured on an event loop (where the buffer gathers), in alternating rounds:
- one update of each kind (a histogram's and a summary's observe, a counter's and a gauge's inc), CPU us;
- one request's updates, as a /detect request makes them (REQUEST: its kinds and counts, taken from the
  server's code), written at once (`direct`), gathered and written when the request ends (`buffered, idle`:
  a lone request, flushed as the server goes idle), and gathered over 100 requests (`buffered, busy`: a busy
  worker, flushed by its timer);
- how many values prometheus_client writes for one real /detect request through the app in process (the tiny
  model, metric_buffer off): a histogram observation writes two (its bucket and its sum), each a write to a
  memory-mapped file in multiprocess mode.

CPU time of the calling thread; figures are medians over rounds, with the median of per-round ratios.

    python -m bench.metric_updates                  # both modes, 9 rounds
    python -m bench.metric_updates --rounds 3       # a quick look

Writes bench/results/metric_updates_cpu.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.benchlib import result_header, round_order, write_result
from electra.serving.engine.metric_buffer import MULTIPROC_ENV

# One /detect request's updates on the hot path (hot_path.py, backend.py, batcher.py, statistics.py).
# Histograms: tokenization, queue wait, batch size, batch tokens, inference, HTTP duration. Summaries:
# Triton's success, queue, compute_input, compute_infer, compute_output. Counters: tokens, inputs, HTTP
# requests. Gauges: HTTP in progress (inc and dec), queue size (set twice), last inference (set).
REQUEST = {"histogram": 6, "summary": 5, "counter": 3, "gauge_inc": 2, "gauge_set": 3}
CALLS = 20_000  # per figure per round
BUSY_REQUESTS = 100  # requests gathered per flush in `buffered, busy`


def _metrics(buffered: bool) -> tuple[dict[str, Any], Any]:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary

    from electra.serving.engine.metric_buffer import (
        BufferedCounter,
        BufferedGauge,
        BufferedHistogram,
        BufferedSummary,
        MetricBuffer,
    )

    registry = CollectorRegistry()
    buffer = MetricBuffer(flush_s=3600.0)
    kw: dict[str, Any] = {"labelnames": ("model",), "registry": registry}
    children = {
        "histogram": Histogram("h", "h", **kw).labels("m"),
        "summary": Summary("s", "s", **kw).labels("m"),
        "counter": Counter("c", "c", **kw).labels("m"),
        "gauge": Gauge("g", "g", multiprocess_mode="livesum", **kw).labels("m"),
    }
    if not buffered:
        return children, buffer
    wrap = {
        "histogram": BufferedHistogram,
        "summary": BufferedSummary,
        "counter": BufferedCounter,
        "gauge": BufferedGauge,
    }
    return {name: wrap[name](child, buffer) for name, child in children.items()}, buffer


def _request(m: dict[str, Any]) -> Callable[[], None]:
    histogram, summary, counter, gauge = m["histogram"], m["summary"], m["counter"], m["gauge"]

    def one() -> None:
        for _ in range(REQUEST["histogram"]):
            histogram.observe(0.003)
        for _ in range(REQUEST["summary"]):
            summary.observe(0.003)
        for _ in range(REQUEST["counter"]):
            counter.inc()
        gauge.inc()
        gauge.dec()
        for _ in range(REQUEST["gauge_set"]):
            gauge.set(3)

    return one


def _cpu_us(fn: Callable[[], None], calls: int) -> float:
    t = time.thread_time()
    for _ in range(calls):
        fn()
    return 1e6 * (time.thread_time() - t) / calls


def _variants() -> dict[str, Callable[[], float]]:
    """Each figure: a function measuring it once, CPU us per call."""
    direct, _ = _metrics(buffered=False)
    gathered, buffer = _metrics(buffered=True)
    out: dict[str, Callable[[], float]] = {}
    for label, m in (("direct", direct), ("buffered", gathered)):
        out[f"histogram observe, {label}"] = lambda m=m: _cpu_us(lambda: m["histogram"].observe(0.003), CALLS)
        out[f"summary observe, {label}"] = lambda m=m: _cpu_us(lambda: m["summary"].observe(0.003), CALLS)
        out[f"counter inc, {label}"] = lambda m=m: _cpu_us(lambda: m["counter"].inc(), CALLS)
        out[f"gauge inc, {label}"] = lambda m=m: _cpu_us(lambda: m["gauge"].inc(), CALLS)
    request_direct, request_buffered = _request(direct), _request(gathered)
    requests = CALLS // 20

    def idle() -> None:
        request_buffered()
        buffer.flush()

    def busy() -> None:
        for _ in range(BUSY_REQUESTS):
            request_buffered()
        buffer.flush()

    out["request, direct"] = lambda: _cpu_us(request_direct, requests)
    out["request, buffered, idle"] = lambda: _cpu_us(idle, requests)
    out["request, buffered, busy"] = lambda: _cpu_us(busy, requests // BUSY_REQUESTS) / BUSY_REQUESTS
    return out


async def _measure(rounds: int) -> dict[str, Any]:
    variants = _variants()
    for fn in variants.values():  # warm
        fn()
    per_round: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        for name in round_order(list(variants), r):
            per_round[name].append(variants[name]())
    figures: dict[str, Any] = {
        name: {"cpu_us_median": statistics.median(v), "per_round": v} for name, v in per_round.items()
    }
    for kind in ("histogram observe", "summary observe", "counter inc", "gauge inc"):
        ratio = _ratio(per_round, kind, "direct", "buffered")
        figures[f"{kind}, direct"]["direct_vs_buffered_median"] = ratio
    for case in ("idle", "busy"):
        direct = per_round["request, direct"]
        figures[f"request, buffered, {case}"]["direct_vs_this_median"] = statistics.median(
            d / b for d, b in zip(direct, per_round[f"request, buffered, {case}"], strict=True)
        )
    return figures


def _ratio(per_round: dict[str, list[float]], kind: str, a: str, b: str) -> float:
    return statistics.median(
        x / y for x, y in zip(per_round[f"{kind}, {a}"], per_round[f"{kind}, {b}"], strict=True)
    )


def _writes_per_request(requests: int = 200) -> float:
    """Values prometheus_client writes for one /detect request through the app, in process (tiny model)."""
    from prometheus_client import values

    from bench import asgi_inprocess
    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    value_class = values.ValueClass
    counted = [0]
    originals = {name: getattr(value_class, name) for name in ("inc", "set")}

    def counting(name: str) -> Callable[..., Any]:
        original = originals[name]

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            counted[0] += 1
            return original(self, *args, **kwargs)

        return method

    async def run(app: Any) -> None:
        await asgi_inprocess.start(app)
        for _ in range(50):  # warm: the first requests look up their metric children
            await asgi_inprocess.call(app)
        for name in originals:
            setattr(value_class, name, counting(name))
        try:
            for _ in range(requests):
                await asgi_inprocess.call(app)
        finally:
            for name, original in originals.items():
                setattr(value_class, name, original)

    with tempfile.TemporaryDirectory(prefix="metric-updates-") as tmp:
        bundle = asgi_inprocess.build_bundle(Path(tmp), "tiny")
        settings = ServeSettings(models=(ModelSpec("detector", bundle),), metrics_flush_ms=0.0)
        asyncio.run(run(create_app(settings)))
    return counted[0] / requests


def _one_mode(rounds: int) -> dict[str, Any]:
    figures = asyncio.run(_measure(rounds))
    return {"figures": figures, "value_writes_per_detect_request": _writes_per_request()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--mode", choices=("single", "multiprocess"), default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.mode is not None:  # a child: one mode, JSON on stdout
        print(json.dumps(_one_mode(a.rounds)))
        return 0
    record: dict[str, Any] = {
        **result_header("metric_updates_cpu"),
        "what": "CPU us of metric updates on an event loop: each kind, and one /detect request's (REQUEST)",
        "request_updates": REQUEST,
        "calls_per_round": CALLS,
        "busy_requests_per_flush": BUSY_REQUESTS,
        "rounds": a.rounds,
        "modes": {},
    }
    started = time.perf_counter()
    for mode in ("single", "multiprocess"):
        with tempfile.TemporaryDirectory(prefix="metric-updates-mp-") as tmp:
            env = {k: v for k, v in os.environ.items() if k != MULTIPROC_ENV}
            if mode == "multiprocess":
                env[MULTIPROC_ENV] = tmp
            cmd = [sys.executable, "-m", "bench.metric_updates", "--mode", mode, "--rounds", str(a.rounds)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                raise SystemExit(f"metric_updates: the {mode} run failed (exit {done.returncode})")
            record["modes"][mode] = json.loads(done.stdout.strip().splitlines()[-1])
        request = record["modes"][mode]["figures"]
        print(
            f"{mode}: a request's updates {request['request, direct']['cpu_us_median']:.1f} us direct, "
            f"{request['request, buffered, idle']['cpu_us_median']:.1f} us buffered and flushed, "
            f"{request['request, buffered, busy']['cpu_us_median']:.1f} us buffered over "
            f"{BUSY_REQUESTS} requests; {record['modes'][mode]['value_writes_per_detect_request']:.1f} value "
            "writes per /detect request",
            flush=True,
        )
    record["wall_s"] = time.perf_counter() - started
    path = write_result(record, a.out, "metric_updates_cpu")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
