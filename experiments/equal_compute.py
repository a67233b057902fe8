"""The paper's central experiment in miniature: ELECTRA against masked-LM pre-training and against none, at
equal training compute, on CPU (experiments/README.md has the write-ups).

Arms (experiments.lib.arms.ARMS), pre-trained on the same data (the shared English Wikipedia sample under
one vocabulary), with the same encoder, recipe (learning rate, batch, mask rate, generator width) and
pre-training seeds, for the same training FLOPs as our counter counts them (generator included, so the
masked-LM arm gets proportionally more steps, as the paper gives BERT-Small 1.5M steps to ELECTRA-Small's
1M): `electra` (tied embeddings), `gdes` (DeBERTaV3's gradient-disentangled sharing, E_G at the full rate),
`gdes-all` (the first experiment's GDES: E_G slowed with the generator), `none` (no sharing), `mlm` (the
BERT-style baseline) and `random` (no pre-training, the floor; one encoder per pre-training seed).

Each pre-trained run is stopped at budget points (fractions of its schedule), and each point of each seed
is fine-tuned on a fixed suite (SST-2 and CoNLL-2003 by default) with several fine-tuning seeds, each task at
its own budget (--train-examples, --epochs); spreads are over pre-training x fine-tuning seeds, and the table
names the pre-training seeds each row pools. The ELECTRA arms also detect replacements in held-out English
(experiments.lib.heldout). Every stage is cached in --work, so an interrupted run continues where it
stopped; --stage pretrain trains without evaluating (the fine-tuning budget can be chosen later), --arms /
--pretrain-seeds / --tasks split the work between invocations, and --evaluate-points fine-tunes some points
only (a second pre-training seed's top point, say).

    python -m experiments.equal_compute --work runs/eq2 --vocab cased-8192 --flops 3.6e14 \\
        --lr 1e-3 --arms random,mlm,gdes --pretrain-seeds 1,2 --train-examples sst2=20000,conll2003=all

Writes experiments/results/<--name>.json (per arm, point and seed: steps, tokens, FLOPs, time, load,
validation and its history, detection, every fine-tuning score; per point the gaps to random init and, for
the ELECTRA arms, to the masked LM at equal FLOPs; where each arm's line would cross the random floor and
where an ELECTRA arm's would meet the masked LM's), <--name>.png (suite average against FLOPs) and
<--name>_pretraining.png (each run's validation against FLOPs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bench.benchlib import int_list, result_header, usable_cores, write_result
from experiments.lib import carry, heldout, tables
from experiments.lib.arms import (
    ARMS,
    ELECTRA_ARMS,
    Setup,
    detection_key,
    finetune_keys,
    point_dir,
    run_dir,
    save_setup,
    seeds_held,
)
from experiments.lib.budget import flops_by_step, steps_within
from experiments.lib.evaluation import FinetuneBudget, finetune_each, spread, task_scores
from experiments.lib.pretraining import (
    POINT_RECORD,
    Recipe,
    encoder_dir,
    first_collapse,
    metrics,
    prepare,
    random_encoder,
    train_to_points,
    unigram_entropy,
)
from experiments.lib.shared_data import CONLL, GLUE, WIKI, WIKITEXT, missing
from experiments.lib.store import RESULTS, Cache, read_record, save_figure, write_record
from experiments.lib.vocab import check_name, tokenizer_path

RANDOM_POINT = 0.0
# What counts as pre-training paying: this many suite-average points above random init (the experiment's aim).
AIM_MARGIN = 3.0

# ------------------------------------------------------------------------------------------------ budgets


def arm_steps(setup: Setup, arm: str, seed: int) -> int:
    """The steps of `arm`'s run with `seed` that spend the budget (cached: replaying the batch order of a
    long run takes a while)."""
    recipe = setup.arm_recipe(arm)
    key = f"{arm}/{seed}/{setup.flops:.6g}/{recipe}"
    path = setup.work / "steps.json"
    known = read_record(path) or {}
    if key not in known:
        curve = arm_flops(setup, arm, seed, int(setup.flops / 5e9))
        known[key] = steps_within(curve, setup.flops)
        write_record(path, known)
    return known[key]


def arm_flops(setup: Setup, arm: str, seed: int, steps: int) -> np.ndarray:
    r = setup.arm_recipe(arm)
    return flops_by_step(
        setup.data, setup.size, r.objective, steps, r.batch_size, seed, r.mask_prob, r.generator_size
    )


# ------------------------------------------------------------------------------------------- the stages


def pretrain(setup: Setup, arm: str, seed: int) -> list[dict[str, Any]]:
    steps = arm_steps(setup, arm, seed)
    recipe = setup.arm_recipe(arm)
    return train_to_points(
        setup.data,
        run_dir(setup, arm, seed),
        setup.size,
        recipe,
        steps,
        seed,
        setup.points,
        f"{arm} seed {seed}",
    )


def evaluate(setup: Setup, cache: Cache, arm: str, seed: int, point: float, jobs: int = 1) -> None:
    path = point_dir(setup, arm, seed, point)
    label = f"{arm} seed {seed} @{point:.0%}"
    # Detection first: it is the one evaluation that needs the generator, so once it is cached the fine-tunes
    # need only the discriminator (all that a point carried to another machine has to hold).
    if arm in ELECTRA_ARMS and cache.get(detection_key(arm, seed, point)) is None:
        figures = heldout.detection(path, setup.work / "heldout", setup.swaps)
        cache.put(
            detection_key(arm, seed, point), {"arm": arm, "pretrain_seed": seed, "point": point, **figures}
        )
        print(
            f"{label} held-out detection: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()),
            flush=True,
        )
    finetune_each(
        cache,
        finetune_keys(setup, arm, seed, point),
        encoder_dir(path),
        setup.tasks,
        setup.finetune_seeds,
        setup.budgets,
        {"arm": arm, "pretrain_seed": seed, "point": point},
        label,
        jobs=jobs,
    )


def random_point(setup: Setup, seed: int) -> Path:
    return random_encoder(setup.data, setup.size, seed, point_dir(setup, "random", seed, RANDOM_POINT))


# ----------------------------------------------------------------------------------------------- results


def finished_points(setup: Setup, arm: str, seed: int) -> list[dict[str, Any]]:
    if arm == "random":
        done = (point_dir(setup, arm, seed, RANDOM_POINT) / "config.json").is_file()
        return [{"point": RANDOM_POINT, "step": 0, "tokens": 0, "seed": seed}] if done else []
    found = (
        read_record(p) for p in sorted(point_dir(setup, arm, seed, 0).parent.glob(f"point-*/{POINT_RECORD}"))
    )
    return sorted((r for r in found if r is not None), key=lambda r: r["point"])


def summarize(setup: Setup, cache: Cache) -> dict[str, list[dict[str, Any]]]:
    """Per arm, one row per budget point: every seed's run and scores, and the spreads over all of them."""
    arms: dict[str, list[dict[str, Any]]] = {}
    for arm in ARMS:
        by_point: dict[float, list[dict[str, Any]]] = {}
        for seed in seeds_held(setup, arm):
            for rec in finished_points(setup, arm, seed):
                by_point.setdefault(rec["point"], []).append(run_row(setup, cache, arm, seed, rec))
        rows = [point_row(setup, point, runs) for point, runs in sorted(by_point.items())]
        if rows:
            arms[arm] = rows
    return arms


