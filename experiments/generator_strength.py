"""How strong should ELECTRA's generator be at this budget? The equal-compute experiment's ELECTRA settings
side by side: each one's generator context gain at the end of pre-training (the corpus's unigram entropy minus
the generator's validation MLM loss: what its samples know beyond word frequency) against its fine-tuned suite
average, with the masked LM and random init as references (experiments/README.md has the write-up).

The settings are arms of experiments.lib.arms: the official arm (tied embeddings, generator at the full rate,
official Adam and schedule), DeBERTaV3's GDES with the generator at 1x, GDES with the whole generator slowed
to 0.2x and 0.05x (`gdes-all`), each at generator width 1/4 and 1/2 of the discriminator's, every one
pre-trained to the full budget by experiments.equal_compute in a work directory of the same setup, one
pre-training seed each (the official arm and `gdes-all` may have two). This script runs nothing: it reads
those results files, the ones given first winning for an arm that several hold.

    python -m experiments.equal_compute --work runs/sweep --vocab uncased-8192 --flops 3.64e14 \\
        --generator-lr-scale 0.05 --points 1 --pretrain-seeds 1 --arms gdes-1x,gdes-all-0.2 \\
        --train-examples sst2=all,conll2003=all --threads 1 --name equal_compute_sweep
    python -m experiments.generator_strength --results equal_compute_sweep,equal_compute_v3

Writes experiments/results/<--name>.json (per setting: its recipe, per pre-training seed the context gain,
validation AUCs and suite average; the references; the rank correlation of suite average with context gain)
and <--name>.png.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.benchlib import result_header, write_result
from experiments.lib import tables
from experiments.lib.arms import ARMS, ELECTRA_ARMS
from experiments.lib.store import RESULTS, read_record, save_figure

TOP = 1.0  # the budget point every setting is compared at: the full budget


def setting(arm: str, recipe: dict[str, Any]) -> dict[str, Any]:
    """An arm's generator as its results file's setup and the arm's own overrides make it."""
    a = ARMS[arm]
    return {
        "embedding_sharing": a.embedding_sharing,
        "generator_lr_scope": a.generator_lr_scope,
        "generator_lr_scale": a.generator_lr_scale
        if a.generator_lr_scale is not None
        else recipe["generator_lr_scale"],
        "generator_size": a.generator_size or recipe.get("generator_size") or 0.25,
        "adam": a.adam or recipe.get("adam", "torch"),
        "schedule": a.schedule or recipe.get("schedule", "hf"),
    }


def seed_rows(result: dict[str, Any], row: dict[str, Any], tasks: list[str]) -> list[dict[str, Any]]:
    """Per pre-training run at the point: its context gain, AUCs and suite average (once every task is
    scored)."""
    out = []
    for run in row["runs"]:
        val = run.get("validation") or {}
        loss = val.get("mlm_loss")
        scored = all(t in run.get("tasks", {}) for t in tasks)
        out.append(
            {
                "seed": run["seed"],
                "step": run["step"],
                "context_gain": None if loss is None else result["unigram_entropy"] - loss,
                "disc_auc": val.get("disc_auc"),
                "identity_auc": val.get("identity_auc"),
                "phase": val.get("phase"),
                "suite_average": statistics.mean(run["tasks"][t]["median"] for t in tasks)
                if scored
                else None,
            }
        )
    return out


