"""GLUE readers on the shared data and on generated MNLI / QQP files, custom data, bad input, submissions."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from electra.errors import InputError
from electra.training.finetune.tasks import (
    TASKS,
    Example,
    ExampleList,
    get_task,
    label_names,
    read_custom,
    read_glue,
    submission_rows,
    submission_stem,
)

GLUE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "glue"

# Published GLUE split sizes (QNLI train, MNLI and QQP are not in the shared set).
COUNTS = {
    ("cola", "train"): 8551,
    ("cola", "dev"): 1043,
    ("cola", "test"): 1063,
    ("sst2", "train"): 67349,
    ("sst2", "dev"): 872,
    ("sst2", "test"): 1821,
    ("mrpc", "train"): 3668,
    ("mrpc", "dev"): 408,
    ("mrpc", "test"): 1725,
    ("stsb", "train"): 5749,
    ("stsb", "dev"): 1500,
    ("stsb", "test"): 1379,
    ("rte", "train"): 2490,
    ("rte", "dev"): 277,
    ("rte", "test"): 3000,
    ("wnli", "train"): 635,
    ("wnli", "dev"): 71,
    ("wnli", "test"): 146,
    ("qnli", "dev"): 5463,
    ("qnli", "test"): 5463,
}


def glue_file(task: str, split: str) -> Path:
    path = GLUE / TASKS[task].dir_name / f"{split}.tsv"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared GLUE data is not on this machine")
    return path


def write(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + end for line in lines), encoding="utf-8")
    return path


def raises(parts: list[str]) -> AbstractContextManager[Any]:
    """InputError whose message holds every part (file name, line number, ...)."""
    return pytest.raises(InputError, match="".join(f"(?=.*{re.escape(p)})" for p in parts))


# ------------------------------------------------------------------------------------------ registry


def test_registry_specs_follow_glue_and_the_electra_recipe() -> None:
    assert set(TASKS) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
    assert TASKS["mnli"].labels == ("contradiction", "entailment", "neutral")
    assert TASKS["qnli"].labels == TASKS["rte"].labels == ("entailment", "not_entailment")
    for name in ("cola", "sst2", "mrpc", "qqp", "wnli"):
        assert TASKS[name].labels == ("0", "1")
    # id2label: the names of the GLUE datasets on the Hub (nyu-mll/glue), in the files' label order.
    assert {n: s.names for n, s in TASKS.items()} == {
        "cola": ("unacceptable", "acceptable"),
        "sst2": ("negative", "positive"),
        "mrpc": ("not_equivalent", "equivalent"),
        "stsb": None,
        "qqp": ("not_duplicate", "duplicate"),
        "mnli": ("contradiction", "entailment", "neutral"),
        "qnli": ("entailment", "not_entailment"),
        "rte": ("entailment", "not_entailment"),
        "wnli": ("not_entailment", "entailment"),
    }
    assert TASKS["stsb"].labels is None and TASKS["stsb"].is_regression and not TASKS["rte"].is_regression
    assert {n: s.main_metric for n, s in TASKS.items()} == {
        "cola": "mcc",
        "sst2": "accuracy",
        "mrpc": "f1",
        "stsb": "pearson",
        "qqp": "f1",
        "mnli": "accuracy",
        "qnli": "accuracy",
        "rte": "accuracy",
        "wnli": "accuracy",
    }
    assert TASKS["stsb"].metrics == ("pearson", "spearman") and TASKS["mrpc"].metrics == ("f1", "accuracy")
    assert TASKS["cola"].metrics == ("mcc",)
    assert {n for n, s in TASKS.items() if s.default_epochs == 10} == {"rte", "stsb"}
    assert all(s.default_epochs == 3 for n, s in TASKS.items() if n not in ("rte", "stsb"))
    assert TASKS["mnli"].dev_splits == ("dev_matched", "dev_mismatched")
    assert TASKS["mnli"].test_splits == ("test_matched", "test_mismatched")
    assert TASKS["sst2"].dev_splits == ("dev",) and TASKS["sst2"].test_splits == ("test",)
    assert TASKS["stsb"].submission_name == "STS-B" and TASKS["sst2"].dir_name == "SST-2"
    assert submission_stem("mnli", "test_matched") == "MNLI-m"
    assert submission_stem("mnli", "test_mismatched") == "MNLI-mm"
    assert submission_stem("qnli") == "QNLI"
    assert get_task("SST-2") is TASKS["sst2"] and get_task("sts-b") is TASKS["stsb"]


def test_unknown_task_and_split_list_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="valid tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli"):
        read_glue("squad", tmp_path, "train")
    with pytest.raises(InputError, match="valid splits: train, dev, test"):
        read_glue("rte", tmp_path, "validation")


# ------------------------------------------------------------------------------------------ shared GLUE files


@pytest.mark.shared_data
@pytest.mark.parametrize(("task", "split"), list(COUNTS))
def test_published_row_counts(task: str, split: str) -> None:
    glue_file(task, split)
    examples = read_glue(task, GLUE, split)
    assert len(examples) == COUNTS[task, split]
    assert isinstance(examples, ExampleList) and examples.n_skipped == 0
    spec = TASKS[task]
    if split == "test":
        assert all(e.label is None for e in examples)
        # the index column, in file order, is what a submission repeats
        assert [e.guid for e in examples[:3]] == ["0", "1", "2"]
    elif spec.is_regression:
        assert all(isinstance(e.label, float) and 0.0 <= e.label <= 5.0 for e in examples)
    else:
        assert {e.label for e in examples} == set(spec.labels or ())
    assert all(e.text for e in examples)
    assert all((e.text_pair is not None) == (task not in ("cola", "sst2")) for e in examples)


@pytest.mark.shared_data
def test_first_dev_examples_match_the_files() -> None:
    glue_file("mrpc", "dev")
    mrpc = read_glue("mrpc", GLUE, "dev")[0]
    # MRPC dev starts with a UTF-8 BOM before "Quality", and this pair has an unclosed literal quote.
    assert mrpc == Example(
        "dev-0",
        "He said the foodservice pie business doesn't fit the company's long-term growth strategy.",
        '"The foodservice pie business does not fit our long-term growth strategy.',
        "1",
    )
    raw = (GLUE / "MRPC" / "dev.tsv").read_text(encoding="utf-8-sig").split("\n")[1].split("\t")
    assert (mrpc.label, mrpc.text, mrpc.text_pair) == (raw[0], raw[3], raw[4])

    glue_file("rte", "dev")
    rte = read_glue("rte", GLUE, "dev")[0]
    assert rte.guid == "0" and rte.label == "not_entailment"
    assert rte.text.startswith(
        "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer"
    )
    assert rte.text_pair == "Christopher Reeve had an accident."

    glue_file("stsb", "dev")
    stsb = read_glue("stsb", GLUE, "dev")[0]
    assert stsb == Example(
        "0", "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", 5.0
    )
    assert read_glue("stsb", GLUE, "dev")[1].label == 4.75


@pytest.mark.shared_data
def test_rte_row_with_a_stray_space_before_a_quote_parses() -> None:
    glue_file("rte", "train")
    by_guid = {e.guid: e for e in read_glue("rte", GLUE, "train")}
    row = by_guid["2164"]
    assert row.text.startswith(" \"That film wasn't too successful")
    assert row.text_pair == 'The film "WarGames" was shot in 1983.' and row.label == "not_entailment"


@pytest.mark.shared_data
def test_cola_has_no_header_in_train_dev_but_one_in_test() -> None:
    glue_file("cola", "dev")
    train = read_glue("cola", GLUE, "train")
    assert train[0] == Example(
        "train-0", "Our friends won't buy this analysis, let alone the next one we propose.", None, "1"
    )
    dev = read_glue("cola", GLUE, "dev")  # no trailing newline: the last row still counts
    last = (GLUE / "CoLA" / "dev.tsv").read_text(encoding="utf-8").rsplit("\n", 1)[-1].split("\t")
    assert (dev[-1].text, dev[-1].label) == (last[3], last[1])
    test = read_glue("cola", GLUE, "test")
    assert test[0] == Example("0", "Bill whistled past the house.", None, None)


@pytest.mark.shared_data
def test_glue_root_and_task_directory_are_both_accepted() -> None:
    glue_file("sst2", "dev")
    assert read_glue("sst2", GLUE, "dev") == read_glue("sst2", GLUE / "SST-2", "dev")
    assert read_glue(TASKS["wnli"], GLUE / "WNLI", "test") == read_glue("wnli", GLUE, "test")


def test_cola_generated_files_without_header(tmp_path: Path) -> None:
    write(tmp_path / "CoLA" / "train.tsv", ["gj04\t1\t\tA fine sentence.", "gj04\t0\t*\tSentence bad a."])
    ex = read_glue("cola", tmp_path, "train")
    assert [(e.text, e.label) for e in ex] == [("A fine sentence.", "1"), ("Sentence bad a.", "0")]
    write(tmp_path / "CoLA" / "dev.tsv", ["gj04\t1\tA fine sentence."])  # 3 columns
    with raises(["dev.tsv:1", "expected 4"]):
        read_glue("cola", tmp_path, "dev")


# ------------------------------------------------------------------------------ generated MNLI / QQP

MNLI_BASE = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2"
)


def _mnli_row(i: int, s1: str, s2: str, labels: list[str]) -> str:
    return "\t".join(
        [str(i), f"{i}0", f"{i}0e", "fiction", "( a )", "( b )", "(ROOT a)", "(ROOT b)", s1, s2, *labels]
    )


def make_mnli(root: Path) -> Path:
    d = root / "MNLI"
    write(
        d / "train.tsv",
        [
            MNLI_BASE + "\tlabel1\tgold_label",
            _mnli_row(0, "A cat sat.", "An animal sat.", ["entailment", "entailment"]),
            _mnli_row(1, "A cat sat.", "A dog sat.", ["contradiction", "contradiction"]),
            _mnli_row(2, "A cat sat.", "It was black.", ["neutral", "neutral"]),
        ],
    )
    dev_header = MNLI_BASE + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"
    # label1 disagrees with the gold label: the reader must take gold_label (the last column).
    votes = ["neutral", "entailment", "entailment", "entailment", "neutral", "entailment"]
    write(d / "dev_matched.tsv", [dev_header, _mnli_row(10, "M premise.", "M hypothesis.", votes)])
    write(
        d / "dev_mismatched.tsv",
        [
            dev_header,
            _mnli_row(20, "MM premise.", "MM hypothesis.", ["neutral"] * 5 + ["contradiction"]),
            _mnli_row(21, "MM premise 2.", "MM hypothesis 2.", ["neutral"] * 6),
        ],
    )
    write(d / "test_matched.tsv", [MNLI_BASE, _mnli_row(7, "T premise.", "T hypothesis.", [])])
    write(d / "test_mismatched.tsv", [MNLI_BASE, _mnli_row(8, "TM premise.", "TM hypothesis.", [])])
    return d


def test_mnli_all_five_files(tmp_path: Path) -> None:
    make_mnli(tmp_path)
    train = read_glue("mnli", tmp_path, "train")
    assert [e.label for e in train] == ["entailment", "contradiction", "neutral"]
    assert train[0] == Example("0", "A cat sat.", "An animal sat.", "entailment")
    matched = read_glue("mnli", tmp_path, "dev_matched")
    assert matched == [Example("10", "M premise.", "M hypothesis.", "entailment")]
    assert read_glue("mnli", tmp_path, "dev") == matched  # plain "dev" means matched
    mismatched = read_glue("mnli", tmp_path / "MNLI", "dev_mismatched")
    assert [e.label for e in mismatched] == ["contradiction", "neutral"]
    assert read_glue("mnli", tmp_path, "test_matched") == [Example("7", "T premise.", "T hypothesis.", None)]
    assert read_glue("mnli", tmp_path, "test") == read_glue("mnli", tmp_path, "test_matched")
    assert read_glue("mnli", tmp_path, "test_mismatched")[0].guid == "8"
    with pytest.raises(InputError, match="valid splits: train, dev_matched, dev_mismatched"):
        read_glue("mnli", tmp_path, "dev_other")


def test_qqp_malformed_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    write(
        tmp_path / "QQP" / "train.tsv",
        [
            "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            "0\t1\t2\tHow do I learn Python?\tWhat is the best way to learn Python?\t1",
            "1\t3\t4\tWhy is the sky blue?",  # a question broken by a newline, as in the real file
            "what makes it blue?\t0",
            "2\t5\t6\tIs tea healthy?\tIs coffee healthy?\t0",
        ],
    )
    examples = read_glue("qqp", tmp_path, "train")
    assert [e.guid for e in examples] == ["0", "2"]
    assert examples[0].text_pair == "What is the best way to learn Python?" and examples[1].label == "0"
    assert examples.skipped_lines == (3, 4) and examples.n_skipped == 2
    write(tmp_path / "QQP" / "test.tsv", ["id\tquestion1\tquestion2", "0\tQ one?\tQ two?", "1\tbroken"])
    test = read_glue("qqp", tmp_path, "test")
    assert test == [Example("0", "Q one?", "Q two?", None)] and test.n_skipped == 1


def test_crlf_line_ends_and_blank_lines_are_tolerated(tmp_path: Path) -> None:
    lines = ["index\tsentence1\tsentence2\tlabel", "0\tA.\tB.\tentailment", "", "1\tC.\tD.\tnot_entailment"]
    write(tmp_path / "RTE" / "dev.tsv", lines, end="\r\n")
    assert [e.label for e in read_glue("rte", tmp_path, "dev")] == ["entailment", "not_entailment"]
    assert read_glue("rte", tmp_path, "dev")[1].text_pair == "D."


# ------------------------------------------------------------------------------------------ GLUE bad input


def test_missing_file_names_the_expected_layout(tmp_path: Path) -> None:
    with raises(["SST-2/train.tsv", "no such file", "download_glue_data.py"]):
        read_glue("sst2", tmp_path, "train")


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    write(tmp_path / "SST-2" / "train.tsv", [])
    with raises(["train.tsv", "empty file"]):
        read_glue("sst2", tmp_path, "train")
    write(tmp_path / "SST-2" / "dev.tsv", ["sentence\tlabel"])
    with raises(["dev.tsv", "no examples"]):
        read_glue("sst2", tmp_path, "dev")


def test_missing_header_columns_are_named(tmp_path: Path) -> None:
    write(tmp_path / "RTE" / "train.tsv", ["index\tpremise\thypothesis\tlabel", "0\ta\tb\tentailment"])
    with raises(["train.tsv:1", "'sentence1'", "'sentence2'", "premise"]):
        read_glue("rte", tmp_path, "train")


def test_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    write(
        tmp_path / "RTE" / "train.tsv",
        ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment", "1\ta\tb"],
    )
    with raises(["train.tsv:3", "3 tab-separated columns, expected 4"]):
        read_glue("rte", tmp_path, "train")


def test_unknown_label_names_file_line_and_allowed_labels(tmp_path: Path) -> None:
    write(tmp_path / "SST-2" / "train.tsv", ["sentence\tlabel", "good .\t1", "bad .\tnegative"])
    with raises(["train.tsv:3", "'negative'", "allowed: 0, 1"]):
        read_glue("sst2", tmp_path, "train")


def test_regression_label_that_is_not_a_number(tmp_path: Path) -> None:
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    write(tmp_path / "STS-B" / "dev.tsv", [header, "0\tg\tf\t2012\t0\tnone\tnone\tA.\tB.\thigh"])
    with raises(["dev.tsv:2", "'high' is not a number"]):
        read_glue("stsb", tmp_path, "dev")


def test_bad_input_messages_are_one_line(tmp_path: Path) -> None:
    write(tmp_path / "SST-2" / "train.tsv", ["sentence\tlabel", "good .\t7"])
    with pytest.raises(InputError) as info:
        read_glue("sst2", tmp_path, "train")
    assert "\n" not in str(info.value) and info.value.exit_code == 2


# ------------------------------------------------------------------------------------------ custom files


def test_custom_csv_with_quoted_commas_and_newlines(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text(
        'text,other,label\n"Hello, world",x,pos\n"two\nlines, here",y,neg\nplain,z, pos \n', encoding="utf-8"
    )
    ex = read_custom(path, "text", None, "label")
    assert ex == [
        Example("0", "Hello, world", None, "pos"),
        Example("1", "two\nlines, here", None, "neg"),
        Example("2", "plain", None, "pos"),
    ]
    assert label_names(ex) == ("neg", "pos")


def test_custom_csv_error_after_a_multiline_record_names_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text('text,label\n"a\nb\nc",1\nonly-one-field\n', encoding="utf-8")
    with raises(["train.csv:5", "1 fields, but the header has 2"]):
        read_custom(path, "text", None, "label")


def test_custom_tsv_with_pair_and_regression(tmp_path: Path) -> None:
    path = write(tmp_path / "data.tsv", ["id\ts1\ts2\tscore", "a\tOne.\tUno.\t4.5", "b\tTwo.\tDos.\t1"])
    ex = read_custom(path, "s1", "s2", "score", regression=True)
    assert ex == [Example("0", "One.", "Uno.", 4.5), Example("1", "Two.", "Dos.", 1.0)]
    unlabeled = read_custom(path, "s1", None, None)
    assert [(e.text_pair, e.label) for e in unlabeled] == [(None, None), (None, None)]


def test_custom_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    rows = [
        {"text": "a", "pair": "b", "label": 1},
        {"text": "c", "pair": "d", "label": 0},
        {"text": "e", "label": 1},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n")
    ex = read_custom(path, "text", None, "label")
    assert [(e.guid, e.text, e.label) for e in ex] == [("0", "a", "1"), ("1", "c", "0"), ("2", "e", "1")]
    assert read_custom(path, "text", None, "label", regression=True)[0].label == 1.0
    with raises(["train.jsonl:4", "no column 'pair'"]):
        read_custom(path, "text", "pair", "label")
    json_lines = tmp_path / "more.json"  # .json is read as JSON lines too
    json_lines.write_text('{"text": "x", "label": "pos"}\n')
    assert read_custom(json_lines, "text", None, "label") == [Example("0", "x", None, "pos")]


def test_label_names_sorts_integer_labels_numerically() -> None:
    ex = [Example(str(i), "t", None, lab) for i, lab in enumerate(["10", "2", "0", "2", "1"])]
    assert label_names(ex) == ("0", "1", "2", "10")
    with pytest.raises(ValueError):
        label_names([Example("0", "t", None, 1.5)])


def test_custom_missing_columns_are_named_with_the_header(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", ["sentence,label", "hi,1"])
    with raises(["train.csv", "no column 'text'", "it has: sentence, label"]):
        read_custom(path, "text", None, "label")
    with raises(["train.csv", "'target'"]):
        read_custom(path, "sentence", None, "target")


def test_custom_invalid_json_and_non_objects(tmp_path: Path) -> None:
    path = write(tmp_path / "train.jsonl", ['{"text": "ok", "label": "a"}', '{"text": "broken"'])
    with raises(["train.jsonl:2", "not valid JSON"]):
        read_custom(path, "text", None, "label")
    path = write(tmp_path / "list.jsonl", ['{"text": "ok", "label": "a"}', '["text", "a"]'])
    with raises(["list.jsonl:2", "expected an object"]):
        read_custom(path, "text", None, "label")


def test_custom_empty_text_and_empty_label(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", ["text,label", "fine,a", "  ,b"])
    with raises(["train.csv:3", "empty text"]):
        read_custom(path, "text", None, "label")
    path = write(tmp_path / "nolabel.csv", ["text,label", "fine,"])
    with raises(["nolabel.csv:2", "empty label"]):
        read_custom(path, "text", None, "label")


def test_custom_regression_with_string_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", ["text,label", "good,0.5", "great,positive"])
    with raises(["train.csv:3", "label 'positive' is not a number; drop --regression for classification"]):
        read_custom(path, "text", None, "label", regression=True)
    path = write(tmp_path / "train.jsonl", ['{"text": "t", "label": "high"}'])
    with raises(["train.jsonl:1", "'high' is not a number"]):
        read_custom(path, "text", None, "label", regression=True)


def test_custom_empty_files_and_bad_extensions(tmp_path: Path) -> None:
    for name in ("empty.csv", "empty.tsv", "empty.jsonl"):
        (tmp_path / name).write_text("")
        with raises([name, "empty file"]):
            read_custom(tmp_path / name, "text", None, "label")
    header_only = write(tmp_path / "header.csv", ["text,label"])
    with raises(["header.csv", "no examples"]):
        read_custom(header_only, "text", None, "label")
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    with raises(["data.parquet", ".csv, .tsv or .jsonl"]):
        read_custom(tmp_path / "data.parquet", "text", None, "label")
    with raises(["absent.csv", "no such file"]):
        read_custom(tmp_path / "absent.csv", "text", None, "label")


def test_custom_tsv_with_an_unclosed_literal_quote_is_an_error_not_merged_rows(tmp_path: Path) -> None:
    # GLUE-style literal quotes (MRPC) are not CSV quoting: strict parsing stops at the first bad one.
    path = write(tmp_path / "dev.tsv", ["text\tlabel", '"He said\t1', 'no "quote" here\t0', 'x"\t1'])
    with raises(["dev.tsv:2", "bad TSV quoting"]):
        read_custom(path, "text", None, "label")


# ------------------------------------------------------------------------------------------ submissions


def test_submission_rows_mnli_label_words_and_index_column(tmp_path: Path) -> None:
    make_mnli(tmp_path)
    test = read_glue("mnli", tmp_path, "test_matched")
    assert submission_rows(TASKS["mnli"], test, [2]) == [("index", "prediction"), ("7", "neutral")]
    assert submission_rows("mnli", test, ["contradiction"])[1] == ("7", "contradiction")
    with pytest.raises(ValueError):
        submission_rows("mnli", test, [3])
    with pytest.raises(ValueError):
        submission_rows("mnli", test, [])


def test_submission_rows_stsb_three_decimals_and_binary_strings() -> None:
    examples = [Example("12", "a", "b", None), Example("40", "c", "d", None)]
    assert submission_rows("stsb", examples, [3.14159, 5]) == [
        ("index", "prediction"),
        ("12", "3.142"),
        ("40", "5.000"),
    ]
    assert submission_rows("wnli", examples, [1, "0"])[1:] == [("12", "1"), ("40", "0")]
    # A model's label names go back to the files' labels, which the leaderboard reads.
    assert submission_rows("wnli", examples, ["entailment", "not_entailment"])[1:] == [
        ("12", "1"),
        ("40", "0"),
    ]
    assert submission_rows("sst2", examples, ["positive", "negative"])[1:] == [("12", "1"), ("40", "0")]
    assert submission_rows("rte", examples, [0, 1])[1:] == [("12", "entailment"), ("40", "not_entailment")]


@pytest.mark.shared_data
def test_submission_rows_keep_the_shared_test_index() -> None:
    glue_file("rte", "test")
    test = read_glue("rte", GLUE, "test")
    rows = submission_rows("rte", test, [0] * len(test))
    assert rows[0] == ("index", "prediction") and len(rows) == 3001
    raw = (GLUE / "RTE" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [r[0] for r in rows[1:]] == [line.split("\t")[0] for line in raw]
