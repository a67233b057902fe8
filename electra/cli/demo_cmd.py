"""`electra demo`: arguments for the main job; the job itself is electra.demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from electra.cli.common import add_progress_flag, default_workers, positive_int, show_progress
from electra.demo import DEMO_MODEL_NAME, DemoConfig, build_demo, serve_demo

_DEFAULTS = DemoConfig()
# (DemoConfig field, argument type, help): the defaults come from DemoConfig.
_OPTIONS = (
    ("workdir", Path, "where to put everything"),
    ("vocab_size", positive_int, "tokenizer vocabulary"),
    ("max_seq_len", int, "tokens per example"),
    ("corpus_mb", positive_int, "size of the demo corpus in MB"),
    ("steps", positive_int, "pre-training steps"),
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole pipeline on the embedded demo corpus, then serve the model (no download needed)",
        description="Build the demo corpus (docstrings of the installed Python modules), train a tokenizer "
        "on it, prepare pre-training data, pre-train a tiny ELECTRA for a few minutes, export it to a fused "
        "ONNX bundle and serve it (POST /detect, the page at /), all in --workdir. Finished stages are "
        "reused; --no-serve stops after the bundle.",
    )
    for name, kind, what in _OPTIONS:
        default = getattr(_DEFAULTS, name)
        p.add_argument(
            f"--{name.replace('_', '-')}", type=kind, default=default, help=f"{what} (default {default})"
        )
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
    bundle = build_demo(cfg)
    if args.no_serve:
        print(f"bundle ready: {bundle}\n  serve it:  electra serve --model {DEMO_MODEL_NAME}={bundle}")
        return 0
    return serve_demo(bundle, args.host, args.port)
