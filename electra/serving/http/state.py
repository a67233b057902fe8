"""What every route of one app shares: the engine (electra.serving.engine.backend: the models, their
batchers, readiness and the core every route hands its request to), Triton's statistics, and the API keys.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from litestar import Litestar

from electra.serving.engine.backend import BatchingBackend
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http.statistics import Statistics
from electra.serving.settings import ServeSettings


class ServerState:
    """The engine, the statistics and the keys; shared by the route handlers of one app."""

    def __init__(
        self,
        settings: ServeSettings,
        runners: dict[str, ModelRunner],
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.engine = BatchingBackend(settings, runners, on_ready)
        self.inference = self.engine.inference
        self.runners = runners
        self.statistics = Statistics(runners)
        self._keys = [k.encode() for k in settings.api_keys]

    @property
    def ready(self) -> bool:
        return self.engine.ready

    @property
    def failure(self) -> str | None:
        return self.engine.failure

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        """The app's lifespan: the engine runs (batchers, warm-up in the background), drains on shutdown."""
        async with self.engine.running():
            yield

    def authorize(self, header: str | None) -> bool:
        if not self._keys:
            return True
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = token.strip().encode()
        # Compare against every key, so the time taken says nothing about which key (or prefix) matched.
        return any([hmac.compare_digest(given, key) for key in self._keys])
