"""The paper's central experiment in miniature: ELECTRA vs masked-LM pre-training at equal compute, on CPU.

Arms, pre-trained on the same data (the shared English Wikipedia sample, BERT's uncased vocabulary), with the
same encoder shape, seed, batch and learning rate, for the same training FLOPs as our FLOPs counter counts
them (generator included, so the masked-LM arm gets proportionally more steps, as the paper gives BERT-Small
1.5M steps to ELECTRA-Small's 1M):

* `electra`: replaced-token detection, generator and discriminator sharing one embedding block (tied);
* `gdes`: the same with gradient-disentangled embedding sharing (DeBERTaV3);
* `none`: the same with no embedding sharing (`--embedding-sharing none`): the discriminator's tables learn
  from its own loss only, which reaches a row only when its token is in the batch;
* `mlm`: the BERT-style masked-LM baseline;
* `random`: no pre-training at all, the floor.

Each pre-trained arm is evaluated at several points of its budget (--points) by fine-tuning with the default
recipe on a fixed suite (SST-2 and CoNLL-2003: a sentence task and a token task; --tasks adds STS-B or
MRPC), several seeds each, median and spread; the electra arms also report replaced-token detection on
held-out WikiText-2 (bench/heldout_detection.py). Every stage is cached in --work, so an interrupted run
continues where it stopped.

    python bench/equal_compute.py --work runs/equal-compute                  # the README's table and plot
    python bench/equal_compute.py --work runs/eq-smoke --steps 40 --points 0.5,1 --seeds 1 \\
        --tasks sst2 --max-train-examples 200                                  # a quick smoke run

Writes bench/results/equal_compute_cpu.json (per arm, budget point, task and seed: scores; FLOPs, steps,
tokens, wall time, load average, commit) and bench/results/equal_compute_cpu.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import cpu_name, git_commit, usable_cores, write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import heldout_detection as heldout  # noqa: E402

from electra.atomic import atomic_write_text  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WIKI = SHARED / "corpus" / "enwiki-2015-wikiextractor" / "AA"
VOCAB = SHARED / "models" / "bert-uncased-vocab" / "vocab.txt"
GLUE = SHARED / "glue"
CONLL = SHARED / "ner" / "conll2003"

ARMS = ("electra", "gdes", "none", "mlm", "random")
PRETRAINED = {
    "electra": ("electra", "tied"),
    "gdes": ("electra", "gdes"),
    "none": ("electra", "none"),
    "mlm": ("mlm", "tied"),
}
ELECTRA_ARMS = tuple(arm for arm, (objective, _) in PRETRAINED.items() if objective == "electra")
LABELS = {
    "electra": "ELECTRA (tied)",
    "gdes": "ELECTRA (GDES)",
    "none": "ELECTRA (no sharing)",
    "mlm": "masked LM",
}
RANDOM_POINT = {"arm": "random", "point": 0.0, "step": 0, "tokens": 0}
# The figure each task contributes to the suite average (x100), as in the paper's tables.
SCORE = {"sst2": "accuracy", "stsb": "pearson_spearman_avg", "mrpc": "f1_accuracy_avg", "conll2003": "f1"}


@dataclass(frozen=True)
class Setup:
    work: Path
    size: str
    steps: int  # of the electra arms; the mlm arm gets the steps of the same FLOPs
    batch_size: int
    lr: float | None
    generator_lr_scale: float
    points: tuple[float, ...]
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    max_train_examples: int | None
    max_epochs: int | None
    swaps: int
    seed: int = 0

    @property
    def data(self) -> Path:
        return self.work / "data"


# ------------------------------------------------------------------------------------------------ budgets


def row_counts(data_dir: Path, mask_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Per training row: real tokens, and masked predictions by the objective's own rule."""
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.trainer import data_tokenizer

    data = PretrainingData.open(data_dir)
    _, sp = data_tokenizer(data)
    lengths = np.asarray(data.train.lengths, dtype=np.int64)
    ids = np.asarray(data.train.input_ids)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    candidates = (valid & ~np.isin(ids, (sp.pad, sp.cls, sp.sep))).sum(axis=1)
    masked = np.where(candidates > 0, np.maximum(1, np.round(candidates * mask_prob)), 0).astype(np.int64)
    return lengths, masked


