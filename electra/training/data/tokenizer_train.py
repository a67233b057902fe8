"""Train a new BERT-style WordPiece vocabulary from raw text lines."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sized
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import pre_tokenizers
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from electra.errors import InputError
from electra.progress import progress
from electra.tokenizer import (
    MAX_INPUT_CHARS_PER_WORD,
    SPECIAL_TOKENS,
    bert_normalizer,
    configure_bert_pipeline,
)
from electra.training.data.corpus import CorpusStats, iter_corpus_lines

# Below this the vocabulary cannot even hold a useful alphabet next to the special tokens.
MIN_LEARNED_TOKENS = 32
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + MIN_LEARNED_TOKENS

# Lines handed to the Rust trainer per call into Python: large enough to amortise the crossing, small
# enough that a 100 MB corpus is never held in memory at once.
_BATCH_LINES = 1000


def vocabulary_line(size: int, asked: int) -> str:
    """The trained vocabulary's size as a person reads it: --vocab-size is a cap, which a small corpus
    does not reach (its word pieces run out first), not a target the trainer fell short of."""
    line = f"vocabulary of {size:,} tokens"
    if size < asked:
        line += f" (all the corpus yields; --vocab-size {asked:,} is only a cap)"
    return line


def train_tokenizer(
    lines: Iterable[str],
    vocab_size: int = 30522,
    cased: bool = False,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    show_progress: bool = False,
) -> tokenizers.Tokenizer:
    """Train a WordPiece tokenizer with BERT's pipeline; [PAD], [UNK], [CLS], [SEP], [MASK] get ids 0..4.

    `lines` is consumed once and lazily, so it can be a generator over a large corpus. The progress counts
    lines, out of len(lines) when it has one (a generator has no total: train_tokenizer_on_files, reading
    files, shows bytes out of the corpus size).
    """
    _check_options(vocab_size, min_frequency, limit_alphabet)
    counted = _Counted(lines)
    total = len(lines) if isinstance(lines, Sized) else None
    with progress(total, "tokenizer", "line", show_progress) as bar:
        return _train(counted, bar, lambda: counted.n, vocab_size, cased, min_frequency, limit_alphabet)


def train_tokenizer_on_files(
    paths: list[Path],
    stats: CorpusStats | None = None,
    vocab_size: int = 30522,
    cased: bool = False,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    show_progress: bool = False,
) -> tokenizers.Tokenizer:
    """train_tokenizer on every line of the corpus files `paths` (corpus.iter_corpus_lines), filling `stats`;
    the progress shows the bytes read out of the files' total size."""
    _check_options(vocab_size, min_frequency, limit_alphabet)
    stats = stats if stats is not None else CorpusStats()
    lines = iter_corpus_lines(list(paths), stats)
    total = sum(Path(p).stat().st_size for p in paths)
    with progress(total, "tokenizer", "B", show_progress, unit_scale=True) as bar:
        return _train(lines, bar, lambda: stats.bytes_read, vocab_size, cased, min_frequency, limit_alphabet)


def train_tokenizer_dir(
    sources: list[str],
    out: Path,
    overwrite: bool = False,
    vocab_size: int = 30522,
    cased: bool = False,
    min_frequency: int = 2,
    show_progress: bool = False,
) -> tuple[tokenizers.Tokenizer, list[Path], CorpusStats]:
    """`electra tokenizer train`: the output directory checked first, a tokenizer trained on the corpus
    `sources` (files, directories, globs) and written atomically to `out`; returns it with the files read and
    what was read of them (undecodable bytes counted per file)."""
    from electra.atomic import atomic_dir, check_output_dir
    from electra.tokenizer import save_tokenizer
    from electra.training.data.corpus import resolve_sources

    paths = resolve_sources(sources)
    check_output_dir(out, overwrite, paths)
    stats = CorpusStats()
    tok = train_tokenizer_on_files(
        paths,
        stats,
        vocab_size=vocab_size,
        cased=cased,
        min_frequency=min_frequency,
        show_progress=show_progress,
    )
    with atomic_dir(out, overwrite=overwrite) as tmp:
        save_tokenizer(tok, tmp)
    return tok, paths, stats


def _train(
    lines: Iterable[str],
    bar: Any,
    position: Callable[[], int],
    vocab_size: int,
    cased: bool,
    min_frequency: int,
    limit_alphabet: int,
) -> tokenizers.Tokenizer:
    """The training itself, moving `bar` to `position()` after each batch of lines."""
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
        # The library's own bar has a total of 0 for an iterator (and draws nothing off a terminal); ours
        # (electra.progress) follows the reading instead, with the real total where there is one.
        show_progress=False,
    )
    tokenizer.train_from_iterator(_following(batches, bar, position), trainer=trainer)
    configure_bert_pipeline(tokenizer, lowercase=not cased)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


class _Counted:
    """An iterable that counts the items taken from it."""

    def __init__(self, items: Iterable[str]) -> None:
        self.items = items
        self.n = 0

    def __iter__(self) -> Iterator[str]:
        for item in self.items:
            self.n += 1
            yield item


def _following(batches: Iterator[list[str]], bar: Any, position: Callable[[], int]) -> Iterator[list[str]]:
    """The batches, moving `bar` to `position()` after each; the vocabulary is computed after the last."""
    for batch in batches:
        yield batch
        bar.update(position() - bar.n)
    bar.update(position() - bar.n)
    bar.set_postfix_str("computing the vocabulary")


# The tokenizers library counts in 32-bit integers; a WordPiece vocabulary past a few hundred thousand
# entries is no longer a subword vocabulary.
MAX_VOCAB_SIZE = 1_000_000
MAX_COUNT = 2**32 - 1


def _check_options(vocab_size: int, min_frequency: int, limit_alphabet: int) -> None:
    if vocab_size < MIN_VOCAB_SIZE:
        raise InputError(
            f"--vocab-size {vocab_size} is too small; use at least {MIN_VOCAB_SIZE} "
            f"({len(SPECIAL_TOKENS)} special tokens + {MIN_LEARNED_TOKENS})"
        )
    if vocab_size > MAX_VOCAB_SIZE:
        raise InputError(f"--vocab-size {vocab_size:,} is too large; use at most {MAX_VOCAB_SIZE:,}")
    if not 0 <= min_frequency <= MAX_COUNT:
        raise InputError(f"--min-frequency {min_frequency} is out of range; use 0..{MAX_COUNT:,}")
    if not 1 <= limit_alphabet <= MAX_COUNT:
        raise InputError(f"--limit-alphabet {limit_alphabet} must be in 1..{MAX_COUNT:,}")


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
