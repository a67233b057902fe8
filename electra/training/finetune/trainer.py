"""GLUE-style classification and regression on a discriminator, one trainer per run (`electra finetune`
builds it through electra.training.finetune.run, which gives a tagging task to TaggerTrainer instead).

The hyperparameters: lr by width (electra.sizes: the official code's 1e-4, 5e-5 large, or the paper's
Table 7 under the recipe's `lr_table`), layer-wise learning-rate decay 0.8 (0.9 large), 10% warmup,
batch 32, 3 epochs (10 for RTE and STS-B), gradient norm clipped at 1.0; how the optimizer, schedule,
head, loss and data treat them is the recipe's (`recipe`, default the official code's).
Dev evaluation after every epoch, several seeds with the median reported and the best seed's model saved.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.atomic import check_output_dir
from electra.config import ElectraConfig
from electra.errors import InputError
from electra.files import CONFIG_JSON, EVAL_RESULTS_JSON
from electra.hf_format import LoadReport, load_hf_dir_with_report, save_hf_dir
from electra.model import ElectraClassifier
from electra.progress import progress
from electra.sizes import finetune_recipe
from electra.tokenizer import special_ids, tokenizer_files
from electra.training.device import autocast, resolve_device, resolve_precision
from electra.training.finetune.baseline import MajorityCheck, majority_check
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.data import double_unordered, load_datasets, subsample
from electra.training.finetune.encoding import encode, max_len_for
from electra.training.finetune.glue_metrics import median_over_seeds
from electra.training.finetune.head import check_head, fold_target_scale, init_head, target_scale
from electra.training.finetune.inference import predict_logits, score
from electra.training.finetune.layerwise import layerwise_groups
from electra.training.finetune.model_dir import (
    classifier_head_config,
    load_model_tokenizer,
    resolve_model_dir,
)
from electra.training.optim import adam, build_scheduler, warmup_steps_for

Metrics = dict[str, dict[str, float]]  # split -> metric -> value

log = logging.getLogger("electra.finetune")


class FinetuneTrainer:
    """Fine-tunes one model on one task for each seed, keeps the best seed's model and saves it.

    Construction does everything that can fail on bad input (output directory, model, tokenizer, data,
    device), so a mistake is reported before any training time is spent.
    """

    def __init__(self, cfg: FinetuneConfig) -> None:
        cfg.validate()
        inputs = [cfg.model, *(x for x in (cfg.data_dir, cfg.train, cfg.dev) if x is not None)]
        check_output_dir(cfg.out, cfg.overwrite, inputs)
        self.cfg = cfg
        self.recipe = cfg.resolved_recipe()
        self.model_dir = resolve_model_dir(Path(cfg.model))
        self.tokenizer = load_model_tokenizer(self.model_dir)
        self.pad_id = special_ids(self.tokenizer).pad
        self.load_data()
        if self.task.kind == "relevance" and cfg.head is None:
            # A cross-encoder is transformers' ElectraForSequenceClassification, head included, as
            # sentence-transformers trains and loads one: its directory opens without remote code.
            self.recipe = dataclasses.replace(self.recipe, head="hf")
        self.device = resolve_device(cfg.device)
        self.autocast = autocast(self.device, resolve_precision(cfg.precision, self.device))
        self.epochs = cfg.epochs or self.task.default_epochs
        self.total_steps = self.epochs * math.ceil(len(self.train_data) / cfg.batch_size)
        self.best: tuple[float, int, nn.Module] | None = None  # (main dev metric, seed, model on CPU)
        # The last evaluation's majority-class checks by dev split (single-label classification only).
        self.checks: dict[str, MajorityCheck] = {}

    def load_data(self) -> None:
        """The task, its encoded training set and dev splits (and the regression target scale)."""
        cfg = self.cfg
        self.task, train_examples, dev_examples = load_datasets(cfg)
        if cfg.max_train_examples:
            train_examples = subsample(train_examples, cfg.max_train_examples)
        if not train_examples:
            raise InputError("the training set is empty")
        if self.recipe.double_unordered:
            train_examples = double_unordered(self.task, train_examples)
        cut = self.recipe.pair_truncation
        positions = ElectraConfig.from_json_file(self.model_dir / CONFIG_JSON).max_position_embeddings
        max_seq_len = max_len_for(cfg.max_seq_len, positions)
        self.train_data = encode(self.tokenizer, train_examples, self.task, max_seq_len, cut)
        self.scale = target_scale(self.task, self.recipe.normalize_regression_labels)
        if self.scale is not None and self.train_data.labels is not None:
            lo, hi = self.scale
            self.train_data.labels = (self.train_data.labels - lo) / hi
        self.dev_data = {
            name: encode(self.tokenizer, examples, self.task, max_seq_len, cut)
            for name, examples in dev_examples.items()
        }

    def setup(self, seed: int) -> None:
        """A fresh classifier from the pre-trained weights (head drawn from `seed`), optimizer, schedule."""
        r = self.recipe
        torch.manual_seed(seed)
        model, report = self.load_model()
        if any(k.startswith("classifier.") for k in report.newly_initialized):
            init_head(model, r.head_init)
        self.model = model.to(self.device)
        self.newly_initialized = report.newly_initialized
        lr, decay = self.lr_and_decay(model.config.hidden_size)
        groups = layerwise_groups(model, lr, decay, r.weight_decay, r.layerwise_rule)
        self.optimizer = adam(groups, lr, r.adam, r.adam_eps)
        warmup = warmup_steps_for(r.schedule, self.cfg.warmup_fraction, self.total_steps)
        self.scheduler = build_scheduler(self.optimizer, warmup, self.total_steps, r.schedule)

    def load_model(self) -> tuple[nn.Module, LoadReport]:
        """The pre-trained model with this task's head (new heads at their init; setup re-draws them)."""
        model, report = load_hf_dir_with_report(
            self.model_dir,
            kind="classifier",
            head=self.recipe.head,
            **classifier_head_config(self.task.names, self.task.kind),
        )
        assert isinstance(model, ElectraClassifier)
        check_head(model)
        return model, report

    def lr_and_decay(self, hidden_size: int) -> tuple[float, float]:
        """(peak learning rate, layer-wise decay): the config's, else electra.sizes' for the model's width."""
        lr, decay = finetune_recipe(hidden_size, self.recipe.lr_table)
        if self.recipe.layerwise_lr_decay is not None:
            decay = self.recipe.layerwise_lr_decay
        return (lr if self.cfg.lr is None else self.cfg.lr), decay

    def batch_loss(self, idx: np.ndarray) -> torch.Tensor:
        """The loss of the training examples `idx` (forward pass included), as the recipe reduces it."""
        batch = self.train_data.batch(idx, self.pad_id, self.device)
        target = torch.from_numpy(self.train_data.labels[idx]).to(self.device)
        with self.autocast:
            logits = self.model(**batch)
        return _loss(logits, target, self.task.kind, self.recipe.loss_reduction)

    def train_step(self, idx: np.ndarray) -> torch.Tensor:
        loss = self.batch_loss(idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def train_epoch(self, seed: int, epoch: int, bar: Any | None) -> None:
        self.model.train()
        # Seeded per (seed, epoch) so a run's batch order does not depend on what ran before it.
        order = np.random.default_rng([seed, epoch]).permutation(len(self.train_data))
        for lo in range(0, len(order), self.cfg.batch_size):
            loss = self.train_step(order[lo : lo + self.cfg.batch_size])
            if bar is not None:
                bar.update(1)
                if bar.n % 10 == 0:  # .item() waits for the device: not every step
                    bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)

    def evaluate(self) -> Metrics:
        """The task's metrics on every labeled dev split (regression outputs on the labels' scale); the
        majority-class checks go to `self.checks`."""
        results, self.checks = {}, {}
        for name, d in self.dev_data.items():
            if d.labels is None:
                continue
            logits = predict_logits(self.model, d, self.pad_id, self.device, self.autocast)
            if self.scale is not None:
                logits = logits * self.scale[1] + self.scale[0]
            results[name] = score(self.task, logits, d.labels, d.groups)
            if (check := majority_check(self.task, logits, d.labels)) is not None:
                self.checks[name] = check
        return results

    def train_seed(self, seed: int) -> dict[str, Any]:
        """Train one seed, evaluating after every epoch: its entry in eval_results.json's "per_seed"."""
        self.setup(seed)
        bar = self._progress_bar(seed)
        per_epoch = []
        for epoch in range(self.epochs):
            self.train_epoch(seed, epoch, bar)
            per_epoch.append({"epoch": epoch + 1, **self.evaluate()})
        if bar is not None:
            bar.close()
        result = {"epochs": per_epoch, "final": per_epoch[-1], "newly_initialized": self.newly_initialized}
        if self.checks:
            result["majority_class"] = {split: check.to_dict() for split, check in self.checks.items()}
        return result

    def keep_if_best(self, seed: int, final: dict[str, Any]) -> bool:
        """Keep this seed's model if its main dev metric beats the best so far: a tie or nan does not, and any
        number beats a nan (a first seed without the metric, or diverged, must not block every later one).
        True when it was kept."""
        value = final.get(self.task.dev_splits[0], {}).get(self.task.main_metric, float("nan"))
        if self.best is None or (
            not math.isnan(value) and (math.isnan(self.best[0]) or value > self.best[0])
        ):
            self.best = (value, seed, self.model.cpu())
            return True
        return False

    def run(self) -> dict[str, Any]:
        """Every seed, then the best model saved with eval_results.json; returns that file's content."""
        started = time.perf_counter()
        per_seed: dict[str, Any] = {}
        kept_checks: dict[str, MajorityCheck] = {}  # the kept seed's
        for seed in self.cfg.seeds:
            result = self.train_seed(seed)
            per_seed[str(seed)] = result
            if self.keep_if_best(seed, result["final"]):
                kept_checks = self.checks
            log.info("%s seed %s: %s", self.task.name, seed, _describe(result["final"]))
        assert self.best is not None
        summary = self.summary(per_seed, time.perf_counter() - started)
        if kept_checks:
            summary["majority_class"] = per_seed[str(self.best[1])]["majority_class"]
        for split, check in kept_checks.items():
            if (warning := check.warning(split)) is not None:
                log.warning("%s %s", self.task.name, warning)
        self.save(self.best[2], summary)
        return summary

    def summary(self, per_seed: dict[str, Any], seconds: float) -> dict[str, Any]:
        finals = [r["final"] for r in per_seed.values()]
        splits = [split for split in finals[0] if split != "epoch"]
        assert self.best is not None
        return {
            "task": self.task.name,
            "model": str(self.model_dir),
            "seeds": self.cfg.seeds,
            "selected_seed": self.best[1],
            "median": {split: median_over_seeds([f[split] for f in finals]) for split in splits},
            "per_seed": per_seed,
            "train_examples": len(self.train_data),
            "epochs": self.epochs,
            "seconds": seconds,
            "config": json.loads(json.dumps(asdict(self.cfg), default=str)),
            "recipe": self.recipe.describe(),
        }

    def save(self, model: nn.Module, summary: dict[str, Any]) -> None:
        """A Hugging Face model directory, its tokenizer and eval_results.json, written atomically (a
        multi-label model with each label's threshold, chosen on the dev set, in its config)."""
        if self.scale is not None:
            assert isinstance(model, ElectraClassifier)
            fold_target_scale(model, self.scale)
        if self.task.kind == "multi_label":
            thresholds = self.label_thresholds(model)
            model.config = model.config.replace(label_thresholds=thresholds)
            summary["label_thresholds"] = thresholds
        files = tokenizer_files(self.tokenizer)
        files[EVAL_RESULTS_JSON] = (json.dumps(summary, indent=2) + "\n").encode()
        save_hf_dir(model, self.cfg.out, overwrite=self.cfg.overwrite, extra_files=files)

    def label_thresholds(self, model: nn.Module) -> dict[str, float]:
        """Each label's threshold for the saved model: the best F1 on the first dev split."""
        from electra.training.finetune.inference import sigmoid
        from electra.training.finetune.multilabel_metrics import tune_thresholds

        assert self.task.labels is not None
        d = self.dev_data[self.task.dev_splits[0]]
        model = model.to(self.device)
        probs = sigmoid(predict_logits(model, d, self.pad_id, self.device, self.autocast))
        thresholds = tune_thresholds(probs, d.labels)  # type: ignore[arg-type]
        model.cpu()
        return {label: float(t) for label, t in zip(self.task.labels, thresholds, strict=True)}

    def _progress_bar(self, seed: int) -> Any | None:
        """A bar on a terminal, a line every 30 s elsewhere (electra.progress); None with --quiet."""
        if not self.cfg.progress:
            return None
        return progress(total=self.total_steps, desc=f"{self.task.name} seed {seed}", unit="step")