def run_row(setup: Setup, cache: Cache, arm: str, seed: int, rec: dict[str, Any]) -> dict[str, Any]:
    point = rec["point"]
    row = {
        **rec,
        "tasks": task_scores(
            cache, finetune_keys(setup, arm, seed, point), setup.tasks, setup.finetune_seeds
        ),
    }
    if arm != "random":
        curve = arm_flops(setup, arm, seed, rec["step"])
        row["flops"] = float(curve[-1])
        row["collapsed_at_step"] = first_collapse(run_dir(setup, arm, seed), rec["step"])
        row["validation_history"] = validation_history(run_dir(setup, arm, seed), curve)
    det = cache.get(detection_key(arm, seed, point))
    if det is not None:
        row["heldout_detection"] = {k: v for k, v in det.items() if isinstance(v, float)}
    return row


HISTORY_KEYS = ("mlm_loss", "disc_auc", "identity_auc")


def validation_history(run: Path, curve: np.ndarray) -> list[dict[str, Any]]:
    """Every validation of the run up to the end of `curve` (its cumulative FLOPs by step), with the FLOPs
    spent by then: the learning curve the budget points sample. A step validated twice (a run resumed from
    its checkpoint before it) counts once, the later record."""
    by_step = {}
    for r in metrics(run):
        if r.get("split") == "val" and 0 < r["step"] <= len(curve):
            kept = {k: r[k] for k in HISTORY_KEYS if r.get(k) is not None}
            by_step[r["step"]] = {"step": r["step"], "flops": float(curve[r["step"] - 1]), **kept}
    return [by_step[s] for s in sorted(by_step)]


