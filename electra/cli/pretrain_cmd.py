"""`electra pretrain`."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from fractions import Fraction
from pathlib import Path

from electra.cli.common import add_progress_flag, per_size, positive_int, show_progress
from electra.config import ElectraConfig
from electra.errors import InputError
from electra.hub import LOCAL_OR_HUB, REVISION_HELP
from electra.sizes import SIZES
from electra.threads import use_free_cores
from electra.training.device import DEVICES, PRECISIONS
from electra.training.pretrain.config import (
    ADAMS,
    EMBEDDING_SHARINGS,
    GENERATOR_LR_SCOPES,
    OBJECTIVES,
    SCHEDULES,
    PretrainConfig,
)

# The defaults shown in --help and used when an option is left out: PretrainConfig's (one source); the
# options left None there follow the paper's recipe for the size (electra.sizes).
DEFAULTS = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}

log = logging.getLogger("electra.cli")


def _fraction(value: float) -> str:
    return str(Fraction(value).limit_denominator(16))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="pre-train a discriminator with replaced-token detection (or the masked-LM baseline)",
        description="Joint generator + discriminator pre-training on data from `electra data prepare`. Paper "
        "defaults per --size; bf16 autocast + TF32 + fused AdamW on CUDA, fp32 on CPU. Several GPUs or "
        "nodes: launch with torchrun (see docs/pretraining.md). SIGTERM or Ctrl-C writes a checkpoint and "
        "exits 0.",
    )
    _add_run_args(p)
    _add_model_args(p)
    _add_recipe_args(p)
    add_progress_flag(p)
    p.set_defaults(handler=run_pretrain)


def _add_run_args(p: argparse.ArgumentParser) -> None:
    """Data, output, device and the run's bookkeeping (logging, evaluation, checkpoints, resuming)."""
    p.add_argument("--data", type=Path, required=True, help="a directory written by `electra data prepare`")
    p.add_argument(
        "--out", type=Path, required=True, help="run directory (checkpoints, metrics, final models)"
    )
    p.add_argument(
        "--stop-at",
        type=positive_int,
        help="checkpoint and exit after this step (for time-limited jobs); continue with --resume",
    )
    p.add_argument("--precision", choices=PRECISIONS, help="default: bf16 on CUDA, fp32 on CPU")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the training step's forward and backward passes whole (fullgraph)",
    )
    p.add_argument(
        "--no-cuda-graphs",
        dest="cuda_graphs",
        action="store_false",
        default=DEFAULTS["cuda_graphs"],
        help="on CUDA, launch the training step kernel by kernel instead of replaying it as one CUDA graph",
    )
    p.add_argument("--device", choices=DEVICES, help="default: cuda when available, else cpu")
    p.add_argument(
        "--seed",
        type=int,
        default=DEFAULTS["seed"],
        help="seed of initialisation and masking (default: %(default)s)",
    )
    p.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    p.add_argument("--overwrite", action="store_true", help="discard a previous run in --out")
    p.add_argument(
        "--log-every",
        type=positive_int,
        default=DEFAULTS["log_every"],
        help="steps between metric records (default: %(default)s)",
    )
    p.add_argument(
        "--eval-every",
        type=positive_int,
        default=DEFAULTS["eval_every"],
        help="steps between validation passes (default: %(default)s)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=positive_int,
        default=DEFAULTS["checkpoint_every"],
        help="steps between checkpoints (default: %(default)s)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=positive_int,
        default=DEFAULTS["keep_checkpoints"],
        help="checkpoints kept, the newest (default: %(default)s)",
    )


def _add_model_args(p: argparse.ArgumentParser) -> None:
    """What is trained: the model size and objective, and where it starts from."""
    p.add_argument(
        "--size", default=DEFAULTS["size"], choices=list(SIZES), help="model size (default: %(default)s)"
    )
    p.add_argument(
        "--objective",
        default=DEFAULTS["objective"],
        choices=OBJECTIVES,
        help="electra (replaced-token detection) or mlm (the BERT-style baseline, same encoder) "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--embedding-sharing",
        default=DEFAULTS["embedding_sharing"],
        choices=EMBEDDING_SHARINGS,
        help="tied: one embedding block for generator and discriminator (ELECTRA); gdes: the discriminator's "
        "is stop_gradient(generator's) + its own zero-initialised residual (DeBERTaV3), folded in when "
        "saved; none: two blocks (default: %(default)s)",
    )
    p.add_argument(
        "--generator-size",
        type=float,
        help="generator hidden size as a fraction of the discriminator's (default per --size: "
        f"{per_size('generator_fraction', shown=_fraction)})",
    )
    p.add_argument(
        "--dropout",
        type=float,
        help="dropout of the encoders (default: the --init model's, else "
        f"{ElectraConfig.__dataclass_fields__['hidden_dropout_prob'].default})",
    )
    p.add_argument(
        "--init",
        help="start from a Hugging Face ELECTRA discriminator (and INIT/generator when there is one): "
        + LOCAL_OR_HUB,
    )
    p.add_argument("--revision", help=REVISION_HELP + " (for --init)")


