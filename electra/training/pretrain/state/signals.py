"""SIGTERM and Ctrl-C as a request to checkpoint and exit cleanly, instead of losing the steps since the last
checkpoint (schedulers send SIGTERM before they kill a job)."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class StopSignal:
    """While entered, SIGTERM / SIGINT set `requested`; the loop checks it at the end of each step."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C means now
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
