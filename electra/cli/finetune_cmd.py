"""`electra finetune`."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from electra.cli.common import add_progress_flag, format_number, per_size, positive_int, show_progress
from electra.cli.task_args import (
    DEFAULTS,
    TASK_CHOICES,
    TASK_HELP,
    custom_args,
    inference_args,
    model_args,
    model_dir,
    shown_metrics,
)
from electra.files import CONFIG_JSON, EVAL_RESULTS_JSON
from electra.linear_head import LINEAR_MODEL_TYPE
from electra.sizes import DEFAULT_FINETUNE_LR as DEFAULT_LR
from electra.sizes import DEFAULT_LAYERWISE_LR_DECAY as DEFAULT_DECAY
from electra.sizes import SIZES
from electra.threads import use_free_cores
from electra.training.device import PRECISIONS
from electra.training.finetune.baseline import MajorityCheck
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.recipe import CHOICES, OVERRIDABLE, RECIPES, Recipe
from electra.training.finetune.tasks import TASKS

SIZE_NAMES = [s for s in SIZES if s != "tiny"]  # the paper's sizes, as the recipe names them

log = logging.getLogger("electra.cli")


def _seeds(value: str) -> list[int]:
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("expected at least one seed")
    return seeds


def _per_size(attr: str, other: float) -> str:
    """A recipe value per model width, e.g. "small 3e-4, base 1e-4, large 5e-5, other widths 1e-4"."""
    return f"{per_size(attr, SIZE_NAMES)}, other widths {format_number(other)}"


def _epochs() -> tuple[int, str]:
    """The usual number of epochs and the exceptions, e.g. (3, "10 for STS-B and RTE"), from TASKS."""
    by_epochs: dict[int, list[str]] = {}
    for spec in TASKS.values():
        by_epochs.setdefault(spec.default_epochs, []).append(spec.dir_name)
    usual = max(by_epochs, key=lambda n: len(by_epochs[n]))
    others = "; ".join(f"{n} for {' and '.join(names)}" for n, names in by_epochs.items() if n != usual)
    return usual, others


def _epochs_help() -> str:
    usual, others = _epochs()
    return f"default {usual}" + (f" ({others})" if others else "")


def _recipe_default(field: str) -> str:
    """Each recipe's value of a field, for --help: "official sum, intended sum, hf mean"."""
    return ", ".join(f"{name} {_shown_value(getattr(r, field), field)}" for name, r in RECIPES.items())


def _shown_value(value: object, field: str) -> str:
    if value is None and field == "layerwise_lr_decay":
        return "by width"
    if isinstance(value, bool):
        return "on" if value else "off"
    return format_number(value) if isinstance(value, float) else str(value)


