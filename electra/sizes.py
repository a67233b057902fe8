"""The model sizes and their per-size recipes, in one table: architecture, generator width, pre-training and
fine-tuning hyperparameters.

Sources: Clark et al. 2020, Table 6 (architecture, pre-training lr/batch/steps), Section 3.2 (generator width:
1/4 of the discriminator for Small and Large, 1/3 for Base), Appendix A (mask rate 0.25 for Large) and Table 7
(fine-tuning lr and layer-wise decay), and google-research/electra's `configure_finetuning.py` for the lr
its code uses (1e-4 for every size but Large's 5e-5, where Table 7 gives Small 3e-4). "tiny" is ours, for
tests and the demo; "micro" is ours too, the encoder of the CPU equal-compute experiment
(experiments/equal_compute.py, experiments/README.md): 4 layers of width 128, 2,400 steps of batch 32
in about 21 minutes on 2 idle CPU cores (0.52 s an ELECTRA step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSize:
    name: str
    # Discriminator architecture (transformers' ElectraConfig field names).
    embedding_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    # Generator hidden size as a fraction of the discriminator's.
    generator_fraction: float
    # Pre-training.
    pretrain_lr: float
    pretrain_batch_size: int
    pretrain_steps: int
    mask_prob: float
    # Fine-tuning.
    finetune_lr: float  # the paper's (Table 7)
    layerwise_lr_decay: float
    finetune_lr_code: float  # what the official code sets (configure_finetuning.py learning_rate)

    def architecture(self) -> dict[str, Any]:
        return {
            "embedding_size": self.embedding_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
        }


SIZES: dict[str, ModelSize] = {
    s.name: s
    for s in (
        # tiny and micro are ours: the code's lr is the paper-table one.
        ModelSize("tiny", 32, 64, 2, 2, 128, 1 / 4, 1e-3, 32, 10_000, 0.15, 1e-4, 0.8, 1e-4),
        ModelSize("micro", 128, 128, 4, 2, 512, 1 / 4, 5e-4, 32, 2_400, 0.15, 3e-4, 0.8, 3e-4),
        ModelSize("small", 128, 256, 12, 4, 1024, 1 / 4, 5e-4, 128, 1_000_000, 0.15, 3e-4, 0.8, 1e-4),
        ModelSize("base", 768, 768, 12, 12, 3072, 1 / 3, 2e-4, 256, 766_000, 0.15, 1e-4, 0.8, 1e-4),
        ModelSize("large", 1024, 1024, 24, 16, 4096, 1 / 4, 2e-4, 2048, 400_000, 0.25, 5e-5, 0.9, 5e-5),
    )
}

# For a model not built from the table (e.g. a Hub checkpoint): the size of the same width, else these.
DEFAULT_GENERATOR_FRACTION = 1 / 4
DEFAULT_FINETUNE_LR = 1e-4
DEFAULT_LAYERWISE_LR_DECAY = 0.8


def size_of_width(hidden_size: int) -> ModelSize | None:
    """The table's size with this hidden width (the recipes are keyed by width, as the paper's are)."""
    return next((s for s in SIZES.values() if s.hidden_size == hidden_size), None)


def finetune_recipe(hidden_size: int, lr_table: str = "code") -> tuple[float, float]:
    """(learning rate, layer-wise decay) for a discriminator of this width; `lr_table` "code" gives the lr
    the official code uses, "paper" the paper's Table 7."""
    size = size_of_width(hidden_size)
    if size is None:
        return DEFAULT_FINETUNE_LR, DEFAULT_LAYERWISE_LR_DECAY
    lr = size.finetune_lr_code if lr_table == "code" else size.finetune_lr
    return lr, size.layerwise_lr_decay


def generator_fraction(hidden_size: int) -> float:
    size = size_of_width(hidden_size)
    return DEFAULT_GENERATOR_FRACTION if size is None else size.generator_fraction