def collect(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings (ELECTRA arms at the full budget) and the references (masked LM, random init) of the
    results files, the first file holding an arm winning."""
    settings: dict[str, dict[str, Any]] = {}
    refs: dict[str, dict[str, Any]] = {}
    for result in results:
        tasks = result["setup"]["tasks"]
        for arm, rows in result["arms"].items():
            top = [r for r in rows if r["point"] == (TOP if arm != "random" else 0.0)]
            if not top or arm in settings or arm in refs:
                continue
            runs = seed_rows(result, top[0], tasks)
            entry = {"file": result["benchmark"], "suite_average": top[0].get("suite_average"), "runs": runs}
            if arm in ELECTRA_ARMS:
                settings[arm] = {**entry, **setting(arm, result["setup"]["recipe"])}
            elif arm in ("mlm", "random"):
                refs[arm] = entry
    for entry in settings.values():
        gains = [r["context_gain"] for r in entry["runs"] if r["context_gain"] is not None]
        entry["context_gain"] = statistics.median(gains) if gains else None
    if "mlm" in refs:
        gains = [r["context_gain"] for r in refs["mlm"]["runs"] if r["context_gain"] is not None]
        refs["mlm"]["context_gain"] = statistics.median(gains) if gains else None
    return {"settings": settings, "references": refs, "rank_correlation": rank_correlation(settings)}


def rank_correlation(settings: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Spearman's rho of suite average on context gain over the settings with both (ties share their mean
    rank); None below three settings. With a handful of points it describes these runs, nothing more."""
    pts = [
        (s["context_gain"], s["suite_average"])
        for s in settings.values()
        if s.get("context_gain") is not None and s.get("suite_average") is not None
    ]
    if len(pts) < 3:
        return None
    gains, averages = ranks([g for g, _ in pts]), ranks([a for _, a in pts])
    return {"spearman_rho": float(np.corrcoef(gains, averages)[0, 1]), "settings": len(pts)}


def ranks(values: list[float]) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(1, len(v) + 1)
    for value in np.unique(v):
        tied = v == value
        r[tied] = r[tied].mean()
    return r


def markdown_table(result: dict[str, Any]) -> str:
    """The write-up's table: one row per setting, ordered by context gain, then the references."""

    def num(v: float | None, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    rows = []
    ordered = sorted(
        result["settings"].items(), key=lambda kv: (kv[1]["context_gain"] is None, kv[1]["context_gain"] or 0)
    )
    for arm, s in ordered:
        runs = s["runs"]
        rows.append(
            [
                arm,
                s["embedding_sharing"]
                + ("" if s["embedding_sharing"] == "tied" else f" ({s['generator_lr_scope']})"),
                f"{s['generator_lr_scale']:g}x",
                f"1/{round(1 / s['generator_size'])}",
                s["adam"],
                ", ".join(str(r["seed"]) for r in runs),
                num(s["context_gain"], "+.2f"),
                num(
                    statistics.median(r["disc_auc"] for r in runs)
                    if all(r["disc_auc"] for r in runs)
                    else None,
                    ".3f",
                ),
                num(s["suite_average"], ".1f"),
            ]
        )
    for arm, ref in result["references"].items():
        rows.append(
            [
                arm,
                "",
                "",
                "",
                "",
                ", ".join(str(r["seed"]) for r in ref["runs"]),
                num(ref.get("context_gain"), "+.2f"),
                "",
                num(ref["suite_average"], ".1f"),
            ]
        )
    head = [
        "setting",
        "sharing",
        "generator lr",
        "generator width",
        "Adam",
        "pre-training seeds",
        "context gain",
        "val AUC",
        "suite average",
    ]
    return tables.markdown_table(head, rows)


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm, s in result["settings"].items():
        for run in s["runs"]:
            if run["context_gain"] is None or run["suite_average"] is None:
                continue
            marker = "o" if s["generator_size"] <= 0.25 else "s"
            ax.plot(
                run["context_gain"],
                run["suite_average"],
                marker,
                color="C0" if s["embedding_sharing"] == "tied" else "C1",
            )
            ax.annotate(
                f"{arm} ({run['seed']})",
                (run["context_gain"], run["suite_average"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    refs = result["references"]
    if refs.get("random", {}).get("suite_average") is not None:
        ax.axhline(refs["random"]["suite_average"], color="k", linestyle=":", label="random init")
    if refs.get("mlm", {}).get("suite_average") is not None:
        ax.axhline(
            refs["mlm"]["suite_average"],
            color="C2",
            linestyle="--",
            label="masked LM (its own context gain as x)",
        )
        if refs["mlm"].get("context_gain") is not None:
            ax.plot(refs["mlm"]["context_gain"], refs["mlm"]["suite_average"], "^", color="C2")
    ax.set_xlabel("generator context gain at the end of pre-training (nats)")
    ax.set_ylabel("fine-tuned suite average")
    ax.set_title(
        "ELECTRA's generator strength at equal compute (o: 1/4 wide, s: 1/2; blue tied, orange GDES)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--results", required=True, help="results files (names in experiments/results), first wins"
    )
    ap.add_argument("--name", default="generator_strength", help="results file name")
    a = ap.parse_args(argv)
    results = []
    for name in filter(None, a.results.split(",")):
        record = read_record(RESULTS / f"{name}.json")
        if record is None:
            print(f"error: no {RESULTS / name}.json", file=sys.stderr)
            return 2
        results.append(record)
    collected = collect(results)
    out = {**result_header(a.name), "sources": [r["benchmark"] for r in results], **collected}
    path = write_result(out, RESULTS / f"{a.name}.json", a.name)
    plot(out, path.with_suffix(".png"))
    print(f"wrote {path}")
    print(markdown_table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