def _recipe_args(p: argparse.ArgumentParser) -> None:
    """--recipe and one override per Recipe field (recipe.OVERRIDABLE), each defaulting to the recipe's."""
    p.add_argument(
        "--recipe",
        choices=list(RECIPES),
        default=DEFAULTS["recipe"],
        help="a complete set of the choices below (default: %(default)s; see docs/finetuning.md)",
    )
    g = p.add_argument_group("recipe overrides (default: the --recipe's value)")
    what = {
        "adam": "official: no bias correction (AdamWeightDecayOptimizer); torch: torch.optim.AdamW",
        "adam_eps": "Adam epsilon",
        "weight_decay": "decoupled weight decay, never on biases and LayerNorm",
        "layerwise_rule": "official: _get_layer_lrs (top layer decay^2); intended: top layer decay^1",
        "layerwise_lr_decay": f"by width {_per_size('layerwise_lr_decay', DEFAULT_DECAY)}; 1 disables it",
        "head": "linear: [CLS], dropout, dense (official); hf: ElectraForSequenceClassification's; "
        "taggers: linear is one dense layer without dropout (official), hf has dropout before it",
        "head_init": "glorot: TF's dense default (official); normal: N(0, 0.02) (transformers)",
        "double_unordered": "MRPC and STS-B also train on every pair swapped",
        "schedule": "official: decay over all steps x warmup ramp; hf: warmup, then decay over the rest",
        "loss_reduction": "over the batch, before clipping at norm 1",
        "normalize_regression_labels": "STS-B trains on score / 5 (the saved model still predicts 0..5)",
        "lr_table": "the lr by width when --lr is not given: code "
        f"{_per_size('finetune_lr_code', DEFAULT_LR)} (configure_finetuning.py); paper "
        f"{per_size('finetune_lr', SIZE_NAMES)} (Table 7)",
        "pair_truncation": "a too-long pair loses tokens from its longer text; on a tie, official: the "
        "second (_truncate_seq_pair); longest_first: the tokenizers library's rule",
    }
    for name in OVERRIDABLE:
        flag = "--" + name.replace("_", "-")
        help_text = f"{what[name]} ({_recipe_default(name)})"
        kind = Recipe.__dataclass_fields__[name].type
        if name in CHOICES:
            g.add_argument(flag, choices=CHOICES[name], help=help_text)
        elif "bool" in str(kind):
            g.add_argument(flag, action=argparse.BooleanOptionalAction, help=help_text)
        else:
            g.add_argument(flag, type=float, help=help_text)


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser(
        "finetune",
        help="fine-tune a discriminator on a GLUE task, CoNLL-2003, or your own classification, regression "
        "or tagging data",
        description="The paper's hyperparameters (per-size lr, layer-wise learning-rate decay, "
        f"{DEFAULTS['warmup_fraction']:.0%} linear warmup, batch {DEFAULTS['batch_size']}, "
        f"{_epochs()[0]} epochs, {_epochs()[1]}) under a --recipe: official (default: the code behind the "
        "paper's GLUE tables), intended (official with the maintainers' layer-wise decay rule) or hf "
        "(Hugging Face's Trainer); each choice of a recipe can be overridden on its own. "
        "Dev metrics after every epoch (taggers: seqeval's entity F1, strict IOB2); with several --seeds "
        "the median is reported and the best seed's model is saved in Hugging Face format with "
        "eval_results.json.",
    )
    f.add_argument("--task", required=True, choices=TASK_CHOICES, help=TASK_HELP)
    model_args(f, "a Hugging Face ELECTRA discriminator or the --out of `electra pretrain`")
    f.add_argument("--out", type=Path, required=True, help="output classifier directory")
    f.add_argument("--data-dir", type=Path, help="GLUE data (the root, or the task's folder)")
    f.add_argument(
        "--train",
        type=Path,
        help="custom data: training file (CSV, TSV or JSONL; for tags CoNLL columns or JSONL)",
    )
    f.add_argument("--dev", type=Path, help="custom data: dev file")
    custom_args(f)
    f.add_argument("--epochs", type=positive_int, help=_epochs_help())
    f.add_argument(
        "--lr",
        type=float,
        help="peak learning rate (default by the model's width and --lr-table: "
        f"{_per_size('finetune_lr_code', DEFAULT_LR)})",
    )
    _recipe_args(f)
    f.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULTS["batch_size"],
        help="examples per optimizer step (default: %(default)s)",
    )
    f.add_argument(
        "--seeds",
        type=_seeds,
        default=DEFAULTS["seeds"],
        help="comma-separated, e.g. 1,2,3; the best seed's model is kept "
        f"(default: {','.join(map(str, DEFAULTS['seeds']))})",
    )
    inference_args(f)
    f.add_argument("--precision", choices=PRECISIONS, help="default: bf16 on CUDA, fp32 on CPU")
    f.add_argument("--max-train-examples", type=positive_int, help="train on a random subset (quick runs)")
    f.add_argument("--overwrite", action="store_true", help="replace --out if it exists (default: refuse to)")
    add_progress_flag(f)
    f.set_defaults(handler=run_finetune)


def run_finetune(args: argparse.Namespace) -> int:
    from electra.training.finetune.run import trainer_for

    cfg = FinetuneConfig(
        task=args.task,
        model=model_dir(args),
        out=args.out,
        data_dir=args.data_dir,
        train=args.train,
        dev=args.dev,
        text_column=args.text_column,
        text_pair_column=args.text_pair_column,
        label_column=args.label_column,
        regression=args.regression,
        label_separator=args.label_separator,
        tag_column=args.tag_column,
        tag_scheme=args.tag_scheme,
        epochs=args.epochs,
        lr=args.lr,
        recipe=args.recipe,
        **{name: getattr(args, name) for name in OVERRIDABLE},
        batch_size=args.batch_size,
        max_seq_len=args.max_seq_len,
        seeds=args.seeds,
        precision=args.precision,
        device=args.device,
        max_train_examples=args.max_train_examples,
        overwrite=args.overwrite,
        progress=show_progress(args),
    )
    trainer = trainer_for(cfg)
    use_free_cores("fine-tuning")
    summary = trainer.run()
    checks = {split: MajorityCheck(**d) for split, d in summary.get("majority_class", {}).items()}
    for split, metrics in summary["median"].items():
        line = (
            f"{summary['task']} {split} (median of {len(summary['seeds'])} seed(s)): {shown_metrics(metrics)}"
        )
        print(line + (f"; {checks[split].beside()}" if split in checks else ""))
    print(f"wrote {args.out} (seed {summary['selected_seed']}) with {EVAL_RESULTS_JSON}")
    print(f"  transformers: {transformers_line(args.out)}")
    return 0


def transformers_line(model_dir: Path) -> str:
    """The one line that loads a model `electra finetune` wrote with transformers' pipeline: the official
    linear head runs as the code saved beside it, which transformers runs only with trust_remote_code=True
    (without it, it asks [y/N] and then raises)."""
    config = json.loads((model_dir / CONFIG_JSON).read_text(encoding="utf-8"))
    tagger = "ElectraForTokenClassification" in (config.get("architectures") or [])
    task = "token-classification" if tagger else "text-classification"
    call = f"pipeline({json.dumps(task)}, model={json.dumps(str(model_dir))}"
    if config.get("model_type") == LINEAR_MODEL_TYPE:
        return (
            f"{call}, trust_remote_code=True)  # the official head runs as code saved with the model; "
            "--head hf saves transformers' own"
        )
    return call + ")"
