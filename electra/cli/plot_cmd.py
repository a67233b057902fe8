"""`electra plot`: a pre-training run's curves as a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser("plot", help="draw the training curves of a run to PNG")
    q.add_argument("run", type=Path, help="a run directory of `electra pretrain`")
    q.add_argument("--out", type=Path, help="PNG path (default: RUN/curves.png)")
    q.set_defaults(handler=run_plot)


def run_plot(args: argparse.Namespace) -> int:
    from electra.training.pretrain.diagnostics.plot import plot_run

    path = plot_run(args.run, args.out)
    print(f"wrote {path}")
    return 0