def _loss(logits: torch.Tensor, labels: torch.Tensor, kind: str, reduction: str) -> torch.Tensor:
    """Squared error (regression), binary cross-entropy (a reranker's relevance: sentence-transformers'
    CrossEncoder.fit's BCEWithLogitsLoss; a multi-label model's, summed over its labels) or cross-entropy,
    summed over the batch (official: it decides how often the gradient clipping at norm 1.0 bites) or
    averaged (transformers)."""
    if kind == "regression":
        return F.mse_loss(logits.squeeze(-1).float(), labels.float(), reduction=reduction)
    if kind == "relevance":
        return F.binary_cross_entropy_with_logits(
            logits.squeeze(-1).float(), labels.float(), reduction=reduction
        )
    if kind == "multi_label":
        per_example = F.binary_cross_entropy_with_logits(
            logits.float(), labels.float(), reduction="none"
        ).sum(-1)
        return per_example.sum() if reduction == "sum" else per_example.mean()
    return F.cross_entropy(logits.float(), labels, reduction=reduction)


def _describe(final: dict[str, Any]) -> str:
    # A tagger's per-type precision, recall and support stay in eval_results.json: the line would not fit.
    detail = ("precision_", "recall_", "support_")
    return "; ".join(
        f"{split} " + ", ".join(f"{k} {v:.4f}" for k, v in m.items() if not k.startswith(detail))
        for split, m in final.items()
        if split != "epoch"
    )
