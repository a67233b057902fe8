"""Sentence vectors: an encoder's last hidden state (the bundle's HIDDEN_OUTPUT) pooled into one vector per
input, as the bundle says ([CLS], or the mean over the real tokens, electra.bundle.Pooling), and scaled to
unit length on request, all in numpy.

Any encoder bundle embeds: a discriminator, a classifier or a tagger, since each graph answers its backbone's
output beside its logits. An input that wants its vector is an `EmbedInput`; it rides the model's own queue
and batches with its other inputs, and the runner pools it in the batcher's worker thread, so what comes back
to the event loop is one vector, not a row of hidden states per token. A bundle exported before graphs
answered their hidden state has no `embedding` in bundle.json: `not_embeddable` says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from electra.serving.engine.encoded import Encoded


@dataclass(frozen=True, slots=True)
class EmbedInput(Encoded):
    """An input answered by its pooled vector (float32, hidden_size) instead of its logits."""

    pooling: str = "cls"


def embed_input(encoded: Encoded, pooling: str) -> EmbedInput:
    return EmbedInput(
        ids=encoded.ids,
        type_ids=encoded.type_ids,
        offsets=encoded.offsets,
        special=encoded.special,
        word_ids=encoded.word_ids,
        truncated=encoded.truncated,
        pooling=pooling,
    )


def pool(hidden: np.ndarray, pooling: str) -> np.ndarray:
    """One input's vector from its hidden states at its real tokens (length x hidden, padding cut off): the
    first ([CLS]) row, or the mean of every row, [CLS] and [SEP] included, as sentence-transformers' mean
    pooling averages every position its attention mask keeps."""
    if pooling == "cls":
        return np.array(hidden[0], dtype=np.float32)
    if pooling == "mean":
        return hidden.mean(axis=0, dtype=np.float64).astype(np.float32)
    raise ValueError(f"unknown pooling {pooling!r}")


def normalized(vectors: list[np.ndarray]) -> list[np.ndarray]:
    """Each vector divided by its L2 norm (a zero vector stays zero rather than becoming NaN)."""
    out = []
    for v in vectors:
        norm = float(np.linalg.norm(v.astype(np.float64)))
        out.append(v if norm == 0.0 else (v / norm).astype(np.float32))
    return out


def not_embeddable(name: str) -> str:
    """Why a bundle without the hidden-state output cannot embed, and what to do."""
    return (
        f"model {name!r} was exported before bundles answered their last hidden state, so it cannot embed; "
        "export it again with this version (electra export --model MODEL --out DIR, --pooling cls or mean) "
        "and serve the new bundle"
    )
