"""`electra plot RUN`: the curves of a pre-training run (metrics.jsonl) drawn to one PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.files import CURVES_PNG, METRICS_JSONL
from electra.training.pretrain.diagnostics.identity_auc import PHASE_CONTEXT

PANELS = (
    ("mlm_loss", "generator MLM loss"),
    ("disc_loss", "discriminator loss"),
    ("disc_accuracy", "discriminator accuracy"),
    ("disc_recall", "replaced-token recall / precision"),
    ("disc_auc", "replaced-token detection ROC AUC (val, maskable tokens)"),
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
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{path} is not UTF-8 text (byte {e.start}); is it a run's {METRICS_JSONL}?"
        ) from None
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        # A record is an object with a numeric step; anything else is not one of the trainer's lines.
        if isinstance(record, dict) and isinstance(record.get("step"), int | float):
            records.append(record)
    if not records:
        raise InputError(f"{path} holds no records yet; plot again after the first --log-every steps")
    return records


# Drawn over a panel's own train / val curves: (key, split, style, label).
EXTRA_LINES = {
    # In black: once nothing is flagged the two coincide, and that must show.
    "disc_accuracy": ("all_original_accuracy", "train", "k:", "all-original baseline (train)"),
    "disc_recall": ("disc_precision", "train", ".", "precision (train; undefined while nothing is flagged)"),
    # The bound of a detector that sees token identity only: at or below it the run may be reading identity
    # alone; clearly above it, context (diagnostics.identity_auc).
    "disc_auc": ("identity_auc", "val", "k:", "token identity alone (val)"),
}


def series(records: list[dict[str, Any]], key: str, split: str = "train") -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in records if r.get("split") == split and r.get(key) is not None]


def phase_title(records: list[dict[str, Any]]) -> str | None:
    """The detection panel's note on the run's phase: since when the discriminator reads context, or that it
    has not been seen to; None for a run without the identity-only AUC (the masked LM, older runs)."""
    val = [r for r in records if r.get("split") == "val" and r.get("phase")]
    if not val:
        return None
    context = next((r["step"] for r in val if r["phase"] == PHASE_CONTEXT), None)
    if context is None:
        return f"phase: identity (to step {val[-1]['step']}: not above token identity alone)"
    return f"phase: reading context from step {context}"


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png_out(out: Path) -> None:
    """Where a plot may go: a folder that exists, and no file there but an earlier plot (a PNG), which it
    replaces; any other file (the run's metrics, say) is refused rather than lost."""
    if not out.parent.is_dir():
        raise InputError(
            f"--out {out}: folder {out.parent} does not exist; create it or choose another --out"
        )
    if out.is_dir():
        raise InputError(f"--out {out} is a folder; name the PNG file to write")
    if out.exists():
        with out.open("rb") as f:
            if f.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
                raise InputError(f"--out {out} exists and is not a PNG; choose another --out")


def plot_run(run: Path, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    records = read_metrics(run)
    out = out or run / CURVES_PNG
    check_png_out(out)
    fig, axes = plt.subplots(2, 4, figsize=(20, 8))
    for ax, (key, title) in zip(axes.flat, PANELS, strict=True):
        for split, style in (("train", "-"), ("val", "o--")):
            if pts := series(records, key, split):
                ax.plot(*zip(*pts, strict=True), style, label=split, markersize=3)
        if key in EXTRA_LINES:
            other, split, style, label = EXTRA_LINES[key]
            if pts := series(records, other, split):
                ax.plot(*zip(*pts, strict=True), style, alpha=0.7, label=label, zorder=3)
        note = phase_title(records) if key == "disc_auc" else None
        ax.set_title(title if note is None else f"{title}\n{note}")
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
