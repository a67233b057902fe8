"""`electra finetune`, `evaluate`, `predict`: GLUE-style classification and regression on a discriminator.

The ELECTRA fine-tuning recipe by default: lr 3e-4 (small) / 1e-4 (base) / 5e-5 (large), layer-wise
learning-rate decay 0.8 (0.9 large), 10% linear warmup then linear decay, batch 32, 3 epochs (10 for RTE and
STS-B), no weight decay, dev evaluation after every epoch, several seeds with the median reported.

Layer-wise decay: the classifier head and the top encoder layer train at the full learning rate and each layer
below at `decay` times the one above; the embeddings sit below layer 0. The official code
(`_get_layer_lrs`) puts the head at depth n+2 and the top layer at n, so its top layer already gets decay^2
and its embeddings decay^(n+2); we use decay^0 for the top layer and decay^n for the embeddings, which is what
the paper describes.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.errors import InputError
from electra.training.finetune.glue_metrics import glue_metrics
from electra.training.finetune.tasks import TASKS, Example, TaskSpec, label_names, read_custom, read_glue
from electra.training.optim import build_scheduler

# Recipe by model width (the paper's sizes): learning rate and layer-wise decay.
RECIPE = {256: (3e-4, 0.8), 768: (1e-4, 0.8), 1024: (5e-5, 0.9)}
DEFAULT_RECIPE = (1e-4, 0.8)


@dataclass
class FinetuneConfig:
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
    epochs: int | None = None
    lr: float | None = None
    layerwise_lr_decay: float | None = None
    batch_size: int = 32
    max_seq_len: int = 128
    warmup_fraction: float = 0.1
    weight_decay: float = 0.0
    seeds: list[int] = field(default_factory=lambda: [1])
    precision: str | None = None
    device: str | None = None
    max_train_examples: int | None = None
    overwrite: bool = False
    progress: bool = True


@dataclass
class Encoded:
    """Tokenized examples, unpadded; batches are padded to their own longest sequence."""

    ids: list[list[int]]
    type_ids: list[list[int]]
    labels: np.ndarray | None

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, idx: np.ndarray, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
        length = max(len(self.ids[i]) for i in idx)
        ids = np.full((len(idx), length), pad_id, dtype=np.int64)
        types = np.zeros((len(idx), length), dtype=np.int64)
        mask = np.zeros((len(idx), length), dtype=np.int64)
        for row, i in enumerate(idx):
            n = len(self.ids[i])
            ids[row, :n], types[row, :n], mask[row, :n] = self.ids[i], self.type_ids[i], 1
        out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        return {k: torch.from_numpy(v).to(device) for k, v in out.items()}


def custom_task(labels: tuple[str, ...] | None) -> TaskSpec:
    regression = labels is None
    return TaskSpec(
        name="custom",
        dir_name="",
        labels=labels,
        metrics=("pearson", "spearman") if regression else ("accuracy",),
        main_metric="pearson" if regression else "accuracy",
        dev_splits=("dev",),
        test_splits=("test",),
        default_epochs=3,
        submission_name="custom",
    )


def load_datasets(cfg: FinetuneConfig) -> tuple[TaskSpec, list[Example], dict[str, list[Example]]]:
    """The task, its training examples, and its dev splits by name."""
    if cfg.task == "custom":
        if cfg.train is None or cfg.dev is None:
            raise InputError("--task custom needs --train FILE and --dev FILE (CSV, TSV or JSONL)")
        train = read_custom(
            cfg.train, cfg.text_column, cfg.text_pair_column, cfg.label_column, cfg.regression
        )
        dev = read_custom(cfg.dev, cfg.text_column, cfg.text_pair_column, cfg.label_column, cfg.regression)
        task = custom_task(None if cfg.regression else label_names(train))
        if task.labels is not None:
            unknown = sorted({str(e.label) for e in dev} - set(task.labels))
            if unknown:
                raise InputError(
                    f"{cfg.dev} has labels {unknown[:5]} that never occur in {cfg.train}; the classifier "
                    "cannot predict them: fix the labels or add training examples"
                )
        return task, train, {"dev": dev}
    if cfg.task not in TASKS:
        raise InputError(f"--task {cfg.task!r} is not one of {', '.join([*TASKS, 'custom'])}")
    if cfg.data_dir is None:
        raise InputError(f"--task {cfg.task} needs --data-dir (the GLUE directory)")
    task = TASKS[cfg.task]
    train = read_glue(task, cfg.data_dir, "train")
    dev = {split: read_glue(task, cfg.data_dir, split) for split in task.dev_splits}
    return task, train, dev


def encode(tok: Any, examples: list[Example], task: TaskSpec, max_len: int) -> Encoded:
    tok.enable_truncation(max_length=max_len, strategy="longest_first")
    try:
        inputs = [(e.text, e.text_pair) if e.text_pair is not None else e.text for e in examples]
        encodings = tok.encode_batch(inputs)
    finally:
        tok.no_truncation()
    labels = None
    if examples and examples[0].label is not None:
        if task.labels is None:
            labels = np.asarray([float(e.label) for e in examples], dtype=np.float32)
        else:
            index = {name: i for i, name in enumerate(task.labels)}
            labels = np.asarray([index[str(e.label)] for e in examples], dtype=np.int64)
    return Encoded([e.ids for e in encodings], [e.type_ids for e in encodings], labels)


def resolve_model_dir(path: Path) -> Path:
    """A Hugging Face directory, or a run of `electra pretrain` (its discriminator)."""
    if not path.exists():
        raise InputError(f"--model {path} does not exist")
    if (path / "config.json").is_file():
        return path
    if (path / "discriminator" / "config.json").is_file():
        return path / "discriminator"
    raise InputError(
        f"--model {path} is not a model directory (no config.json); pass a Hugging Face ELECTRA directory or "
        "the --out of `electra pretrain`"
    )


def layerwise_groups(model: nn.Module, lr: float, decay: float, weight_decay: float) -> list[dict]:
    """A group per depth: head and top layer at lr, each layer below x decay, embeddings lowest."""
    n = model.config.num_hidden_layers
    groups: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, p in model.named_parameters():
        if name.startswith("electra.encoder.layer."):
            depth = int(name.split(".")[3])
            scale = decay ** (n - 1 - depth)
        elif name.startswith("electra.embeddings"):
            scale = decay**n
        else:
            scale = 1.0  # the classifier head
        no_decay = name.endswith(("bias", "LayerNorm.weight", "LayerNorm.bias"))
        groups.setdefault((scale, no_decay), []).append(p)
    return [
        {"params": params, "lr": lr * scale, "weight_decay": 0.0 if no_decay else weight_decay}
        for (scale, no_decay), params in sorted(groups.items(), key=lambda kv: -kv[0][0])
    ]


def _loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    if regression:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    data: Encoded,
    pad_id: int,
    device: torch.device,
    autocast,
    batch_size: int = 128,
) -> np.ndarray:
    model.eval()
    # Sorting by length keeps padding (wasted compute) small; results go back in the original order.
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    out = np.zeros((len(data), model.config.num_labels), dtype=np.float32)
    for lo in range(0, len(order), batch_size):
        idx = order[lo : lo + batch_size]
        with autocast:
            logits = model(**data.batch(idx, pad_id, device))
        out[idx] = logits.float().cpu().numpy()
    return out


def score(task: TaskSpec, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    preds = logits[:, 0] if task.labels is None else logits.argmax(-1)
    return glue_metrics(task, preds, labels)


def finetune(cfg: FinetuneConfig) -> dict[str, Any]:
    from electra.atomic import check_output_dir
    from electra.hf_format import load_hf_dir_with_report, save_hf_dir
    from electra.tokenizer import load_tokenizer, save_tokenizer, special_ids

    if cfg.batch_size < 1 or cfg.max_seq_len < 8:
        raise InputError("--batch-size must be >= 1 and --max-seq-len >= 8")
    if not cfg.seeds:
        raise InputError("--seeds needs at least one seed, e.g. --seeds 1,2,3")
    check_output_dir(cfg.out, cfg.overwrite)
    model_dir = resolve_model_dir(Path(cfg.model))
    try:
        tok = load_tokenizer(model_dir)
    except InputError as e:
        raise InputError(f"--model {model_dir} has no usable tokenizer ({e})") from e
    pad_id = special_ids(tok).pad
    task, train_examples, dev_examples = load_datasets(cfg)
    if cfg.max_train_examples:
        rng = np.random.default_rng(0)
        keep = np.sort(rng.permutation(len(train_examples))[: cfg.max_train_examples])
        train_examples = [train_examples[i] for i in keep]
    if not train_examples:
        raise InputError("the training set is empty")
    train = encode(tok, train_examples, task, cfg.max_seq_len)
    devs = {name: encode(tok, ex, task, cfg.max_seq_len) for name, ex in dev_examples.items()}

    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    precision = cfg.precision or ("bf16" if device.type == "cuda" else "fp32")
    if precision == "fp16" and device.type != "cuda":
        raise InputError("--precision fp16 needs a CUDA device; use fp32 (or bf16) on CPU")
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
        if precision != "fp32"
        else nullcontext()
    )
    labels = task.labels
    overrides: dict[str, Any] = (
        {
            "num_labels": 1,
            "problem_type": "regression",
            "id2label": {0: "LABEL_0"},
            "label2id": {"LABEL_0": 0},
        }
        if labels is None
        else {
            "num_labels": len(labels),
            "problem_type": "single_label_classification",
            "id2label": dict(enumerate(labels)),
            "label2id": {name: i for i, name in enumerate(labels)},
        }
    )
    epochs = cfg.epochs or task.default_epochs
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total_steps = epochs * steps_per_epoch
    results: dict[str, Any] = {}
    best: tuple[float, int, nn.Module] | None = None
    started = time.perf_counter()
    for seed in cfg.seeds:
        torch.manual_seed(seed)
        model, report = load_hf_dir_with_report(model_dir, kind="classifier", **overrides)
        model.to(device)
        base_lr, base_decay = RECIPE.get(model.config.hidden_size, DEFAULT_RECIPE)
        lr = cfg.lr or base_lr
        decay = cfg.layerwise_lr_decay if cfg.layerwise_lr_decay is not None else base_decay
        groups = layerwise_groups(model, lr, decay, cfg.weight_decay)
        optimizer = torch.optim.AdamW(groups, lr=lr, eps=1e-6, fused=device.type == "cuda" or None)
        scheduler = build_scheduler(optimizer, int(cfg.warmup_fraction * total_steps), total_steps)
        per_epoch = []
        bar = None
        if cfg.progress:
            from tqdm import tqdm

            bar = tqdm(
                total=total_steps,
                desc=f"{task.name} seed {seed}",
                unit="step",
                file=sys.stderr,
                dynamic_ncols=True,
            )
        for epoch in range(epochs):
            model.train()
            order = np.random.default_rng([seed, epoch]).permutation(len(train))
            for lo in range(0, len(order), cfg.batch_size):
                idx = order[lo : lo + cfg.batch_size]
                batch = train.batch(idx, pad_id, device)
                target = torch.from_numpy(train.labels[idx]).to(device)
                with autocast:
                    logits = model(**batch)
                loss = _loss(logits, target, labels is None)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                if bar is not None:
                    bar.update(1)
                    if bar.n % 10 == 0:  # .item() waits for the device: not every step
                        bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
            metrics = {
                name: score(task, predict_logits(model, d, pad_id, device, autocast), d.labels)
                for name, d in devs.items()
                if d.labels is not None
            }
            per_epoch.append({"epoch": epoch + 1, **metrics})
        if bar is not None:
            bar.close()
        final = per_epoch[-1]
        results[str(seed)] = {
            "epochs": per_epoch,
            "final": final,
            "newly_initialized": report.newly_initialized,
        }
        main_split = task.dev_splits[0]
        main_value = final.get(main_split, {}).get(task.main_metric, float("nan"))
        if best is None or (not math.isnan(main_value) and main_value > best[0]):
            best = (main_value, seed, model.cpu())
        print(
            f"{task.name} seed {seed}: "
            + "; ".join(
                f"{split} " + ", ".join(f"{k} {v:.4f}" for k, v in m.items())
                for split, m in final.items()
                if split != "epoch"
            ),
            file=sys.stderr,
        )

    finals = [r["final"] for r in results.values()]
    median = {
        split: {k: statistics.median(f[split][k] for f in finals) for k in finals[0][split]}
        for split in finals[0]
        if split != "epoch"
    }
    summary = {
        "task": task.name,
        "model": str(model_dir),
        "seeds": cfg.seeds,
        "selected_seed": best[1] if best else None,
        "median": median,
        "per_seed": results,
        "train_examples": len(train),
        "epochs": epochs,
        "seconds": time.perf_counter() - started,
        "config": json.loads(json.dumps(asdict(cfg), default=str)),
    }
    assert best is not None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        save_tokenizer(tok, Path(tmp))
        files = {p.name: p.read_bytes() for p in Path(tmp).iterdir()}
    files["eval_results.json"] = (json.dumps(summary, indent=2) + "\n").encode()
    save_hf_dir(best[2], cfg.out, overwrite=cfg.overwrite, extra_files=files)
    return summary
