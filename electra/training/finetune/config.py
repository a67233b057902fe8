"""The options of one `electra finetune` run, and the columns custom data files are read from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from electra.errors import InputError
from electra.training.finetune.recipe import DEFAULT_RECIPE, OVERRIDABLE, Recipe, resolve_recipe


@dataclass(frozen=True)
class CustomColumns:
    """Where a custom CSV / TSV / JSONL file keeps its texts and labels; label None reads unlabeled input."""

    text: str = "text"
    text_pair: str | None = None
    label: str | None = "label"
    regression: bool = False
    # A multi-label CSV/TSV cell's labels are joined by this (JSON lines give a list).
    separator: str = ","


@dataclass
class FinetuneConfig:
    """Every option of `electra finetune`; saved flat under "config" in eval_results.json.

    `lr`, `layerwise_lr_decay` and `epochs` left None follow `electra.sizes.finetune_recipe` for the model's
    width and the task's default epochs. `recipe` names a set of choices (recipe.RECIPES); each field of the
    recipe also has a field here, None keeping the recipe's value, set overriding it.
    """

    task: str
    model: Path
    out: Path
    data_dir: Path | None = None
    train: Path | None = None
    dev: Path | None = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    regression: bool = False
    label_separator: str = ","
    # Tagging tasks (custom files): the column holding the tag (negative: from the end) and its scheme.
    tag_column: int = -1
    tag_scheme: str = "iob2"
    epochs: int | None = None
    lr: float | None = None
    batch_size: int = 32
    max_seq_len: int = 128
    warmup_fraction: float = 0.1
    recipe: str = DEFAULT_RECIPE
    # Overrides of the recipe's fields (electra.training.finetune.recipe.Recipe), None: the recipe's.
    adam: str | None = None
    adam_eps: float | None = None
    weight_decay: float | None = None
    layerwise_rule: str | None = None
    layerwise_lr_decay: float | None = None
    head: str | None = None
    head_init: str | None = None
    double_unordered: bool | None = None
    schedule: str | None = None
    loss_reduction: str | None = None
    normalize_regression_labels: bool | None = None
    lr_table: str | None = None
    pair_truncation: str | None = None
    seeds: list[int] = field(default_factory=lambda: [1])
    precision: str | None = None
    device: str | None = None
    max_train_examples: int | None = None
    overwrite: bool = False
    progress: bool = True

    @property
    def columns(self) -> CustomColumns:
        return CustomColumns(
            self.text_column, self.text_pair_column, self.label_column, self.regression, self.label_separator
        )

    def resolved_recipe(self) -> Recipe:
        """The named recipe with this config's overrides; InputError for a bad name or value."""
        return resolve_recipe(self.recipe, {name: getattr(self, name) for name in OVERRIDABLE})

    def validate(self) -> None:
        """Reject settings that would fail only after the data is read and tokenized."""
        if self.batch_size < 1 or self.max_seq_len < 8:
            raise InputError("--batch-size must be >= 1 and --max-seq-len >= 8")
        if not 0 <= self.warmup_fraction <= 1:
            raise InputError(f"warmup_fraction must be in [0, 1], got {self.warmup_fraction}")
        if self.lr is not None and (not math.isfinite(self.lr) or self.lr <= 0):
            raise InputError(f"--lr {self.lr} must be a positive number")
        self.resolved_recipe()
        if not self.seeds:
            raise InputError("--seeds needs at least one seed, e.g. --seeds 1,2,3")
        for seed in self.seeds:
            if not 0 <= seed < 2**63:
                raise InputError(f"seed {seed} must be in 0..2**63-1")
