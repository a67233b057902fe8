"""Token classification metrics: entity precision / recall / F1 (seqeval, strict IOB2) and token accuracy.

An entity is a B-X followed by the I-X that continue it, and a predicted entity is right only if its type and
both boundaries match a gold one (micro-averaged over all entities: the CoNLL-2003 score). Strict mode is
seqeval's `mode="strict", scheme=IOB2`: an I-X that continues no X entity (a model may output one after O)
starts no entity, where conlleval and seqeval's default mode would count it as one. On valid IOB2 both
agree. Scores with nothing to divide by are 0.0 (zero_division=0), with no warning.
"""

from __future__ import annotations

from collections.abc import Sequence

from electra.errors import InputError
from electra.training.finetune.tagging_data import OUTSIDE, TagSequenceError, repair_iob2, to_iob2

MAIN_METRIC = "f1"


def require_seqeval() -> None:
    """InputError unless seqeval is importable: called before training or evaluating a tagger, so a missing
    package stops the run at once rather than at its first evaluation, after an epoch of training."""
    import importlib.util

    if importlib.util.find_spec("seqeval") is None:
        raise InputError(
            "token classification is scored with seqeval, which is not installed "
            "(pip install seqeval, or the train extra: pip install 'electra[train]')"
        )


def tag_metrics(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """f1, precision, recall (entities, micro), accuracy (tokens), and f1_X / precision_X / recall_X /
    support_X (gold entities of type X) for every entity type X in the gold or predicted tags.

    `gold` must be valid IOB2; `pred` may hold invalid sequences but only O / B-X / I-X tags. Sentences
    must pair up with equal lengths. ValueError otherwise.
    """
    # seqeval (train extra) imports scikit-learn, about 2 s: only here, so the CLI that imports MAIN_METRIC
    # starts fast and without it.
    from seqeval.metrics import accuracy_score
    from seqeval.metrics.v1 import precision_recall_fscore_support
    from seqeval.scheme import IOB2, Entities

    y_true, y_pred = _checked(gold, pred)
    # v1.precision_recall_fscore_support is what seqeval's f1_score & co. run for mode="strict". Called
    # directly, with the entities found once (as classification_report does: half the time), it skips the
    # report's macro average, which warns (mean of an empty slice) when there are no entities at all.
    found = {"entities_true": Entities(y_true, IOB2), "entities_pred": Entities(y_pred, IOB2)}
    p, r, f, _ = precision_recall_fscore_support(
        y_true, y_pred, average="micro", scheme=IOB2, zero_division=0, **found
    )
    metrics = {"f1": float(f), "precision": float(p), "recall": float(r)}
    metrics["accuracy"] = float(accuracy_score(y_true, y_pred))
    per_type = dict.fromkeys(_types(y_true, y_pred), (0.0, 0.0, 0.0, 0))
    names = sorted(found["entities_true"].unique_tags | found["entities_pred"].unique_tags)
    if names:
        # Scores come in the order of the sorted entity types, as `names`.
        ps, rs, fs, ss = precision_recall_fscore_support(
            y_true, y_pred, average=None, scheme=IOB2, zero_division=0, **found
        )
        per_type.update(zip(names, zip(ps, rs, fs, ss, strict=True), strict=True))
    for kind in sorted(per_type):
        p_k, r_k, f_k, s_k = per_type[kind]
        metrics[f"f1_{kind}"] = float(f_k)
        metrics[f"precision_{kind}"] = float(p_k)
        metrics[f"recall_{kind}"] = float(r_k)
        metrics[f"support_{kind}"] = float(s_k)
    return metrics


def _checked(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]
) -> tuple[list[list[str]], list[list[str]]]:
    if len(gold) != len(pred):
        raise ValueError(f"{len(pred)} predicted sentences for {len(gold)} gold ones")
    y_true, y_pred = [list(s) for s in gold], [list(s) for s in pred]
    for n, (g, p) in enumerate(zip(y_true, y_pred, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {n}: {len(p)} predicted tags for {len(g)} gold ones")
        try:
            to_iob2(g, "iob2")
        except TagSequenceError as e:
            raise ValueError(f"sentence {n}: gold tags are not valid IOB2 ({e})") from e
        try:
            repair_iob2(p)  # only its check of each tag's form: seqeval fails on other prefixes
        except TagSequenceError as e:
            raise ValueError(f"sentence {n}: predicted {e}") from e
    if not any(y_true):
        raise ValueError("no tokens to score")
    return y_true, y_pred


def _types(*corpora: list[list[str]]) -> set[str]:
    """Every entity type named by a tag, also one that only occurs in I- tags strict mode ignores."""
    return {tag[2:] for corpus in corpora for tags in corpus for tag in tags if tag != OUTSIDE}
