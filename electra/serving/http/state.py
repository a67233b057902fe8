"""What every route of one app shares: the engine (electra.serving.engine.backend: the models, their
batchers, readiness and the core every route hands its request to), Triton's statistics, the API keys, and
with --workers the other workers' readiness.

Route handlers are module-level functions that get it by dependency injection: a handler with a parameter
named `server` (SERVER) is handed its app's ServerState (`dependencies`), so one handler serves every app
built in a process (each app registers its own copy, through a Router) and none closes over a state.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.di import NamedDependency, Provide

from electra.serving.engine.backend import BatchingBackend
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http.siblings import Siblings
from electra.serving.http.statistics import Statistics
from electra.serving.settings import ServeSettings


class ServerState:
    """The engine, the statistics and the keys; shared by the route handlers of one app."""

    def __init__(
        self,
        settings: ServeSettings,
        runners: dict[str, ModelRunner],
        on_ready: Callable[[], None] | None = None,
        siblings: Siblings | None = None,
    ) -> None:
        self.settings = settings
        self.siblings = siblings
        self.engine = BatchingBackend(settings, runners, self._ready_callback(on_ready))
        self.inference = self.engine.inference
        self.runners = runners
        self.statistics = Statistics(runners)
        self._keys = [k.encode() for k in settings.api_keys]

    @property
    def ready(self) -> bool:
        """Whether the server can take traffic: every model warm, in every worker."""
        return self.engine.ready and (self.siblings is None or self.siblings.all_ready())

    @property
    def failure(self) -> str | None:
        return self.engine.failure

    def loading(self) -> str | None:
        """What a server that is not ready yet waits for, when it is other workers."""
        if self.siblings is None or not self.engine.ready:
            return None
        return f"{self.siblings.count_ready()} of {len(self.siblings.flags)} workers ready"

    def _ready_callback(self, on_ready: Callable[[], None] | None) -> Callable[[], None] | None:
        """What the engine calls when its warm-up is done: this worker's flag set, then `on_ready`."""
        siblings = self.siblings
        if siblings is None:
            return on_ready

        def ready() -> None:
            siblings.mark(True)
            if on_ready is not None:
                on_ready()

        return ready

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


# The parameter a route handler names to get its app's ServerState (`state` is Litestar's own app state),
# and its type: `server: Server`.
SERVER = "server"
Server = NamedDependency[ServerState]


def dependencies(state: ServerState) -> dict[str, Provide]:
    """The app's dependencies: `server`, this app's one ServerState (the same object for every request)."""
    return {SERVER: Provide(lambda: state, use_cache=True, sync_to_thread=False)}