def flops_by_step(setup: Setup, objective: str, steps: int) -> np.ndarray:
    """Cumulative training FLOPs after each step (index s-1 for step s), replaying the run's batch order."""
    from electra.config import ElectraConfig, generator_config
    from electra.sizes import SIZES
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.flops import electra_step_flops
    from electra.training.pretrain.loader import GlobalBatchOrder

    size = SIZES[setup.size]
    data = PretrainingData.open(setup.data)
    lengths, masked = row_counts(setup.data, size.mask_prob)
    disc = ElectraConfig.from_size(setup.size, vocab_size=data.manifest["tokenizer"]["vocab_size"])
    gen = generator_config(disc) if objective == "electra" else None
    order = GlobalBatchOrder(len(lengths), setup.batch_size, setup.seed)
    per_step = []
    for _ in range(steps):
        idx = order.next_global_batch()
        per_step.append(
            electra_step_flops(disc, gen, int(lengths[idx].sum()), data.max_seq_len, int(masked[idx].sum()))
        )
    return np.cumsum(per_step)


def arm_steps(setup: Setup) -> dict[str, int]:
    """Steps per pre-trained arm for the electra arm's FLOPs: the mlm arm runs until it has spent as much."""
    budget = flops_by_step(setup, "electra", setup.steps)[-1]
    mlm = flops_by_step(setup, "mlm", 4 * setup.steps)
    return {**dict.fromkeys(ELECTRA_ARMS, setup.steps), "mlm": int(np.searchsorted(mlm, budget) + 1)}


# ------------------------------------------------------------------------------------------- pre-training


def prepare_data(setup: Setup) -> None:
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    if (setup.data / "manifest.json").is_file():
        return
    print(f"preparing {WIKI} with {VOCAB}", flush=True)
    prepare_dataset(
        PrepareConfig(
            corpus=[str(WIKI)],
            tokenizer=str(VOCAB),
            out=setup.data,
            max_seq_len=128,
            progress=False,
            workers=usable_cores(),
        )
    )


def point_dir(setup: Setup, arm: str, point: float) -> Path:
    return setup.work / "arms" / arm / f"point-{round(point * 100):03d}"


