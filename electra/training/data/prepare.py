"""`electra data prepare`: corpus -> sentences -> token ids -> packed fixed-width examples on disk.

The parent process reads and decompresses the corpus and cuts it into document-aligned chunks; a pool of
worker processes parses, sentence-splits, tokenizes (`tokenizers`, one thread each: the pool is the
parallelism) and packs each chunk; the parent appends the results, in chunk order, to arrays in a temporary
directory that is renamed into place at the end. Random decisions use one generator per chunk seeded from
(seed, chunk index), so the output depends on the seed and the data only, not on the number of workers.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from electra import __version__
from electra.atomic import atomic_dir, check_output_dir
from electra.errors import InputError
from electra.files import DATA_MANIFEST_JSON, DATA_TOKENIZER_DIR
from electra.progress import progress
from electra.training.data import packing
from electra.training.data.corpus import (
    DEFAULT_CHUNK_CHARS,
    Chunk,
    CorpusStats,
    iter_chunks,
    parse_documents,
    resolve_sources,
)
from electra.training.data.dataset import FORMAT, FORMAT_VERSION, SPLITS, SplitWriter, ids_dtype
from electra.training.data.sentences import split_sentences

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from electra.tokenizer import SpecialIds

MIN_SEQ_LEN = 8
# What each chunk reports, summed over the corpus (the manifest's "counts").
_COUNTS = (
    "documents",
    "sentences",
    "tokens",
    "truncated_tokens",
    "random_target_examples",
    "single_segment_examples",
)


@dataclass
class PrepareConfig:
    corpus: list[str]
    tokenizer: str
    out: Path
    max_seq_len: int = 128
    val_fraction: float = 0.005
    seed: int = 0
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    overwrite: bool = False
    chunk_chars: int = DEFAULT_CHUNK_CHARS
    progress: bool = True

    def validate(self) -> None:
        if self.max_seq_len < MIN_SEQ_LEN:
            raise InputError(
                f"--max-seq-len {self.max_seq_len} is too small; use at least {MIN_SEQ_LEN} (128 is usual)"
            )
        if self.max_seq_len > 65535:
            raise InputError(f"--max-seq-len {self.max_seq_len} is too large; use at most 65535")
        if not 0.0 <= self.val_fraction < 1.0:
            raise InputError(f"--val-fraction {self.val_fraction} must be in [0, 1)")
        if self.workers < 1:
            raise InputError(f"--workers {self.workers} must be at least 1")


@dataclass
class ChunkResult:
    index: int
    train: tuple[np.ndarray, np.ndarray, np.ndarray]
    val: tuple[np.ndarray, np.ndarray, np.ndarray]
    documents: int
    sentences: int
    tokens: int
    truncated_tokens: int
    random_target_examples: int
    single_segment_examples: int


@dataclass
class PrepareSummary:
    out: str
    train_examples: int
    val_examples: int
    documents: int
    sentences: int
    tokens: int
    truncated_tokens: int
    seconds: float
    tokens_per_second: float
    corpus_bytes: int
    undecodable_bytes: dict[str, int]

    def report_lines(self) -> list[str]:
        """What a user should read after a prepare: the counts, and warnings prefixed with "warning:"."""
        lines = [
            f"warning: {n} undecodable bytes in {path} were replaced with U+FFFD"
            for path, n in self.undecodable_bytes.items()
        ]
        lines.append(
            f"wrote {self.out}: {self.train_examples:,} train + {self.val_examples:,} val examples from "
            f"{self.documents:,} documents ({self.tokens:,} tokens) in {self.seconds:.1f} s, "
            f"{self.tokens_per_second:,.0f} tokens/s"
        )
        if self.val_examples == 0:
            lines.append("warning: the validation split is empty; raise --val-fraction or add documents")
        return lines


# Worker state, set once per process by _init_worker (a spawned process cannot inherit it).
_STATE: dict[str, Any] = {}


def _init_worker(tokenizer_json: str, max_len: int, seed: int, val_fraction: float, pool: bool) -> None:
    if pool:
        # The pool supplies the parallelism; tokenizers' own thread pool would oversubscribe the cores. Ctrl-C
        # is the parent's to handle: workers printing their own KeyboardInterrupt tracebacks is noise.
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    from tokenizers import Tokenizer

    from electra.tokenizer import special_ids

    tok = Tokenizer.from_str(tokenizer_json)
    _STATE.update(
        tokenizer=tok,
        encode=getattr(tok, "encode_batch_fast", tok.encode_batch),  # _fast skips offsets we do not need
        specials=special_ids(tok),
        dtype=ids_dtype(tok.get_vocab_size()),
        max_len=max_len,
        seed=seed,
        val_fraction=val_fraction,
    )


def _tokenize(sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encodings = _STATE["encode"](sentences, add_special_tokens=False)
    lengths = np.fromiter((len(e) for e in encodings), dtype=np.int64, count=len(encodings))
    total = int(lengths.sum())
    flat = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total)
    return flat, lengths


def process_chunk(chunk: Chunk) -> ChunkResult:
    """Parse, sentence-split, tokenize and pack one chunk (runs in a worker)."""
    max_len, seed, specials = _STATE["max_len"], _STATE["seed"], _STATE["specials"]
    docs = parse_documents(chunk.text, chunk.fmt)
    sentences: list[str] = []
    doc_of_sentence: list[int] = []
    for d, lines in enumerate(docs):
        for line in lines:
            parts = split_sentences(line)
            sentences.extend(parts)
            doc_of_sentence.extend([d] * len(parts))
    tokens, lengths = _tokenize(sentences)
    starts = np.cumsum(lengths) - lengths
    starts, lengths, doc_ids = packing.cut_long_sentences(
        starts, lengths, np.asarray(doc_of_sentence, dtype=np.int64), cap=max_len - 2
    )

    # Whole documents go to validation, so no text is shared between the splits.
    split_rng = random.Random(f"electra-val-{seed}-{chunk.index}")
    is_val = [split_rng.random() < _STATE["val_fraction"] for _ in docs]
    builders = {
        False: packing.ExampleBuilder(max_len, random.Random(f"electra-pack-{seed}-{chunk.index}")),
        True: packing.ExampleBuilder(max_len, random.Random(f"electra-pack-val-{seed}-{chunk.index}")),
    }
    bounds = np.searchsorted(doc_ids, np.arange(len(docs) + 1))
    starts_l, lengths_l = starts.tolist(), lengths.tolist()
    for d in range(len(docs)):
        lo, hi = bounds[d], bounds[d + 1]
        if hi > lo:
            builders[is_val[d]].add_document(starts_l[lo:hi], lengths_l[lo:hi])

    out = {}
    truncated = random_targets = single = 0
    for key, builder in builders.items():
        packed = builder.result()
        truncated += packed.truncated_tokens
        random_targets += packed.random_target_examples
        single += int((packed.b_len == 0).sum())
        out[key] = packing.build_arrays(
            packed, tokens, max_len, specials.cls, specials.sep, specials.pad, _STATE["dtype"]
        )
    return ChunkResult(
        index=chunk.index,
        train=out[False],
        val=out[True],
        documents=len(docs),
        sentences=len(sentences),
        tokens=len(tokens),
        truncated_tokens=truncated,
        random_target_examples=random_targets,
        single_segment_examples=single,
    )


def _run_chunks(chunks: Iterator[Chunk], init_args: tuple, workers: int) -> Iterator[ChunkResult]:
    """Process chunks in order; with several workers, keep a bounded number in flight (bounded memory)."""
    if workers == 1:
        _init_worker(*init_args, pool=False)
        for chunk in chunks:
            yield process_chunk(chunk)
        return
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(*init_args, True),
    ) as pool:
        pending: deque[Future[ChunkResult]] = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(process_chunk, chunk))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def prepare_dataset(cfg: PrepareConfig) -> PrepareSummary:
    """Tokenize and pack the corpus into the dataset directory `cfg.out`, which appears only when complete."""
    from electra.tokenizer import load_tokenizer, save_tokenizer, special_ids

    cfg.validate()
    paths = resolve_sources(cfg.corpus)
    tok = load_tokenizer(cfg.tokenizer)
    specials = special_ids(tok)
    # Before the long work, not after it.
    check_output_dir(Path(cfg.out), cfg.overwrite, [*paths, Path(cfg.tokenizer)])
    stats = CorpusStats()
    disk_bytes = sum(p.stat().st_size for p in paths)
    start = time.perf_counter()
    with atomic_dir(Path(cfg.out), overwrite=cfg.overwrite) as tmp:
        (tmp / DATA_TOKENIZER_DIR).mkdir()
        save_tokenizer(tok, tmp / DATA_TOKENIZER_DIR)
        counts, split_info = _write_splits(tmp, cfg, tok, paths, stats, disk_bytes)
        if counts["tokens"] == 0:
            raise InputError(
                f"the corpus is empty: {', '.join(map(str, paths[:3]))}{' ...' if len(paths) > 3 else ''} "
                "holds no text; pass files with one sentence or paragraph per line"
            )
        seconds = time.perf_counter() - start
        manifest = _manifest(cfg, tok, specials, stats, disk_bytes, counts, split_info)
        (tmp / DATA_MANIFEST_JSON).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return PrepareSummary(
        out=str(cfg.out),
        train_examples=split_info["train"]["examples"],
        val_examples=split_info["val"]["examples"],
        documents=counts["documents"],
        sentences=counts["sentences"],
        tokens=counts["tokens"],
        truncated_tokens=counts["truncated_tokens"],
        seconds=seconds,
        tokens_per_second=counts["tokens"] / max(seconds, 1e-9),
        corpus_bytes=disk_bytes,
        undecodable_bytes=stats.undecodable_bytes,
    )


def _write_splits(
    tmp: Path, cfg: PrepareConfig, tok: Tokenizer, paths: list[Path], stats: CorpusStats, disk_bytes: int
) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """Stream the corpus through the workers into train/ and val/ under `tmp`: (counts, split info)."""
    dtype = ids_dtype(tok.get_vocab_size())
    writers = {name: SplitWriter(tmp / name, cfg.max_seq_len, dtype) for name in SPLITS}
    counts = dict.fromkeys(_COUNTS, 0)
    start = time.perf_counter()
    # Closed with a last line when done; on an error, that is what gets said instead.
    with progress(disk_bytes, "prepare", "B", cfg.progress, unit_scale=True) as bar:
        chunks = iter_chunks(paths, stats, cfg.chunk_chars, on_bytes=bar.update)
        init_args = (tok.to_str(), cfg.max_seq_len, cfg.seed, cfg.val_fraction)
        for result in _run_chunks(chunks, init_args, cfg.workers):
            writers["train"].append(*result.train)
            writers["val"].append(*result.val)
            for key in counts:
                counts[key] += getattr(result, key)
            elapsed = max(time.perf_counter() - start, 1e-9)
            bar.set_postfix(tokens=f"{counts['tokens']:,}", tok_s=f"{counts['tokens'] / elapsed:,.0f}")
    return counts, {name: w.close() for name, w in writers.items()}


def _manifest(
    cfg: PrepareConfig,
    tok: Tokenizer,
    specials: SpecialIds,
    stats: CorpusStats,
    disk_bytes: int,
    counts: dict[str, int],
    split_info: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The dataset's manifest.json: what it was made from and how, its counts, and every array's checksum."""
    from electra.tokenizer import tokenizer_fingerprint

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "electra_version": __version__,
        "max_seq_len": cfg.max_seq_len,
        "seed": cfg.seed,
        "val_fraction": cfg.val_fraction,
        "packing": {
            "single_segment_prob": packing.SINGLE_SEGMENT_PROB,
            "short_seq_prob": packing.SHORT_SEQ_PROB,
            "chunk_chars": cfg.chunk_chars,
        },
        "tokenizer": {
            "fingerprint": tokenizer_fingerprint(tok),
            "vocab_size": tok.get_vocab_size(),
            "source": str(cfg.tokenizer),
            "special_ids": asdict(specials),
            "dir": DATA_TOKENIZER_DIR,
        },
        "corpus": {
            "files": stats.files,
            "bytes_on_disk": disk_bytes,
            "chars": stats.chars,
            "undecodable_bytes": stats.undecodable_bytes,
        },
        "counts": counts,
        "splits": split_info,
    }
