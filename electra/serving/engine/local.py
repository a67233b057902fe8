"""The engine without a server: the core over runners loaded in this process, its model calls made straight in
the caller's thread. What the demo, the benchmarks and the experiments score texts with, through the same
checks and post-processing as the server.

    core = local_inference({runner.name: runner})
    _, results = run(core.detect(Detect(["The chef cooked the river."])))
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from electra.serving.engine.core import Inference
from electra.serving.engine.encoded import Encoded
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.runtime import ModelRunner
from electra.serving.settings import ModelSpec, ServeSettings

T = TypeVar("T")


class LocalBackend:
    """Model calls straight to the runners (and their generators) in the caller's thread, in chunks of the
    settings' --max-batch-size; always ready."""

    def __init__(self, runners: dict[str, ModelRunner], batch_size: int) -> None:
        self.calls: dict[str, Callable[[list[Encoded]], list[Any]]] = {}
        for runner in runners.values():
            self.calls[runner.name] = runner.infer
            if runner.generator is not None:
                self.calls[runner.generator.name] = runner.generator.infer
        self.batch_size = batch_size

    def check_ready(self) -> None:
        return None

    def tokenized(self, name: str, seconds: float) -> None:
        return None

    async def submit(
        self, name: str, encoded: list[Encoded], inputs: int, meta: RequestMetadata
    ) -> list[Any]:
        call = self.calls[name]
        rows: list[Any] = []
        for lo in range(0, len(encoded), self.batch_size):
            rows += call(encoded[lo : lo + self.batch_size])
        meta.answered()
        return rows


def local_inference(runners: dict[str, ModelRunner], settings: ServeSettings | None = None) -> Inference:
    """The core over runners loaded in this process. A local caller is not a client to be protected from:
    by default no limit on the inputs of one request or on the model's queue (the settings' other limits,
    characters per text and suggestions per token, as the server's defaults)."""
    if settings is None:
        models = tuple(ModelSpec(name, r.path) for name, r in runners.items())
        settings = ServeSettings(models=models, max_texts=sys.maxsize, max_queue=sys.maxsize)
    return Inference(runners, settings, LocalBackend(runners, settings.max_batch_size))


def run(request: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
    """A core request run to its end from synchronous code (no event loop running in this thread)."""
    return asyncio.run(request)  # type: ignore[arg-type]
