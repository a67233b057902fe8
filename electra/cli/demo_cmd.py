"""`electra demo`: the main job, end to end on the embedded demo corpus, with no download and no input.

Every stage writes into --workdir and is skipped when its output is already there and valid, so a second
run picks up where the first stopped. Stages: demo corpus -> tokenizer -> packed pre-training data.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from electra.cli.common import add_progress_flag, default_workers, demo_corpus, positive_int, show_progress
from electra.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline on the embedded demo corpus (no data or download needed)",
        description="Build the demo corpus (docstrings of the installed Python modules), train a tokenizer "
        "on it and prepare pre-training data, in --workdir. Finished stages are reused.",
    )
    p.add_argument("--workdir", type=Path, default=Path("electra-demo"), help="where to put everything")
    p.add_argument(
        "--vocab-size", type=positive_int, default=16384, help="tokenizer vocabulary (default 16384)"
    )
    p.add_argument("--max-seq-len", type=int, default=128, help="tokens per example (default 128)")
    p.add_argument(
        "--corpus-mb", type=positive_int, default=20, help="size of the demo corpus in MB (default 20)"
    )
    p.add_argument("--fresh", action="store_true", help="rebuild every stage even if its output exists")
    add_progress_flag(p)
    p.set_defaults(handler=demo)


def _stage(n: int, total: int, title: str) -> None:
    print(f"[{n}/{total}] {title}", file=sys.stderr, flush=True)


def demo(args: argparse.Namespace) -> int:
    from electra.atomic import atomic_dir
    from electra.cli.data_cmd import report
    from electra.tokenizer import load_tokenizer, save_tokenizer
    from electra.training.corpus import iter_corpus_lines
    from electra.training.dataset import PretrainingData
    from electra.training.prepare import PrepareConfig, prepare_dataset
    from electra.training.tokenizer_train import train_tokenizer

    work: Path = args.workdir
    progress = show_progress(args)
    total = 3
    start = time.perf_counter()
    if work.exists() and not work.is_dir():
        raise InputError(f"--workdir {work} exists and is not a directory")

    _stage(1, total, "demo corpus")
    if args.fresh and (work / "corpus").exists():
        shutil.rmtree(work / "corpus")
    corpus = demo_corpus(cache=work / "corpus", progress=progress, max_bytes=args.corpus_mb * 1_000_000)

    _stage(2, total, "tokenizer")
    tok_dir = work / "tokenizer"
    if _valid(lambda: load_tokenizer(tok_dir)) and not args.fresh:
        print(f"reusing {tok_dir}", file=sys.stderr)
    else:
        tok = train_tokenizer(iter_corpus_lines([corpus]), vocab_size=args.vocab_size, show_progress=progress)
        with atomic_dir(tok_dir, overwrite=True) as tmp:
            save_tokenizer(tok, tmp)
        print(f"wrote {tok_dir}: vocabulary of {tok.get_vocab_size():,}", file=sys.stderr)

    _stage(3, total, "pre-training data")
    data_dir = work / "data"
    if _valid(lambda: PretrainingData.open(data_dir)) and not args.fresh:
        print(f"reusing {data_dir}", file=sys.stderr)
    else:
        summary = prepare_dataset(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tok_dir),
                out=data_dir,
                max_seq_len=args.max_seq_len,
                workers=default_workers(),
                overwrite=True,
                progress=progress,
            )
        )
        report(summary)
    data = PretrainingData.open(data_dir)
    print(
        f"demo ready in {time.perf_counter() - start:.0f} s: {len(data.train):,} training examples of "
        f"{data.max_seq_len} tokens in {data_dir}\n"
        f"  inspect it:  electra data info {data_dir}\n"
        f'  tokenize:    electra tokenizer show --tokenizer {tok_dir} "Replaced token detection."'
    )
    return 0


def _valid(open_fn) -> bool:
    try:
        open_fn()
    except Exception:
        return False
    return True
