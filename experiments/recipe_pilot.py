"""The pilot of the equal-compute experiment: which vocabulary and pre-training recipe let a `micro` encoder
learn something from context within a CPU budget, before the experiment spends hours on them.

Each trial pre-trains one model on the shared Wikipedia sample for the same training FLOPs (our counter,
generator included) and records what says whether it reads context: the masked LM's (or the generator's)
validation loss against the unigram entropy of the corpus under that vocabulary (a model that reads no
context cannot go below it), and for ELECTRA the discriminator's validation AUC and its detection of
replacements in held-out English (experiments.lib.heldout). `--floors` fine-tunes randomly initialised
encoders under each vocabulary: what a vocabulary costs or gives before any pre-training.

A trial is a spec, `OBJECTIVE[:key=value,...]` with keys vocab (bert-uncased, cased-N, uncased-N), sharing
(tied, gdes, none), gen (generator width fraction), scale and scope (--generator-lr-scale/-scope), mask, lr
and batch; left out, the size's defaults (and vocab cased-8192):

    python -m experiments.recipe_pilot --work runs/pilot --prepare bert-uncased,cased-8192
    python -m experiments.recipe_pilot --work runs/pilot --trials mlm:vocab=cased-8192 "electra:lr=1e-3"
    python -m experiments.recipe_pilot --work runs/pilot --floors cased-8192,uncased-8192

Every trial and floor is cached in --work (several invocations may run side by side on distinct trials);
each invocation rewrites experiments/results/recipe_pilot.json from all of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.benchlib import int_list, result_header, usable_cores, write_result
from experiments.lib import heldout
from experiments.lib.budget import flops_by_step, steps_within
from experiments.lib.evaluation import FinetuneBudget, finetune_each, prefixed, task_scores
from experiments.lib.pretraining import (
    Recipe,
    encoder_dir,
    first_collapse,
    prepare,
    random_encoder,
    train_to_points,
    unigram_entropy,
)
from experiments.lib.shared_data import CONLL, GLUE, WIKI, WIKITEXT, missing
from experiments.lib.store import RESULTS, Cache, read_record, write_record
from experiments.lib.vocab import check_name, tokenizer_path

SIZE = "micro"
DEFAULT_VOCAB = "cased-8192"
# Half the first equal-compute experiment's budget (9.1e13): enough for the losses to part, cheap enough to
# try a dozen recipes.
PILOT_FLOPS = 4.5e13
_KEYS = {
    "sharing": ("embedding_sharing", str),
    "gen": ("generator_size", float),
    "scale": ("generator_lr_scale", float),
    "scope": ("generator_lr_scope", str),
    "mask": ("mask_prob", float),
    "lr": ("lr", float),
    "batch": ("batch_size", int),
}


def parse_trial(spec: str) -> tuple[str, Recipe]:
    """(vocabulary, recipe) of a trial spec; ValueError naming what is wrong."""
    objective, _, rest = spec.partition(":")
    if objective not in ("electra", "mlm"):
        raise ValueError(f"trial {spec!r}: the objective is electra or mlm")
    recipe, vocab = Recipe(objective=objective), DEFAULT_VOCAB
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or (key not in _KEYS and key != "vocab"):
            raise ValueError(
                f"trial {spec!r}: {item!r} is not key=value with key vocab or {', '.join(_KEYS)}"
            )
        if key == "vocab":
            vocab = check_name(value)
            continue
        field, kind = _KEYS[key]
        recipe = replace(recipe, **{field: kind(value)})
    return vocab, recipe


def slug(spec: str) -> str:
    return spec.replace(":", "__").replace(",", "_").replace("=", "-")


def data_dir(work: Path, vocab: str) -> Path:
    return work / "data" / vocab


def prepared(work: Path, vocab: str) -> Path:
    return prepare(WIKI, tokenizer_path(vocab, work), data_dir(work, vocab), usable_cores())


def entropy(work: Path, vocab: str) -> float:
    return vocab_facts(work, vocab)["unigram_entropy"]


def vocab_facts(work: Path, vocab: str) -> dict[str, Any]:
    """What a vocabulary makes of the corpus and of the `micro` encoder: tokens, unigram entropy, how many of
    its rows the corpus rarely or never has, the word table's share of the parameters and the output
    softmax's share of a training step's FLOPs (ELECTRA's generator; the masked LM's own head)."""
    path = data_dir(work, vocab).parent / f"{vocab}.facts.json"
    if (done := read_record(path)) is not None:
        return done
    import numpy as np

    from electra.config import ElectraConfig, generator_config
    from electra.model import ElectraDiscriminator
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.diagnostics.flops import electra_step_flops

    data = prepared(work, vocab)
    prepared_data = PretrainingData.open(data)
    size = prepared_data.manifest["tokenizer"]["vocab_size"]
    ids = np.asarray(prepared_data.train.input_ids)
    lengths = np.asarray(prepared_data.train.lengths)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    counts = np.bincount(ids[valid].astype(np.int64), minlength=size)[:size]
    disc = ElectraConfig.from_size(SIZE, vocab_size=size)
    params = sum(p.numel() for p in ElectraDiscriminator(disc).parameters())
    tokens, masked = 128 * 32, round(0.15 * 126 * 32)  # a full batch of 32 at the size's mask rate

    def softmax_share(gen: ElectraConfig | None) -> float:
        mlm = gen or disc
        head = 3.0 * masked * 2 * mlm.embedding_size * mlm.vocab_size
        return head / electra_step_flops(disc, gen, tokens, 128, masked)

    return write_record(
        path,
        {
            "vocab": vocab,
            "vocab_size": size,
            "train_tokens": int(valid.sum()),
            "unigram_entropy": unigram_entropy(data),
            "rows_under_100": float((counts < 100).mean()),
            "rows_never": int((counts == 0).sum()),
            "word_table_share_of_parameters": disc.embedding_size * size / params,
            "softmax_share_of_step_flops": {
                "electra": softmax_share(generator_config(disc)),
                "mlm": softmax_share(None),
            },
        },
    )


def run_trial(work: Path, spec: str, flops: float, swaps: int) -> dict[str, Any]:
    """Pre-train the trial to `flops`, then measure it; cached in work/trials/SLUG/trial.json."""
    vocab, recipe = parse_trial(spec)
    home = work / "trials" / slug(spec)
    if (done := read_record(home / "trial.json")) is not None:
        return done
    data = prepared(work, vocab)
    batch = recipe.batch_size
    guess = int(flops / 1e9)  # far more steps than any recipe spends: the curve is cut where it reaches flops
    curve = flops_by_step(
        data, SIZE, recipe.objective, min(guess, 200_000), batch, 0, recipe.mask_prob, recipe.generator_size
    )
    steps = steps_within(curve, flops)
    started = time.perf_counter()
    (point,) = train_to_points(data, home / "run", SIZE, recipe, steps, 0, (1.0,), spec, evaluations=4)
    record: dict[str, Any] = {
        "trial": spec,
        "vocab": vocab,
        "recipe": recipe.describe(),
        "steps": steps,
        "flops": float(curve[steps - 1]),
        "unigram_entropy": entropy(work, vocab),
        **point,
        "wall_seconds": time.perf_counter() - started,
        "collapsed_at_step": first_collapse(home / "run", steps),
    }
    val = point["validation"] or {}
    if "mlm_loss" in val:
        record["context_gain"] = record["unigram_entropy"] - val["mlm_loss"]
    if recipe.objective == "electra":
        record["heldout_detection"] = heldout.detection(home / "point-100", work / "heldout" / vocab, swaps)
    return write_record(home / "trial.json", record)


def run_floors(
    work: Path, vocabs: list[str], tasks: tuple[str, ...], seeds: tuple[int, ...], budget: FinetuneBudget
) -> None:
    cache = Cache(work / "floors.jsonl")
    budgets = dict.fromkeys(tasks, budget)
    for vocab in vocabs:
        model = random_encoder(prepared(work, vocab), SIZE, 0, work / "random" / vocab)
        fields = {"vocab": vocab}
        finetune_each(
            cache, prefixed(f"floor/{vocab}"), model, tasks, seeds, budgets, fields, f"random {vocab}"
        )


def evaluate_trials(
    work: Path, specs: list[str], tasks: tuple[str, ...], seeds: tuple[int, ...], budget: FinetuneBudget
) -> None:
    """Fine-tune each finished trial's encoder as the floors are: what its pre-training gives over its
    vocabulary's random init, at the pilot's budget (a hint beside the losses, not the experiment)."""
    cache = Cache(work / "floors.jsonl")
    budgets = dict.fromkeys(tasks, budget)
    for spec in specs:
        point = work / "trials" / slug(spec) / "point-100"
        if not point.is_dir():
            print(f"{spec}: not trained yet; evaluate it after its trial", flush=True)
            continue
        fields = {"trial": spec}
        finetune_each(
            cache, prefixed(f"trial/{spec}"), encoder_dir(point), tasks, seeds, budgets, fields, spec
        )


def report(
    work: Path, flops: float, tasks: tuple[str, ...], seeds: tuple[int, ...], budget: FinetuneBudget
) -> Path:
    trials = [read_record(p) for p in sorted((work / "trials").glob("*/trial.json"))]
    cache = Cache(work / "floors.jsonl")
    vocabs = sorted({row["vocab"] for row in cache.rows.values() if "vocab" in row})
    floors = {v: task_scores(cache, prefixed(f"floor/{v}"), tasks, seeds) for v in vocabs}
    for t in trials:
        t["finetuned"] = task_scores(cache, prefixed(f"trial/{t['trial']}"), tasks, seeds)
    known = sorted({t["vocab"] for t in trials} | set(vocabs))
    record = {
        **result_header("recipe_pilot"),
        "setup": {
            "size": SIZE,
            "flops_per_trial": flops,
            "corpus": "enwiki-2015 sample (shared data), 128-token examples",
            "floors": {"tasks": tasks, "seeds": seeds, **budget.describe()},
        },
        "vocabularies": {v: vocab_facts(work, v) for v in known},
        "trials": trials,
        "floors": floors,
    }
    return write_result(record, RESULTS / "recipe_pilot.json", "recipe_pilot")


def markdown_table(result: dict[str, Any]) -> str:
    head = [
        "trial",
        "steps",
        "tokens",
        "val MLM loss",
        "unigram entropy",
        "context gain",
        "val AUC",
        "held-out swap AUC",
        "generator AUC",
        *(f"{task} (floor)" for task in result["setup"]["floors"]["tasks"]),
        "minutes",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in result["trials"]:
        val = t.get("validation") or {}
        det = t.get("heldout_detection") or {}
        auc = val.get("disc_auc")
        cells = [
            f"`{t['trial']}`",
            f"{t['steps']:,}",
            f"{t['tokens'] / 1e6:.1f}M",
            f"{val['mlm_loss']:.2f}" if "mlm_loss" in val else "",
            f"{t['unigram_entropy']:.2f}",
            f"{t['context_gain']:+.2f}" if "context_gain" in t else "",
            ""
            if auc is None
            else f"{auc:.3f}"
            + (f" (collapsed at {t['collapsed_at_step']})" if t.get("collapsed_at_step") else ""),
            f"{det['swap_auc']:.3f}" if det else "",
            f"{det['generator_auc']:.3f}" if det else "",
        ]
        for task in result["setup"]["floors"]["tasks"]:
            got, floor = (t.get("finetuned") or {}).get(task), result["floors"].get(t["vocab"], {}).get(task)
            cells.append(f"{got['median']:.1f} ({floor['median']:.1f})" if got and floor else "")
        # Minutes of a run timed whole; a run resumed after a crash timed only its tail, which says nothing.
        timed_whole = t.get("segment_steps", t["steps"]) == t["steps"]
        cells.append(f"{t['segment_seconds'] / 60:.0f}" if timed_whole else "resumed")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def vocab_table(result: dict[str, Any]) -> str:
    """Per vocabulary: what it makes of the corpus and the model, and its random-init floors."""
    tasks = result["setup"]["floors"]["tasks"]
    head = [
        "vocabulary",
        "training tokens",
        "unigram entropy",
        "rows seen < 100 times",
        "word table / parameters",
        "softmax / step FLOPs (ELECTRA)",
        *(f"{t} random init" for t in tasks),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, v in result["vocabularies"].items():
        floors = result["floors"].get(name, {})
        cells = [
            f"`{name}`",
            f"{v['train_tokens'] / 1e6:.1f}M",
            f"{v['unigram_entropy']:.2f}",
            f"{v['rows_under_100']:.0%}",
            f"{v['word_table_share_of_parameters']:.0%}",
            f"{v['softmax_share_of_step_flops']['electra']:.0%}",
            *(cell(floors.get(t)) for t in tasks),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(t: dict[str, Any] | None) -> str:
    return f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})" if t else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument(
        "--prepare", default="", help="vocabularies to train and prepare data with, comma-separated"
    )
    ap.add_argument("--trials", nargs="*", default=[], help="trial specs (see above)")
    ap.add_argument("--floors", default="", help="vocabularies whose random-init floors to fine-tune")
    ap.add_argument(
        "--evaluate", nargs="*", default=[], help="trials whose encoders to fine-tune as the floors"
    )
    ap.add_argument("--flops", type=float, default=PILOT_FLOPS, help="training FLOPs per trial")
    ap.add_argument("--tasks", default="sst2,conll2003")
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3])
    ap.add_argument("--max-train-examples", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--swaps", type=int, default=2000, help="held-out swapped sentences per ELECTRA trial")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    a = ap.parse_args(argv)
    try:
        vocabs = [check_name(v) for v in filter(None, a.prepare.split(","))]
        floors = [check_name(v) for v in filter(None, a.floors.split(","))]
        for spec in [*a.trials, *a.evaluate]:
            parse_trial(spec)
    except ValueError as e:
        ap.error(str(e))
    if absent := missing(WIKI, WIKITEXT, GLUE, CONLL):
        print(f"skipped: {', '.join(map(str, absent))} absent", file=sys.stderr)
        return 0
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    tasks, seeds = tuple(a.tasks.split(",")), tuple(a.seeds)
    budget = FinetuneBudget(a.max_train_examples, a.epochs)
    for vocab in vocabs:
        vocab_facts(a.work, vocab)
    run_floors(a.work, floors, tasks, seeds, budget)
    for spec in a.trials:
        rec = run_trial(a.work, spec, a.flops, a.swaps)
        print(f"{spec}: {rec['steps']} steps, validation {rec['validation']}", flush=True)
    evaluate_trials(a.work, a.evaluate, tasks, seeds, budget)
    path = report(a.work, a.flops, tasks, seeds, budget)
    print(f"wrote {path}")
    print(vocab_table(read_record(path) or {}))
    print(markdown_table(read_record(path) or {}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
