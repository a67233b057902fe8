"""GLUE tasks (registry, TSV readers, leaderboard rows) and custom CSV / TSV / JSONL data sets.

The GLUE readers take the files exactly as `download_glue_data.py` leaves them:

* lines are split on tab only: GLUE quotes are literal text (MRPC and RTE have fields that open a quote and
  never close it), so CSV quoting would merge rows;
* a UTF-8 byte-order mark is dropped (MRPC train/dev start with one), CRLF line ends are accepted, blank
  lines are skipped, and a missing final newline (CoLA dev) changes nothing;
* columns are found by their header names wherever the file has a header; only CoLA train/dev have none;
* QQP has lines with a wrong column count: they are skipped and counted (as the GLUE loaders of BERT /
  ELECTRA / Hugging Face do), see `ExampleList.skipped_lines`. In every other task such a line is an error.

Every problem with a file is an `InputError` whose one-line message names the file (and the line) and the fix.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from electra.errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Example:
    """One input: a text (and optionally a second text) with its label.

    `guid` is the file's index / id column where it has one (what a GLUE submission must repeat), otherwise
    "<split>-<row>" for GLUE files and the 0-based row number for custom files.
    `label` is the label string as in the file for classification, a float for regression and relevance, a
    tuple of label strings for multi-label classification, None if unlabeled. `group`: the query a
    reranking dev example belongs to (its metrics are per query), else None.
    """

    guid: str
    text: str
    text_pair: str | None
    label: str | float | tuple[str, ...] | None
    group: int | None = None


# What a classifier's outputs mean: one label of several (softmax, cross-entropy), a number (regression,
# squared error), any number of labels (a sigmoid each, binary cross-entropy), or a pair's relevance (one
# output, a sigmoid, binary cross-entropy against 0..1: a cross-encoder, as sentence-transformers trains one).
TaskKind = Literal["single_label", "regression", "multi_label", "relevance"]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    dir_name: str
    labels: tuple[str, ...] | None  # label strings in id order; None = one output (regression, relevance)
    metrics: tuple[str, ...]
    main_metric: str
    dev_splits: tuple[str, ...]
    test_splits: tuple[str, ...]
    default_epochs: int
    submission_name: str  # GLUE leaderboard file stem; for MNLI see submission_stem(), which is per split
    # The two texts can be swapped without changing the label (the official code's double_unordered tasks).
    unordered_pairs: bool = False
    # Regression: (min, max) of the labels, which the official code scales by (label - min) / max.
    label_range: tuple[float, float] | None = None
    kind: TaskKind = "single_label"
    # The labels as a person reads them, in id order (GLUE's "0"/"1" files mean negative/positive, ...): what
    # a fine-tuned model's id2label holds, so /classify and transformers' pipeline answer in words. None:
    # `labels` themselves.
    label_names: tuple[str, ...] | None = None

    @property
    def names(self) -> tuple[str, ...] | None:
        """The labels as id2label holds them."""
        return self.label_names or self.labels

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression"

    @property
    def one_output(self) -> bool:
        return self.kind in ("regression", "relevance")


class ExampleList(list[Example]):
    """The examples of one file, plus the lines that were skipped as malformed (only ever non-empty for QQP).

    A plain list in every other respect, so callers that only want the examples need not know about it.
    """

    skipped_lines: tuple[int, ...] = ()

    @property
    def n_skipped(self) -> int:
        return len(self.skipped_lines)


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")


def _spec(
    name: str, dir_name: str, labels: tuple[str, ...] | None, metrics: tuple[str, ...], **kw: Any
) -> TaskSpec:
    fields: dict[str, Any] = {
        "main_metric": metrics[0],
        "dev_splits": ("dev",),
        "test_splits": ("test",),
        "default_epochs": 3,
        "submission_name": dir_name,
    }
    fields.update(kw)
    return TaskSpec(name=name, dir_name=dir_name, labels=labels, metrics=metrics, **fields)


TASKS: dict[str, TaskSpec] = {
    s.name: s
    for s in (
        # The label names are those of the GLUE datasets on the Hugging Face Hub (nyu-mll/glue).
        _spec("cola", "CoLA", _BINARY, ("mcc",), label_names=("unacceptable", "acceptable")),
        _spec("sst2", "SST-2", _BINARY, ("accuracy",), label_names=("negative", "positive")),
        _spec(
            "mrpc",
            "MRPC",
            _BINARY,
            ("f1", "accuracy"),
            unordered_pairs=True,
            label_names=("not_equivalent", "equivalent"),
        ),
        # ELECTRA fine-tunes the small data sets RTE and STS-B for 10 epochs instead of 3.
        _spec(
            "stsb",
            "STS-B",
            None,
            ("pearson", "spearman"),
            default_epochs=10,
            unordered_pairs=True,
            label_range=(0.0, 5.0),
            kind="regression",
        ),
        _spec("qqp", "QQP", _BINARY, ("f1", "accuracy"), label_names=("not_duplicate", "duplicate")),
        _spec(
            "mnli",
            "MNLI",
            ("contradiction", "entailment", "neutral"),
            ("accuracy",),
            dev_splits=("dev_matched", "dev_mismatched"),
            test_splits=("test_matched", "test_mismatched"),
            submission_name="MNLI-m",
        ),
        _spec("qnli", "QNLI", _NLI2, ("accuracy",)),
        _spec("rte", "RTE", _NLI2, ("accuracy",), default_epochs=10),
        _spec("wnli", "WNLI", _BINARY, ("accuracy",), label_names=("not_entailment", "entailment")),
    )
}


def custom_task(labels: tuple[str, ...] | None) -> TaskSpec:
    """The spec of a custom data set: its label names in id order (`label_names`), or None for regression."""
    regression = labels is None
    return TaskSpec(
        name="custom",
        dir_name="",
        labels=labels,
        metrics=("pearson", "spearman") if regression else ("accuracy",),
        main_metric="pearson" if regression else "accuracy",
        dev_splits=("dev",),
        test_splits=("test",),
        default_epochs=3,
        submission_name="custom",
        kind="regression" if regression else "single_label",
    )


# The tasks of your own files beyond `custom`: a reranker and a multi-label classifier.
RERANK, MULTILABEL = "rerank", "multilabel"
CUSTOM_TASKS = ("custom", RERANK, MULTILABEL)


def rerank_task() -> TaskSpec:
    """A cross-encoder: (query, passage) -> relevance, ranked per query (sentence-transformers'
    CrossEncoderRerankingEvaluator's figures: NDCG@10 first)."""
    return TaskSpec(
        name=RERANK,
        dir_name="",
        labels=None,
        metrics=("ndcg@10", "mrr@10", "map"),
        main_metric="ndcg@10",
        dev_splits=("dev",),
        test_splits=("test",),
        default_epochs=1,
        submission_name=RERANK,
        kind="relevance",
    )


def multilabel_task(labels: tuple[str, ...]) -> TaskSpec:
    """Any number of `labels` per text; micro F1 at each label's own threshold (chosen on the dev set)
    first."""
    return TaskSpec(
        name=MULTILABEL,
        dir_name="",
        labels=labels,
        metrics=("micro_f1", "macro_f1", "micro_f1_at_0.5", "macro_f1_at_0.5"),
        main_metric="micro_f1",
        dev_splits=("dev",),
        test_splits=("test",),
        default_epochs=3,
        submission_name=MULTILABEL,
        kind="multi_label",
    )


@dataclass(frozen=True)
class _Layout:
    """Header names of the columns a task's files use (test files have `index` and no `label`)."""

    text: str
    pair: str | None
    label: str
    index: str = "index"


_LAYOUTS: dict[str, _Layout] = {
    "cola": _Layout("sentence", None, "label"),  # only the test file has a header; see _COLA_*
    "sst2": _Layout("sentence", None, "label"),
    "mrpc": _Layout("#1 String", "#2 String", "Quality"),
    "stsb": _Layout("sentence1", "sentence2", "score"),
    "qqp": _Layout("question1", "question2", "is_duplicate", index="id"),
    # gold_label is the last column: train has label1 before it, dev label1..label5 (the annotators' votes).
    "mnli": _Layout("sentence1", "sentence2", "gold_label"),
    "qnli": _Layout("question", "sentence", "label"),
    "rte": _Layout("sentence1", "sentence2", "label"),
    "wnli": _Layout("sentence1", "sentence2", "label"),
}

# CoLA train/dev: source, label, original judgement ("*" or empty), sentence; no header row.
_COLA_COLUMNS = 4
_COLA_LABEL, _COLA_TEXT = 1, 3


def get_task(task: str | TaskSpec) -> TaskSpec:
    """The spec for a task name; also accepts the directory spelling ("SST-2", "sts-b") in any case."""
    if isinstance(task, TaskSpec):
        return task
    key = task.strip().lower()
    for spec in TASKS.values():
        if key in (spec.name, spec.dir_name.lower()):
            return spec
    raise InputError(f"unknown GLUE task {task!r}; valid tasks: {', '.join(TASKS)}")


def task_splits(task: str | TaskSpec) -> tuple[str, ...]:
    """Every split name read_glue accepts for the task ("dev"/"test" mean matched for MNLI)."""
    spec = get_task(task)
    extra = ("dev", "test") if spec.name == "mnli" else ()
    return ("train", *spec.dev_splits, *spec.test_splits, *extra)


def _split_file(spec: TaskSpec, split: str) -> tuple[str, str]:
    """(canonical split, file name) for a split name."""
    if spec.name == "mnli" and split in ("dev", "test"):
        split = f"{split}_matched"
    if split not in task_splits(spec):
        raise InputError(f"{spec.name} has no split {split!r}; valid splits: {', '.join(task_splits(spec))}")
    return split, f"{split}.tsv"


def _task_file(spec: TaskSpec, data_dir: Path, file_name: str) -> Path:
    """The file in the GLUE root (data_dir/SST-2/train.tsv) or in the task directory itself."""
    data_dir = Path(data_dir)
    candidates = [data_dir / spec.dir_name]
    if data_dir.is_dir():
        # Tolerate a differently-cased task directory ("sst-2"), which case-sensitive file systems would miss.
        candidates += [
            p for p in data_dir.iterdir() if p.is_dir() and p.name.lower() == spec.dir_name.lower()
        ]
    candidates.append(data_dir)
    for d in candidates:
        if (d / file_name).is_file():
            return d / file_name
    expected = data_dir / spec.dir_name / file_name
    shown = data_dir / file_name if data_dir.name.lower() == spec.dir_name.lower() else expected
    raise InputError(
        f"{shown}: no such file; expected the GLUE layout {data_dir}/{spec.dir_name}/{file_name} "
        "(download_glue_data.py)"
    )


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for every non-blank line, BOM and CR removed; an empty file is an error."""
    try:
        # newline="" keeps a stray "\r" inside a field from splitting the line (only "\n" ends a row).
        with open(path, encoding="utf-8-sig", newline="") as f:
            data = f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (bad byte at offset {e.start}); re-save it as UTF-8") from e
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from e
    if not data.strip():
        raise InputError(f"{path}: empty file; expected a GLUE TSV file (download_glue_data.py)")
    for number, line in enumerate(data.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip():
            yield number, line


def _parse_score(path: Path, number: int, value: str, what: str = "score") -> float:
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise InputError(f"{path}:{number}: {what} {value!r} is not a number; fix or remove the line")
    return score


def _check_label(spec: TaskSpec, path: Path, number: int, value: str) -> str | float:
    value = value.strip()
    if spec.labels is None:
        return _parse_score(path, number, value)
    if value not in spec.labels:
        raise InputError(
            f"{path}:{number}: label {value!r} is not a {spec.name} label; allowed: {', '.join(spec.labels)}"
        )
    return value


def read_glue(task: str | TaskSpec, data_dir: Path, split: str) -> ExampleList:
    """The examples of one GLUE split, in file order.

    `data_dir` is the GLUE root (holding SST-2/, ...) or the task directory itself. `split` is "train", "dev",
    "test", or for MNLI "dev_matched", "dev_mismatched", "test_matched", "test_mismatched" ("dev"/"test" mean
    matched). Test splits have no labels: their examples carry label None and guid = the index column.
    The result is an ExampleList; for QQP its `skipped_lines` are the malformed lines that were left out.
    """
    spec = get_task(task)
    split, file_name = _split_file(spec, split)
    path = _task_file(spec, data_dir, file_name)
    is_test = split in spec.test_splits
    lines = _read_lines(path)
    if spec.name == "cola" and not is_test:
        return _read_cola(spec, path, split, lines)
    out = ExampleList()
    layout = _LAYOUTS[spec.name]
    header_number, header_line = next(lines)
    header = [h.strip() for h in header_line.split("\t")]
    needed = [layout.text, *([layout.pair] if layout.pair else [])]
    needed += [layout.index] if is_test else [layout.label]
    missing = [c for c in needed if c not in header]
    if missing:
        raise InputError(
            f"{path}:{header_number}: header lacks column(s) {', '.join(map(repr, missing))} "
            f"(it has: {', '.join(header)}); is this the {spec.dir_name} {split} file?"
        )
    col = {name: header.index(name) for name in header[::-1]}  # first occurrence wins on duplicates
    i_text, i_label = col[layout.text], col.get(layout.label)
    i_pair = col[layout.pair] if layout.pair else None
    i_index = col.get(layout.index)
    skipped: list[int] = []
    for row, (number, line) in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != len(header):
            if spec.name == "qqp":
                skipped.append(number)
                continue
            raise InputError(
                f"{path}:{number}: {len(fields)} tab-separated columns, expected {len(header)} as in the "
                "header; a field contains a tab or the line is truncated: fix or remove the line"
            )
        guid = fields[i_index] if i_index is not None else f"{split}-{row}"
        label = None if is_test or i_label is None else _check_label(spec, path, number, fields[i_label])
        pair = fields[i_pair] if i_pair is not None else None
        out.append(Example(guid, fields[i_text], pair, label))
    if skipped:
        log.warning(
            "%s: skipped %d malformed line(s) (wrong column count), e.g. line %d",
            path,
            len(skipped),
            skipped[0],
        )
    if not out:
        raise InputError(
            f"{path}: has a header but no examples; the file is truncated (download_glue_data.py)"
        )
    out.skipped_lines = tuple(skipped)
    return out


def _read_cola(spec: TaskSpec, path: Path, split: str, lines: Iterator[tuple[int, str]]) -> ExampleList:
    """CoLA train/dev: fixed columns and no header row."""
    out = ExampleList()
    for row, (number, line) in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != _COLA_COLUMNS:
            raise InputError(
                f"{path}:{number}: {len(fields)} tab-separated columns, expected {_COLA_COLUMNS} "
                "(source, label, original label, sentence; CoLA train/dev have no header row)"
            )
        label = _check_label(spec, path, number, fields[_COLA_LABEL])
        out.append(Example(f"{split}-{row}", fields[_COLA_TEXT], None, label))
    if not out:
        raise InputError(f"{path}: empty file; expected a GLUE TSV file (download_glue_data.py)")
    return out


# ---------------------------------------------------------------------------------------------- custom files

_CUSTOM_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json")


def _custom_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], list[str]]]:
    """(line number, row as dict, header) for every non-blank record of a CSV / TSV / JSON-lines file."""
    suffix = path.suffix.lower()
    if suffix not in _CUSTOM_EXTENSIONS:
        raise InputError(
            f"{path}: unsupported file type {path.suffix or '(none)'!r}; use .csv, .tsv or .jsonl "
            "(one JSON object per line)"
        )
    if not path.is_file():
        raise InputError(f"{path}: no such file" if not path.exists() else f"{path}: is not a file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file; expected a header row (CSV/TSV) or one JSON object per line")
    if suffix in (".jsonl", ".json"):
        yield from _json_rows(path)
    else:
        yield from _csv_rows(path, "\t" if suffix == ".tsv" else ",")


def _json_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], list[str]]]:
    try:
        with open(path, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    hint = (
                        "; a .json file must hold one JSON object per line"
                        if line.lstrip().startswith("[")
                        else ""
                    )
                    raise InputError(f"{path}:{number}: not valid JSON ({e.msg}){hint}") from e
                if not isinstance(obj, dict):
                    raise InputError(
                        f"{path}:{number}: a JSON {type(obj).__name__}, expected an object like "
                        '{"text": ..., "label": ...} on every line'
                    )
                yield number, obj, list(obj)
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (bad byte at offset {e.start}); re-save it as UTF-8") from e


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any], list[str]]]:
    # Long documents exceed the csv module's default 128 KiB field limit; the limit is process-wide but only
    # guards against runaway unterminated quotes, which strict mode reports anyway.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    kind = "TSV" if delimiter == "\t" else "CSV"
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter=delimiter, strict=True)
            header: list[str] | None = None
            while True:
                start = reader.line_num + 1  # a quoted field may span lines: report where the record begins
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as e:
                    raise InputError(
                        f"{path}:{start}: bad {kind} quoting ({e}); quote fields that contain the delimiter, "
                        'quotes or newlines, and double the quotes inside them ("")'
                    ) from e
                if not any(x.strip() for x in fields):
                    continue
                if header is None:
                    header = [h.strip() for h in fields]
                    continue
                if len(fields) != len(header):
                    raise InputError(
                        f"{path}:{start}: {len(fields)} fields, but the header has {len(header)}; "
                        f"quote fields that contain the delimiter ({delimiter!r}) or newlines"
                    )
                yield start, dict(zip(header, fields, strict=True)), header
            if header is None:
                raise InputError(f"{path}: empty file; expected a header row naming the columns")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (bad byte at offset {e.start}); re-save it as UTF-8") from e


def _as_text(path: Path, number: int, column: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"{path}:{number}: {column!r} is a JSON {type(value).__name__}, expected a string")


LabelType = Literal["class", "score", "relevance", "labels"]


def read_custom(
    path: Path,
    text_column: str,
    text_pair_column: str | None,
    label_column: str | None,
    regression: bool = False,
    label_type: LabelType | None = None,
    label_separator: str = ",",
) -> list[Example]:
    """The examples of a custom data set: .csv and .tsv (header row, CSV quoting) or .jsonl / .json lines.

    With `label_column` None (a prediction input) labels are None. Labels are, by `label_type` (default:
    "score" with `regression`, else "class"): stripped strings ("class"); floats ("score"); floats from 0 to
    1 ("relevance", a reranker's: 0/1 or graded); tuples of label strings ("labels": a JSON list, or in a
    CSV/TSV cell the labels joined by `label_separator`; none at all is an empty list or cell). guid is the
    0-based row number.
    """
    kind: LabelType = label_type or ("score" if regression else "class")
    path = Path(path)
    wanted = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    examples: list[Example] = []
    for number, row, header in _custom_rows(path):
        missing = [c for c in wanted if c not in row]
        if missing:
            where = (
                f"{path}:{number}: this object"
                if path.suffix.lower() in (".jsonl", ".json")
                else f"{path}: the header"
            )
            raise InputError(
                f"{where} has no column {', '.join(map(repr, missing))} "
                f"(it has: {', '.join(header) or 'nothing'}); "
                "name the right columns with --text-column / --text-pair-column / --label-column"
            )
        text = _as_text(path, number, text_column, row[text_column])
        if text is None or not text.strip():
            raise InputError(
                f"{path}:{number}: empty text in column {text_column!r}; fill it in or drop the row"
            )
        pair = (
            None
            if text_pair_column is None
            else (_as_text(path, number, text_pair_column, row[text_pair_column]) or "")
        )
        label: str | float | tuple[str, ...] | None = None
        if label_column is not None:
            value = row[label_column]
            if kind == "labels":
                label = _label_list(path, number, label_column, value, label_separator)
            else:
                label = _custom_label(path, number, label_column, value, kind != "class")
                if kind == "relevance" and not 0.0 <= float(label) <= 1.0:
                    raise InputError(
                        f"{path}:{number}: relevance {label:g} is not between 0 and 1; give 1 for a relevant "
                        "passage, 0 for another (or a grade scaled to 0..1)"
                    )
        examples.append(Example(str(len(examples)), text, pair, label))
    if not examples:
        raise InputError(f"{path}: no examples (only a header or blank lines)")
    return examples


def _custom_label(path: Path, number: int, column: str, value: Any, regression: bool) -> str | float:
    if isinstance(value, bool):
        value = "true" if value else "false"
    if regression:
        if isinstance(value, int | float):
            value = float(value)
            if math.isfinite(value):
                return value
        text = str(value).strip() if value is not None else ""
        try:
            score = float(text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"{path}:{number}: label {text!r} is not a number; drop --regression for classification"
            )
        return score
    text = _as_text(path, number, column, value)
    if text is None or not text.strip():
        raise InputError(f"{path}:{number}: empty label in column {column!r}; fill it in or drop the row")
    return text.strip()


def _label_list(path: Path, number: int, column: str, value: Any, separator: str) -> tuple[str, ...]:
    """A multi-label example's labels: a JSON list of strings, or a cell of labels joined by `separator`."""
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise InputError(f"{path}:{number}: {column!r} must be a list of label strings, got {value!r}")
        items = value
    elif isinstance(value, str):
        items = value.split(separator) if separator else [value]
    elif value is None:
        items = []
    else:
        raise InputError(
            f"{path}:{number}: {column!r} is a JSON {type(value).__name__}; give the labels as a list of "
            'strings, e.g. ["sports", "politics"] ([] for none)'
        )
    labels = tuple(sorted({v.strip() for v in items if v.strip()}))
    return labels


def read_rerank_groups(path: Path) -> list[Example]:
    """A reranker's dev set: JSON lines, one query each, as sentence-transformers' reranking evaluator takes
    them: {"query": ..., "positive": [passages], "negative": [passages]} (relevance 1 and 0), or graded,
    {"query": ..., "documents": [passages], "labels": [relevance, ...]}. The examples are (query, passage,
    relevance), each with its query's `group`."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".json"):
        raise InputError(
            f"{path}: a reranker's dev set is JSON lines, one query per line: "
            '{"query": ..., "positive": [...], "negative": [...]}'
        )
    examples: list[Example] = []
    for group, (number, row, _) in enumerate(_custom_rows(path)):
        query = row.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InputError(f'{path}:{number}: no "query" string; every line is one query with its passages')
        if "documents" in row:
            docs, grades = row["documents"], row.get("labels")
            if not isinstance(grades, list) or not isinstance(docs, list) or len(grades) != len(docs):
                raise InputError(f'{path}:{number}: "labels" must give one relevance per document')
            pairs = list(zip(docs, grades, strict=True))
        else:
            positive, negative = row.get("positive", []), row.get("negative", [])
            if not isinstance(positive, list) or not isinstance(negative, list):
                raise InputError(f'{path}:{number}: "positive" and "negative" must be lists of passages')
            pairs = [(d, 1.0) for d in positive] + [(d, 0.0) for d in negative]
        for doc, grade in pairs:
            if not isinstance(doc, str) or isinstance(grade, bool) or not isinstance(grade, int | float):
                raise InputError(f"{path}:{number}: a passage must be a string and its relevance a number")
            if not math.isfinite(grade) or grade < 0:
                raise InputError(f"{path}:{number}: relevance {grade!r} must be a number >= 0")
            examples.append(Example(str(len(examples)), query, doc, float(grade), group))
    if not examples:
        raise InputError(f"{path}: no passages to rank")
    return examples


def label_names(examples: list[Example]) -> tuple[str, ...]:
    """The distinct labels of a classification training set, sorted: the label ids of the classifier.

    Labels that are all integers ("0", "1", ..., "10") sort numerically so their ids equal their values.
    """
    names: set[Any] = set()
    for e in examples:
        names.update(e.label if isinstance(e.label, tuple) else [e.label])
    if any(not isinstance(n, str) for n in names):
        raise ValueError("label_names needs string labels (a classification set read without --regression)")
    as_str: set[str] = {n for n in names if isinstance(n, str)}

    def key(name: str) -> tuple[int, float, str]:
        try:
            return (0, int(name), name)
        except ValueError:
            return (1, 0, name)

    numeric = all(key(n)[0] == 0 for n in as_str)
    return tuple(sorted(as_str, key=key if numeric else None))


# ---------------------------------------------------------------------------------------------- submissions


def submission_stem(task: str | TaskSpec, split: str = "test") -> str:
    """The leaderboard file stem (no .tsv) for a test split: MNLI-m / MNLI-mm for MNLI, else the task's."""
    spec = get_task(task)
    if spec.name == "mnli":
        return "MNLI-mm" if split in ("test_mismatched", "dev_mismatched") else "MNLI-m"
    return spec.submission_name


def submission_rows(
    task: str | TaskSpec, examples: list[Example], predictions: list[str | float] | Any
) -> list[tuple[str, str]]:
    """Rows of a GLUE leaderboard file, the header ("index", "prediction") first.

    index = the test file's index / id column (Example.guid); prediction = a label string (GLUE wants label
    words for MNLI/QNLI/RTE and "0"/"1" elsewhere: label ids are mapped through the task's labels) or, for
    STS-B, the score with 3 decimals. Write them as tab-separated lines to <submission_stem>.tsv.
    """
    spec = get_task(task)
    predictions = list(predictions)
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
    rows = [("index", "prediction")]
    for example, pred in zip(examples, predictions, strict=True):
        rows.append((example.guid, _format_prediction(spec, pred)))
    return rows


def _format_prediction(spec: TaskSpec, pred: Any) -> str:
    if spec.labels is None:
        return f"{float(pred):.3f}"
    if isinstance(pred, str):
        if spec.label_names and pred in spec.label_names:  # a model's id2label name: the file's label
            return spec.labels[spec.label_names.index(pred)]
        if pred not in spec.labels:
            raise ValueError(f"prediction {pred!r} is not a {spec.name} label ({', '.join(spec.labels)})")
        return pred
    index = int(pred)  # a label id (int or numpy integer)
    if not 0 <= index < len(spec.labels) or index != pred:
        raise ValueError(f"prediction {pred!r} is not a {spec.name} label id (0..{len(spec.labels) - 1})")
    return spec.labels[index]
