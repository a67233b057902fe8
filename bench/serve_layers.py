"""What each layer of the server's request path costs: CPU time per /detect request, in process (the ASGI app
called directly, no network, so the figures are the app's own): the full app, whose hot path
(electra.serving.http.hot_path) answers /detect; the same app with the hot path stepped aside, so the request
goes through Litestar's route and the middlewares, and that with one middleware left out; beside
`bench.bare_server`'s app and a minimal Litestar app that calls the same runner (the framework's own floor).
Variants alternate in rounds (order rotated, `benchlib.round_order`); a middleware's cost is the median over
rounds of (through Litestar - without it), anything else's a difference from the full app, each round's
pair measured back to back.

CPU time of the calling thread (`time.thread_time`), not wall time: what a layer costs does not depend on
what else the machine runs, which a shared 2-core machine cannot promise for latency. Every variant runs its
model on that thread (on the event loop, one ONNX Runtime thread), so the model's own time is in every variant
alike.

    python -m bench.serve_layers                  # 9 rounds of 500 requests per variant
    python -m bench.serve_layers --rounds 3 --requests 100 --size tiny   # a quick look

Writes bench/results/serve_layers_cpu.json.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from bench.asgi_inprocess import TEXT, build_bundle, call, start
from bench.benchlib import result_header, round_order, write_result

# The app's middlewares, as electra.serving.http.app wires them: (name in that module, whether it is a factory
# called with settings first, so that leaving it out means a factory of the identity).
MIDDLEWARES = {
    "request_metadata": True,
    "http_metrics": True,
    "client_gone": False,
    "request_body": True,
    "decode_content": True,
}


# The full app without its hot path (see apps).
THROUGH_LITESTAR = "through litestar"
# --inline-max-ms for every variant: longer than any call (see apps).
INLINE_ALWAYS_MS = 600_000.0
# ONNX Runtime threads of every variant's model (see apps).
ORT_THREADS = 1


def _identity(app: Any) -> Any:
    return app


@contextmanager
def without(layer: str | None) -> Iterator[None]:
    """electra.serving.http.app as create_app sees it with `layer` left out (None: all of them in)."""
    import electra.serving.http.app as appmod

    if layer is None:
        yield
        return
    saved = getattr(appmod, layer)
    setattr(appmod, layer, (lambda *a, **k: _identity) if MIDDLEWARES[layer] else _identity)
    try:
        yield
    finally:
        setattr(appmod, layer, saved)


class MinimalBody(msgspec.Struct):
    text: str
    truncate: bool = True


def minimal_litestar(runner: Any) -> Any:
    """The least a Litestar app does for /detect: one route, msgspec in and out, the same runner."""
    from litestar import Litestar, post

    @post("/detect", status_code=200)
    async def detect(data: MinimalBody) -> dict[str, list[float]]:
        encoded = runner.encode([data.text])
        return {"logits": runner.infer(encoded)[0].tolist()}

    return Litestar(route_handlers=[detect], logging_config=None, debug=False)


def apps(bundle: Path) -> dict[str, Any]:
    from bench.bare_app import make_app
    from electra.serving.engine.runtime import ModelRunner
    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    # Every model call on the event loop, as the bare app makes it, and on this thread alone (one ONNX Runtime
    # thread): the server runs a call on the loop only when it predicts it short, which on a loaded machine
    # it may not, and work in another thread (the batcher's, ORT's pool, which shares a call's work out
    # differently from call to call) would leave this thread's CPU time, which is all that is measured.
    settings = ServeSettings(
        models=(ModelSpec("detector", bundle),), inline_max_ms=INLINE_ALWAYS_MS, threads=ORT_THREADS
    )
    out: dict[str, Any] = {"full": create_app(settings)}
    # The same app without its hot path (electra.serving.http.hot_path; --hot-path false): every request
    # through Litestar's route and the middlewares, as a request the hot path hands on goes; and each
    # middleware's share of that.
    through_litestar = dataclasses.replace(settings, hot_path=False)
    for layer in (None, *MIDDLEWARES):
        with without(layer):
            out[THROUGH_LITESTAR if layer is None else f"{THROUGH_LITESTAR} without {layer}"] = create_app(
                through_litestar
            )
    runner = ModelRunner("detector", bundle, threads=ORT_THREADS)
    out["litestar minimal"] = minimal_litestar(runner)
    out["bare"] = make_app(runner)
    return out


async def measure(
    variants: dict[str, Any], rounds: int, requests: int, say: Callable[[str], None]
) -> dict[str, Any]:
    for app in variants.values():
        await start(app)
        for _ in range(200):  # warm: ORT's first calls, Litestar's caches
            status = await call(app)
            if status != 200:
                name = next(n for n, a in variants.items() if a is app)
                raise SystemExit(f"{name}: warm-up answered {status}")
    per_round: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        for name in round_order(list(variants), r):
            app = variants[name]
            t = time.thread_time()
            for _ in range(requests):
                await call(app)
            per_round[name].append(1e6 * (time.thread_time() - t) / requests)
        full, bare = per_round["full"][-1], per_round["bare"][-1]
        say(f"round {r + 1}/{rounds}: full {full:.0f} us, bare {bare:.0f} us")
    return {name: _figures(name, per_round) for name in per_round}


def _figures(name: str, per_round: dict[str, list[float]]) -> dict[str, Any]:
    """A variant's median and rounds, and its difference from the variant it leaves something out of:
    a middleware's from the app through Litestar, anything else's from the full app."""
    values = per_round[name]
    out: dict[str, Any] = {"cpu_us_per_request_median": statistics.median(values), "per_round": values}
    reference = THROUGH_LITESTAR if name.startswith(f"{THROUGH_LITESTAR} without") else "full"
    if name != reference:
        key = f"{reference.replace(' ', '_')}_minus_this_us_median"
        out[key] = statistics.median(f - v for f, v in zip(per_round[reference], values, strict=True))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small", help="model size of the detector (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--requests", type=int, default=500, help="per variant per round")
    ap.add_argument("--name", default="serve_layers_cpu")
    a = ap.parse_args(argv)
    header = result_header(a.name)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="serve-layers-") as tmp:
        bundle = build_bundle(Path(tmp), a.size)
        variants = apps(bundle)
        figures = asyncio.run(measure(variants, a.rounds, a.requests, lambda line: print(line, flush=True)))
    full = figures["full"]["cpu_us_per_request_median"]
    bare = figures["bare"]["cpu_us_per_request_median"]
    record = {
        **header,
        "what": "CPU time of the calling thread per /detect request, in process (ASGI, no network)",
        "text": TEXT,
        "size": a.size,
        "rounds": a.rounds,
        "requests_per_round": a.requests,
        "variants": figures,
        "full_vs_bare": full / bare,
        "load_average_end": result_header("")["load_average"],
        "seconds": time.perf_counter() - started,
    }
    path = write_result(record, None, a.name)
    for name, f in figures.items():
        differences = [(k.removesuffix("_us_median"), v) for k, v in f.items() if k.endswith("_us_median")]
        print(
            f"{name:45s} {f['cpu_us_per_request_median']:7.0f} us"
            + "".join(f"  ({what.replace('_', ' ')}: {cost:+.0f} us)" for what, cost in differences)
        )
    print(f"full / bare: {full / bare:.2f}x; wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
