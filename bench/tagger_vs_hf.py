"""CoNLL-2003 NER: our token-classification trainer vs Hugging Face's `Trainer`, same checkpoint, same run.

    python -m bench.tagger_vs_hf --model runs/small          # a pretrain --out or an HF ELECTRA directory
    python -m bench.tagger_vs_hf --model electra-demo/pretrain --max-train-examples 0 --epochs 3 --lr 1e-3 \\
        --seeds 1,2,3,4,5 --note "electra demo, tiny"           # the recorded CPU result (~20 min, 2 cores)

Three configurations fine-tune the same starting checkpoint on the same training subset (the first
`--max-train-examples` of a fixed shuffle, as `electra finetune` subsamples; 0 trains on all) with the same
learning rate, epochs, batch size, warmup fraction (0.1), length limit and seed:

* `ours-hf`: `electra finetune` (TaggerTrainer) with `--recipe hf`, the hyperparameters Hugging Face's Trainer
  uses (torch AdamW eps 1e-8, no weight decay, no layer-wise decay, linear warmup/decay, mean loss,
  N(0, 0.02) head);
* `ours-official`: our default recipe (the official ELECTRA code: layer-wise decay, weight decay 0.01,
  uncorrected Adam, summed loss, Glorot head);
* `hf-trainer`: `transformers.Trainer` with `ElectraForTokenClassification`, the run_ner recipe (tokenized
  with is_split_into_words, labels on each word's first piece, DataCollatorForTokenClassification, no
  evaluation during training, no checkpoints).

Every model is then scored by the same code: our `tag_metrics` (seqeval, strict IOB2, entity F1) over every
word of dev and test, each model's own forward on the same word-piece encoding, a word's tag the argmax on
its first piece (a word past the length limit counts as "O"). So an F1 difference is the training's.

Before the rounds, a lockstep check trains ours-hf and hf-trainer (800 sentences, --epochs) from the same
initial weights (head included), in the same batch order, with dropout off, and records the largest difference
of the trained weights: float rounding if the two trainers make the same updates, so that what remains between
their F1 is the seeds' (data order, dropout masks, head draw).

Times: `train_s` is the training loop only (ours: the epochs' batches; HF: from Trainer's on_train_begin to
on_train_end, after its optimizer is built); `full_s` is a user's whole run from reading the CoNLL files to
dev/test F1 (ours: `electra finetune` as it runs, tokenization, model load, training, its dev+test evaluation
after every epoch, saving; HF: tokenization, model load, Trainer, training, save_model, one dev+test
evaluation). Rounds alternate: round r uses the r-th seed and the configurations in an order rotated by r, and
time ratios (hf-trainer / ours) are taken within each round, their median reported with the load average per
round, so the figures hold on a shared machine whose speed drifts. Both sides run with `--threads` torch
threads (default 1) after a few untimed warm-up steps of each model. The record goes to
`bench/results/tagger_vs_hf_<name>.json`. Targets: ours-hf's median F1 >= hf-trainer's - 0.5 points (dev and
test) and its training faster (median ratio > 1).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Sampler
from transformers import (
    AutoTokenizer,
    DataCollatorForTokenClassification,
    ElectraForTokenClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from bench.benchlib import ROOT, int_list, portable_path, result_header, write_result
from electra.config import ElectraConfig
from electra.digest import file_sha256
from electra.files import CONFIG_JSON
from electra.hf_format import load_hf_dir_with_report
from electra.sizes import finetune_recipe
from electra.tokenizer import special_ids
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.data import subsample
from electra.training.finetune.model_dir import (
    classifier_head_config,
    load_model_tokenizer,
    resolve_model_dir,
)
from electra.training.finetune.tag_encoding import (
    IGNORE,
    EncodedSentences,
    encode_sentences,
    eval_max_len,
    word_tags,
)
from electra.training.finetune.tag_metrics import tag_metrics
from electra.training.finetune.tag_trainer import TaggerTrainer, gold_tags, predict_token_logits
from electra.training.finetune.tagging_data import TaggedSentence
from electra.training.finetune.tagging_tasks import load_tagging_data

TASK = "conll2003"
CONFIGS = ("ours-hf", "ours-official", "hf-trainer")
OURS = {"ours-hf": "hf", "ours-official": "official"}  # configuration -> our recipe
BASELINE = "hf-trainer"
F1_TOLERANCE = 0.5  # points: ours >= theirs - this


@dataclass
class Common:
    """What every configuration shares: settings, the checkpoint, and the encoded evaluation data."""

    args: argparse.Namespace
    model_dir: Path
    lr: float
    labels: tuple[str, ...]
    train: list[TaggedSentence]  # the subset every configuration trains on
    train_encoded: EncodedSentences  # our encoding of it (the HF side's is checked against it)
    eval_data: dict[str, EncodedSentences]
    gold: dict[str, list[list[str]]]
    pad_id: int


def load_common(args: argparse.Namespace) -> Common:
    model_dir = resolve_model_dir(args.model)
    data = load_tagging_data(TASK, data_dir=args.data_dir)
    train = subsample(data.train, args.max_train_examples) if args.max_train_examples else data.train
    tok = load_model_tokenizer(model_dir)
    cfg = ElectraConfig.from_json_file(model_dir / CONFIG_JSON)
    limit = eval_max_len(cfg.max_position_embeddings, args.max_seq_len)
    labels = data.task.labels
    return Common(
        args=args,
        model_dir=model_dir,
        lr=args.lr or finetune_recipe(cfg.hidden_size)[0],
        labels=labels,
        train=train,
        train_encoded=encode_sentences(tok, train, labels, args.max_seq_len),
        eval_data={split: encode_sentences(tok, s, labels, limit) for split, s in data.dev.items()},
        gold={split: gold_tags(s) for split, s in data.dev.items()},
        pad_id=special_ids(tok).pad,
    )


def score(model: nn.Module, common: Common) -> dict[str, dict[str, float]]:
    """Entity metrics on dev and test: the one evaluation both sides get (fp32, CPU, eval mode)."""
    results = {}
    for split, data in common.eval_data.items():
        logits = predict_token_logits(model, data, common.pad_id, torch.device("cpu"), nullcontext())
        results[split] = tag_metrics(common.gold[split], word_tags(logits, data, common.labels))
    return results


def warm_up(common: Common, batches: int = 8) -> float:
    """A few untimed training steps of both models first, so that neither configuration pays the process's
    one-time start-up (allocator, oneDNN/MKL initialisation) inside its timed loop; returns the seconds."""
    started = time.perf_counter()
    data, size = common.train_encoded, common.args.batch_size
    ours, _ = load_hf_dir_with_report(
        common.model_dir, kind="tagger", **classifier_head_config(common.labels)
    )
    theirs = ElectraForTokenClassification.from_pretrained(common.model_dir, num_labels=len(common.labels))
    cpu = torch.device("cpu")
    for model in (ours, LogitsOnly(theirs)):
        model.train()
        for lo in range(0, min(len(data), batches * size), size):
            idx = np.arange(lo, min(lo + size, len(data)))
            logits = model(**data.batch(idx, common.pad_id, cpu))
            loss = F.cross_entropy(logits.flatten(0, 1), data.label_batch(idx, cpu).flatten())
            loss.backward()
    return time.perf_counter() - started


class TimedTagger(TaggerTrainer):
    """Our trainer as `electra finetune` runs it, with the time of its training epochs and evaluations."""

    train_s = 0.0
    eval_s = 0.0

    def train_epoch(self, seed: int, epoch: int, bar: Any | None) -> None:
        started = time.perf_counter()
        super().train_epoch(seed, epoch, bar)
        self.train_s += time.perf_counter() - started

    def evaluate(self) -> dict[str, dict[str, float]]:
        started = time.perf_counter()
        try:
            return super().evaluate()
        finally:
            self.eval_s += time.perf_counter() - started


def ours_config(
    common: Common, out: Path, recipe: str, seed: int, max_train_examples: int | None
) -> FinetuneConfig:
    """`electra finetune --task conll2003` as every run of ours here trains: one seed, on CPU."""
    args = common.args
    return FinetuneConfig(
        task=TASK,
        model=args.model,
        out=out,
        data_dir=args.data_dir,
        recipe=recipe,
        seeds=[seed],
        epochs=args.epochs,
        lr=common.lr,
        batch_size=args.batch_size,
        max_seq_len=args.max_seq_len,
        warmup_fraction=args.warmup_fraction,
        max_train_examples=max_train_examples,
        device="cpu",
        progress=False,
    )


def run_ours(common: Common, recipe: str, seed: int, tmp: Path) -> dict[str, Any]:
    args = common.args
    started = time.perf_counter()
    trainer = TimedTagger(
        ours_config(common, tmp / f"ours-{recipe}-{seed}", recipe, seed, args.max_train_examples)
    )
    summary = trainer.run()
    full_s = time.perf_counter() - started
    assert trainer.best is not None
    metrics = score(trainer.best[2], common)
    own = summary["per_seed"][str(seed)]["final"]
    return {
        "metrics": metrics,
        "train_s": trainer.train_s,
        "full_s": full_s,
        "eval_in_full_s": trainer.eval_s,
        "steps": trainer.total_steps,
        "train_examples": summary["train_examples"],
        "same_training_data": trainer.train_data.ids == common.train_encoded.ids,
        "trainer_own_f1": {split: own[split]["f1"] for split in metrics},
        "recipe": summary["recipe"],
    }


class LogitsOnly(nn.Module):
    """transformers' model as `predict_token_logits` calls ours: keyword inputs in, logits out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        return self.model(**batch).logits


