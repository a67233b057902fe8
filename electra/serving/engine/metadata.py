"""One request's metadata, carried with it as data through the engine (text-embeddings-inference's
`Metadata`): made where the request arrives, filled by the core and the batcher as its work goes by, read
where its answer leaves (the Server-Timing header, Triton's statistics).

Passed by hand rather than through context variables, so what the engine reports about a request is in its
signatures, and a program that runs the engine without a server can read it too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from electra.serving.engine.batcher import Arrivals


@dataclass(slots=True, eq=False)
class RequestMetadata:
    """`stages`: seconds per stage of the request's work (`tokenize`, `queue`: the wait before its first model
    call, `model`: the calls its inputs were in, shared with the rest of their batch); `model`: the model
    whose work it started (from tokenization on, it counts in that model's statistics); `rows_at`: when the
    model's rows were back (what follows is post-processing); `arrivals`: the server's count of requests on
    their way to a queue, which this one is in until it enqueues."""

    stages: dict[str, float] = field(default_factory=dict)
    model: str | None = None
    rows_at: float | None = None
    arrivals: Arrivals | None = None

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def entered(self, model: str) -> None:
        """The request starts `model`'s work (tokenization first)."""
        self.model = model

    def enqueued(self) -> None:
        """The request no longer holds up a batch that waits for company (it enqueued, or never will)."""
        if self.arrivals is not None:
            arrivals, self.arrivals = self.arrivals, None
            arrivals.arrived()

    def answered(self) -> None:
        """The model's rows for the request are back."""
        self.rows_at = time.perf_counter()
