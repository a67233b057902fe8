"""`electra predict`: a fine-tuned model's predictions for a file: a classifier's as GLUE submission rows, a
tagger's in the input's form (`predict` picks which)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import numpy as np

from electra.errors import InputError
from electra.training.finetune.config import CustomColumns
from electra.training.finetune.data import read_columns
from electra.training.finetune.encoding import encode, max_len_for
from electra.training.finetune.inference import predict_logits, sigmoid
from electra.training.finetune.model_dir import Classifier, load_classifier
from electra.training.finetune.tasks import CUSTOM_TASKS, Example, read_glue, submission_rows


def predict(
    model_dir: Path,
    task: str,
    input_file: Path,
    out: Path | None,
    *,
    columns: CustomColumns | None = None,
    scheme: str = "iob2",
    max_seq_len: int = 128,
    device: str | None = None,
    overwrite: bool = False,
) -> tuple[int, str | None]:
    """Predictions for `input_file`, written atomically to `out`: (how many, None); a classifier's with no
    `out`: (how many, the TSV text) for the caller to print. A tagger's need `out` (a file in the input's
    form). An existing `out` is replaced only with `overwrite`, and never when it is the input."""
    from electra.atomic import atomic_write_text
    from electra.training.finetune.tag_predict import predict_tags
    from electra.training.finetune.tagging_tasks import is_tagging_task

    if out is not None:
        check_output_file(out, input_file, overwrite)
    if is_tagging_task(task):
        if out is None:
            raise InputError("a tagger's predictions are a file in the input's form: pass --out FILE")
        return predict_tags(
            model_dir, task, input_file, out, scheme=scheme, max_seq_len=max_seq_len, device=device
        ), None
    rows = predict_file(model_dir, task, input_file, columns=columns, max_seq_len=max_seq_len, device=device)
    text = "".join("\t".join(r) + "\n" for r in rows)
    if out is None:
        return len(rows) - 1, text
    atomic_write_text(out, text)
    return len(rows) - 1, None


def check_output_file(out: Path, input_file: Path, overwrite: bool) -> None:
    """Refuse to write the predictions over their own input, or over any file without `overwrite`."""
    if out.exists() and input_file.exists() and out.resolve() == input_file.resolve():
        raise InputError(
            f"--out {out} is the input file, which the predictions would replace; choose another --out"
        )
    if out.is_dir():
        raise InputError(f"--out {out} is a directory; name the file to write")
    if out.exists() and not overwrite:
        raise InputError(f"{out} already exists; choose another --out or pass --overwrite to replace it")


def predict_file(
    model_dir: Path,
    task: str,
    input_file: Path,
    *,
    columns: CustomColumns | None = None,
    max_seq_len: int = 128,
    device: str | None = None,
) -> list[tuple[str, str]]:
    """("index", "prediction") then one row per example of `input_file`.

    GLUE tasks read a GLUE test file and format the rows for the leaderboard (`submission_rows`); custom
    data keeps its row numbers and the label names (or the raw score for regression).
    """
    clf = load_classifier(model_dir, task, device)
    max_seq_len = max_len_for(max_seq_len, clf.model.config.max_position_embeddings)
    examples = _read_input(clf, task, input_file, columns)
    data = encode(clf.tokenizer, examples, clf.task, max_seq_len)
    preds = _predictions(clf, predict_logits(clf.model, data, clf.pad_id, clf.device, nullcontext()))
    if task not in CUSTOM_TASKS:
        return submission_rows(clf.task, examples, preds)
    return [("index", "prediction"), *((e.guid, str(p)) for e, p in zip(examples, preds, strict=True))]


def _read_input(clf: Classifier, task: str, input_file: Path, columns: CustomColumns | None) -> list[Example]:
    if task in CUSTOM_TASKS:
        columns = columns or CustomColumns()
        return read_columns(input_file, CustomColumns(columns.text, columns.text_pair, label=None))
    if not input_file.is_file():
        raise InputError(f"--input {input_file} does not exist")
    # read_glue finds a split by file name: test.tsv (or test_matched.tsv ...) in its directory.
    return read_glue(clf.task, input_file.parent, input_file.stem)


def _predictions(clf: Classifier, logits: np.ndarray) -> list[str] | list[float]:
    """Per input: the label, the number (regression), the relevance (a reranker: the sigmoid of its logit,
    as sentence-transformers' CrossEncoder scores it) or the labels over their thresholds, joined by ","."""
    cfg = clf.model.config
    if clf.task.is_regression:
        return [float(x) for x in logits[:, 0]]
    if clf.task.kind == "relevance":
        return [float(x) for x in sigmoid(logits[:, 0])]
    if clf.task.kind == "multi_label":
        names = [cfg.id2label[i] for i in range(cfg.num_labels)]
        cut = np.asarray([(cfg.label_thresholds or {}).get(n, 0.5) for n in names])
        return [
            ",".join(n for n, chosen in zip(names, row, strict=True) if chosen)
            for row in sigmoid(logits) > cut
        ]
    return [str(cfg.id2label[int(i)]) for i in logits.argmax(-1)]