def point_row(setup: Setup, point: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One budget point over its pre-training seeds: each task's scores pooled over pre-training x fine-tuning
    seeds (the pre-training seeds evaluated on it: an invocation may evaluate some seeds at the top point
    only), and the medians of what the table shows per seed."""
    first = runs[0]
    row: dict[str, Any] = {"point": point, "step": first["step"], "tokens": first["tokens"], "runs": runs}
    row["tasks"] = {}
    for task in setup.tasks:
        evaluated = [r for r in runs if task in r["tasks"]]
        if evaluated:
            pooled = spread([s for r in evaluated for s in r["tasks"][task]["per_seed"]])
            row["tasks"][task] = {**pooled, "pretrain_seeds": [r["seed"] for r in evaluated]}
    if len(row["tasks"]) == len(setup.tasks):
        row["suite_average"] = statistics.mean(t["median"] for t in row["tasks"].values())
        row["suite_average_per_pretrain_seed"] = [
            statistics.mean(r["tasks"][t]["median"] for t in setup.tasks)
            for r in runs
            if all(t in r["tasks"] for t in setup.tasks)
        ]
    if "flops" in first:
        row["flops"] = statistics.mean(r["flops"] for r in runs)
        collapses = [r["collapsed_at_step"] for r in runs if r.get("collapsed_at_step")]
        row["collapsed_at_step"] = min(collapses) if collapses else None
        aucs = [
            r["validation"]["disc_auc"]
            for r in runs
            if (r.get("validation") or {}).get("disc_auc") is not None
        ]
        row["validation"] = {"disc_auc": statistics.median(aucs)} if aucs else None
    dets = [r["heldout_detection"] for r in runs if "heldout_detection" in r]
    if dets:
        row["heldout_detection"] = {k: statistics.median(d[k] for d in dets) for k in dets[0]}
    row["pretrain_seeds"] = [r["seed"] for r in runs]
    return row


def gaps(row: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Each task's median gap from `ref` to `row`, and whether their ranges (over every pre-training x
    fine-tuning seed) do not overlap: "beyond the combined seed spread"; and the same for the suite average,
    whose range is taken as the average of the tasks' ranges (its worst and best case)."""
    out: dict[str, Any] = {}
    for task, t in row["tasks"].items():
        r = ref["tasks"].get(task)
        if r:
            out[task] = {"gap": t["median"] - r["median"], "beyond_spread": apart(t, r)}
    if "suite_average" in row and "suite_average" in ref:
        out["suite_average"] = {
            "gap": row["suite_average"] - ref["suite_average"],
            "beyond_spread": apart(average_range(row), average_range(ref)),
        }
    return out


def apart(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["min"] > b["max"] or a["max"] < b["min"]


def average_range(row: dict[str, Any]) -> dict[str, float]:
    tasks = row["tasks"].values()
    return {"min": statistics.mean(t["min"] for t in tasks), "max": statistics.mean(t["max"] for t in tasks)}


def against_random(arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per pre-trained arm and point: gaps to the random floor."""
    floor = (arms.get("random") or [None])[0]
    if floor is None:
        return {}
    out: dict[str, Any] = {}
    for arm, rows in arms.items():
        if arm != "random":
            out[arm] = {f"{row['point']:g}": gaps(row, floor) for row in rows}
    return out


def against_masked_lm(arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per ELECTRA arm: gaps to the masked LM at each budget point both reached (equal FLOPs), and where the
    ELECTRA arm's line of suite averages would meet the masked LM's (`catch_up`): the paper's claim is that
    replaced-token detection is ahead at equal compute, so this says at which budget, if any, these lines
    would agree with it."""
    mlm = {row["point"]: row for row in arms.get("mlm", [])}
    out: dict[str, Any] = {}
    for arm, rows in arms.items():
        if arm not in ELECTRA_ARMS:
            continue
        shared = [row for row in rows if row["point"] in mlm]
        if not shared:
            continue
        out[arm] = {"points": {f"{row['point']:g}": gaps(row, mlm[row["point"]]) for row in shared}}
        lines = [
            [(r["flops"], r["suite_average"]) for r in rs if "suite_average" in r]
            for rs in (shared, [mlm[row["point"]] for row in shared])
        ]
        if len(lines[0]) >= 2 and len(lines[0]) == len(lines[1]):
            out[arm]["catch_up"] = catch_up(lines[0], lines[1])
    return out


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares through (log10 FLOPs, score): slope per decade and intercept; flat through one point."""
    x = np.log10([f for f, _ in points])
    y = np.asarray([a for _, a in points])
    if len(points) < 2:
        return 0.0, float(y[0])
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def floor_crossing(points: list[tuple[float, float]], floor: float) -> dict[str, Any]:
    """Where a straight line through (log10 FLOPs, suite average) meets the random-init floor: a rough
    extrapolation of when an arm would start to beat no pre-training, from the budget points of one run.

    Least squares over the points; `flops` is None when the line does not rise (no crossing ahead), and the
    current point when the arm is already above the floor at its last point.
    """
    slope, intercept = fit_line(points)
    if points[-1][1] > floor:
        return {"slope_per_decade": slope, "flops": float(points[-1][0]), "above_floor": True}
    if slope <= 0:
        return {"slope_per_decade": slope, "flops": None, "above_floor": False}
    return {
        "slope_per_decade": slope,
        "flops": float(10 ** ((floor - intercept) / slope)),
        "above_floor": False,
    }


def catch_up(trail: list[tuple[float, float]], lead: list[tuple[float, float]]) -> dict[str, Any]:
    """Where the least-squares line of `trail` (log10 FLOPs, score) meets `lead`'s: the budget at which the
    trailing arm would draw level if both went on as they did. `flops` is None when `trail` does not rise
    faster (the gap only widens), and `trail`'s last point when it is already level or ahead there."""
    s_trail, b_trail = fit_line(trail)
    s_lead, b_lead = fit_line(lead)
    out = {"slope_per_decade": s_trail, "lead_slope_per_decade": s_lead, "ahead": trail[-1][1] >= lead[-1][1]}
    if out["ahead"]:
        return {**out, "flops": float(trail[-1][0])}
    if s_trail <= s_lead:
        return {**out, "flops": None}
    return {**out, "flops": float(10 ** ((b_lead - b_trail) / (s_trail - s_lead)))}


def floor_crossings(arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """floor_crossing for every pre-trained arm with a suite average at two or more budget points, against
    the floor itself and against the floor plus AIM_MARGIN (`aim`: the budget at which the arm's line would
    clear the margin the experiment asks of pre-training)."""
    floor = [r["suite_average"] for r in arms.get("random", []) if "suite_average" in r]
    out: dict[str, Any] = {}
    if not floor:
        return out
    for arm, rows in arms.items():
        pts = [(r["flops"], r["suite_average"]) for r in rows if "flops" in r and "suite_average" in r]
        if arm != "random" and len(pts) >= 2:
            out[arm] = {
                "floor": floor[0],
                "points": len(pts),
                **floor_crossing(pts, floor[0]),
                "aim": {"margin": AIM_MARGIN, **floor_crossing(pts, floor[0] + AIM_MARGIN)},
            }
    return out


def cell(t: dict[str, Any] | None) -> str:
    return f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})" if t else ""


def markdown_table(result: dict[str, Any]) -> str:
    """The write-up's table: one row per arm and budget point, each task's median over seeds and its range."""
    tasks = result["setup"]["tasks"]
    # Results of the first version of the script predate pre-training seeds (one run per arm).
    with_seeds = any("pretrain_seeds" in r for rows in result["arms"].values() for r in rows)
    head = [
        "arm",
        "budget",
        *(["pre-training seeds"] if with_seeds else []),
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
            cells = [arm, f"{r['point']:.0%}" if arm != "random" else "-"]
            if with_seeds:
                pooled = sorted({s for t in r["tasks"].values() for s in t.get("pretrain_seeds", [])})
                cells.append(", ".join(map(str, pooled)))
            cells.append(str(r["step"]))
            cells.append(f"{r['flops']:.2e}" if "flops" in r else "0")
            cells += [cell(r["tasks"].get(task)) for task in tasks]
            cells.append(f"{r['suite_average']:.1f}" if "suite_average" in r else "")
            val = r.get("validation") or {}
            auc = val.get("disc_auc")
            collapsed = r.get("collapsed_at_step")
            if collapsed is None and val.get("collapsed"):
                collapsed = val.get("step")
            # Runs that log the identity-only AUC say which phase they are in; the collapse watch's flag is
            # the first phase ending (docs/pretraining.md, "The identity phase"): the phase is shown.
            phases = sorted(
                {p for run in r.get("runs", []) if (p := (run.get("validation") or {}).get("phase"))}
            )
            note = " / ".join(phases) if phases else (f"collapsed at {collapsed}" if collapsed else "")
            cells.append("" if auc is None else f"{auc:.2f}" + (f" ({note})" if note else ""))
            det = r.get("heldout_detection", {})
            cells += [f"{det['swap_auc']:.3f}" if det else "", f"{det['generator_auc']:.3f}" if det else ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pretraining_table(result: dict[str, Any]) -> str:
    """The write-up's pre-training table: per arm, pre-training seed and budget point, the last validation
    before the point: masked-LM loss (an ELECTRA arm's generator's), its context gain over the corpus's
    unigram entropy, and the discriminator's AUC."""
    entropy = result["unigram_entropy"]
    runs = [
        (arm, run)
        for arm, points in result["arms"].items()
        if arm != "random"
        for p in points
        for run in p["runs"]
    ]
    # Runs validated since the identity-only AUC exists carry it and the phase; older files have neither.
    identity = any("identity_auc" in (run.get("validation") or {}) for _, run in runs)
    rows = []
    for arm, run in sorted(
        runs, key=lambda ar: (list(result["arms"]).index(ar[0]), ar[1]["seed"], ar[1]["point"])
    ):
        val = run.get("validation") or {}
        loss, auc = val.get("mlm_loss"), val.get("disc_auc")
        cells = [
            arm,
            str(run["seed"]),
            f"{run['point']:.0%}",
            f"{run['step']:,}",
            f"{run['tokens'] / 1e6:.1f}M",
        ]
        cells += ["", ""] if loss is None else [f"{loss:.2f}", f"{entropy - loss:+.2f}"]
        cells.append("" if auc is None else f"{auc:.3f}")
        if identity:
            cells.append(f"{val['identity_auc']:.3f}" if val.get("identity_auc") is not None else "")
            cells.append(val.get("phase", ""))
        rows.append(cells)
    head = [
        "arm",
        "pre-training seed",
        "budget",
        "steps",
        "tokens",
        "val MLM loss",
        "context gain",
        "val AUC",
        *(["identity-only AUC", "phase"] if identity else []),
    ]
    return tables.markdown_table(head, rows)


def gaps_table(result: dict[str, Any]) -> str:
    """The write-up's gaps: per pre-trained arm and point, each task's and the suite average's median gap to
    random init and, for the ELECTRA arms, to the masked LM at the same FLOPs; `*` where the two ranges over
    every pre-training x fine-tuning seed do not overlap."""
    tasks = [*result["setup"]["tasks"], "suite_average"]

    def cells(gs: dict[str, Any] | None) -> list[str]:
        gs = gs or {}
        return [
            f"{gs[t]['gap']:+.1f}" + ("*" if gs[t].get("beyond_spread") else "") if t in gs else ""
            for t in tasks
        ]

    rows = []
    for arm, by_point in result["against_random"].items():
        electra = result["against_masked_lm"].get(arm, {}).get("points", {})
        for point, vs_random in by_point.items():
            rows.append([arm, f"{float(point):.0%}", *cells(vs_random), *cells(electra.get(point))])
    names = [*result["setup"]["tasks"], "average"]
    head = ["arm", "budget", *(f"{n} vs random" for n in names), *(f"{n} vs masked LM" for n in names)]
    return tables.markdown_table(head, rows)


STYLES = {"official": "v-", "electra": "o-", "gdes": "s-", "gdes-all": "s--", "none": "D-", "mlm": "^-"}


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm, rows in result["arms"].items():
        rows = [r for r in rows if "suite_average" in r]
        if not rows:
            continue
        # Bars and band: the average of the tasks' ranges over every pre-training x fine-tuning seed, the
        # range "beyond the combined seed spread" is judged on (a median pooled from a seed evaluated on one
        # task only can lie outside the per-seed averages' range, so those cannot be the bars).
        ranges = [average_range(r) for r in rows]
        if arm == "random":
            ax.axhline(
                rows[0]["suite_average"], color="k", linestyle=":", label="random init (no pre-training)"
            )
            ax.axhspan(ranges[0]["min"], ranges[0]["max"], color="k", alpha=0.08)
            continue
        x = [r["flops"] for r in rows]
        y = [r["suite_average"] for r in rows]
        err = [
            [a - g["min"] for a, g in zip(y, ranges, strict=True)],
            [g["max"] - a for a, g in zip(y, ranges, strict=True)],
        ]
        ax.errorbar(
            x,
            y,
            yerr=err,
            fmt=STYLES.get(arm, "o-"),
            capsize=3,
            label=ARMS[arm].label if arm in ARMS else arm,
        )
    # Budget points are fractions of one budget: show them against zero.
    top = max((r["flops"] for rows in result["arms"].values() for r in rows if "flops" in r), default=1)
    ax.set_xlim(0, 1.08 * top)
    ax.set_xlabel("pre-training FLOPs")
    ax.set_ylabel(f"suite average ({', '.join(result['setup']['tasks'])})")
    ax.set_title(f"equal compute, {result['setup']['size']} encoder, {result['machine']['cores']} CPU cores")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # none until some point has every task evaluated
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


# What an earlier results file must share with this setup for its arms to stand in the same tables: the
# pre-training budget and points, the encoder, the data's vocabulary and every fine-tuning choice.
IMPORT_FIELDS = ("vocab", "size", "flops", "points", "tasks", "finetune_seeds", "budgets", "swaps")
# Two trainings of one named vocabulary differ in a few rare pieces (the tokenizers trainer breaks ties in
# hash-map order): their corpora's unigram entropies differ by ~1e-4 nats. A different vocabulary differs by
# a tenth of a nat or more (the pilot's vocabularies: 7.01 to 7.37).
ENTROPY_TOLERANCE = 0.005


def importable(setup: Setup, name: str) -> dict[str, Any]:
    """The results file experiments/results/NAME.json, if its setup is this one in what the tables compare
    (ValueError otherwise)."""
    earlier = read_record(RESULTS / f"{name}.json")
    if earlier is None:
        raise ValueError(f"--import-results {name}: no {RESULTS / name}.json")
    mine, theirs = json.loads(json.dumps(setup.describe())), earlier["setup"]
    differ = [k for k in IMPORT_FIELDS if theirs.get(k) != mine[k]]
    # A recipe field the earlier file predates (adam) was at its default there, as Recipe's is here.
    differ += [f"recipe.{k}" for k, v in theirs["recipe"].items() if mine["recipe"].get(k) != v]
    if differ:
        raise ValueError(f"--import-results {name}: its setup differs in {', '.join(differ)}")
    return earlier


def import_arms(
    setup: Setup, names: list[str], arms: dict[str, list[dict[str, Any]]], entropy: float
) -> list[dict[str, Any]]:
    """Add to `arms`, in place, the arms of earlier results files (experiments/results/NAME.json) that this
    work directory does not hold, each row marked with the file it came from; return their provenance.
    ValueError when a file's setup differs from this one in what the tables compare."""
    provenance = []
    for name in names:
        earlier = importable(setup, name)
        gap = abs(earlier["unigram_entropy"] - entropy)
        if gap > ENTROPY_TOLERANCE:
            raise ValueError(
                f"--import-results {name}: its corpus's unigram entropy {earlier['unigram_entropy']:.4f} is "
                f"not this data's {entropy:.4f}: another vocabulary or corpus"
            )
        taken = [arm for arm in earlier["arms"] if arm not in arms]
        for arm in taken:
            arms[arm] = [{**row, "imported_from": name} for row in earlier["arms"][arm]]
        provenance.append(
            {
                "file": f"{name}.json",
                "commit": earlier.get("commit"),
                "date": earlier.get("date"),
                "arms": taken,
                "unigram_entropy": earlier["unigram_entropy"],
            }
        )
    # The table's order: the arms as ARMS lists them.
    ordered = {arm: arms[arm] for arm in ARMS if arm in arms}
    arms.clear()
    arms.update(ordered)
    return provenance


def write(setup: Setup, cache: Cache, name: str, started: float, imports: list[str] | None = None) -> Path:
    import torch

    from electra.sizes import SIZES

    arms = summarize(setup, cache)
    entropy = unigram_entropy(setup.data)
    imported = import_arms(setup, imports or [], arms, entropy)
    result = {
        **result_header(name),
        "torch": torch.__version__,
        "setup": {
            **setup.describe(),
            "architecture": SIZES[setup.size].architecture(),
            "data": "enwiki-2015 sample (shared data), 128-token examples",
        },
        "wall_seconds_this_invocation": time.perf_counter() - started,
        # What a masked LM that reads no context reaches: its loss must go below this to show it reads any.
        "unigram_entropy": entropy,
        **({"imported": imported} if imported else {}),
        "arms": arms,
        "against_random": against_random(arms),
        "against_masked_lm": against_masked_lm(arms),
        "floor_crossing": floor_crossings(arms),
    }
    path = write_result(result, RESULTS / f"{name}.json", name)
    plot(result, path.with_suffix(".png"))
    plot_pretraining(result, path.with_name(f"{path.stem}_pretraining.png"))
    return path


def histories(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each pre-training seed's validation history, from its furthest point (rows come sorted by point)."""
    return {run["seed"]: run.get("validation_history", []) for row in rows for run in row["runs"]}


def plot_pretraining(result: dict[str, Any], path: Path) -> Path:
    """Each pre-training run's validation against FLOPs: masked-LM loss beside the unigram entropy, and the
    ELECTRA arms' discriminator AUC."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, auc_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for arm, rows in result["arms"].items():
        for seed, hist in sorted(histories(rows).items()):
            label = f"{arm} seed {seed}"
            style = STYLES.get(arm, "o-")
            loss = [(h["flops"], h["mlm_loss"]) for h in hist if "mlm_loss" in h]
            if loss:
                loss_ax.plot(*zip(*loss, strict=True), style, markersize=3, label=label)
            auc = [(h["flops"], h["disc_auc"]) for h in hist if "disc_auc" in h]
            if auc:
                auc_ax.plot(*zip(*auc, strict=True), style, markersize=3, label=label)
    if "unigram_entropy" in result:
        loss_ax.axhline(result["unigram_entropy"], color="k", linestyle=":", label="unigram entropy")
    loss_ax.set_ylabel("validation MLM loss (ELECTRA: the generator's), nats")
    auc_ax.set_ylabel("validation discriminator AUC")
    for ax in (loss_ax, auc_ax):
        ax.set_xlabel("pre-training FLOPs")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------------- main


def budgets(text: str, tasks: tuple[str, ...], epochs: int | None, recipe: str) -> dict[str, FinetuneBudget]:
    """`sst2=20000,conll2003=all` (or one number for every task) -> each task's FinetuneBudget."""
    given: dict[str, int | None] = {}
    for item in filter(None, text.split(",")):
        task, _, value = item.rpartition("=") if "=" in item else ("*", "=", item)
        if task not in (*tasks, "*"):
            raise ValueError(f"--train-examples: {task!r} is not one of the tasks {', '.join(tasks)}")
        given[task] = None if value == "all" else int(value)
    default = given.get("*", 3000)
    return {t: FinetuneBudget(given.get(t, default), epochs, recipe) for t in tasks}


def fractions(flag: str, text: str) -> tuple[float, ...]:
    """`0.25,0.5,1` -> budget fractions; ValueError naming the flag."""
    try:
        return tuple(float(p) for p in text.split(","))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected fractions of the budget, e.g. 0.25,0.5,1") from None


class Invocation(NamedTuple):
    setup: Setup
    arms: list[str]
    stage: str
    name: str
    evaluated: tuple[float, ...]  # the points this invocation fine-tunes
    imports: list[str]  # earlier results files shown beside this one's
    pack: Path | None  # pack the arms' finished points there, and only that (experiments.lib.carry)
    unpack: Path | None  # merge a pack into the work directory first
    jobs: int  # fine-tunes at a time


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="where data, runs and evaluations are kept")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument(
        "--stage",
        choices=("pretrain", "all"),
        default="all",
        help="pretrain: no evaluations, and the results file is left as it is",
    )
    ap.add_argument(
        "--vocab", default="bert-uncased", help="bert-uncased, or cased-N / uncased-N trained here"
    )
    ap.add_argument("--size", default="micro")
    ap.add_argument("--flops", type=float, required=True, help="training FLOPs of every pre-trained arm")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=None, help="default: the size's")
    ap.add_argument("--mask-prob", type=float, default=None, help="default: the size's")
    ap.add_argument("--generator-size", type=float, default=None, help="default: the size's")
    ap.add_argument("--generator-lr-scale", type=float, default=1.0, help="the electra arms' (default: 1)")
    ap.add_argument("--points", default="0.25,0.5,1", help="budget fractions evaluated")
    ap.add_argument(
        "--evaluate-points",
        default=None,
        help="the points this invocation fine-tunes (default: all), e.g. 1 for a second seed's top point",
    )
    ap.add_argument("--pretrain-seeds", type=int_list, default=[1, 2])
    ap.add_argument("--tasks", default="sst2,conll2003")
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3], help="fine-tuning seeds")
    ap.add_argument("--train-examples", default="3000", help="per task: sst2=20000,conll2003=all")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--recipe", default="official", help="the fine-tuning recipe")
    ap.add_argument("--swaps", type=int, default=2000, help="held-out swapped sentences")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="fine-tunes run at a time, each in a process of its own with 1/jobs of the threads (at least 1)",
    )
    ap.add_argument("--name", default="equal_compute", help="results file name")
    ap.add_argument(
        "--import-results",
        default="",
        help="earlier results files (names in experiments/results) of the same setup whose arms this work "
        "directory does not hold, shown beside its own in the tables (e.g. equal_compute_v2)",
    )
    ap.add_argument(
        "--pack",
        type=Path,
        default=None,
        help="only pack the finished points of --arms (encoder, records, evaluations; no generator, no "
        "checkpoints) into this directory, to carry them to another machine's work directory",
    )
    ap.add_argument(
        "--unpack", type=Path, default=None, help="merge a --pack directory into --work before running"
    )
    return ap