def _add_recipe_args(p: argparse.ArgumentParser) -> None:
    """The optimisation recipe; unset options take the paper's per-size values (electra.sizes)."""
    p.add_argument(
        "--steps",
        type=positive_int,
        help=f"optimizer steps (default per --size: {per_size('pretrain_steps')})",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        help=f"global batch in sequences (default per --size: {per_size('pretrain_batch_size')})",
    )
    p.add_argument(
        "--grad-accum",
        type=positive_int,
        default=DEFAULTS["grad_accum"],
        help="micro-steps per optimizer step (default: %(default)s)",
    )
    p.add_argument(
        "--lr", type=float, help=f"peak learning rate (default per --size: {per_size('pretrain_lr')})"
    )
    p.add_argument(
        "--generator-lr-scale",
        type=float,
        default=DEFAULTS["generator_lr_scale"],
        help="the generator's own parameters (with --embedding-sharing gdes or none, its embeddings too) "
        "learn at this fraction of --lr; below 1 it keeps the generator from outrunning the discriminator "
        "on short runs (default: %(default)s)",
    )
    p.add_argument(
        "--generator-lr-scope",
        default=DEFAULTS["generator_lr_scope"],
        choices=GENERATOR_LR_SCOPES,
        help="what --generator-lr-scale slows: all the generator owns, or its layers and head only, its "
        "embeddings (gdes's shared E_G, as DeBERTaV3 trains it) keeping the full rate (default: %(default)s)",
    )
    p.add_argument(
        "--warmup-steps",
        type=int,
        help="linear warmup (default: 10k steps, or the first 10%% of a short run)",
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        default=DEFAULTS["weight_decay"],
        help="decoupled weight decay, not on biases and LayerNorm (default: %(default)s)",
    )
    p.add_argument(
        "--adam",
        choices=ADAMS,
        default=DEFAULTS["adam"],
        help="official: the official code's Adam without bias correction (AdamWeightDecayOptimizer); torch: "
        "torch.optim.AdamW, bias-corrected (default: %(default)s, so runs resume as they began)",
    )
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=DEFAULTS["schedule"],
        help="the learning rate after warmup: hf decays linearly over the steps after warmup; official "
        "decays linearly over every step, times the warmup ramp, as the official code (default: %(default)s)",
    )
    p.add_argument(
        "--mask-prob",
        type=float,
        help=f"fraction of tokens masked (default per --size: {per_size('mask_prob')})",
    )
    p.add_argument(
        "--disc-weight",
        type=float,
        default=DEFAULTS["disc_weight"],
        help="weight of the discriminator loss (default: %(default)s)",
    )


def run_pretrain(args: argparse.Namespace) -> int:
    from electra.hub import resolve
    from electra.training.pretrain.trainer import pretrain

    # Every option of `electra pretrain` is a PretrainConfig field of the same name (--revision goes with
    # --init: a Hub id becomes the local snapshot directory here, before the stage sees it).
    options = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(PretrainConfig) if hasattr(args, f.name)
    }
    if args.init is not None:
        options["init"] = resolve(args.init, args.revision, what="model")
    elif args.revision is not None:
        raise InputError("--revision goes with --init (a Hugging Face Hub id); drop it or add --init")
    config = PretrainConfig(**options, progress=show_progress(args))
    # The options are checked before the threads are chosen, so a bad one is a single line on stderr.
    config.resolved()
    use_free_cores("pre-training")
    result = pretrain(config)
    last = result["last"]
    if result["stopped"]:
        log.info("stopped at step %d; continue with --resume", result["step"])
    elif last:
        summary = ", ".join(
            f"{k} {last[k]:.4g}"
            for k in ("mlm_loss", "disc_loss", "disc_accuracy", "disc_recall")
            if isinstance(last.get(k), float)
        )
        print(f"finished {result['step']} steps in {result['out']}: {summary}")
    return 0
