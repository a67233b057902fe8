"""`electra tokenizer`: train a WordPiece tokenizer, or show how one splits a text."""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import time
from pathlib import Path

from electra.cli.common import add_progress_flag, demo_corpus, positive_int, show_progress
from electra.errors import InputError
from electra.files import TOKENIZER_JSON, VOCAB_TXT
from electra.hub import EXAMPLE_ID, REVISION_HELP
from electra.training.data.tokenizer_train import train_tokenizer

# The defaults shown in --help and used when an option is left out: train_tokenizer's (one source).
DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(train_tokenizer).parameters.items()
    if p.default is not inspect.Parameter.empty
}

log = logging.getLogger("electra.cli")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenizer", help="train or inspect a WordPiece tokenizer")
    tsub = p.add_subparsers(dest="tokenizer_command", metavar="SUBCOMMAND", parser_class=type(p))
    tsub.required = True

    t = tsub.add_parser(
        "train",
        help="train a BERT-style WordPiece tokenizer on a corpus",
        description="Train a WordPiece tokenizer (BERT normalisation, [PAD]=0 [UNK] [CLS] [SEP] [MASK]) and "
        f"write {TOKENIZER_JSON}, {VOCAB_TXT} and the Hugging Face tokenizer config to --out.",
    )
    t.add_argument(
        "--corpus",
        nargs="+",
        metavar="PATH",
        help="text files, directories or glob patterns (.txt/.gz/.bz2/.xz, WikiExtractor <doc> files); "
        "default: the embedded demo corpus",
    )
    t.add_argument(
        "--vocab-size",
        type=positive_int,
        default=DEFAULTS["vocab_size"],
        help="vocabulary size (default: %(default)s)",
    )
    t.add_argument(
        "--min-frequency",
        type=positive_int,
        default=DEFAULTS["min_frequency"],
        help="minimum pair frequency (default: %(default)s)",
    )
    t.add_argument(
        "--cased", action="store_true", help="keep case and accents (default: lower-case, strip accents)"
    )
    t.add_argument("--out", type=Path, required=True, help="output directory")
    t.add_argument("--overwrite", action="store_true", help="replace --out if it exists (default: refuse to)")
    add_progress_flag(t)
    t.set_defaults(handler=train)

    s = tsub.add_parser("show", help="print the tokens of a text with their character offsets")
    s.add_argument(
        "--tokenizer",
        required=True,
        help=f"{TOKENIZER_JSON}, {VOCAB_TXT} or a model directory; or a Hugging Face Hub id "
        f"(e.g. {EXAMPLE_ID}): its tokenizer files only are fetched",
    )
    s.add_argument("--revision", help=REVISION_HELP)
    s.add_argument("text", nargs="?", help="text to tokenize (default: read stdin)")
    s.set_defaults(handler=show)


def train(args: argparse.Namespace) -> int:
    from electra.atomic import check_output_dir
    from electra.training.data.tokenizer_train import train_tokenizer_dir, vocabulary_line

    # Before the demo corpus is built, which takes a while on a first run.
    check_output_dir(args.out, args.overwrite, args.corpus or [])
    progress = show_progress(args)
    sources = args.corpus or [str(demo_corpus(progress=progress))]
    start = time.perf_counter()
    tok, paths, stats = train_tokenizer_dir(
        sources,
        args.out,
        overwrite=args.overwrite,
        vocab_size=args.vocab_size,
        cased=args.cased,
        min_frequency=args.min_frequency,
        show_progress=progress,
    )
    for path, n in stats.undecodable_bytes.items():
        log.warning("%d undecodable bytes in %s were replaced with U+FFFD", n, path)
    print(
        f"wrote {args.out}: {vocabulary_line(tok.get_vocab_size(), args.vocab_size)} from {len(paths)} "
        "file(s), "
        f"{stats.bytes_read / 1e6:.1f} MB, in {time.perf_counter() - start:.1f} s"
    )
    return 0


def show(args: argparse.Namespace) -> int:
    from electra.hub import resolve
    from electra.tokenizer import load_tokenizer

    tok = load_tokenizer(resolve(args.tokenizer, args.revision, what="tokenizer"))
    if args.text is not None:
        text = args.text
    else:
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"standard input is not UTF-8 text (byte {e.start}); pass UTF-8") from None
    enc = tok.encode(text)
    for token, token_id, (start, end) in zip(enc.tokens, enc.ids, enc.offsets, strict=True):
        print(f"{token_id:>7}  {start:>5}:{end:<5}  {token:<16}  {text[start:end]!r}")
    return 0