def parse_args(argv: list[str] | None) -> Invocation:
    ap = parser()
    a = ap.parse_args(argv)
    arms = a.arms.split(",")
    if unknown := set(arms) - set(ARMS):
        ap.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    tasks = tuple(a.tasks.split(","))
    try:
        check_name(a.vocab)
        per_task = budgets(a.train_examples, tasks, a.epochs, a.recipe)
        points = fractions("--points", a.points)
        evaluated = points if a.evaluate_points is None else fractions("--evaluate-points", a.evaluate_points)
    except ValueError as e:
        ap.error(str(e))
    if absent := sorted(set(evaluated) - set(points)):
        ap.error(f"--evaluate-points {', '.join(map(str, absent))}: not among --points {a.points}")
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    setup = Setup(
        work=a.work,
        vocab=a.vocab,
        size=a.size,
        flops=a.flops,
        recipe=Recipe(
            lr=a.lr,
            batch_size=a.batch_size,
            mask_prob=a.mask_prob,
            generator_size=a.generator_size,
            generator_lr_scale=a.generator_lr_scale,
        ),
        points=points,
        pretrain_seeds=tuple(a.pretrain_seeds),
        tasks=tasks,
        finetune_seeds=tuple(a.seeds),
        budgets=per_task,
        swaps=a.swaps,
    )
    imports = [n for n in a.import_results.split(",") if n]
    if a.jobs < 1:
        ap.error(f"--jobs {a.jobs}: at least 1")
    return Invocation(setup, arms, a.stage, a.name, evaluated, imports, a.pack, a.unpack, a.jobs)


