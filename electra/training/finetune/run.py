"""One fine-tuning run, whatever the task: a tagging task (CoNLL-2003, custom tags) trains a token classifier
with TaggerTrainer, any other task a sequence classifier with FinetuneTrainer.

The choice is made here, above both trainers, because TaggerTrainer is a FinetuneTrainer: the classification
trainer cannot know its subclass without the two importing each other.
"""

from __future__ import annotations

from typing import Any

from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.tag_trainer import TaggerTrainer
from electra.training.finetune.tagging_tasks import is_tagging_task
from electra.training.finetune.trainer import FinetuneTrainer


def trainer_for(cfg: FinetuneConfig) -> FinetuneTrainer:
    """The task's trainer, its inputs checked (a mistake fails here, before any training)."""
    return TaggerTrainer(cfg) if is_tagging_task(cfg.task) else FinetuneTrainer(cfg)


def finetune(cfg: FinetuneConfig) -> dict[str, Any]:
    """Fine-tune as `cfg` says and save the best seed's model; returns the content of eval_results.json."""
    return trainer_for(cfg).run()
