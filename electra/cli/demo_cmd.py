"""`electra demo`: arguments for the main job; the job itself is electra.demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from electra.cli.common import add_progress_flag, default_workers, positive_int, show_progress
from electra.demo import DemoConfig, build_demo, check_can_serve_demo, serve_command, serve_demo
from electra.training.data.demo_corpus import REFERENCE_CORPUS

_DEFAULTS = DemoConfig()
_PINNED = ", ".join(f"{name} {version}" for name, version in REFERENCE_CORPUS.sources.items())
# (DemoConfig field, argument type, help): the defaults come from DemoConfig (a None one is described in the
# help).
_OPTIONS = (
    ("workdir", Path, "where to put everything"),
    ("vocab_size", positive_int, "tokenizer vocabulary"),
    ("max_seq_len", int, "tokens per example"),
    (
        "corpus_mb",
        positive_int,
        f"cut the demo corpus at this many MB (default: no cut, all {REFERENCE_CORPUS.bytes / 1e6:.1f} MB "
        f"of docstrings in the pinned {_PINNED})",
    ),
    ("steps", positive_int, "pre-training steps"),
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole pipeline on the embedded demo corpus, then serve the model (no download needed)",
        description="Build the demo corpus (the docstrings of the pinned PyTorch's Python sources), "
        "train a tokenizer on it, prepare pre-training data, pre-train a tiny ELECTRA for a few minutes, "
        "export it to a fused ONNX bundle, check it on a docstring-like sentence with one word swapped, and "
        "serve it (POST /detect, the page at /, both showing that sentence), all in --workdir. Finished "
        "stages are reused; --no-serve stops before serving. The demo model knows Python docstrings, not "
        "English.",
    )
    for name, kind, what in _OPTIONS:
        default = getattr(_DEFAULTS, name)
        shown = what if default is None else f"{what} (default {default})"
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default, help=shown)
    p.add_argument("--fresh", action="store_true", help="rebuild every stage even if its output exists")
    p.add_argument("--no-serve", action="store_true", help="stop after exporting the bundle")
    p.add_argument("--host", default="127.0.0.1", help="where to serve (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    add_progress_flag(p)
    p.set_defaults(handler=demo)


def demo(args: argparse.Namespace) -> int:
    cfg = DemoConfig(
        workdir=args.workdir,
        vocab_size=args.vocab_size,
        max_seq_len=args.max_seq_len,
        corpus_mb=args.corpus_mb,
        steps=args.steps,
        fresh=args.fresh,
        workers=default_workers(),
        progress=show_progress(args),
    )
    if not args.no_serve:
        check_can_serve_demo(args.host, args.port)
    built = build_demo(cfg)
    if args.no_serve:
        print(f"bundle ready: {built.bundle}\n  serve it:  {serve_command(built.bundle, built.example.text)}")
        return 0
    return serve_demo(built.bundle, args.host, args.port, built.example.text)