def main(argv: list[str] | None = None) -> int:
    setup, arms, stage, name, evaluated, imports, pack_to, unpack_from, jobs = parse_args(argv)
    if absent := missing(WIKI, GLUE, CONLL, WIKITEXT, heldout.CONLL_TRAIN):
        print(f"skipped: {', '.join(map(str, absent))} absent", file=sys.stderr)
        return 0
    setup.work.mkdir(parents=True, exist_ok=True)
    try:
        if unpack_from is not None:
            copied = carry.unpack(unpack_from, setup.work)
            print(f"unpacked {unpack_from}: {len(copied)} files new to {setup.work}", flush=True)
        for earlier in imports:
            importable(setup, earlier)
        save_setup(setup)
        if pack_to is not None:
            packed = carry.pack(setup, Cache(setup.work / carry.EVALUATIONS), arms, pack_to)
            if not packed:
                raise carry.CarryError(f"{setup.work} holds no finished point of {', '.join(arms)} to pack")
            print(f"packed {len(packed)} points into {pack_to}: " + ", ".join(map(str, packed)))
            return 0
    except (ValueError, OSError) as e:  # carry.CarryError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    prepare(WIKI, tokenizer_path(setup.vocab, setup.work), setup.data, usable_cores())
    cache = Cache(setup.work / carry.EVALUATIONS)
    for arm in arms:
        for seed in setup.pretrain_seeds:
            if arm == "random":
                random_point(setup, seed)
                points = [RANDOM_POINT]
            else:
                points = [rec["point"] for rec in pretrain(setup, arm, seed)]
            if stage == "all":
                for point in points:
                    if arm == "random" or point in evaluated:
                        evaluate(setup, cache, arm, seed, point, jobs)
        if stage == "all":
            write(setup, cache, name, started, imports)
    if stage != "all":
        # Its fine-tuning budget is the default, not the experiment's: a results file written from it would
        # blank the scores the evaluating invocations wrote.
        print(f"pre-trained; {RESULTS / name}.json is written by the invocations that evaluate (--stage all)")
        return 0
    path = write(setup, cache, name, started, imports)
    print(f"wrote {path}")
    print(markdown_table(read_record(path) or {}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
