"""`electra plot RUN`: the curves of a pre-training run (metrics.jsonl) drawn to one PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.files import CURVES_PNG, METRICS_JSONL

PANELS = (
    ("mlm_loss", "generator MLM loss"),
    ("disc_loss", "discriminator loss"),
    ("disc_accuracy", "discriminator accuracy"),
    ("disc_recall", "replaced-token recall / precision"),
    ("disc_auc", "replaced-token detection ROC AUC (val)"),
    ("sampled_accuracy", "generator samples equal to the original"),
    ("tokens_per_s", "throughput (tokens/s)"),
    ("lr", "learning rate"),
)


def read_metrics(run: Path) -> list[dict[str, Any]]:
    path = run / METRICS_JSONL
    if not path.is_file():
        raise InputError(
            f"{run} has no {METRICS_JSONL}; point `electra plot` at a run directory of `electra pretrain`"
        )
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
    if not records:
        raise InputError(f"{path} holds no records yet; plot again after the first --log-every steps")
    return records


def plot_run(run: Path, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    records = read_metrics(run)
    out = out or run / CURVES_PNG
    fig, axes = plt.subplots(2, 4, figsize=(20, 8))

    def series(key: str, split: str = "train") -> list[tuple[int, float]]:
        return [(r["step"], r[key]) for r in records if r.get("split") == split and r.get(key) is not None]

    extra_lines = {
        # Drawn over the accuracy in black: once nothing is flagged the two coincide, and that must show.
        "disc_accuracy": ("all_original_accuracy", "k:", "all-original baseline (train)"),
        "disc_recall": ("disc_precision", ".", "precision (train; undefined while nothing is flagged)"),
    }
    for ax, (key, title) in zip(axes.flat, PANELS, strict=True):
        for split, style in (("train", "-"), ("val", "o--")):
            if pts := series(key, split):
                ax.plot(*zip(*pts, strict=True), style, label=split, markersize=3)
        if key in extra_lines:
            other, style, label = extra_lines[key]
            if pts := series(other):
                ax.plot(*zip(*pts, strict=True), style, alpha=0.7, label=label, zorder=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(str(run))
    fig.tight_layout()
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(out)
    return out
