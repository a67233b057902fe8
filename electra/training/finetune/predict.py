"""`electra predict`: a fine-tuned model's predictions for a file: a classifier's as GLUE submission rows, a
tagger's in the input's form (`predict` picks which)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import numpy as np

from electra.errors import InputError
from electra.training.finetune.config import CustomColumns
from electra.training.finetune.data import read_columns
from electra.training.finetune.encoding import encode
from electra.training.finetune.inference import predict_logits
from electra.training.finetune.model_dir import Classifier, load_classifier
from electra.training.finetune.tasks import Example, read_glue, submission_rows


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
) -> tuple[int, str | None]:
    """Predictions for `input_file`, written atomically to `out`: (how many, None); a classifier's with no
    `out`: (how many, the TSV text) for the caller to print. A tagger's need `out` (a file in the input's
    form)."""
    from electra.atomic import atomic_write_text
    from electra.training.finetune.tag_predict import predict_tags
    from electra.training.finetune.tagging_tasks import is_tagging_task

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
    examples = _read_input(clf, task, input_file, columns)
    data = encode(clf.tokenizer, examples, clf.task, max_seq_len)
    preds = _predictions(clf, predict_logits(clf.model, data, clf.pad_id, clf.device, nullcontext()))
    if task != "custom":
        return submission_rows(clf.task, examples, preds)
    return [("index", "prediction"), *((e.guid, str(p)) for e, p in zip(examples, preds, strict=True))]


def _read_input(clf: Classifier, task: str, input_file: Path, columns: CustomColumns | None) -> list[Example]:
    if task == "custom":
        columns = columns or CustomColumns()
        return read_columns(input_file, CustomColumns(columns.text, columns.text_pair, label=None))
    if not input_file.is_file():
        raise InputError(f"--input {input_file} does not exist")
    # read_glue finds a split by file name: test.tsv (or test_matched.tsv ...) in its directory.
    return read_glue(clf.task, input_file.parent, input_file.stem)


def _predictions(clf: Classifier, logits: np.ndarray) -> list[str] | list[float]:
    if clf.task.is_regression:
        return [float(x) for x in logits[:, 0]]
    id2label = clf.model.config.id2label
    return [str(id2label[int(i)]) for i in logits.argmax(-1)]
