"""`electra data`: pack a corpus into pre-training examples, and inspect a prepared dataset."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path

from electra.cli.common import add_progress_flag, default_workers, demo_corpus, positive_int, show_progress
from electra.files import TOKENIZER_JSON, VOCAB_TXT
from electra.hub import EXAMPLE_ID, REVISION_HELP
from electra.training.data.prepare import PrepareConfig

# The defaults shown in --help and used when an option is left out: PrepareConfig's (one source).
DEFAULTS = {f.name: f.default for f in dataclasses.fields(PrepareConfig)}

log = logging.getLogger("electra.cli")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare pre-training data")
    dsub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", parser_class=type(p))
    dsub.required = True

    d = dsub.add_parser(
        "prepare",
        help="tokenize and pack a corpus into fixed-length pre-training examples",
        description="Pack consecutive sentences of each document into [CLS] A [SEP] B [SEP] examples as the "
        "official ELECTRA data builder does, and store them as memory-mapped arrays with a manifest. The "
        "output directory appears only when complete.",
    )
    d.add_argument(
        "--corpus",
        nargs="+",
        metavar="PATH",
        help="text files, directories or glob patterns (.txt/.gz/.bz2/.xz, WikiExtractor <doc> files); "
        "default: the embedded demo corpus",
    )
    d.add_argument(
        "--tokenizer",
        required=True,
        help=f"{TOKENIZER_JSON}, a BERT {VOCAB_TXT}, or a directory holding one (e.g. a Hugging Face model); "
        f"or a Hugging Face Hub id (e.g. {EXAMPLE_ID}): its tokenizer files only are fetched",
    )
    d.add_argument("--revision", help=REVISION_HELP)
    d.add_argument(
        "--max-seq-len",
        type=int,
        default=DEFAULTS["max_seq_len"],
        help="tokens per example incl. specials (default: %(default)s)",
    )
    d.add_argument("--out", type=Path, required=True, help="output directory")
    d.add_argument(
        "--val-fraction",
        type=float,
        default=DEFAULTS["val_fraction"],
        help="fraction of documents held out for validation (default: %(default)s)",
    )
    d.add_argument(
        "--seed",
        type=int,
        default=DEFAULTS["seed"],
        help="seed for packing decisions and the split (default: %(default)s)",
    )
    d.add_argument(
        "--workers",
        type=positive_int,
        default=default_workers(),
        help="worker processes (default: one per core, here %(default)s)",
    )
    d.add_argument("--overwrite", action="store_true", help="replace --out if it exists (default: refuse to)")
    add_progress_flag(d)
    d.set_defaults(handler=prepare)

    i = dsub.add_parser("info", help="summarise a prepared dataset and check it")
    i.add_argument("dir", type=Path, help="a directory written by `electra data prepare`")
    i.add_argument("--verify", action="store_true", help="also verify the checksums of every array")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")
    i.set_defaults(handler=info)


def prepare(args: argparse.Namespace) -> int:
    from electra.hub import resolve
    from electra.training.data.prepare import prepare_dataset

    progress = show_progress(args)
    # A Hub id becomes its snapshot in the Hugging Face cache (tokenizer files only).
    tokenizer = str(resolve(args.tokenizer, args.revision, what="tokenizer"))
    corpus = args.corpus or [str(demo_corpus(progress=progress))]
    cfg = PrepareConfig(
        corpus=corpus,
        tokenizer=tokenizer,
        out=args.out,
        max_seq_len=args.max_seq_len,
        val_fraction=args.val_fraction,
        seed=args.seed,
        workers=args.workers,
        overwrite=args.overwrite,
        progress=progress,
    )
    summary = prepare_dataset(cfg)
    report(summary)
    return 0


def report(summary) -> None:
    """The summary on stdout, warnings on stderr."""
    for line in summary.report_lines():
        if line.startswith("warning: "):
            log.warning(line.removeprefix("warning: "))
        else:
            print(line)


def info(args: argparse.Namespace) -> int:
    from electra.training.data.dataset import PretrainingData

    data = PretrainingData.open(args.dir)
    if args.verify:
        data.verify_checksums()
    m = data.manifest
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    tok = m["tokenizer"]
    print(f"{args.dir}: max_seq_len {m['max_seq_len']}, seed {m['seed']}, created {m['created']}")
    print(
        f"  tokenizer: vocab {tok['vocab_size']:,}, fingerprint {tok['fingerprint'][:16]}, "
        f"from {tok['source']}"
    )
    for name, split in data.splits.items():
        filled = float(split.lengths.mean()) / m["max_seq_len"] if len(split) else 0.0
        print(f"  {name}: {len(split):,} examples, {int(split.lengths.sum()):,} tokens, {filled:.1%} filled")
    c = m["counts"]
    print(
        f"  corpus: {len(m['corpus']['files'])} file(s), {c['documents']:,} documents, "
        f"{c['sentences']:,} sentences"
    )
    if args.verify:
        print("  checksums: ok")
    return 0
