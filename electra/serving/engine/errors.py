"""What the engine refuses and why, as types that know no HTTP: the HTTP layer maps each one to its status in
one place (electra.serving.http.error_responses), as text-embeddings-inference's router maps its core's
`TextEmbeddingsError`; a program that runs the engine without a server reads the same message.

Each class is one reason a request cannot be answered; the message says what to change.
"""

from __future__ import annotations

from electra.errors import InputError


class EngineError(Exception):
    """A request the engine cannot answer; `str(e)` is the message for the client."""


class InvalidRequest(EngineError):
    """The request contradicts itself or the model (a stride over half a window, a model of another kind)."""


class EmptyInput(InvalidRequest):
    """A request with no input, or (where the protocol refuses it) an input with no text."""


class ModelNotFound(EngineError):
    """No loaded model has the name (or the version) the request gives, or none of the kind it needs."""


class TooLarge(EngineError):
    """Over one of the server's limits (inputs, characters, suggestions, the queue's size, an answer's size);
    retrying the same request cannot help."""


class TooLong(TooLarge, InputError):
    """A text over the model's token limit with truncate=false (also an InputError: a local caller's
    one-line error)."""


class Unavailable(EngineError):
    """The request is fine but cannot run now; `retry_after_s`: when to try again."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotReady(Unavailable):
    """The models are still loading or warming up, or their warm-up failed (the message says which)."""


class QueueFull(Unavailable):
    """The model's queue cannot take the request's inputs now; the client should retry later."""

    def __init__(self, model: str, waiting: int, limit: int, retry_after_s: int) -> None:
        super().__init__(
            f"model {model!r} is busy: {waiting} inputs are waiting (limit {limit}); "
            f"retry in {retry_after_s} s",
            retry_after_s,
        )


class ShuttingDown(Unavailable):
    """The model's batcher is closed and takes no new work."""


class InferenceFailed(Unavailable):
    """The model call for a batch raised; its requests are refused with the reason, the server goes on."""
