"""The readiness of a server's workers (--workers), shared between their processes: one flag per worker in
shared memory, set when that worker's models are warm. A worker answers /health/ready 200 only when every flag
is set (electra.serving.http.state), so a pod takes traffic once all of its copies of the models are warm."""

from __future__ import annotations

from typing import Any


class Siblings:
    """The workers' readiness, shared: one flag per worker, set when its models are warm."""

    def __init__(self, flags: Any, index: int) -> None:
        # A ctypes array of bytes in shared memory (multiprocessing's Array), one per worker; this is `index`.
        self.flags = flags
        self.index = index

    def mark(self, ready: bool) -> None:
        self.flags[self.index] = 1 if ready else 0

    def all_ready(self) -> bool:
        return all(self.flags)

    def count_ready(self) -> int:
        return sum(self.flags)
