"""Throughput of `electra data prepare` against the bare `tokenizers` `encode_batch` on the same text.

The bare figure is the ceiling a data pipeline could reach if reading, sentence splitting, packing and
writing cost nothing: the corpus lines already in memory, tokenized by one `encode_batch` call on all cores.
The prepare figure is the whole command, from compressed files on disk to a finished dataset directory.
Both run alternately in one process, several rounds, and the ratio of medians is reported (target >= 0.8).

    python -m bench.prepare_throughput                       # the shared Wikipedia corpus, 3 rounds
    python -m bench.prepare_throughput --corpus FILE... --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.benchlib import portable_path, result_header

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_CORPUS = SHARED / "corpus" / "enwiki-2015-wikiextractor"
DEFAULT_VOCAB = SHARED / "models" / "bert-uncased-vocab" / "vocab.txt"


def time_rounds(tok: Any, lines: list[str], paths: list[Path], args: argparse.Namespace) -> tuple[Any, ...]:
    """Tokens per second of each round's bare encode_batch, encode_batch_fast and whole preparation (in
    turn within a round); the last preparation's summary, and the bare encoding's token count."""
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    bare: list[float] = []
    bare_fast: list[float] = []
    prep: list[float] = []
    summary = None
    n_bare = 0
    with tempfile.TemporaryDirectory(prefix="electra-bench-") as tmp:
        for r in range(args.rounds):
            t = time.perf_counter()
            enc = tok.encode_batch(lines, add_special_tokens=False)
            dt = time.perf_counter() - t
            n_bare = sum(len(e) for e in enc)
            del enc
            bare.append(n_bare / dt)

            t = time.perf_counter()
            enc = tok.encode_batch_fast(lines, add_special_tokens=False)
            dt = time.perf_counter() - t
            del enc
            bare_fast.append(n_bare / dt)

            cfg = PrepareConfig(
                corpus=[str(p) for p in paths],
                tokenizer=args.tokenizer,
                out=Path(tmp) / f"round{r}",
                max_seq_len=args.max_seq_len,
                workers=args.workers,
                progress=False,
            )
            summary = prepare_dataset(cfg)
            prep.append(summary.tokens_per_second)
            print(
                f"round {r + 1}/{args.rounds}: bare encode_batch {bare[-1]:,.0f} tok/s, "
                f"encode_batch_fast {bare_fast[-1]:,.0f} tok/s, prepare {prep[-1]:,.0f} tok/s "
                f"({summary.seconds:.1f} s), ratio {prep[-1] / bare[-1]:.2f}"
            )
    return bare, bare_fast, prep, summary, n_bare


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=[str(DEFAULT_CORPUS)])
    ap.add_argument("--tokenizer", default=str(DEFAULT_VOCAB))
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prepare_throughput.json")
    args = ap.parse_args()

    from electra.tokenizer import load_tokenizer
    from electra.training.data.corpus import CorpusStats, iter_corpus_lines, resolve_sources

    for p in (*args.corpus, args.tokenizer):
        if not Path(p).exists() and "*" not in p:
            print(f"skipped: {p} is absent (the shared data is not on this machine)", file=sys.stderr)
            return 0
    paths = resolve_sources(args.corpus)
    tok = load_tokenizer(args.tokenizer)
    stats = CorpusStats()
    t0 = time.perf_counter()
    lines = list(iter_corpus_lines(paths, stats))
    read_s = time.perf_counter() - t0
    print(
        f"corpus: {len(paths)} files, {stats.bytes_read / 1e6:.1f} MB on disk, "
        f"{stats.chars / 1e6:.1f} M chars, "
        f"{len(lines):,} lines (read in {read_s:.1f} s)"
    )

    bare, bare_fast, prep, summary, n_bare = time_rounds(tok, lines, paths, args)

    ratio = statistics.median(prep) / statistics.median(bare)
    result = {
        **result_header("prepare_throughput"),
        "corpus": {
            "paths": [portable_path(p) for p in args.corpus],
            "files": len(paths),
            "bytes_on_disk": stats.bytes_read,
            "chars": stats.chars,
            "lines": len(lines),
        },
        "tokenizer": portable_path(args.tokenizer),
        "max_seq_len": args.max_seq_len,
        "workers": args.workers,
        "rounds": args.rounds,
        "tokens_bare": n_bare,
        "tokens_prepare": summary.tokens if summary else 0,
        "examples": {"train": summary.train_examples, "val": summary.val_examples} if summary else {},
        "bare_encode_batch_tok_s": bare,
        "bare_encode_batch_fast_tok_s": bare_fast,
        "prepare_tok_s": prep,
        "median_bare_encode_batch_tok_s": statistics.median(bare),
        "median_bare_encode_batch_fast_tok_s": statistics.median(bare_fast),
        "median_prepare_tok_s": statistics.median(prep),
        "ratio_prepare_to_bare_encode_batch": ratio,
        "target_ratio": 0.8,
        "meets_target": ratio >= 0.8,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"median: bare {result['median_bare_encode_batch_tok_s']:,.0f} tok/s, prepare "
        f"{result['median_prepare_tok_s']:,.0f} tok/s, ratio {ratio:.2f} (target >= 0.8) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
