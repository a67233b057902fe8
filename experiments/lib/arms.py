"""The design of the equal-compute experiment (experiments/equal_compute.py), shared with what reads its work
directory (experiments/embedding_swap.py): the arms, the setup every arm shares, and where each run lives.

Work directory layout: data/ (the corpus prepared with the vocabulary), vocab/ (a trained vocabulary),
arms/ARM/seed-S/run (one pre-training run per arm and pre-training seed) beside its budget points
arms/ARM/seed-S/point-PPP (the exported models and point.json), arms/random/seed-S/point-000 (the floor:
an untrained encoder initialised with seed S), heldout/ (the held-out text prepared with the vocabulary),
evaluations.jsonl (every fine-tuning and detection result, by key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from experiments.lib.evaluation import FinetuneBudget, Keys
from experiments.lib.pretraining import Recipe, point_name
from experiments.lib.store import write_record


@dataclass(frozen=True)
class Arm:
    label: str
    objective: str | None  # None: no pre-training (the floor)
    embedding_sharing: str = "tied"
    # What the setup's generator_lr_scale slows (--generator-lr-scope).
    generator_lr_scope: str = "all"
    # The arm's own generator learning-rate scale, generator width (a fraction of the discriminator's), Adam
    # and schedule, where it does not take the setup's.
    generator_lr_scale: float | None = None
    generator_size: float | None = None
    adam: str | None = None
    schedule: str | None = None


ARMS: dict[str, Arm] = {
    "electra": Arm("ELECTRA (tied)", "electra", "tied"),
    # ELECTRA as google-research/electra trains it: tied embeddings, the generator at the full learning rate
    # whatever the setup's scale, the official AdamWeightDecayOptimizer (no bias correction) and schedule.
    "official": Arm(
        "ELECTRA as the official code trains it",
        "electra",
        "tied",
        generator_lr_scale=1.0,
        adam="official",
        schedule="official",
    ),
    # DeBERTaV3's GDES: the generator's table E_G learns at the full rate from its MLM loss alone; a slower
    # generator (the setup's scale) means its layers and head only.
    "gdes": Arm("ELECTRA (GDES)", "electra", "gdes", "layers"),
    # The first experiment's `gdes`: E_G slowed with the generator's layers.
    "gdes-all": Arm("ELECTRA (GDES, E_G slowed too)", "electra", "gdes", "all"),
    "none": Arm("ELECTRA (no sharing)", "electra", "none"),
    # The generator-strength sweep (experiments/generator_strength.py): the ELECTRA arms above at other
    # generator rates and widths, each setting given whole, whatever the setup's scale and width.
    "official-half": Arm(
        "official, generator 1/2 wide",
        "electra",
        "tied",
        generator_lr_scale=1.0,
        generator_size=0.5,
        adam="official",
        schedule="official",
    ),
    "gdes-1x": Arm(
        "GDES, generator at 1x", "electra", "gdes", "layers", generator_lr_scale=1.0, generator_size=0.25
    ),
    "gdes-1x-half": Arm(
        "GDES, generator at 1x, 1/2 wide",
        "electra",
        "gdes",
        "layers",
        generator_lr_scale=1.0,
        generator_size=0.5,
    ),
    "gdes-all-0.2": Arm(
        "GDES, generator at 0.2x", "electra", "gdes", "all", generator_lr_scale=0.2, generator_size=0.25
    ),
    "gdes-all-0.2-half": Arm(
        "GDES, generator at 0.2x, 1/2 wide",
        "electra",
        "gdes",
        "all",
        generator_lr_scale=0.2,
        generator_size=0.5,
    ),
    "gdes-all-half": Arm(
        "GDES, generator at 0.05x, 1/2 wide",
        "electra",
        "gdes",
        "all",
        generator_lr_scale=0.05,
        generator_size=0.5,
    ),
    "mlm": Arm("masked LM", "mlm"),
    "random": Arm("random init (no pre-training)", None),
}
PRETRAINED = tuple(name for name, arm in ARMS.items() if arm.objective is not None)
ELECTRA_ARMS = tuple(name for name, arm in ARMS.items() if arm.objective == "electra")


@dataclass(frozen=True)
class Setup:
    work: Path
    vocab: str
    size: str
    flops: float  # the budget at 100%, the same for every pre-trained arm
    recipe: Recipe  # lr, batch, mask rate, generator width and lr scale: what every arm shares
    points: tuple[float, ...]
    pretrain_seeds: tuple[int, ...]
    tasks: tuple[str, ...]
    finetune_seeds: tuple[int, ...]
    budgets: dict[str, FinetuneBudget]  # per task
    swaps: int

    @property
    def data(self) -> Path:
        return self.work / "data"

    def arm_recipe(self, arm: str) -> Recipe:
        a = ARMS[arm]
        if a.objective is None:
            raise ValueError(f"{arm} is not pre-trained")
        electra = a.objective == "electra"
        scale = self.recipe.generator_lr_scale if a.generator_lr_scale is None else a.generator_lr_scale
        return replace(
            self.recipe,
            objective=a.objective,
            embedding_sharing=a.embedding_sharing,
            generator_lr_scope=a.generator_lr_scope,
            generator_lr_scale=scale if electra else 1.0,
            generator_size=(a.generator_size or self.recipe.generator_size) if electra else None,
            adam=a.adam or self.recipe.adam,
            schedule=a.schedule or self.recipe.schedule,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "size": self.size,
            "flops": self.flops,
            "recipe": self.recipe.describe(),
            "points": self.points,
            "pretrain_seeds": self.pretrain_seeds,
            "tasks": self.tasks,
            "finetune_seeds": self.finetune_seeds,
            "budgets": {task: b.describe() for task, b in self.budgets.items()},
            "swaps": self.swaps,
        }


def seed_dir(setup: Setup, arm: str, seed: int) -> Path:
    return setup.work / "arms" / arm / f"seed-{seed}"


def point_dir(setup: Setup, arm: str, seed: int, point: float) -> Path:
    return seed_dir(setup, arm, seed) / point_name(point)


def run_dir(setup: Setup, arm: str, seed: int) -> Path:
    return seed_dir(setup, arm, seed) / "run"


def finetune_keys(setup: Setup, arm: str, seed: int, point: float) -> Keys:
    """Cache keys of an encoder's evaluations: its arm, pre-training seed and point, the task with its
    fine-tuning budget (a budget changed in the same work directory is evaluated anew), the fine-tuning
    seed."""

    def key(task: str, ft_seed: int) -> str:
        b = setup.budgets[task]
        examples = "all" if b.max_train_examples is None else b.max_train_examples
        return f"finetune/{arm}/{seed}/{point}/{task}/{examples}x{b.epochs}/{b.recipe}/{ft_seed}"

    return key


def detection_key(arm: str, seed: int, point: float) -> str:
    return f"detection/{arm}/{seed}/{point}"


SETUP_RECORD = "setup.json"
PRETRAINING_FIELDS = ("vocab", "size", "flops", "recipe", "points")


def save_setup(setup: Setup) -> None:
    """The work directory's setup, for what reads it later (embedding_swap): written when an invocation of
    the experiment starts."""
    record = json.loads(json.dumps(setup.describe()))  # as the file holds it: lists, not tuples
    path = setup.work / SETUP_RECORD
    if path.is_file():
        earlier = json.loads(path.read_text())
        # Invocations may split the pre-training seeds between them (the work directory holds them all) and
        # evaluate with another fine-tuning budget (its cache keys name it); anything else of the
        # pre-training changed would mix two experiments in one directory.
        changed = sorted(k for k in PRETRAINING_FIELDS if earlier.get(k) != record[k])
        if changed:
            raise ValueError(
                f"{setup.work} holds an experiment with another {', '.join(changed)}; use another --work"
            )
        record["pretrain_seeds"] = sorted({*earlier["pretrain_seeds"], *setup.pretrain_seeds})
    write_record(path, record)


def seeds_held(setup: Setup, arm: str) -> list[int]:
    """The pre-training seeds of `arm` this invocation asks for or the work directory holds."""
    held = {int(p.name.removeprefix("seed-")) for p in (setup.work / "arms" / arm).glob("seed-*")}
    return sorted(held | set(setup.pretrain_seeds))


def load_setup(work: Path) -> Setup:
    """The setup the experiment recorded in `work`; FileNotFoundError when it has not run there."""
    path = work / SETUP_RECORD
    if not path.is_file():
        raise FileNotFoundError(f"{work}: no {SETUP_RECORD}; run experiments.equal_compute there first")
    d = json.loads(path.read_text())
    return Setup(
        work=work,
        vocab=d["vocab"],
        size=d["size"],
        flops=d["flops"],
        recipe=Recipe(**d["recipe"]),
        points=tuple(d["points"]),
        pretrain_seeds=tuple(d["pretrain_seeds"]),
        tasks=tuple(d["tasks"]),
        finetune_seeds=tuple(d["finetune_seeds"]),
        budgets={task: FinetuneBudget(**b) for task, b in d["budgets"].items()},
        swaps=d["swaps"],
    )
