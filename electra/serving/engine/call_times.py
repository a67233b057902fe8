"""How long a model call of so many padded tokens takes, predicted from the recent calls.

A call's time is a fixed part (ONNX Runtime's dispatch, every layer's kernels launched) plus a part that grows
with its padded tokens: on a 2-core VM one ELECTRA-Small input of 16 tokens took 2.25 ms and one of 128 tokens
9.8 ms (0.14 and 0.077 ms per token; bench/results/inference_cpu.json, ONNX Runtime fused fp32). A rate per
token taken from a stream of mostly short calls therefore over-predicts every longer one (0.14 ms a token
makes the 128-token call 18 ms), which sent calls that would have been short to the worker thread
(electra.serving.engine.batcher: a call runs on the event loop only when predicted short). So the recent
calls are fitted as `seconds = fixed + per_token * tokens`, by least squares weighted towards the latest;
while they are all of about one length, which cannot separate the two parts, the prediction is their time
per token times the tokens, as before.
"""

from __future__ import annotations

# The weight the past keeps at each new call: the fit follows about the last 1 / (1 - DECAY) calls.
DECAY = 0.95
# The calls' lengths must spread by at least this fraction of their mean for the fit to be used.
MIN_SPREAD = 0.1


class CallTimes:
    """Exponentially weighted least squares of seconds on padded tokens."""

    __slots__ = ("_w", "_x", "_xx", "_xy", "_y")

    def __init__(self) -> None:
        self._w = self._x = self._xx = self._y = self._xy = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        d = DECAY
        self._w = d * self._w + 1.0
        self._x = d * self._x + tokens
        self._xx = d * self._xx + tokens * tokens
        self._y = d * self._y + seconds
        self._xy = d * self._xy + tokens * seconds

    def predict(self, tokens: int) -> float | None:
        """Seconds a call of `tokens` padded tokens is expected to take; None before the first call."""
        if self._w == 0.0:
            return None
        mean_x, mean_y = self._x / self._w, self._y / self._w
        variance = self._xx / self._w - mean_x * mean_x
        if variance > (MIN_SPREAD * mean_x) ** 2:
            per_token = (self._xy / self._w - mean_x * mean_y) / variance
            if per_token > 0:
                return max(mean_y + per_token * (tokens - mean_x), 0.0)
        return mean_y * tokens / mean_x
