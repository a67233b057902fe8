"""What every route of one app shares: the loaded models (the registry), their batchers, readiness and the
API keys, and the inference core (electra.serving.core) that every route hands its request to.

ServerState is the core's backend: the core's model calls go through the batchers here, counted in the
metrics and statistics, and refused with 503 until warm-up is done.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.exceptions import HTTPException

from electra.bundle import read_bundle
from electra.errors import InputError
from electra.serving import statistics
from electra.serving.arrivals import arrived
from electra.serving.batcher import Arrivals, Batcher
from electra.serving.core import Inference
from electra.serving.encoded import Encoded
from electra.serving.metrics import ModelMetrics
from electra.serving.runtime import ModelRunner
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
            runners[spec.name] = ModelRunner(spec.name, spec.path, settings.device, settings.threads)
        except InputError as e:
            raise InputError(f"model {spec.name!r}: {e}") from None
    return runners


class ServerState:
    """Runners, their batchers, readiness and keys; shared by the route handlers of one app."""

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
        self.statistics = statistics.Statistics(runners)
        self.batchers: dict[str, Batcher] = {}
        self.arrivals = Arrivals()
        self.ready = False
        self.failure: str | None = None
        self.on_ready = on_ready
        self._keys = [k.encode() for k in settings.api_keys]

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
            )
            batcher.start()
            self.batchers[name] = batcher

    async def warm_up(self) -> None:
        try:
            for runner in self.runners.values():
                await asyncio.to_thread(runner.warm_up)
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

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        """The app's lifespan: batchers start, warm-up runs in the background; on shutdown they drain."""
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
            detail = self.failure or "models are still loading; retry shortly (see /health/ready)"
            raise HTTPException(status_code=503, detail=detail, headers={"Retry-After": "1"})

    def tokenized(self, name: str, seconds: float) -> None:
        self.metrics[name].tokenization.observe(seconds)

    async def submit(self, name: str, encoded: list[Encoded], inputs: int) -> list[Any]:
        """Rows from the batcher of the model or generator called `name` (QueueFull, ShuttingDown or
        InferenceFailed: see error_response); `inputs` is how many texts the rows answer (a long text's
        windows are one input)."""
        arrived()
        rows = await self.batchers[name].submit(encoded)
        self.metrics[name].inputs.inc(inputs)
        statistics.answered()
        return rows

    # --- API keys ------------------------------------------------------------------------------

    def authorize(self, header: str | None) -> bool:
        if not self._keys:
            return True
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = token.strip().encode()
        # Compare against every key, so the time taken says nothing about which key (or prefix) matched.
        return any([hmac.compare_digest(given, key) for key in self._keys])
