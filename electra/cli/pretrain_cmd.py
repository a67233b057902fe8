"""`electra pretrain` and `electra plot`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from electra.cli.common import add_progress_flag, positive_int, show_progress
from electra.sizes import SIZES
from electra.training.device import DEVICES, PRECISIONS
from electra.training.pretrain.config import OBJECTIVES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="pre-train a discriminator with replaced-token detection (or the masked-LM baseline)",
        description="Joint generator + discriminator pre-training on data from `electra data prepare`. Paper "
        "defaults per --size; bf16 autocast + TF32 + fused AdamW on CUDA, fp32 on CPU. Several GPUs or "
        "nodes: "
        "launch with torchrun (see the README). SIGTERM or Ctrl-C writes a checkpoint and exits 0.",
    )
    p.add_argument("--data", type=Path, required=True, help="a directory written by `electra data prepare`")
    p.add_argument(
        "--out", type=Path, required=True, help="run directory (checkpoints, metrics, final models)"
    )
    p.add_argument("--size", default="small", choices=list(SIZES), help="model size")
    p.add_argument(
        "--objective",
        default="electra",
        choices=OBJECTIVES,
        help="electra (replaced-token detection) or mlm (the BERT-style baseline, same encoder)",
    )
    p.add_argument("--steps", type=positive_int, help="optimizer steps (default: the paper's for the size)")
    p.add_argument("--batch-size", type=positive_int, help="global batch in sequences (default: paper's)")
    p.add_argument("--grad-accum", type=positive_int, default=1, help="micro-steps per optimizer step")
    p.add_argument("--lr", type=float, help="peak learning rate (default 5e-4 small, 2e-4 base/large)")
    p.add_argument("--warmup-steps", type=int, help="linear warmup (default 10k, or 10%% of a short run)")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument(
        "--generator-size",
        type=float,
        help="generator hidden size as a fraction of the discriminator's (default 1/4, 1/3 base)",
    )
    p.add_argument("--mask-prob", type=float, help="fraction of tokens masked (default 0.15, 0.25 large)")
    p.add_argument("--disc-weight", type=float, default=50.0, help="weight of the discriminator loss (50)")
    p.add_argument("--dropout", type=float, help="dropout of the encoders (default 0.1)")
    p.add_argument(
        "--stop-at",
        type=positive_int,
        help="checkpoint and exit after this step (for time-limited jobs); continue with --resume",
    )
    p.add_argument("--precision", choices=PRECISIONS, help="default bf16 on CUDA, fp32 on CPU")
    p.add_argument("--compile", action="store_true", help="torch.compile the training step")
    p.add_argument("--device", choices=DEVICES, help="default: cuda when available")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    p.add_argument("--overwrite", action="store_true", help="discard a previous run in --out")
    p.add_argument("--init", type=Path, help="start from a Hugging Face ELECTRA directory")
    p.add_argument("--log-every", type=positive_int, default=10, help="steps between metric records")
    p.add_argument("--eval-every", type=positive_int, default=500, help="steps between validation passes")
    p.add_argument("--checkpoint-every", type=positive_int, default=1000, help="steps between checkpoints")
    p.add_argument("--keep-checkpoints", type=positive_int, default=3, help="checkpoints kept (newest)")
    add_progress_flag(p)
    p.set_defaults(handler=run_pretrain)

    q = sub.add_parser("plot", help="draw the training curves of a run to PNG")
    q.add_argument("run", type=Path, help="a run directory of `electra pretrain`")
    q.add_argument("--out", type=Path, help="PNG path (default RUN/curves.png)")
    q.set_defaults(handler=run_plot)


def run_pretrain(args: argparse.Namespace) -> int:
    from electra.training.pretrain.config import PretrainConfig
    from electra.training.pretrain.trainer import pretrain

    # Every option of `electra pretrain` is a PretrainConfig field of the same name.
    options = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(PretrainConfig) if hasattr(args, f.name)
    }
    result = pretrain(PretrainConfig(**options, progress=show_progress(args)))
    last = result["last"]
    if result["stopped"]:
        print(f"stopped at step {result['step']}; continue with --resume", file=sys.stderr)
    elif last:
        summary = ", ".join(
            f"{k} {last[k]:.4g}"
            for k in ("mlm_loss", "disc_loss", "disc_accuracy", "disc_recall")
            if isinstance(last.get(k), float)
        )
        print(f"finished {result['step']} steps in {result['out']}: {summary}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from electra.training.pretrain.plot import plot_run

    path = plot_run(args.run, args.out)
    print(f"wrote {path}")
    return 0