class LoopTimer(TrainerCallback):
    """The Trainer's training loop, from on_train_begin (optimizer built) to on_train_end."""

    begin = end = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.begin = time.perf_counter()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.end = time.perf_counter()


def hf_features(
    tok: Any, sentences: list[TaggedSentence], labels: tuple[str, ...], max_len: int
) -> list[dict[str, list[int]]]:
    """run_ner's tokenize_and_align_labels: is_split_into_words, truncated, the label on each word's first
    piece and -100 on the others and on [CLS]/[SEP] (label_all_tokens False)."""
    index = {tag: i for i, tag in enumerate(labels)}
    enc = tok([s.words for s in sentences], is_split_into_words=True, truncation=True, max_length=max_len)
    features = []
    for i, sentence in enumerate(sentences):
        assert sentence.tags is not None
        row, previous = [], None
        for word in enc.word_ids(i):
            row.append(IGNORE if word is None or word == previous else index[sentence.tags[word]])
            previous = word
        features.append({key: enc[key][i] for key in ("input_ids", "token_type_ids", "attention_mask")})
        features[-1]["labels"] = row
    return features


def training_arguments(common: Common, seed: int, out: Path) -> TrainingArguments:
    args = common.args
    return TrainingArguments(
        output_dir=str(out),
        learning_rate=common.lr,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        warmup_ratio=args.warmup_fraction,
        lr_scheduler_type="linear",
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=seed,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def run_hf(common: Common, seed: int, tmp: Path) -> dict[str, Any]:
    args = common.args
    started = time.perf_counter()
    data = load_tagging_data(TASK, data_dir=args.data_dir)  # read in the timed run, as ours does
    train = subsample(data.train, args.max_train_examples) if args.max_train_examples else data.train
    tok = AutoTokenizer.from_pretrained(common.model_dir)
    features = hf_features(tok, train, common.labels, args.max_seq_len)
    set_seed(seed)
    model = ElectraForTokenClassification.from_pretrained(
        common.model_dir,
        num_labels=len(common.labels),
        id2label=dict(enumerate(common.labels)),
        label2id={tag: i for i, tag in enumerate(common.labels)},
    )
    timer = LoopTimer()
    trainer = Trainer(
        model=model,
        args=training_arguments(common, seed, tmp / f"hf-{seed}"),
        train_dataset=features,
        data_collator=DataCollatorForTokenClassification(tok),
        callbacks=[timer],
    )
    call_started = time.perf_counter()
    output = trainer.train()
    call_s = time.perf_counter() - call_started
    trainer.save_model()
    metrics = score(LogitsOnly(model), common)
    full_s = time.perf_counter() - started
    ours = common.train_encoded
    return {
        "metrics": metrics,
        "train_s": timer.end - timer.begin,
        "full_s": full_s,
        "train_call_s": call_s,
        "steps": output.global_step,
        "train_examples": len(features),
        "same_training_data": [f["input_ids"] for f in features] == ours.ids
        and all(np.array_equal(f["labels"], row) for f, row in zip(features, ours.labels or [], strict=True)),
        "optim": getattr(trainer.args.optim, "value", str(trainer.args.optim)),
    }


class FixedOrder(Sampler):
    """Our trainer's batch order, a permutation per (seed, epoch), for transformers' Trainer."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch = size, seed, 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(self.size)
        self.epoch += 1
        return iter(order.tolist())


class FixedOrderTrainer(Trainer):
    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Sampler:  # a private hook of Trainer
        assert self.train_dataset is not None
        return FixedOrder(len(self.train_dataset), self.args.seed)


def lockstep(common: Common, tmp: Path, sentences: int = 800, seed: int = 1) -> dict[str, Any]:
    """ours-hf and hf-trainer from the same initial weights (head included), in the same batch order, with
    dropout off: if both do the same updates, the trained weights agree to float rounding. The seeds' F1
    spread is then the only source of their F1 difference (data order, dropout masks, head draw)."""
    trainer = TaggerTrainer(ours_config(common, tmp / "lockstep", "hf", seed, sentences))
    trainer.setup(seed)
    for module in trainer.model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    initial = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    for epoch in range(trainer.epochs):
        trainer.train_epoch(seed, epoch, None)
    ours = trainer.model.state_dict()
    theirs = lockstep_hf(common, initial, sentences, seed, tmp)
    moved = max((ours[k] - initial[k]).abs().max().item() for k in ours)
    differences = {k: (ours[k] - theirs[k]).abs().max().item() for k in ours}
    return {
        "sentences": sentences,
        "steps": trainer.total_steps,
        "seed": seed,
        "largest_weight_change": moved,
        "max_abs_weight_difference": max(differences.values()),
        "largest_differences": dict(sorted(differences.items(), key=lambda kv: -kv[1])[:3]),
    }


def lockstep_hf(
    common: Common, initial: dict[str, torch.Tensor], sentences: int, seed: int, tmp: Path
) -> dict[str, torch.Tensor]:
    """transformers' Trainer from `initial`, in our batch order, dropout off; the trained state dict."""
    data = load_tagging_data(TASK, data_dir=common.args.data_dir)
    tok = AutoTokenizer.from_pretrained(common.model_dir)
    features = hf_features(tok, subsample(data.train, sentences), common.labels, common.args.max_seq_len)
    model = ElectraForTokenClassification.from_pretrained(
        common.model_dir,
        num_labels=len(common.labels),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model.load_state_dict(initial)  # the same names: ours mirror transformers'
    FixedOrderTrainer(
        model=model,
        args=training_arguments(common, seed, tmp / "lockstep-hf"),
        train_dataset=features,
        data_collator=DataCollatorForTokenClassification(tok),
    ).train()
    return model.state_dict()


RUNNERS: dict[str, Callable[[Common, int, Path], dict[str, Any]]] = {
    "ours-hf": lambda common, seed, tmp: run_ours(common, "hf", seed, tmp),
    "ours-official": lambda common, seed, tmp: run_ours(common, "official", seed, tmp),
    "hf-trainer": run_hf,
}
TIMES_INCLUDE = {
    "train_s": "the training loop only: ours, the batches of every epoch (forward, backward, clipping, "
    "optimizer and schedule steps); hf-trainer, on_train_begin to on_train_end (its optimizer already "
    "built); neither includes data loading, tokenization, model loading or evaluation",
    "full_s": "reading the CoNLL files to dev/test F1 in hand: ours, `electra finetune` as it runs "
    "(tokenization, model load, training, dev+test evaluation after every epoch, saving the model); "
    "hf-trainer, tokenization, model load, Trainer, train(), save_model(), one dev+test evaluation",
    "eval_in_full_s": "ours: its evaluations after each epoch, part of full_s",
    "train_call_s": "hf-trainer: the whole trainer.train() call",
}


def run_round(common: Common, index: int, seed: int, tmp: Path) -> dict[str, Any]:
    """Every configuration once with `seed`, in an order rotated by `index`; time ratios within the round."""
    shift = index % len(CONFIGS)
    order = [*CONFIGS[shift:], *CONFIGS[:shift]]
    load_before = os.getloadavg()
    runs = {}
    for name in order:
        runs[name] = run = RUNNERS[name](common, seed, tmp)
        f1 = {split: 100 * m["f1"] for split, m in run["metrics"].items()}
        print(
            f"round {index + 1} seed {seed} {name}: F1 dev {f1['dev']:.2f} test {f1['test']:.2f}, "
            f"train {run['train_s']:.1f} s, full {run['full_s']:.1f} s (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    base = runs[BASELINE]
    ratios = {
        f"{BASELINE}/{name}": {kind: base[kind] / runs[name][kind] for kind in ("train_s", "full_s")}
        for name in OURS
    }
    return {
        "round": index + 1,
        "seed": seed,
        "order": order,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "runs": {name: runs[name] for name in CONFIGS},
        "time_ratios": ratios,
    }


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median F1 (x100) per configuration and split, median per-round time ratios, and the targets."""
    splits = list(rounds[0]["runs"][BASELINE]["metrics"])
    per_seed = {
        name: {split: [100 * r["runs"][name]["metrics"][split]["f1"] for r in rounds] for split in splits}
        for name in CONFIGS
    }
    f1 = {name: {split: statistics.median(v) for split, v in d.items()} for name, d in per_seed.items()}
    ratios = {
        key: {
            kind: statistics.median(r["time_ratios"][key][kind] for r in rounds)
            for kind in ("train_s", "full_s")
        }
        for key in rounds[0]["time_ratios"]
    }
    targets = {
        name: {
            "f1_at_least_hf_minus_0.5": all(f1[name][s] >= f1[BASELINE][s] - F1_TOLERANCE for s in splits),
            "training_faster": ratios[f"{BASELINE}/{name}"]["train_s"] > 1.0,
        }
        for name in OURS
    }
    return {
        "median_f1": f1,
        "f1_per_round": per_seed,
        "median_f1_difference_vs_hf": {
            name: {s: f1[name][s] - f1[BASELINE][s] for s in splits} for name in OURS
        },
        "median_seconds": {
            name: {
                kind: statistics.median(r["runs"][name][kind] for r in rounds)
                for kind in ("train_s", "full_s")
            }
            for name in CONFIGS
        },
        "median_time_ratio": ratios,
        "load_average_per_round": [r["load_average_before"] for r in rounds],
        "targets": targets,
        "targets_met": all(targets["ours-hf"].values()),
        "checks": checks(rounds),
    }


def checks(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Every run trained on the same word pieces and labels; our trainer's own final F1 is the shared one."""
    runs = [run for r in rounds for run in r["runs"].values()]
    ours = [r["runs"][name] for r in rounds for name in OURS]
    return {
        "same_training_data_everywhere": all(run["same_training_data"] for run in runs),
        "same_steps_everywhere": len({run["steps"] for run in runs}) == 1,
        "max_abs_f1_difference_trainer_own_vs_shared": max(
            abs(run["trainer_own_f1"][split] - run["metrics"][split]["f1"])
            for run in ours
            for split in run["trainer_own_f1"]
        ),
    }


def print_summary(summary: dict[str, Any], out: Path) -> None:
    for name in CONFIGS:
        f1 = summary["median_f1"][name]
        secs = summary["median_seconds"][name]
        print(
            f"{name}: median F1 dev {f1['dev']:.2f} test {f1['test']:.2f}; "
            f"median train {secs['train_s']:.1f} s, full {secs['full_s']:.1f} s"
        )
    for key, ratio in summary["median_time_ratio"].items():
        print(f"{key}: median time ratio train {ratio['train_s']:.2f}x, full {ratio['full_s']:.2f}x")
    print(f"targets (ours-hf): {summary['targets']['ours-hf']} -> {out}")


def describe_checkpoint(model_dir: Path, note: str) -> dict[str, Any]:
    """The starting checkpoint: path, size, weights checksum and, for a pretrain run, how it was trained."""
    cfg = json.loads((model_dir / CONFIG_JSON).read_text())
    record: dict[str, Any] = {
        "path": portable_path(model_dir),
        "note": note,
        "size": {
            k: cfg.get(k)
            for k in (
                "num_hidden_layers",
                "hidden_size",
                "embedding_size",
                "num_attention_heads",
                "vocab_size",
            )
        },
        "weights_sha256": file_sha256(
            next(model_dir.glob("model.safetensors"), model_dir / "pytorch_model.bin")
        ),
    }
    run_config = model_dir.parent / "run_config.json"
    if run_config.is_file():
        run = json.loads(run_config.read_text())
        keys = ("data", "size", "objective", "steps", "batch_size", "lr", "warmup_steps", "seed")
        record["pretrain"] = {k: run.get(k) for k in keys} | {"seq_len": run.get("run", {}).get("seq_len")}
        data = record["pretrain"]["data"]
        if isinstance(data, str) and os.path.isabs(data):  # the pretrain run's --data, as it was given
            record["pretrain"]["data"] = portable_path(data)
    return record


def settings(common: Common) -> dict[str, Any]:
    args = common.args
    return {
        **{k: portable_path(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "lr": common.lr,
        "train_sentences": len(common.train),
        "eval_sentences": {split: len(d) for split, d in common.eval_data.items()},
        "labels": list(common.labels),
        "subset": "electra.training.finetune.data.subsample (fixed generator), the same for every run",
        "hf_trainer": "warmup_ratio as --warmup-fraction, linear schedule, weight_decay 0, "
        "max_grad_norm 1.0, default optim (AdamW, eps 1e-8), no evaluation or checkpoints during "
        "training, report_to [], use_cpu, 0 dataloader workers",
    }


def versions() -> dict[str, str]:
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="HF ELECTRA discriminator or `pretrain` --out")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "ner" / "conll2003")
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3], help="one per round")
    ap.add_argument("--max-train-examples", type=int, default=4000, help="training sentences (0: all)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=None, help="default: electra.sizes' for the model's width")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--warmup-fraction", type=float, default=0.1)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads, both sides (default 1: on a shared machine, threads beyond the idle cores stall "
        "at every parallel region; 2 threads on 2 busy cores measured 10-40x slower per step)",
    )
    ap.add_argument("--name", default="cpu", help="results file suffix")
    ap.add_argument("--note", default="", help="how the checkpoint was pre-trained, recorded with the result")
    args = ap.parse_args()
    if not args.data_dir.is_dir():
        print(f"skipped: {args.data_dir} is absent", file=sys.stderr)
        return 0
    torch.set_num_threads(args.threads)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    header = result_header("tagger_vs_hf")  # its load average: before the run
    common = load_common(args)
    warm_up_s = warm_up(common)
    with tempfile.TemporaryDirectory() as tmp:
        same_updates = lockstep(common, Path(tmp))
        print(f"lockstep: max |ours - hf| weight difference {same_updates['max_abs_weight_difference']:.2e}")
        rounds = [run_round(common, r, seed, Path(tmp)) for r, seed in enumerate(args.seeds)]
    summary = summarize(rounds)
    record = {
        **header,
        "load_average_after": os.getloadavg(),
        "versions": versions(),
        "checkpoint": describe_checkpoint(common.model_dir, args.note),
        "settings": settings(common),
        "times_include": TIMES_INCLUDE,
        "warm_up_s": warm_up_s,
        "lockstep": same_updates,
        "rounds": rounds,
        "summary": summary,
        "seconds": time.perf_counter() - started,
    }
    out = write_result(record, None, f"tagger_vs_hf_{args.name}")
    print_summary(summary, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
