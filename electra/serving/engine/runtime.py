"""One exported bundle in memory: its tokenizer, its ONNX Runtime session, and padded batched inference.

Imports neither torch nor transformers: a serving image carries ONNX Runtime, tokenizers and numpy only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from electra.bundle import INPUT_NAMES, OUTPUT_NAME, Bundle, read_bundle
from electra.errors import InputError
from electra.files import MODEL_ONNX
from electra.padding import PADDING_SIDE, pad_rows
from electra.serving.engine.embedding import EmbedInput, pool
from electra.serving.engine.encoded import Encoded, from_encoding
from electra.serving.engine.errors import TooLong
from electra.serving.engine.generator import GeneratorRunner
from electra.serving.engine.kinds import CLASSIFIER, kind_of
from electra.serving.engine.postprocess import DEFAULT_LABEL_THRESHOLD
from electra.serving.engine.session import open_session, run_outputs, run_session
from electra.serving.engine.shapes import padded_length, warm_up_shapes
from electra.serving.engine.truncation import Measured, Template, measure
from electra.tokenizer import load_tokenizer, special_ids

log = logging.getLogger(__name__)


class ModelRunner:
    """A loaded bundle. `run` is thread-safe (ORT sessions are) and blocks: call it off the event loop."""

    def __init__(
        self, name: str, path: Path, device: str = "cpu", threads: int = 0, pad_multiple: int = 1
    ) -> None:
        self.name = name
        self.path = Path(path)
        self.bundle: Bundle = read_bundle(self.path)
        # The fused attention reads the mask as per-row lengths: it needs the padding electra.padding does.
        if self.bundle.padding_side != PADDING_SIDE:
            raise InputError(
                f"{path}: bundle expects {self.bundle.padding_side} padding "
                "(export the model again with this version)"
            )
        self.kind: str = self.bundle.kind
        # Logits per token (padded positions trimmed off), or a vector per input: as its registered kind says.
        self.per_token = kind_of(self.kind).per_token
        self.max_seq_len: int = self.bundle.max_seq_len
        labels = self.bundle.labels or {}
        self.labels: list[str] = [labels[str(i)] for i in range(len(labels))]
        self.problem_type: str | None = self.bundle.problem_type
        self.regression = self.kind == CLASSIFIER and (
            self.problem_type == "regression" or len(self.labels) == 1
        )
        self.multi_label = self.problem_type == "multi_label_classification"
        # Each label's threshold for a multi-label model's chosen labels (0.5 where its bundle gives none).
        given = self.bundle.label_thresholds or {}
        self.thresholds: list[float] = [given.get(label, DEFAULT_LABEL_THRESHOLD) for label in self.labels]
        # A model with one token type cannot embed segment 1: pairs are fed as one joined text instead.
        self.pair_types = self.bundle.type_vocab_size > 1

        # Never truncating: texts are tokenized whole and cut here (electra.serving.engine.truncation), at a
        # cost linear in their length; the library's own truncation of a long pair is not. One tokenizer
        # without per-call state, so concurrent requests share it.
        self.tokenizer = load_tokenizer(self.path)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.untruncated = self.tokenizer  # the name the windows' callers read it by
        self.template = Template.of(self.tokenizer)
        self.pad_id = special_ids(self.tokenizer).pad
        self.mask_id = special_ids(self.tokenizer).mask

        self.device = device
        # Batches are padded to a multiple of this (electra.serving.engine.shapes): 1, their longest row.
        self.pad_multiple = pad_multiple
        self.session = open_session(self.path / MODEL_ONNX, device, threads)
        self._inputs = [i.name for i in self.session.get_inputs()]
        self.generator: GeneratorRunner | None = None
        if self.bundle.generator is not None:
            self.generator = GeneratorRunner(
                name,
                self.path,
                self.bundle.generator,
                self.tokenizer,
                self.pad_id,
                device,
                threads,
                pad_multiple,
                self.max_seq_len,
            )

    # ------------------------------------------------------------------------------------------------------
    # Tokenization
    # ------------------------------------------------------------------------------------------------------

    def measure(self, items: list[str] | list[tuple[str, str | None]], direction: str = "right") -> Measured:
        """Texts (or (text, pair) tuples) tokenized whole, each distinct text once: every input's length,
        and the inputs cut to the model's length (`.encoded()`), losing tokens from their end (`direction`
        "right") or their start ("left"). A model of one token type reads a pair as one text."""
        pairs: list[tuple[str, str | None]] = []
        for item in items:
            text, pair = item if isinstance(item, tuple) else (item, None)
            if pair is not None and not self.pair_types:
                text, pair = f"{text} {pair}", None
            pairs.append((text, pair))
        return measure(self.tokenizer, self.template, pairs, self.max_seq_len, direction)

    def encode(
        self, items: list[str] | list[tuple[str, str | None]], truncate: bool = True, direction: str = "right"
    ) -> list[Encoded]:
        """Tokenize texts (or (text, pair) tuples) with offsets, cut to the model's length; with truncate off,
        TooLong for the first input over it."""
        measured = self.measure(items, direction)
        if not truncate:
            for i in range(len(measured.inputs)):
                if measured.length(i) > self.max_seq_len:
                    raise self.too_long(f"input {i}", measured.length(i))
        return measured.encoded()

    def too_long(self, what: str, tokens: int, together: str = "") -> TooLong:
        """The refusal of an input over the model's length (truncate off): `what` has `tokens` tokens."""
        return TooLong(
            f"{what} has {tokens:,} tokens; model {self.name!r} takes at most {self.max_seq_len} tokens"
            f"{together}, [CLS] and [SEP] included: shorten it or send truncate=true"
        )

    def encode_whole(self, texts: list[str]) -> list[Encoded]:
        """Single texts tokenized whole, however long: [CLS] tokens [SEP] (see engine.windows)."""
        return [from_encoding(enc, truncated=False) for enc in self.tokenizer.encode_batch(texts)]

    # ------------------------------------------------------------------------------------------------------
    # Inference
    # ------------------------------------------------------------------------------------------------------

    def padded_length(self, length: int) -> int:
        """The length a batch whose longest row has `length` tokens is padded to."""
        return padded_length(length, self.pad_multiple, self.max_seq_len)

    def pad(self, batch: list[Encoded]) -> dict[str, np.ndarray]:
        """Right-padded model inputs for a batch: its longest sequence, rounded up to the multiple."""
        width = self.padded_length(max(e.length for e in batch))
        feeds = pad_rows([e.ids for e in batch], [e.type_ids for e in batch], self.pad_id, width)
        return {name: feeds[name] for name in self._inputs if name in INPUT_NAMES}

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Logits (float32): (batch, seq) for a discriminator, (batch, labels) for a classifier, (batch, seq,
        labels) for a tagger."""
        return run_session(self.session, feeds, self.device)

    def infer(self, batch: list[Encoded]) -> list[np.ndarray]:
        """One row per input: per-token logits trimmed to its length (a tagger's: a row of labels per token),
        or a classifier's vector; for an EmbedInput, its pooled sentence vector (electra.serving.engine.
        embedding), pooled here, in the batcher's thread, from the hidden states of its real tokens. The
        session is asked only for the outputs the batch reads."""
        feeds = self.pad(batch)
        embeds = [isinstance(e, EmbedInput) for e in batch]
        if not any(embeds):
            return self._logits_rows(batch, self.run(feeds))
        hidden_name = self.bundle.embedding.output if self.bundle.embedding else ""
        if all(embeds):
            logits, (hidden,) = None, run_outputs(self.session, feeds, self.device, (hidden_name,))
        else:
            logits, hidden = run_outputs(self.session, feeds, self.device, (OUTPUT_NAME, hidden_name))
        rows = [] if logits is None else self._logits_rows(batch, logits)
        out = []
        for row, e in enumerate(batch):
            if isinstance(e, EmbedInput):
                out.append(pool(hidden[row, : e.length], e.pooling))
            else:
                out.append(rows[row])
        return out

    def _logits_rows(self, batch: list[Encoded], logits: np.ndarray) -> list[np.ndarray]:
        if self.per_token:
            return [logits[row, : e.length] for row, e in enumerate(batch)]
        return [logits[row] for row in range(len(batch))]

    def warm_up_shapes(self, max_batch_size: int, max_batch_tokens: int) -> list[tuple[int, int]]:
        """(rows, tokens) of each warm-up call: its generator's too (electra.serving.engine.shapes)."""
        return warm_up_shapes(self.max_seq_len, self.pad_multiple, max_batch_size, max_batch_tokens)

    def warm_up_calls(self, max_batch_size: int, max_batch_tokens: int) -> list[Callable[[], object]]:
        """One call per shape a request can give the model (with buckets; else the shapes a server meets
        first), so that no request pays ONNX Runtime's setup of a new shape. Its generator is warmed up apart
        (Backend.warm_up), on the threads of its own batcher."""
        return [
            partial(self._warm, rows, tokens)
            for rows, tokens in self.warm_up_shapes(max_batch_size, max_batch_tokens)
        ]

    def warm_up(self, max_batch_size: int, max_batch_tokens: int) -> int:
        """Every warm-up call, here and now (a server makes them through its batcher); how many."""
        calls = self.warm_up_calls(max_batch_size, max_batch_tokens)
        for call in calls:
            call()
        return len(calls)

    def _warm(self, rows: int, tokens: int) -> None:
        self.infer([self._filler(tokens)] * rows)

    def _filler(self, tokens: int) -> Encoded:
        """An input of `tokens` tokens: [CLS], copies of the first ordinary token, [SEP]."""
        ids = special_ids(self.tokenizer)
        row = np.full(tokens, self.pad_id + 1, dtype=np.int64)
        row[0], row[-1] = ids.cls, ids.sep
        return Encoded(
            row, np.zeros(tokens, dtype=np.int64), [(0, 0)] * tokens, [0] * tokens, [None] * tokens, False
        )

    def describe(self) -> dict[str, Any]:
        """What GET /models says about this model."""
        return {
            "name": self.name,
            "kind": self.kind,
            "labels": self.labels or None,
            "problem_type": self.problem_type,
            "max_seq_len": self.max_seq_len,
            "precision": self.bundle.precision,
            "device": self.device,
            "providers": self.session.get_providers(),
            "num_hidden_layers": self.bundle.num_hidden_layers,
            "hidden_size": self.bundle.hidden_size,
            "fused_operators": {k: v for k, v in self.bundle.fused_operators.items() if v},
            "parity": msgspec.to_builtins(self.bundle.parity),
            "dev_accuracy": msgspec.to_builtins(self.bundle.dev_accuracy),
            "generator": None if self.generator is None else self.generator.describe(),
            "embedding": None
            if self.bundle.embedding is None
            else {"pooling": self.bundle.embedding.pooling, "dimensions": self.bundle.embedding.dimensions},
            "created": self.bundle.created,
        }
