"""Train a new BERT-style WordPiece vocabulary from raw text lines."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import tokenizers
from tokenizers import pre_tokenizers
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from electra.errors import InputError
from electra.tokenizer import (
    MAX_INPUT_CHARS_PER_WORD,
    SPECIAL_TOKENS,
    bert_normalizer,
    configure_bert_pipeline,
)

# Below this the vocabulary cannot even hold a useful alphabet next to the special tokens.
MIN_LEARNED_TOKENS = 32
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + MIN_LEARNED_TOKENS

# Lines handed to the Rust trainer per call into Python: large enough to amortise the crossing, small
# enough that a 100 MB corpus is never held in memory at once.
_BATCH_LINES = 1000


def train_tokenizer(
    lines: Iterable[str],
    vocab_size: int = 30522,
    cased: bool = False,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    show_progress: bool = False,
) -> tokenizers.Tokenizer:
    """Train a WordPiece tokenizer with BERT's pipeline; [PAD], [UNK], [CLS], [SEP], [MASK] get ids 0..4.

    `lines` is consumed once and lazily, so it can be a generator over a large corpus.
    """
    _check_options(vocab_size, min_frequency, limit_alphabet)
    batches = _batches(_non_blank(lines))

    tokenizer = tokenizers.Tokenizer(
        WordPiece(
            unk_token="[UNK]",
            max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
            continuing_subword_prefix="##",
        )
    )
    # The normaliser and pre-tokenizer must be in place before training: the vocabulary is learned from
    # their output. strip_accents=None strips exactly when lowercasing, which is BERT's uncased behaviour.
    tokenizer.normalizer = bert_normalizer(lowercase=not cased, strip_accents=None)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        limit_alphabet=limit_alphabet,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=show_progress,
    )
    tokenizer.train_from_iterator(batches, trainer=trainer)
    configure_bert_pipeline(tokenizer, lowercase=not cased)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _check_options(vocab_size: int, min_frequency: int, limit_alphabet: int) -> None:
    if vocab_size < MIN_VOCAB_SIZE:
        raise InputError(
            f"--vocab-size {vocab_size} is too small; use at least {MIN_VOCAB_SIZE} "
            f"({len(SPECIAL_TOKENS)} special tokens + {MIN_LEARNED_TOKENS})"
        )
    if min_frequency < 0:
        raise InputError(f"--min-frequency {min_frequency} is negative; use 0 or more")
    if limit_alphabet < 1:
        raise InputError(f"--limit-alphabet {limit_alphabet} must be at least 1")


def _non_blank(lines: Iterable[str]) -> Iterator[str]:
    """The non-blank lines, after checking there is at least one.

    Checked up front by peeking at the first line, so an empty corpus fails at once instead of after a
    pointless (and confusing, it would yield only the special tokens) training run.
    """
    remaining = (line for line in lines if line.strip())
    first = next(remaining, None)
    if first is None:
        raise InputError("the corpus is empty (no non-blank lines); give at least one file with text in it")
    return itertools.chain([first], remaining)


def _batches(lines: Iterator[str]) -> Iterator[list[str]]:
    while batch := list(itertools.islice(lines, _BATCH_LINES)):
        yield batch
