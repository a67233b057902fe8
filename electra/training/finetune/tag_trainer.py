"""`electra finetune --task conll2003` (or `tags`): a token classifier, trained as FinetuneTrainer trains a
sequence classifier (same recipe: optimizer, layer-wise decay, schedule, seeds, best-seed selection) with
the tagging task's data, head, loss and metrics in place of the classification ones.

The head is one dense layer over every token, transformers' ElectraForTokenClassification, so the saved
directory loads there and exports as a tagger. Under the recipe's `head` "linear" (official) it has no dropout
of its own, as the official tagging head (tagging_tasks.py: tf.layers.dense on the sequence output), saved as
`classifier_dropout: 0.0`; under "hf" it has transformers' dropout before the dense layer.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.config import ElectraConfig
from electra.errors import InputError
from electra.files import CONFIG_JSON
from electra.hf_format import LoadReport, load_hf_dir_with_report
from electra.training.finetune.data import subsample
from electra.training.finetune.encoding import max_len_for
from electra.training.finetune.model_dir import classifier_head_config
from electra.training.finetune.tag_encoding import (
    IGNORE,
    EncodedSentences,
    encode_sentences,
    eval_max_len,
    word_tags,
)
from electra.training.finetune.tag_metrics import require_seqeval, tag_metrics
from electra.training.finetune.tagging_data import TaggedSentence
from electra.training.finetune.tagging_tasks import load_tagging_data
from electra.training.finetune.trainer import FinetuneTrainer


class TaggerTrainer(FinetuneTrainer):
    def load_data(self) -> None:
        require_seqeval()
        cfg = self.cfg
        data = load_tagging_data(
            cfg.task,
            data_dir=cfg.data_dir,
            train=cfg.train,
            dev=cfg.dev,
            tag_column=cfg.tag_column,
            scheme=cfg.tag_scheme,
        )
        self.task = data.task
        train = data.train
        if cfg.max_train_examples:
            train = subsample(train, cfg.max_train_examples)
        if not train:
            raise InputError("the training set is empty")
        self.scale = None
        positions = ElectraConfig.from_json_file(self.model_dir / CONFIG_JSON).max_position_embeddings
        max_seq_len = max_len_for(cfg.max_seq_len, positions)
        self.train_data = encode_sentences(self.tokenizer, train, self.task.labels, max_seq_len)
        self.dev_sentences = data.dev
        limit = eval_max_len(positions, max_seq_len)
        self.dev_data = {
            split: encode_sentences(self.tokenizer, sentences, self.task.labels, limit)
            for split, sentences in data.dev.items()
        }

    def load_model(self) -> tuple[nn.Module, LoadReport]:
        head = classifier_head_config(self.task.labels)
        if self.recipe.head == "linear":
            head["classifier_dropout"] = 0.0
        return load_hf_dir_with_report(self.model_dir, kind="tagger", **head)

    def batch_loss(self, idx: np.ndarray) -> torch.Tensor:
        """Cross-entropy over every word's first piece: summed (official: per sentence, then over the batch)
        or averaged over those tokens (transformers), as the recipe says."""
        batch = self.train_data.batch(idx, self.pad_id, self.device)
        target = self.train_data.label_batch(idx, self.device)
        with self.autocast:
            logits = self.model(**batch)
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            target.flatten(),
            ignore_index=IGNORE,
            reduction=self.recipe.loss_reduction,
        )

    def evaluate(self) -> dict[str, dict[str, float]]:
        """seqeval's entity-level metrics (strict IOB2) on every dev split, over all of its words."""
        results = {}
        for split, data in self.dev_data.items():
            logits = predict_token_logits(self.model, data, self.pad_id, self.device, self.autocast)
            predicted = word_tags(logits, data, self.task.labels)
            results[split] = tag_metrics(gold_tags(self.dev_sentences[split]), predicted)
        return results

    def summary(self, per_seed: dict[str, Any], seconds: float) -> dict[str, Any]:
        return {**super().summary(per_seed, seconds), "labels": list(self.task.labels)}


def gold_tags(sentences: list[TaggedSentence]) -> list[list[str]]:
    return [list(s.tags or []) for s in sentences]


@torch.no_grad()
def predict_token_logits(
    model: nn.Module,
    data: EncodedSentences,
    pad_id: int,
    device: torch.device,
    autocast: AbstractContextManager,
    batch_size: int = 64,
) -> list[np.ndarray]:
    """Per sentence, (tokens, labels) float32 logits, in the order of `data`."""
    model.eval()
    # Sorted by length, so batches carry little padding; results go back in the original order.
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    out: list[np.ndarray] = [np.empty(0)] * len(data)
    for lo in range(0, len(order), batch_size):
        idx = order[lo : lo + batch_size]
        with autocast:
            logits = model(**data.batch(idx, pad_id, device)).float().cpu().numpy()
        for row, i in enumerate(idx):
            out[i] = logits[row, : len(data.ids[i])]
    return out
