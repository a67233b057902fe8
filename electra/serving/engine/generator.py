"""A bundle's generator in memory: the masked LM that proposes what a flagged token should be.

Its inputs are token rows with some positions to predict (`MaskedInput`, built by
electra.serving.engine.suggest); the batcher packs them like any input. The graph answers logits at those
positions only, and the top tokens with their probabilities are taken here, in the batcher's worker thread, so
what travels back to the event loop is a few numbers per position rather than a row of the whole vocabulary.

A probability is the generator's softmax over its whole vocabulary, as transformers' fill-mask pipeline
computes it; what is ranked leaves out the tokens that cannot stand in a text (special tokens, ids past the
tokenizer's vocabulary) and, for a word-level suggestion, WordPiece continuations ("##ing"), which are pieces
of a word rather than words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from electra.bundle import MASKED_POSITIONS, Generator
from electra.files import GENERATOR_DIR, MODEL_ONNX
from electra.padding import pad_rows
from electra.serving.engine.encoded import Encoded
from electra.serving.engine.session import open_session, run_session
from electra.serving.engine.shapes import padded_length
from electra.tokenizer import is_lowercase, vocab_tokens

# One suggestion: a token id and its probability. A row of these per predicted position, best first.
TOP_TOKENS = np.dtype([("id", np.int64), ("prob", np.float64)])
CONTINUATION_PREFIX = "##"  # WordPiece's, when the tokenizer does not say


@dataclass(frozen=True, slots=True)
class MaskedInput(Encoded):
    """A generator input: token rows (usually with [MASK] at `masked`) and what to predict there.

    masked: positions in the row whose top tokens are wanted, in the order the answer lists them;
    top_k: how many tokens per position; whole_words: rank only tokens that start a word;
    candidates: rank only these token ids (fill-mask's `targets`), specials included.
    """

    masked: tuple[int, ...] = ()
    top_k: int = 1
    whole_words: bool = False
    candidates: tuple[int, ...] | None = None


def masked_input(
    ids: list[int],
    type_ids: list[int],
    masked: tuple[int, ...],
    top_k: int,
    whole_words: bool = False,
    candidates: tuple[int, ...] | None = None,
) -> MaskedInput:
    return MaskedInput(
        ids=np.asarray(ids, dtype=np.int64),
        type_ids=np.asarray(type_ids, dtype=np.int64),
        offsets=[],
        special=[],
        word_ids=[],
        truncated=False,
        masked=masked,
        top_k=top_k,
        whole_words=whole_words,
        candidates=candidates,
    )


class GeneratorRunner:
    """generator/model.onnx of a loaded bundle; `infer` (thread-safe, blocking) is what its batcher calls.

    Built by the bundle's ModelRunner from its own pieces (name, directory, device, tokenizer, padding id).
    """

    def __init__(
        self,
        name: str,
        bundle_dir: Path,
        info: Generator,
        tokenizer: Any,
        pad_id: int,
        device: str,
        threads: int,
        pad_multiple: int = 1,
        max_seq_len: int = 512,
    ) -> None:
        self.name = f"{name}/{GENERATOR_DIR}"
        # Padded as its detector's inputs are (electra.serving.engine.shapes), within the bundle's length.
        self.pad_multiple = pad_multiple
        self.max_seq_len = max_seq_len
        self.info = info
        self.device = device
        self.session = open_session(bundle_dir / GENERATOR_DIR / MODEL_ONNX, device, threads)
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.pad_id = pad_id
        self.tokens = vocab_tokens(tokenizer)
        model = tokenizer.model
        self.prefix: str = getattr(model, "continuing_subword_prefix", None) or CONTINUATION_PREFIX
        # A lower-casing tokenizer's suggestions take the case of what they replace (engine.suggest).
        self.lowercase = is_lowercase(tokenizer)
        vocab = info.vocab_size
        # What can never be suggested: special tokens and ids the tokenizer has no token for.
        self._unusable = np.ones(vocab, dtype=bool)
        self._unusable[: min(vocab, len(self.tokens))] = False
        for token_id, added in tokenizer.get_added_tokens_decoder().items():
            if added.special and token_id < vocab:
                self._unusable[token_id] = True
        self._continuation = self._unusable.copy()
        for token_id, token in enumerate(self.tokens[:vocab]):
            if token.startswith(self.prefix):
                self._continuation[token_id] = True

    def token(self, token_id: int) -> str:
        return self.tokens[token_id]

    def infer(self, batch: list[Encoded]) -> list[np.ndarray]:
        """For each input, its masked positions' top tokens: a (positions, top_k) TOP_TOKENS array."""
        inputs = [_masked(e) for e in batch]
        width = self.padded_length(max(len(e.ids) for e in inputs))
        feeds = pad_rows([e.ids for e in inputs], [e.type_ids for e in inputs], self.pad_id, width)
        width = feeds["input_ids"].shape[1]
        flat = np.concatenate(
            [row * width + np.asarray(e.masked, dtype=np.int64) for row, e in enumerate(inputs)]
        )
        feeds = {name: value for name, value in feeds.items() if name in self._inputs}
        logits = run_session(self.session, {**feeds, MASKED_POSITIONS: flat}, self.device)
        out = []
        start = 0
        for e in inputs:
            out.append(self.top_tokens(logits[start : start + len(e.masked)], e))
            start += len(e.masked)
        return out

    def top_tokens(self, logits: np.ndarray, e: MaskedInput) -> np.ndarray:
        """The best `e.top_k` tokens of each row of `logits` (positions x vocabulary) with their
        probabilities, highest first (ties: the lower id first)."""
        shift = logits.max(axis=1, keepdims=True)
        # log of the softmax's denominator, per row, in float64 (30k terms summed)
        log_total = np.log(np.exp(logits - shift).sum(axis=1, keepdims=True, dtype=np.float64)) + shift
        if e.candidates is not None:
            ids = np.broadcast_to(np.asarray(e.candidates, dtype=np.int64), (len(logits), len(e.candidates)))
        else:
            excluded = self._continuation if e.whole_words else self._unusable
            ranked = np.where(excluded, -np.inf, logits)
            k = min(e.top_k, int((~excluded).sum()))
            ids = np.argpartition(-ranked, k - 1, axis=1)[:, :k] if k else np.zeros((len(logits), 0), int)
        chosen = np.take_along_axis(logits, ids, axis=1).astype(np.float64)
        probs = np.exp(chosen - log_total)
        out = np.empty(ids.shape, dtype=TOP_TOKENS)
        for r in range(len(ids)):
            order = np.lexsort((ids[r], -probs[r]))[: e.top_k]
            out[r, : len(order)]["id"] = ids[r][order]
            out[r, : len(order)]["prob"] = probs[r][order]
        return out[:, : min(e.top_k, ids.shape[1])]

    def padded_length(self, length: int) -> int:
        """The length a batch whose longest row has `length` tokens is padded to."""
        return padded_length(length, self.pad_multiple, self.max_seq_len)

    def warm_up_calls(self, shapes: list[tuple[int, int]]) -> list[Callable[[], object]]:
        """One call per (rows, tokens) shape of its detector's warm-up, one position masked per row, so a
        first suggestion skips ONNX Runtime's setup of a new shape."""
        return [partial(self._warm, rows, tokens) for rows, tokens in shapes]

    def _warm(self, rows: int, tokens: int) -> None:
        self.infer([masked_input([self.pad_id + 1] * tokens, [0] * tokens, (1,), 5)] * rows)

    def describe(self) -> dict[str, Any]:
        """What GET /models says about the generator."""
        info = self.info
        return {
            "num_hidden_layers": info.num_hidden_layers,
            "hidden_size": info.hidden_size,
            "vocab_size": info.vocab_size,
            "fused_operators": {k: v for k, v in info.fused_operators.items() if v},
            "parity": msgspec.to_builtins(info.parity),
        }


def _masked(e: Encoded) -> MaskedInput:
    if not isinstance(e, MaskedInput) or not e.masked:
        raise TypeError("the generator takes MaskedInput rows with at least one position to predict")
    return e