def pretrain_arm(setup: Setup, arm: str, steps: int) -> list[dict[str, Any]]:
    """Train `arm` to each budget point in turn (stop, export the models, resume), each exported once."""
    from electra.training.pretrain.config import PretrainConfig
    from electra.training.pretrain.hf_models import export_hf
    from electra.training.pretrain.trainer import PretrainTrainer

    objective, sharing = PRETRAINED[arm]
    run = setup.work / "arms" / arm / "run"
    records = []
    for point in setup.points:
        out = point_dir(setup, arm, point)
        info = out / "point.json"
        if info.is_file():
            records.append(json.loads(info.read_text()))
            continue
        stop = max(1, round(point * steps))
        cfg = PretrainConfig(
            data=setup.data,
            out=run,
            size=setup.size,
            objective=objective,
            embedding_sharing=sharing,
            steps=steps,
            batch_size=setup.batch_size,
            lr=setup.lr,
            seed=setup.seed,
            stop_at=stop,
            generator_lr_scale=setup.generator_lr_scale if objective == "electra" else 1.0,
            resume=(run / "checkpoints").is_dir(),
            # A run killed before its first checkpoint left nothing to continue: start it over.
            overwrite=not (run / "checkpoints").is_dir(),
            log_every=50,
            eval_every=max(1, steps // 8),
            checkpoint_every=steps + 1,
            keep_checkpoints=1,
            progress=False,
        )
        print(f"{arm}: pre-training to step {stop} of {steps}", flush=True)
        started, load = time.perf_counter(), os.getloadavg()[0]
        trainer = PretrainTrainer(cfg)
        begun_at = trainer.progress.step
        trainer.fit()
        seconds = time.perf_counter() - started
        if trainer.progress.step != stop:
            # Stopped early by a signal (SIGTERM/SIGINT save a checkpoint and return): the model is not the
            # budget point's. Stop here; the next invocation resumes from that checkpoint.
            step = trainer.progress.step
            raise SystemExit(f"{arm}: stopped at step {step} before {stop}; run again to resume")
        export_hf(trainer.model, trainer.tokenizer, out)
        record = {
            "arm": arm,
            "point": point,
            "step": trainer.progress.step,
            "steps_total": steps,
            "tokens": trainer.progress.tokens,
            "segment_seconds": seconds,
            "segment_steps": stop - begun_at,
            "load_average": [load, os.getloadavg()[0]],
            "validation": last_validation(run, trainer.progress.step),
        }
        atomic_write_text(info, json.dumps(record, indent=2) + "\n")
        records.append(record)
    return records


def finished_points(setup: Setup, points: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Every budget point this work directory holds, of this invocation's arms or of earlier ones: the
    results file always reports all of them (an invocation for one arm must not drop the others)."""
    found = {arm: list(recs) for arm, recs in points.items()}
    for arm in PRETRAINED:
        have = {rec["point"] for rec in found.get(arm, [])}
        for info in sorted((setup.work / "arms" / arm).glob("point-*/point.json")):
            rec = json.loads(info.read_text())
            if rec["point"] not in have:
                found.setdefault(arm, []).append(rec)
        if arm in found:
            found[arm].sort(key=lambda r: r["point"])
    if "random" not in found and (setup.work / "arms" / "random" / "point-000" / "config.json").is_file():
        found["random"] = [RANDOM_POINT]
    return {arm: found[arm] for arm in ARMS if arm in found}


def last_validation(run: Path, step: int) -> dict[str, Any] | None:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    val = [r for r in map(json.loads, lines) if r["split"] == "val" and r["step"] <= step]
    return val[-1] if val else None


def first_collapse(run: Path, step: int) -> int | None:
    """The first step at or before `step` whose training or validation record says `collapsed` (the
    trainer's watch, README "When pre-training collapses"), None if the run had not collapsed by then.
    Validation alone can miss it: it runs every eighth of the budget, the training log every 50 steps."""
    metrics = run / "metrics.jsonl"
    if not metrics.is_file():
        return None
    hits = [r["step"] for r in map(json.loads, metrics.read_text().splitlines()) if r.get("collapsed")]
    return next((s for s in hits if s <= step), None)


def random_arm(setup: Setup) -> Path:
    """The floor: a freshly initialised discriminator of the same shape and seed, with the same tokenizer."""
    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import ElectraDiscriminator
    from electra.tokenizer import load_tokenizer, tokenizer_files
    from electra.training.data.dataset import PretrainingData

    out = setup.work / "arms" / "random" / "point-000"
    if not (out / "config.json").is_file():
        import torch

        data = PretrainingData.open(setup.data)
        torch.manual_seed(setup.seed)
        cfg = ElectraConfig.from_size(setup.size, vocab_size=data.manifest["tokenizer"]["vocab_size"])
        tok = load_tokenizer(data.tokenizer_dir)
        save_hf_dir(ElectraDiscriminator(cfg), out, overwrite=True, extra_files=tokenizer_files(tok))
    return out


def encoder_dir(path: Path) -> Path:
    """The directory fine-tuning starts from: the discriminator, the masked-LM encoder, or the random one."""
    for name in ("discriminator", "mlm"):
        if (path / name / "config.json").is_file():
            return path / name
    return path


# --------------------------------------------------------------------------------------------- evaluation


class Cache:
    """Results by key in a JSON-lines file: a finished evaluation is never run twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the half-written last line of a killed run: that evaluation runs again
                self.rows[row["key"]] = row

    def get(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)

    def put(self, key: str, row: dict[str, Any]) -> dict[str, Any]:
        row = {"key": key, **row}
        with self.path.open("a") as f:
            # A line of its own even after a killed run's partial one.
            f.write("\n" + json.dumps(row) + "\n")
        self.rows[key] = row
        return row


def finetune_score(setup: Setup, model: Path, task: str, seed: int) -> dict[str, Any]:
    from electra.training.finetune.config import FinetuneConfig
    from electra.training.finetune.run import finetune

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        summary = finetune(
            FinetuneConfig(
                task=task,
                model=model,
                out=Path(tmp) / "model",
                data_dir=CONLL if task == "conll2003" else GLUE,
                seeds=[seed],
                epochs=setup.max_epochs,
                max_train_examples=setup.max_train_examples,
                progress=False,
            )
        )
    dev = summary["median"]["dev"]
    return {
        "score": 100 * dev[SCORE[task]],
        "dev": {
            k: v
            for k, v in dev.items()
            if isinstance(v, float) and not k.startswith(("precision_", "recall_"))
        },
        "epochs": summary["epochs"],
        "train_examples": summary["train_examples"],
        "seconds": time.perf_counter() - started,
        "load_average": os.getloadavg()[0],
    }


def finetune_each(
    setup: Setup, cache: Cache, prefix: str, model: Path, fields: dict[str, Any], label: str
) -> None:
    """Fine-tune `model` for every task and seed the cache has no row for yet (keys `prefix/task/seed`)."""
    for task in setup.tasks:
        for seed in setup.seeds:
            key = f"{prefix}/{task}/{seed}"
            if cache.get(key) is None:
                row = cache.put(
                    key, {**fields, "task": task, "seed": seed, **finetune_score(setup, model, task, seed)}
                )
                print(f"{label} {task} seed {seed}: {row['score']:.1f} ({row['seconds']:.0f} s)", flush=True)


def evaluate_point(setup: Setup, cache: Cache, arm: str, point: float, path: Path) -> None:
    finetune_each(
        setup,
        cache,
        f"finetune/{arm}/{point}",
        encoder_dir(path),
        {"arm": arm, "point": point},
        f"{arm} @{point:.0%}",
    )
    if arm in ELECTRA_ARMS:
        key = f"detection/{arm}/{point}"
        if cache.get(key) is None:
            row = cache.put(key, {"arm": arm, "point": point, **detection(setup, path)})
            figures = {k: round(v, 3) for k, v in row.items() if isinstance(v, float)}
            print(
                f"{arm} @{point:.0%} held-out detection: {json.dumps(figures)}",
                flush=True,
            )


def detection(setup: Setup, path: Path) -> dict[str, float]:
    swaps = heldout.make_swaps(
        heldout.sentences(heldout.heldout_paragraphs()), heldout.pos_lexicon(), setup.swaps
    )
    result = heldout.swap_detection(path / "discriminator", swaps)
    result.update(
        heldout.generator_detection(path, heldout.prepare_heldout(setup.work, path / "discriminator"))
    )
    return result


# ----------------------------------------------------------------------------------------------- results


def task_scores(
    cache: Cache, prefix: str, tasks: tuple[str, ...], seeds: tuple[int, ...]
) -> dict[str, dict[str, Any]]:
    """Per task with any seed evaluated (keys `prefix/task/seed`): median, range, scores in seed order."""
    out = {}
    for task in tasks:
        rows = (cache.get(f"{prefix}/{task}/{seed}") for seed in seeds)
        scores = [row["score"] for row in rows if row is not None]
        if scores:
            out[task] = {
                "median": statistics.median(scores),
                "min": min(scores),
                "max": max(scores),
                "per_seed": scores,
            }
    return out


def summarize(
    setup: Setup, cache: Cache, steps: dict[str, int], points: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    flops = {arm: flops_by_step(setup, PRETRAINED[arm][0], steps[arm]) for arm in PRETRAINED if arm in points}
    arms: dict[str, Any] = {}
    for arm, recs in points.items():
        rows = []
        for rec in recs:
            point = rec["point"]
            tasks = task_scores(cache, f"finetune/{arm}/{point}", setup.tasks, setup.seeds)
            row = {**rec, "tasks": tasks}
            if arm != "random":
                row["flops"] = float(flops[arm][rec["step"] - 1])
                row["collapsed_at_step"] = first_collapse(setup.work / "arms" / arm / "run", rec["step"])
            if len(tasks) == len(setup.tasks):
                row["suite_average"] = statistics.mean(t["median"] for t in tasks.values())
            det = cache.get(f"detection/{arm}/{point}")
            if det is not None:
                row["heldout_detection"] = {k: v for k, v in det.items() if k not in ("key", "arm", "point")}
            rows.append(row)
        arms[arm] = rows
    return arms


def markdown_table(result: dict[str, Any]) -> str:
    """The README's table: one row per arm and budget point, the median over seeds and its range per task."""
    tasks = result["setup"]["tasks"]
    head = [
        "arm",
        "budget",
        "steps",
        "FLOPs",
        *tasks,
        "average",
        "val AUC",
        "held-out swap AUC",
        "generator AUC",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm, rows in result["arms"].items():
        for r in rows:
            cells = [arm, f"{r['point']:.0%}" if arm != "random" else "-", str(r["step"])]
            cells.append(f"{r['flops']:.2e}" if "flops" in r else "0")
            for task in tasks:
                t = r["tasks"].get(task)
                cells.append(f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})" if t else "")
            cells.append(f"{r['suite_average']:.1f}" if "suite_average" in r else "")
            val = r.get("validation") or {}
            auc = val.get("disc_auc")
            collapsed = r.get("collapsed_at_step")
            if collapsed is None and val.get("collapsed"):
                collapsed = val.get("step")
            cells.append(
                "" if auc is None else f"{auc:.2f}" + (f" (collapsed at {collapsed})" if collapsed else "")
            )
            det = r.get("heldout_detection", {})
            cells += [f"{det['swap_auc']:.3f}" if det else "", f"{det['generator_auc']:.3f}" if det else ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def floor_crossing(points: list[tuple[float, float]], floor: float) -> dict[str, Any]:
    """Where a straight line through (log10 FLOPs, suite average) meets the random-init floor: a rough
    extrapolation of when an arm would start to beat no pre-training, from the budget points of one run.

    Least squares over the points; `flops` is None when the line does not rise (no crossing ahead), and the
    current point when the arm is already above the floor at its last point.
    """
    x = np.log10([f for f, _ in points])
    y = np.asarray([a for _, a in points])
    slope, intercept = np.polyfit(x, y, 1) if len(points) > 1 else (0.0, float(y[0]))
    if y[-1] > floor:
        return {"slope_per_decade": float(slope), "flops": float(points[-1][0]), "above_floor": True}
    if slope <= 0:
        return {"slope_per_decade": float(slope), "flops": None, "above_floor": False}
    return {
        "slope_per_decade": float(slope),
        "flops": float(10 ** ((floor - intercept) / slope)),
        "above_floor": False,
    }


def floor_crossings(arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """floor_crossing for every pre-trained arm with a suite average at two or more budget points."""
    floor = [r["suite_average"] for r in arms.get("random", []) if "suite_average" in r]
    out: dict[str, Any] = {}
    if not floor:
        return out
    for arm, rows in arms.items():
        pts = [(r["flops"], r["suite_average"]) for r in rows if "flops" in r and "suite_average" in r]
        if arm != "random" and len(pts) >= 2:
            out[arm] = {"floor": floor[0], "points": len(pts), **floor_crossing(pts, floor[0])}
    return out


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"electra": "o-", "gdes": "s-", "none": "D-", "mlm": "^-"}
    for arm, rows in result["arms"].items():
        pts = [(r["flops"], r["suite_average"]) for r in rows if "suite_average" in r and "flops" in r]
        if arm == "random":
            floor = [r["suite_average"] for r in rows if "suite_average" in r]
            if floor:
                ax.axhline(floor[0], color="k", linestyle=":", label="random init (no pre-training)")
        elif pts:
            ax.plot(
                *zip(*pts, strict=True),
                styles[arm],
                label=LABELS[arm],
            )
    # Budget points are fractions of one budget: show them against zero.
    ax.set_xlim(
        0,
        1.08 * max((r["flops"] for rows in result["arms"].values() for r in rows if "flops" in r), default=1),
    )
    ax.set_xlabel("pre-training FLOPs")
    ax.set_ylabel(f"suite average ({', '.join(result['setup']['tasks'])})")
    ax.set_title(f"equal compute, {result['setup']['size']} encoder, {result['machine']['cores']} CPU cores")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path


# ------------------------------------------------------------------------------------------------- main


def parse_args() -> tuple[Setup, list[str], str]:
    from benchlib import int_list

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="where data, runs and partial results are kept")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--size", default="micro")
    ap.add_argument("--steps", type=int, default=2400, help="the electra arms' steps (default: %(default)s)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=None, help="default: the size's")
    ap.add_argument(
        "--generator-lr-scale", type=float, default=0.05, help="the electra arms' (default: %(default)s)"
    )
    ap.add_argument("--points", default="0.25,0.5,1", help="budget fractions evaluated")
    # STS-B (a pair regression task) costs 3x SST-2 per example; sentence + token tasks fit the CPU budget.
    ap.add_argument("--tasks", default="sst2,conll2003")
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3])
    ap.add_argument("--max-train-examples", type=int, default=3000)
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--swaps", type=int, default=2000, help="held-out swapped sentences")
    ap.add_argument("--name", default="equal_compute_cpu", help="results file name")
    a = ap.parse_args()
    arms = a.arms.split(",")
    if unknown := set(arms) - set(ARMS):
        ap.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    setup = Setup(
        work=a.work,
        size=a.size,
        steps=a.steps,
        batch_size=a.batch_size,
        lr=a.lr,
        generator_lr_scale=a.generator_lr_scale,
        points=tuple(float(p) for p in a.points.split(",")),
        tasks=tuple(a.tasks.split(",")),
        seeds=tuple(a.seeds),
        max_train_examples=a.max_train_examples,
        max_epochs=a.max_epochs,
        swaps=a.swaps,
    )
    return setup, arms, a.name


def main() -> int:
    setup, arms, name = parse_args()
    missing = [p for p in (WIKI, VOCAB, GLUE, CONLL, heldout.WIKITEXT) if not p.exists()]
    if missing:
        print(f"skipped: {', '.join(map(str, missing))} absent", file=sys.stderr)
        return 0
    setup.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    prepare_data(setup)
    steps = arm_steps(setup)
    print(f"steps at equal FLOPs: {steps}", flush=True)
    cache = Cache(setup.work / "evaluations.jsonl")
    points: dict[str, list[dict[str, Any]]] = {}
    if "random" in arms:
        path = random_arm(setup)
        points["random"] = [RANDOM_POINT]
        evaluate_point(setup, cache, "random", 0.0, path)
    for arm in (a for a in arms if a != "random"):
        points[arm] = pretrain_arm(setup, arm, steps[arm])
        for rec in points[arm]:
            evaluate_point(setup, cache, arm, rec["point"], point_dir(setup, arm, rec["point"]))
        write(setup, cache, steps, finished_points(setup, points), name, started)
    path = write(setup, cache, steps, finished_points(setup, points), name, started)
    print(f"wrote {path}")
    print(markdown_table(json.loads(path.read_text())))
    return 0


def write(
    setup: Setup,
    cache: Cache,
    steps: dict[str, int],
    points: dict[str, list[dict[str, Any]]],
    name: str,
    started: float,
) -> Path:
    import torch

    from electra.sizes import SIZES

    result = {
        "benchmark": "equal_compute",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {
            "cpu": cpu_name(),
            "cores": usable_cores(),
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "setup": {
            "size": setup.size,
            "architecture": SIZES[setup.size].architecture(),
            "batch_size": setup.batch_size,
            "lr": setup.lr or SIZES[setup.size].pretrain_lr,
            "electra_steps": setup.steps,
            "steps": steps,
            "points": setup.points,
            "tasks": setup.tasks,
            "seeds": setup.seeds,
            "max_train_examples": setup.max_train_examples,
            "max_epochs": setup.max_epochs,
            "recipe": "official (the default)",
            "data": "enwiki-2015 sample, BERT uncased vocab, 128 tokens",
        },
        "wall_seconds_this_invocation": time.perf_counter() - started,
        "arms": summarize(setup, cache, steps, points),
    }
    result["floor_crossing"] = floor_crossings(result["arms"])
    path = write_result(result, None, name)
    plot(result, path.with_suffix(".png"))
    return path


if __name__ == "__main__":
    raise SystemExit(main())
