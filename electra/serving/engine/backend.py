"""The server's engine: the loaded models, a batcher and metrics for each (and for each generator), readiness
and warm-up, and the inference core (electra.serving.engine.core) over them, whose backend this is: the core's
model calls go through the batchers here, counted in the metrics, and refused (NotReady) until warm-up is
done.

It knows no HTTP: the HTTP layer (electra.serving.http.state) runs it for the app's lifespan and hands it
each request, with the request's metadata.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from electra.bundle import read_bundle
from electra.errors import InputError
from electra.serving.engine.batcher import Arrivals, Batcher
from electra.serving.engine.core import Inference
from electra.serving.engine.encoded import Encoded
from electra.serving.engine.errors import NotReady
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.metric_buffer import BUFFER
from electra.serving.engine.metrics import ModelMetrics
from electra.serving.engine.runtime import ModelRunner
from electra.serving.settings import ServeSettings

log = logging.getLogger("electra.serving")


def check_bundles(settings: ServeSettings) -> None:
    """Every bundle's bundle.json read and validated, without loading a model: InputError naming the first
    bad one, in a moment."""
    for spec in settings.models:
        try:
            read_bundle(spec.path)
        except InputError as e:
            raise InputError(f"model {spec.name!r}: {e}") from None


def load_runners(settings: ServeSettings) -> dict[str, ModelRunner]:
    """Every bundle of the settings, loaded (InputError naming the bundle on the first bad one)."""
    runners = {}
    for spec in settings.models:
        try:
            runners[spec.name] = ModelRunner(
                spec.name, spec.path, settings.device, settings.threads, settings.pad_multiple
            )
        except InputError as e:
            raise InputError(f"model {spec.name!r}: {e}") from None
    return runners


class BatchingBackend:
    """Runners, their batchers and metrics, readiness; the core over them (`inference`)."""

    def __init__(
        self,
        settings: ServeSettings,
        runners: dict[str, ModelRunner],
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.runners = runners
        self.inference = Inference(runners, settings, self)
        # Each generator has a batcher and metrics of its own, under its name ("detector/generator").
        self.generators = {r.generator.name: r.generator for r in runners.values() if r.generator}
        self.metrics = {name: ModelMetrics.for_model(name) for name in [*runners, *self.generators]}
        self.batchers: dict[str, Batcher] = {}
        self.arrivals = Arrivals()
        self.ready = False
        self.failure: str | None = None
        self.on_ready = on_ready

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        for name, runner in [*self.runners.items(), *self.generators.items()]:
            batcher = Batcher(
                runner,
                self.metrics[name],
                s.max_batch_tokens,
                s.max_batch_size,
                s.max_wait_ms,
                s.max_queue,
                self.arrivals,
                s.inline_max_ms,
                runner.padded_length,
                s.batch_order,
            )
            batcher.start()
            self.batchers[name] = batcher

    async def warm_up(self) -> None:
        """Every runner's warm-up shapes (electra.serving.engine.shapes), then ready."""
        s = self.settings
        try:
            for name, runner in self.runners.items():
                start = time.perf_counter()
                calls = await self.batchers[name].warm_up(
                    runner.warm_up_calls(s.max_batch_size, s.max_batch_tokens)
                )
                if runner.generator is not None:
                    shapes = runner.warm_up_shapes(s.max_batch_size, s.max_batch_tokens)
                    calls += await self.batchers[runner.generator.name].warm_up(
                        runner.generator.warm_up_calls(shapes)
                    )
                log.info(
                    "warm-up: %s, %d model calls (lengths padded to a multiple of %d) in %.1f s",
                    runner.name,
                    calls,
                    runner.pad_multiple,
                    time.perf_counter() - start,
                )
        except Exception as e:  # a model that cannot run keeps the pod unready, with the reason visible
            self.failure = f"warm-up failed: {e.__class__.__name__}: {e}"
            log.exception("warm-up failed")
            return
        self.ready = True
        if self.on_ready is not None:
            self.on_ready()
        log.info("ready: %s", ", ".join(f"{n} ({r.kind})" for n, r in self.runners.items()))

    async def stop(self) -> None:
        self.ready = False
        await asyncio.gather(*(b.close() for b in self.batchers.values()))
        BUFFER.flush()  # the last metric updates, before a worker's files are all that is left of it

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Batchers started and warm-up running in the background while the caller serves; on exit they
        drain."""
        self.start()
        warm = asyncio.create_task(self.warm_up(), name="warm-up")
        try:
            yield
        finally:
            if not warm.done():
                warm.cancel()
            await self.stop()

    # --- the core's backend: model calls through the batchers ------------------------------------------

    def check_ready(self) -> None:
        if not self.ready:
            raise NotReady(self.failure or "models are still loading; retry shortly (see /health/ready)")

    def tokenized(self, name: str, seconds: float) -> None:
        self.metrics[name].tokenization.observe(seconds)

    async def submit(
        self, name: str, encoded: list[Encoded], inputs: int, meta: RequestMetadata
    ) -> list[Any]:
        """Rows from the batcher of the model or generator called `name` (QueueFull, ShuttingDown or
        InferenceFailed); `inputs` is how many texts the rows answer (a long text's windows are one input)."""
        meta.enqueued()
        rows = await self.batchers[name].submit(encoded, meta)
        self.metrics[name].inputs.inc(inputs)
        meta.answered()
        return rows
