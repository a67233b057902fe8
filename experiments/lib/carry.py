"""An equal-compute work directory's finished points, packed to be carried to another machine, and unpacked
into a work directory there: what the stages after pre-training need, and nothing else.

Why: one arm's pre-training takes hours on 2 cores and its fine-tunes hours more, while a work directory
lives on one machine. A packed point holds its record (point.json: step, tokens, last validation), its
encoder (the discriminator or the masked LM: fine-tuning starts from it), its run's training log
(metrics.jsonl: the validation history and collapse the results file reports) and the arm's cached
evaluations; with them come the setup, the step counts and a trained vocabulary, so that the corpus
prepared there is the one the point was trained on. Not carried: the checkpoints (optimizer state; a point is
trained to the end before it is packed), the run's config (it names this machine's paths) and the generator,
which only held-out detection reads; so an ELECTRA point packs only once its detection is cached
(equal_compute's evaluate runs it first).

Unpacking never overwrites: a file the work directory has is its own (the same, or newer), and an evaluation
it has cached stays. The work directory's setup then meets the invocation's (save_setup), so a packed point
cannot join an experiment with another budget, vocabulary or recipe.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from experiments.lib.arms import ELECTRA_ARMS, SETUP_RECORD, Setup, detection_key, seed_dir
from experiments.lib.pretraining import POINT_RECORD, encoder_dir
from experiments.lib.store import Cache

EVALUATIONS = "evaluations.jsonl"
STEPS = "steps.json"
TRAINING_LOG = "metrics.jsonl"


class CarryError(ValueError):
    """A point that cannot be packed as it is (its detection not cached, a machine path in a file)."""


def pack(setup: Setup, cache: Cache, arms: Iterable[str], dest: Path) -> list[Path]:
    """The finished points of `arms` (every pre-training seed of the setup) packed into `dest`, which then
    mirrors the work directory's layout; the point directories packed. Packing again adds to `dest`."""
    work = setup.work
    chosen = [arm for arm in arms if arm != "random"]  # the floor is rebuilt in seconds from its seed
    points = [
        record.parent
        for arm in chosen
        for seed in setup.pretrain_seeds
        for record in sorted(seed_dir(setup, arm, seed).glob(f"point-*/{POINT_RECORD}"))
    ]
    for point in points:
        arm, seed, fraction = _identify(point)
        if arm in ELECTRA_ARMS and cache.get(detection_key(arm, seed, fraction)) is None:
            raise CarryError(
                f"{point.relative_to(work)}: its held-out detection is not cached; run its evaluation first "
                "(detection reads the generator, which is not packed)"
            )
    files = [work / SETUP_RECORD, work / STEPS]
    vocab = work / "vocab" / setup.vocab
    if vocab.is_dir():
        files += sorted(p for p in vocab.rglob("*") if p.is_file())
    for point in points:
        files.append(point / POINT_RECORD)
        files += sorted(p for p in encoder_dir(point).rglob("*") if p.is_file())
        files.append(point.parent / "run" / TRAINING_LOG)
    for path in files:
        _check_portable(path, work)
    for path in files:
        target = dest / path.relative_to(work)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    carried = Cache(dest / EVALUATIONS)
    for key, row in cache.rows.items():
        if key.split("/")[1] in chosen and carried.get(key) is None:
            carried.put(key, {k: v for k, v in row.items() if k != "key"})
    return points


def unpack(src: Path, work: Path) -> list[Path]:
    """`src` (a pack) merged into the work directory `work`: files it lacks copied, evaluations it has not
    cached added; the files copied."""
    if not (src / SETUP_RECORD).is_file():
        raise CarryError(f"{src}: not a packed work directory (no {SETUP_RECORD})")
    copied = []
    for path in sorted(p for p in src.rglob("*") if p.is_file() and p.name != EVALUATIONS):
        target = work / path.relative_to(src)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        copied.append(target)
    cache = Cache(work / EVALUATIONS)
    for key, row in Cache(src / EVALUATIONS).rows.items():
        if cache.get(key) is None:
            cache.put(key, {k: v for k, v in row.items() if k != "key"})
    return copied


def _identify(point: Path) -> tuple[str, int, float]:
    """A point directory's arm, pre-training seed and budget fraction, from its record and place."""
    record = json.loads((point / POINT_RECORD).read_text())
    return point.parent.parent.name, int(record["seed"]), float(record["point"])


def _check_portable(path: Path, work: Path) -> None:
    if not path.is_file():
        raise CarryError(f"{path.relative_to(work)}: missing (is the point's run complete?)")
    if path.suffix not in {".json", ".jsonl", ".txt"}:
        return
    text = path.read_text(errors="replace")
    for root in {str(work), str(work.resolve())}:
        if root in text:
            raise CarryError(f"{path.relative_to(work)} names this machine's work directory {root}")
