"""Spotting a discriminator that has collapsed to the prior, in the training log and the validation pass.

A discriminator that answers "replaced with probability q" for every token, q the share of replaced tokens,
scores the binary entropy H(q) as its loss: about 0.41 nats at 15%. Its `disc_prior_gain`, the share of H(q)
its loss removes (1 - loss / H(q)), is then 0, its recall 0 and its ROC AUC 0.5. Every run starts there; a
collapsed one gets back there after having learned, typically once the generator's samples stop being rare
words (docs/pretraining.md, "When pre-training collapses"). Left unflagged it looks like a run that has
merely slowed down.
"""

from __future__ import annotations

import math
from typing import Any

# A run has learned once its discriminator removes this share of the prior's entropy (or reaches this AUC)...
LEARNED_GAIN = 0.05
LEARNED_AUC = 0.7
# ... and has collapsed when it is back below these with nothing flagged (or at this AUC on validation).
COLLAPSED_GAIN = 0.02
COLLAPSED_RECALL = 0.01
COLLAPSED_AUC = 0.6


def binary_entropy(q: float) -> float:
    """H(q) in nats: the loss of a discriminator that predicts q for every token."""
    if not 0.0 < q < 1.0:
        return 0.0
    return -(q * math.log(q) + (1 - q) * math.log(1 - q))


def prior_gain(record: dict[str, Any]) -> float | None:
    """1 - disc_loss / H(replaced_fraction); None for a record without a discriminator."""
    loss, q = record.get("disc_loss"), record.get("replaced_fraction")
    if not isinstance(loss, float) or not isinstance(q, float) or binary_entropy(q) == 0.0:
        return None
    return 1.0 - loss / binary_entropy(q)


class CollapseWatch:
    """Remembers the best the discriminator has done, and marks each record `collapsed` true or false.

    Stateful like the other parts of a run (state_dict / load_state_dict), so that a resumed run flags the
    same steps as an uninterrupted one.
    """

    def __init__(self) -> None:
        self.best_gain = 0.0
        self.best_gain_step = 0
        self.best_auc = 0.5
        self.best_auc_step = 0
        self.warned = False

    def observe(self, record: dict[str, Any]) -> str | None:
        """Add `disc_prior_gain` and `collapsed` to a train or val record; return a warning the first time a
        collapse is seen (None otherwise, and for records without a discriminator)."""
        gain = prior_gain(record)
        if gain is None:
            return None
        record["disc_prior_gain"] = gain
        step = int(record["step"])
        if record["split"] == "val" and isinstance(record.get("disc_auc"), float):
            auc = record["disc_auc"]
            collapsed = self.best_auc >= LEARNED_AUC and auc < COLLAPSED_AUC
            if auc > self.best_auc:
                self.best_auc, self.best_auc_step = auc, step
            what = f"validation AUC {auc:.2f}, down from {self.best_auc:.2f} at step {self.best_auc_step}"
        else:
            recall = record.get("disc_recall")
            collapsed = (
                self.best_gain >= LEARNED_GAIN
                and gain < COLLAPSED_GAIN
                and isinstance(recall, float)
                and recall < COLLAPSED_RECALL
            )
            if gain > self.best_gain:
                self.best_gain, self.best_gain_step = gain, step
            what = (
                f"loss {record['disc_loss']:.3f} is the entropy of its {record['replaced_fraction']:.1%} "
                f"replaced rate (it removes {gain:.1%} of it, down from {self.best_gain:.1%} at step "
                f"{self.best_gain_step}), recall {recall:.2f}"
            )
        record["collapsed"] = collapsed
        if not collapsed or self.warned:
            return None
        self.warned = True
        return (
            f"step {step}: the discriminator has collapsed to the prior: {what}. It no longer tells replaced "
            "tokens from original ones: the generator's samples became plausible before the discriminator "
            "learned to read context (docs/pretraining.md, 'When pre-training collapses': "
            "--embedding-sharing gdes --generator-lr-scale 0.05 keeps the generator behind)"
        )

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)
