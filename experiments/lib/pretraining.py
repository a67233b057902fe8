"""Pre-training one arm of an experiment to its budget points: one run on one schedule, stopped at each point
(a fraction of its steps), its models exported there, then resumed; every point recorded once."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.lib.store import read_record, write_record

POINT_RECORD = "point.json"
# Steps between checkpoints: a few minutes of a micro run on one thread, a few seconds to save.
CHECKPOINT_EVERY = 250


@dataclass(frozen=True)
class Recipe:
    """What an arm's pre-training run is given beyond the data, size, steps and seed; None: the size's."""

    objective: str = "electra"
    embedding_sharing: str = "tied"
    generator_size: float | None = None
    generator_lr_scale: float = 1.0
    generator_lr_scope: str = "all"
    mask_prob: float | None = None
    lr: float | None = None
    batch_size: int = 32
    adam: str = "torch"
    schedule: str = "hf"

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def point_name(point: float) -> str:
    return f"point-{round(point * 100):03d}"


def train_to_points(
    data: Path,
    run: Path,
    size: str,
    recipe: Recipe,
    steps: int,
    seed: int,
    points: tuple[float, ...],
    label: str,
    evaluations: int = 8,
) -> list[dict[str, Any]]:
    """Train `run` to each point in turn (stop, export the models beside the run, resume); each point's
    record names its step, tokens, time, load and the last validation before it. A point whose record exists
    is not trained again; a run stopped by a signal before a point raises SystemExit (run again to resume)."""
    from electra.training.pretrain.config import PretrainConfig
    from electra.training.pretrain.hf_models import export_hf
    from electra.training.pretrain.trainer import PretrainTrainer

    records = []
    for point in sorted(points):
        out = run.parent / point_name(point)
        if (done := read_record(out / POINT_RECORD)) is not None:
            records.append(done)
            continue
        stop = max(1, round(point * steps))
        cfg = PretrainConfig(
            data=data,
            out=run,
            size=size,
            steps=steps,
            seed=seed,
            stop_at=stop,
            resume=(run / "checkpoints").is_dir(),
            # A run killed before its first checkpoint left nothing to continue: start it over.
            overwrite=not (run / "checkpoints").is_dir(),
            log_every=50,
            eval_every=max(1, steps // evaluations),
            # Every validation row, not the first ten batches: losses a few hundredths apart are compared.
            eval_batches=1000,
            # A machine restart (no signal, no checkpoint) would otherwise lose the whole segment.
            checkpoint_every=CHECKPOINT_EVERY,
            keep_checkpoints=1,
            progress=False,
            **{k: v for k, v in asdict(recipe).items()},
        )
        print(f"{label}: pre-training to step {stop} of {steps}", flush=True)
        started, load = time.perf_counter(), os.getloadavg()[0]
        trainer = PretrainTrainer(cfg)
        begun_at = trainer.progress.step
        trainer.fit()
        if trainer.progress.step != stop:
            # Stopped early by a signal (SIGTERM/SIGINT save a checkpoint and return): not the point's model.
            raise SystemExit(f"{label}: stopped at step {trainer.progress.step} before {stop}; run again")
        export_hf(trainer.model, trainer.tokenizer, out)
        records.append(
            write_record(
                out / POINT_RECORD,
                {
                    "point": point,
                    "step": trainer.progress.step,
                    "steps_total": steps,
                    "seed": seed,
                    "tokens": trainer.progress.tokens,
                    "segment_seconds": time.perf_counter() - started,
                    "segment_steps": stop - begun_at,
                    "threads": _threads(),
                    "load_average": [load, os.getloadavg()[0]],
                    "validation": last_validation(run, stop),
                },
            )
        )
    return records


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def metrics(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def last_validation(run: Path, step: int) -> dict[str, Any] | None:
    val = [r for r in metrics(run) if r["split"] == "val" and r["step"] <= step]
    return val[-1] if val else None


def first_collapse(run: Path, step: int) -> int | None:
    """The first step at or before `step` whose training or validation record says `collapsed` (the
    trainer's watch, docs/pretraining.md: "The identity phase"), None if the run had not collapsed by then.
    Validation alone can miss it: it runs a few times a run, the training log every 50 steps."""
    hits = [r["step"] for r in metrics(run) if r.get("collapsed")]
    return next((s for s in hits if s <= step), None)


def encoder_dir(path: Path) -> Path:
    """The directory fine-tuning starts from: the discriminator, the masked-LM encoder, or the random one."""
    for name in ("discriminator", "mlm"):
        if (path / name / "config.json").is_file():
            return path / name
    return path


def random_encoder(data: Path, size: str, seed: int, out: Path) -> Path:
    """The floor: a freshly initialised discriminator of the size, with the data's tokenizer."""
    import torch

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import ElectraDiscriminator
    from electra.tokenizer import load_tokenizer, tokenizer_files
    from electra.training.data.dataset import PretrainingData

    if not (out / "config.json").is_file():
        prepared = PretrainingData.open(data)
        torch.manual_seed(seed)
        cfg = ElectraConfig.from_size(size, vocab_size=prepared.manifest["tokenizer"]["vocab_size"])
        tok = load_tokenizer(prepared.tokenizer_dir)
        save_hf_dir(ElectraDiscriminator(cfg), out, overwrite=True, extra_files=tokenizer_files(tok))
    return out


def prepare(corpus: Path, tokenizer: Path, out: Path, workers: int) -> Path:
    """The corpus prepared with `tokenizer` (128-token examples), once."""
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    if not (out / "manifest.json").is_file():
        print(f"preparing {corpus.name} with {tokenizer}", flush=True)
        prepare_dataset(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tokenizer),
                out=out,
                max_seq_len=128,
                progress=False,
                workers=workers,
            )
        )
    return out


def unigram_entropy(data: Path) -> float:
    """Entropy (nats) of the training split's tokens, specials left out: what a masked LM that reads no
    context at all can reach, the mark its loss has to go below to show it reads context."""
    import numpy as np

    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.trainer import data_tokenizer

    prepared = PretrainingData.open(data)
    _, sp = data_tokenizer(prepared)
    ids = np.asarray(prepared.train.input_ids)
    lengths = np.asarray(prepared.train.lengths)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    tokens = ids[valid & ~np.isin(ids, (sp.pad, sp.cls, sp.sep))]
    counts = np.bincount(tokens.astype(np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())
