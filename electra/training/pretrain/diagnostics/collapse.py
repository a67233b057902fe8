"""Spotting a discriminator back at the prior after a peak, in the training log and the validation pass, and
saying which phase of replaced-token detection the run is in.

A discriminator that answers "replaced with probability q" for every token, q the share of replaced tokens,
scores the binary entropy H(q) as its loss: about 0.41 nats at 15%. Its `disc_prior_gain`, the share of H(q)
its loss removes (1 - loss / H(q)), is then 0, its recall 0 and its ROC AUC 0.5. Every run starts there.

Many runs leave it early and come back: the early AUC comes from token identity (while the generator samples
rare words more often than the corpus holds them, a rare word is probably a replacement), and once the
generator samples at about the corpus's frequencies that cue is gone; a discriminator that has not yet
learned to read context falls back to the prior with it. This is the first phase of replaced-token
detection, not learning lost. The validation pass logs the identity-only AUC (identity_auc.py), the best a
detector of token identity alone could reach, and the `phase` it gives: "identity" while the discriminator is
at or below it, "reading context" once clearly above. Records are still marked `collapsed` (back at the
prior after a peak) so that the event shows in the log and in `electra plot`; the warning says what it is.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from electra.training.pretrain.diagnostics.identity_auc import CONTEXT_MARGIN, PHASE_CONTEXT

# A run has left the prior once its discriminator removes this share of the prior's entropy (or reaches this
# AUC)...
LEARNED_GAIN = 0.05
LEARNED_AUC = 0.7
# ... and is back at it when below these with nothing flagged (or at this AUC on validation).
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
    """Remembers the best the discriminator has done, marks each record `collapsed` true or false, and says
    (once each) when the discriminator falls back to the prior and when it first reads context.

    Stateful like the other parts of a run (state_dict / load_state_dict), so that a resumed run flags the
    same steps as an uninterrupted one.
    """

    def __init__(self) -> None:
        self.best_gain = 0.0
        self.best_gain_step = 0
        self.best_auc = 0.5
        self.best_auc_step = 0
        self.identity_at_best_auc: float | None = None
        # Warned once per kind of record: the training log sees the fall first, validation says why.
        self.warned_train = False
        self.warned_val = False
        self.warned_below_identity = False
        self.context_step: int | None = None

    def observe(self, record: dict[str, Any]) -> list[tuple[int, str]]:
        """Add `disc_prior_gain` and `collapsed` to a train or val record; return the log lines (level,
        text) it calls for: a warning the first time each kind of record finds the discriminator back at the
        prior, a note the first time a validation pass finds it reading context; none for records without a
        discriminator."""
        gain = prior_gain(record)
        if gain is None:
            return []
        record["disc_prior_gain"] = gain
        if record["split"] == "val" and isinstance(record.get("disc_auc"), float):
            return self._observe_val(record)
        step = int(record["step"])
        recall = record.get("disc_recall")
        collapsed = (
            self.best_gain >= LEARNED_GAIN
            and gain < COLLAPSED_GAIN
            and isinstance(recall, float)
            and recall < COLLAPSED_RECALL
        )
        if gain > self.best_gain:
            self.best_gain, self.best_gain_step = gain, step
        record["collapsed"] = collapsed
        if not collapsed or self.warned_train or self.context_step is not None:
            return []
        self.warned_train = True
        return [
            (
                logging.WARNING,
                f"step {step}: the discriminator is back at the prior: its loss {record['disc_loss']:.3f} is "
                f"the entropy of its {record['replaced_fraction']:.1%} replaced rate (it removes {gain:.1%} "
                f"of it, down from {self.best_gain:.1%} at step {self.best_gain_step}), recall {recall:.2f}. "
                "Early detection often comes from token identity alone and fades as the generator's samples "
                "reach the corpus's frequencies; the validation records' identity_auc and phase say whether "
                "that is what happened (docs/pretraining.md, 'The identity phase')",
            )
        ]

    def _observe_val(self, record: dict[str, Any]) -> list[tuple[int, str]]:
        step, auc = int(record["step"]), record["disc_auc"]
        identity = record.get("identity_auc")
        identity = identity if isinstance(identity, float) and math.isfinite(identity) else None
        collapsed = self.best_auc >= LEARNED_AUC and auc < COLLAPSED_AUC
        if auc > self.best_auc:
            self.best_auc, self.best_auc_step, self.identity_at_best_auc = auc, step, identity
        record["collapsed"] = collapsed
        messages: list[tuple[int, str]] = []
        if record.get("phase") == PHASE_CONTEXT and self.context_step is None and identity is not None:
            self.context_step = step
            messages.append(
                (
                    logging.INFO,
                    f"step {step}: the discriminator reads context: validation AUC {auc:.3f} against "
                    f"{identity:.3f} for token identity alone",
                )
            )
        if collapsed and not self.warned_val and self.context_step is None:
            self.warned_val = True
            messages.append((logging.WARNING, self._val_warning(step, auc, identity)))
        if identity is not None and auc < identity - CONTEXT_MARGIN and not self.warned_below_identity:
            self.warned_below_identity = True
            messages.append(
                (
                    logging.WARNING,
                    f"step {step}: validation AUC {auc:.3f} is below the {identity:.3f} that token identity "
                    "alone gives: the discriminator does not use even the words' identity to tell the "
                    "generator's samples apart (it ranks worse than a table of which words the generator "
                    "over-samples would)",
                )
            )
        return messages

    def _val_warning(self, step: int, auc: float, identity: float | None) -> str:
        text = (
            f"step {step}: the discriminator is back near the prior: validation AUC {auc:.2f}, down from "
            f"{self.best_auc:.2f} at step {self.best_auc_step}"
        )
        if identity is None or self.identity_at_best_auc is None:
            return text + " (no identity-only AUC recorded: docs/pretraining.md, 'The identity phase')"
        peak = self.identity_at_best_auc
        text += (
            f". Token identity alone could reach {peak:.2f} at that peak and {identity:.2f} now: "
            + (
                "its peak was no more than identity gives, and identity stopped paying as the generator's "
                "samples approached the corpus's frequencies. "
                if self.best_auc <= peak + CONTEXT_MARGIN
                else "its peak was above what identity gives. "
            )
            + "It is not seen reading context yet (phase 'identity'). This is the first phase of "
            "replaced-token detection, not learning lost: training goes on, and the phase turns to "
            "'reading context' once the AUC is clearly above the identity-only AUC. A longer warm-up or a "
            "slowed generator only moves this phase (docs/pretraining.md, 'The identity phase')"
        )
        return text

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)
