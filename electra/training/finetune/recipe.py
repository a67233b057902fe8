"""Fine-tuning recipes: complete, named sets of the choices that decide how a discriminator is fine-tuned.

* `official`: what google-research/electra's code does, the code behind the paper's GLUE tables
  (`model/optimization.py` create_optimizer, AdamWeightDecayOptimizer, _get_layer_lrs;
  `configure_finetuning.py`; `run_finetuning.py` FinetuningModel; `finetune/classification/
  classification_tasks.py` ClassificationTask, RegressionTask, MRPC, STS).
* `intended`: `official` with the layer-wise decay the maintainers say was intended (google-research/electra
  issue #51): the head counts as one layer above the top one, so the top layer gets decay^1, not decay^2.
* `hf`: what Hugging Face's Trainer does with ElectraForSequenceClassification in a run_glue.py-style run.

The learning rate comes from the same table in all three (electra.sizes: the official code's, 1e-4 for
every size but Large, unless `lr_table` says "paper", Table 7's), and batch size, epochs and the 10% warmup
are the paper's (FinetuneConfig), so comparing recipes compares only these choices. `official` is the
default: a user who reproduces ELECTRA gets the code that produced the paper's numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from electra.errors import InputError

# Torch-free on purpose (the CLI imports this module to build --help), so these mirror the choices of
# electra.model (CLASSIFIER_HEADS) and electra.training.optim (ADAMS, SCHEDULES); tests/test_recipes.py
# checks that they agree.
Adam = Literal["official", "torch"]
ADAMS: tuple[Adam, ...] = ("official", "torch")
Schedule = Literal["official", "hf"]
SCHEDULES: tuple[Schedule, ...] = ("official", "hf")
ClassifierHead = Literal["hf", "linear"]
CLASSIFIER_HEADS: tuple[ClassifierHead, ...] = ("hf", "linear")
LayerwiseRule = Literal["official", "intended"]
LAYERWISE_RULES: tuple[LayerwiseRule, ...] = ("official", "intended")
HeadInit = Literal["glorot", "normal"]
HEAD_INITS: tuple[HeadInit, ...] = ("glorot", "normal")
LossReduction = Literal["sum", "mean"]
LOSS_REDUCTIONS: tuple[LossReduction, ...] = ("sum", "mean")
LrTable = Literal["code", "paper"]
LR_TABLES: tuple[LrTable, ...] = ("code", "paper")
PairTruncation = Literal["official", "longest_first"]
PAIR_TRUNCATIONS: tuple[PairTruncation, ...] = ("official", "longest_first")


@dataclass(frozen=True)
class Recipe:
    name: str
    adam: Adam  # "official": no bias correction (AdamWeightDecayOptimizer); "torch": torch.optim.AdamW
    adam_eps: float
    weight_decay: float  # decoupled, never on biases and LayerNorm (both sides exclude them)
    layerwise_rule: LayerwiseRule  # layerwise.py
    layerwise_lr_decay: float | None  # None: electra.sizes' value for the model's width; 1.0 turns it off
    head: ClassifierHead  # electra.model: "linear" ([CLS], dropout, dense) or "hf" (HF's head)
    head_init: HeadInit  # "glorot": TF's tf.layers.dense default; "normal": N(0, initializer_range) as HF
    double_unordered: bool  # also train on every pair of an order-free task (MRPC, STS-B) swapped
    schedule: Schedule  # optim.py: "official" decays over all steps x warmup ramp; "hf" decays after warmup
    loss_reduction: LossReduction  # over the batch, before clipping the gradient norm at 1.0
    normalize_regression_labels: bool  # STS-B trains on (score - 0) / 5 as the official RegressionTask
    lr_table: LrTable  # electra.sizes: "code" (configure_finetuning.py) or "paper" (Table 7)
    pair_truncation: PairTruncation  # encoding.py: which segment of a too-long pair loses a token on a tie

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_OFFICIAL = Recipe(
    name="official",
    adam="official",
    adam_eps=1e-6,
    weight_decay=0.01,  # configure_finetuning.py weight_decay_rate
    layerwise_rule="official",
    layerwise_lr_decay=None,
    head="linear",
    head_init="glorot",
    double_unordered=True,
    schedule="official",
    loss_reduction="sum",  # run_finetuning.py FinetuningModel: tf.reduce_sum over the batch
    normalize_regression_labels=True,
    lr_table="code",  # configure_finetuning.py: learning_rate 1e-4, 5e-5 for large
    pair_truncation="official",  # classification_tasks.py _truncate_seq_pair: the second on a tie
)

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        _OFFICIAL,
        dataclasses.replace(_OFFICIAL, name="intended", layerwise_rule="intended"),
        Recipe(
            name="hf",
            adam="torch",  # Trainer's default optim (adamw_torch): bias-corrected
            adam_eps=1e-8,  # TrainingArguments.adam_epsilon
            weight_decay=0.0,  # TrainingArguments.weight_decay
            layerwise_rule="intended",  # only used if --layerwise-lr-decay turns decay on
            layerwise_lr_decay=1.0,  # Trainer has no layer-wise decay
            head="hf",
            head_init="normal",
            double_unordered=False,
            schedule="hf",  # get_linear_schedule_with_warmup
            loss_reduction="mean",  # CrossEntropyLoss / MSELoss defaults in ElectraForSequenceClassification
            normalize_regression_labels=False,
            lr_table="code",  # the same lr as the other two, so an A/B compares only the recipe
            pair_truncation="longest_first",  # the tokenizer's truncation=True
        ),
    )
}
DEFAULT_RECIPE = "official"
# The fields a FinetuneConfig may override one by one (it has a field of the same name for each).
OVERRIDABLE = tuple(f.name for f in dataclasses.fields(Recipe) if f.name != "name")

# The recipe fields that take one of a few named values (the CLI's choices come from here too).
CHOICES: dict[str, tuple[Any, ...]] = {
    "adam": ADAMS,
    "layerwise_rule": LAYERWISE_RULES,
    "head": CLASSIFIER_HEADS,
    "head_init": HEAD_INITS,
    "schedule": SCHEDULES,
    "loss_reduction": LOSS_REDUCTIONS,
    "lr_table": LR_TABLES,
    "pair_truncation": PAIR_TRUNCATIONS,
}


def resolve_recipe(name: str, overrides: dict[str, Any]) -> Recipe:
    """The named recipe with the given fields (None: keep the recipe's) replaced; InputError if invalid."""
    if name not in RECIPES:
        raise InputError(f"--recipe {name!r} is not one of {', '.join(RECIPES)}")
    changes = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(changes) - set(OVERRIDABLE)
    if unknown:
        raise InputError(f"unknown recipe field(s) {', '.join(sorted(unknown))}")
    for key, allowed in CHOICES.items():
        if key in changes and changes[key] not in allowed:
            raise InputError(f"--{_flag(key)} {changes[key]!r} is not one of {', '.join(allowed)}")
    recipe = dataclasses.replace(RECIPES[name], **changes)
    if not recipe.adam_eps > 0:
        raise InputError(f"--adam-eps must be positive, got {recipe.adam_eps}")
    if not recipe.weight_decay >= 0:
        raise InputError(f"--weight-decay must be >= 0, got {recipe.weight_decay}")
    decay = recipe.layerwise_lr_decay
    if decay is not None and not 0 < decay <= 1:
        raise InputError(f"--layerwise-lr-decay must be in (0, 1] (1 turns it off), got {decay}")
    return recipe


def _flag(field_name: str) -> str:
    return field_name.replace("_", "-")
