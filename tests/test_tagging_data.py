"""Token classification data: CoNLL and JSON-lines readers, tag schemes, label sets, prediction files."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from electra.errors import InputError
from electra.training.finetune.tagging_data import (
    OUTSIDE,
    SCHEMES,
    TaggedSentence,
    TagSequenceError,
    check_known,
    entities_of,
    from_iob2,
    read_tagged,
    repair_iob2,
    split_words,
    tag_set,
    to_iob2,
    write_predictions,
)

CONLL2003 = Path(__file__).resolve().parents[1].parent / "shared/data/ner/conll2003"

# Published CoNLL-2003 English sizes: (sentences, tokens) without the -DOCSTART- lines.
COUNTS = {"train": (14039, 203619), "dev": (3250, 51362), "test": (3453, 46435)}


def write(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + end for line in lines), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[Any]) -> Path:
    return write(path, [r if isinstance(r, str) else json.dumps(r) for r in records])


def raises(parts: list[str]) -> AbstractContextManager[Any]:
    """InputError whose message holds every part (file name, line number, ...)."""
    return pytest.raises(InputError, match="".join(f"(?=.*{re.escape(p)})" for p in parts))


SAMPLE = [
    "EU NNP B-ORG",
    "rejects VBZ O",
    "German JJ B-MISC",
    "",
    "Peter NNP B-PER",
    "Blackburn NNP I-PER",
]


def sample_tags(sentences: list[TaggedSentence]) -> list[list[str] | None]:
    return [s.tags for s in sentences]


# ---------------------------------------------------------------------------------------------- CoNLL


@pytest.mark.parametrize("split", sorted(COUNTS))
def test_conll2003_has_the_published_sizes(split: str) -> None:
    path = CONLL2003 / f"{split}.txt"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared CoNLL-2003 data is not on this machine")
    sentences = read_tagged(path)
    assert (len(sentences), sum(len(s.words) for s in sentences)) == COUNTS[split]
    labels = ("O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER")
    assert tag_set(sentences) == labels
    assert sentences[0].guid == f"{split}.txt:1" and sentences[0].line == 1
    assert all(s.tags is not None and len(s.tags) == len(s.words) for s in sentences)


def test_conll_reads_words_tags_lines_and_guids(tmp_path: Path) -> None:
    path = write(tmp_path / "train.txt", SAMPLE)
    sentences = read_tagged(path)
    assert [s.words for s in sentences] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert sample_tags(sentences) == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    assert [(s.guid, s.line) for s in sentences] == [("train.txt:1", 1), ("train.txt:5", 5)]
    assert sentences[1].word_line(1) == 6
    assert sentences[0].text is None and sentences[0].offsets is None


def test_conll_docstart_blank_runs_bom_crlf_and_final_newline_change_nothing(tmp_path: Path) -> None:
    plain = read_tagged(write(tmp_path / "plain.txt", SAMPLE))
    variants = {
        "docstart.txt": [
            "-DOCSTART- -X- -X- O",
            "",
            *SAMPLE[:4],
            "",
            "",
            "-DOCSTART- -X- -X- O",
            *SAMPLE[4:],
        ],
        "blanks.txt": ["", "", *SAMPLE[:4], "  ", "\t", *SAMPLE[4:], "", ""],
        "tabs.txt": [line.replace(" ", "\t") for line in SAMPLE],
        "mixed.txt": [line.replace(" ", " \t  ", 1) for line in SAMPLE],
    }
    for name, lines in variants.items():
        got = read_tagged(write(tmp_path / name, lines))
        assert [(s.words, s.tags) for s in got] == [(s.words, s.tags) for s in plain], name
    for name, data in {
        "bom_crlf.txt": "\ufeff" + "\r\n".join(SAMPLE) + "\r\n",
        "no_final_newline.txt": "\n".join(SAMPLE),
    }.items():
        (tmp_path / name).write_bytes(data.encode("utf-8"))
        got = read_tagged(tmp_path / name)
        assert [(s.words, s.tags, s.line) for s in got] == [(s.words, s.tags, s.line) for s in plain]


def test_conll_docstart_alone_on_its_line_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / "d.txt", ["-DOCSTART-", "Paris B-LOC", "-DOCSTART-", "Rome B-LOC"])
    assert [(s.words, s.line) for s in read_tagged(path)] == [(["Paris"], 2), (["Rome"], 4)]


def test_conll_keeps_a_no_break_space_inside_a_word(tmp_path: Path) -> None:
    path = write(tmp_path / "nbsp.txt", ["10\u00a0000 CD O"])
    assert read_tagged(path)[0].words == ["10\u00a0000"]


def test_conll_tag_column(tmp_path: Path) -> None:
    path = write(tmp_path / "cols.txt", ["Paris B-LOC NNP", "is O VBZ"])
    assert read_tagged(path, tag_column=1)[0].tags == ["B-LOC", "O"]
    assert read_tagged(path, tag_column=-2)[0].tags == ["B-LOC", "O"]
    for bad in (3, 0, -3, 7):
        with raises([str(path), f"--tag-column {bad}", "3 columns"]):
            read_tagged(path, tag_column=bad)
    words_only = write(tmp_path / "words.txt", ["Paris", "is"])
    with raises([str(words_only), "1 column"]):
        read_tagged(words_only)


def test_conll_unlabeled_reads_words_only(tmp_path: Path) -> None:
    words_only = read_tagged(write(tmp_path / "w.txt", ["Paris", "is", "", "Rome"]), labeled=False)
    assert [(s.words, s.tags) for s in words_only] == [(["Paris", "is"], None), (["Rome"], None)]
    # The tags of a labeled file are not even looked at: an invalid one is no error.
    labeled = read_tagged(write(tmp_path / "l.txt", ["Paris NNP I-LOC", "is VBZ ???"]), labeled=False)
    assert labeled[0].words == ["Paris", "is"] and labeled[0].tags is None


# ---------------------------------------------------------------------------------------------- errors

# (file name, lines, read_tagged options, parts the message must hold besides the path)
CONLL_ERRORS: list[tuple[str, list[str], dict[str, Any], list[str]]] = [
    ("ragged.txt", ["a NN O", "b O", "c NN O"], {}, [":2:", "has 2 columns", "first line has 3"]),
    ("i_after_o.txt", ["a O", "b I-PER"], {}, [":2:", "'I-PER'", "--tag-scheme iob1"]),
    ("i_at_start.txt", ["x O", "", "b I-PER"], {}, [":3:", "'I-PER'", "sentence start"]),
    ("i_other_type.txt", ["a B-LOC", "b I-PER"], {}, [":2:", "'I-PER'", "'B-LOC'"]),
    ("no_prefix.txt", ["a O", "b O", "c PER"], {}, [":3:", "'PER'", "B-TYPE"]),
    ("lower.txt", ["a o"], {}, [":1:", "case-sensitive"]),
    ("lower_prefix.txt", ["a b-PER"], {}, [":1:", "case-sensitive"]),
    ("empty_type.txt", ["a B-"], {}, [":1:", "'B-'"]),
    ("bioes_tag.txt", ["a S-PER"], {}, [":1:", "--tag-scheme bioes"]),
    ("bioes_unclosed.txt", ["a B-PER", "b O"], {"scheme": "bioes"}, [":2:", "E-PER"]),
    ("bioes_open_end.txt", ["a B-PER", "b I-PER"], {"scheme": "bioes"}, [":2:", "ends inside"]),
    ("bioes_e_after_o.txt", ["a O", "b E-PER"], {"scheme": "bioes"}, [":2:", "'E-PER'"]),
    ("bioes_type.txt", ["a B-PER", "b E-LOC"], {"scheme": "bioes"}, [":2:", "'E-LOC'"]),
    ("bioes_i_alone.txt", ["a I-PER"], {"scheme": "bioes"}, [":1:", "S-PER"]),
    ("empty.txt", [], {}, ["no sentences"]),
    ("blank.txt", ["", "  "], {}, ["no sentences"]),
    ("docstart_only.txt", ["-DOCSTART- -X- O", ""], {}, ["no sentences"]),
]


@pytest.mark.parametrize(
    ("name", "lines", "options", "parts"), CONLL_ERRORS, ids=[c[0] for c in CONLL_ERRORS]
)
def test_conll_errors_name_the_file_and_line(
    tmp_path: Path, name: str, lines: list[str], options: dict[str, Any], parts: list[str]
) -> None:
    path = write(tmp_path / name, lines)
    with raises([str(path), *parts]) as caught:
        read_tagged(path, **options)
    assert "\n" not in str(caught.value)


def test_non_utf8_missing_and_directory_are_input_errors(tmp_path: Path) -> None:
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Müller B-PER\n".encode("latin-1"))
    with raises([str(latin), "not UTF-8"]) as caught:
        read_tagged(latin)
    assert "\n" not in str(caught.value)
    with raises([str(tmp_path / "missing.txt"), "no such file"]):
        read_tagged(tmp_path / "missing.txt")
    with raises([str(tmp_path), "not a file"]):
        read_tagged(tmp_path)


def test_unknown_scheme(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", SAMPLE)
    with raises(["'bilou'", "--tag-scheme"]):
        read_tagged(path, scheme="bilou")
    with pytest.raises(ValueError, match="bilou"):
        to_iob2(["O"], "bilou")


# ---------------------------------------------------------------------------------------------- schemes


def test_iob1_to_iob2() -> None:
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "B-MISC"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC"]
    assert to_iob2(iob1, "iob1") == iob2
    assert from_iob2(iob2, "iob1") == ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC"]


def test_bioes_to_iob2_and_back() -> None:
    bioes = ["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "B-ORG", "E-ORG", "S-ORG"]
    iob2 = ["B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "B-ORG", "I-ORG", "B-ORG"]
    assert to_iob2(bioes, "bioes") == iob2
    assert to_iob2(bioes, "IOBES") == iob2
    assert from_iob2(iob2, "bioes") == bioes


def test_conll_reader_converts_the_scheme(tmp_path: Path) -> None:
    path = write(tmp_path / "iob1.txt", ["John I-PER", "Smith I-PER", "Mary B-PER", "", "x O"])
    assert sample_tags(read_tagged(path, scheme="iob1")) == [["B-PER", "I-PER", "B-PER"], ["O"]]
    path = write(tmp_path / "bioes.txt", ["John B-PER", "Smith E-PER", "Mary S-PER"])
    assert sample_tags(read_tagged(path, scheme="iobes")) == [["B-PER", "I-PER", "B-PER"]]


def test_invalid_sequences_raise_value_errors_with_the_index() -> None:
    with pytest.raises(TagSequenceError, match=r"tag 2: .*'I-LOC'") as caught:
        to_iob2(["B-PER", "O", "I-LOC"], "iob2")
    assert isinstance(caught.value, ValueError) and caught.value.index == 2
    with pytest.raises(ValueError, match="tag 1"):
        from_iob2(["O", "I-PER"], "bioes")
    with pytest.raises(ValueError, match="tag 0"):
        entities_of(["E-PER"])


@st.composite
def iob2_sequences(draw: st.DrawFn) -> list[str]:
    """Valid IOB2: runs of O and entities of a few types, adjacent entities of one type included."""
    tags: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["PER", "LOC", "B-X", "O", "x"]))  # types may look like tags
        length = draw(st.integers(1, 3))
        if draw(st.booleans()):
            tags += [OUTSIDE] * length
        else:
            tags += [f"B-{kind}"] + [f"I-{kind}"] * (length - 1)
    return tags


@given(iob2_sequences())
def test_every_scheme_round_trips_valid_iob2(tags: list[str]) -> None:
    for scheme in (*SCHEMES, "iobes"):
        written = from_iob2(tags, scheme)
        assert to_iob2(written, scheme) == tags, scheme
    # The span form says the same: rebuilding the tags from the entities gives them back.
    rebuilt = [OUTSIDE] * len(tags)
    for kind, first, last in entities_of(tags):
        rebuilt[first:last] = [f"B-{kind}"] + [f"I-{kind}"] * (last - first - 1)
    assert rebuilt == tags
    assert repair_iob2(tags) == tags


def test_entities_of() -> None:
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    assert entities_of(tags) == [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6), ("ORG", 6, 7)]
    assert entities_of([]) == [] and entities_of(["O"]) == []


def test_repair_iob2_reads_a_stray_i_as_a_start() -> None:
    assert repair_iob2(["O", "I-PER", "I-PER", "I-LOC", "B-ORG", "I-ORG"]) == [
        "O",
        "B-PER",
        "I-PER",
        "B-LOC",
        "B-ORG",
        "I-ORG",
    ]
    with pytest.raises(ValueError, match="'PER'"):
        repair_iob2(["PER"])


# ---------------------------------------------------------------------------------------------- label set


def sentence(tags: list[str], line: int = 1, source_format: str = "conll") -> TaggedSentence:
    words = [f"w{i}" for i in range(len(tags))]
    return TaggedSentence(f"f.txt:{line}", words, tags, line, source_format=source_format)


def test_tag_set_has_o_first_and_both_tags_of_every_type() -> None:
    sentences = [sentence(["B-ORG", "O"]), sentence(["B-PER", "I-PER", "B-LOC"])]
    assert tag_set(sentences) == ("O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER")
    assert tag_set([sentence(["O"])]) == ("O",)
    with pytest.raises(ValueError, match="labeled"):
        tag_set([TaggedSentence("f.txt:1", ["a"], None, 1)])


def test_check_known_names_the_line_of_the_unknown_tag(tmp_path: Path) -> None:
    labels = tag_set([sentence(["B-PER", "O"])])
    dev = write(tmp_path / "dev.txt", ["a B-PER", "", "b O", "c B-LOC", "d I-LOC", "e B-LOC"])
    sentences = read_tagged(dev)
    with raises([f"{dev}:4:", "'B-LOC'", "3 such tokens", "B-PER"]) as caught:
        check_known(sentences, labels, dev)
    assert "\n" not in str(caught.value)
    check_known(sentences[:1], labels, dev)
    check_known([TaggedSentence("x:1", ["a"], None, 1)], labels, dev)  # unlabeled: nothing to check
    jsonl = write_jsonl(
        tmp_path / "dev.jsonl", [{"tokens": ["a"], "tags": ["O"]}, {"tokens": ["b"], "tags": ["B-X"]}]
    )
    with raises([f"{jsonl}:2:", "'B-X'"]):
        check_known(read_tagged(jsonl), labels, jsonl)


# ---------------------------------------------------------------------------------------------- JSON lines


def test_jsonl_tokens_records(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "train.jsonl",
        [
            {"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"], "id": 7},
            "",
            {"tokens": ["Peter", "Blackburn"], "ner_tags": ["B-PER", "I-PER"]},
        ],
    )
    sentences = read_tagged(path)
    assert [(s.guid, s.line, s.words, s.tags) for s in sentences] == [
        ("train.jsonl:1", 1, ["EU", "rejects"], ["B-ORG", "O"]),
        ("train.jsonl:3", 3, ["Peter", "Blackburn"], ["B-PER", "I-PER"]),
    ]
    assert sentences[1].word_line(1) == 3
    unlabeled = read_tagged(write_jsonl(tmp_path / "u.json", [{"tokens": ["a", "b"]}]), labeled=False)
    assert unlabeled[0].words == ["a", "b"] and unlabeled[0].tags is None
    bioes = write_jsonl(tmp_path / "b.jsonl", [{"tokens": ["a", "b"], "tags": ["B-PER", "E-PER"]}])
    assert read_tagged(bioes, scheme="bioes")[0].tags == ["B-PER", "I-PER"]


def test_jsonl_accepts_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"tokens": ["a"], "tags": ["O"]}\r\n\r\n{"text": "b", "entities": []}\r\n')
    assert [(s.words, s.tags, s.line) for s in read_tagged(path)] == [(["a"], ["O"], 1), (["b"], ["O"], 3)]


def test_jsonl_text_records_become_words_and_tags(tmp_path: Path) -> None:
    text = "Peter Blackburn visited New York, then Paris."
    entities = [
        {"start": 39, "end": 44, "label": "LOC"},
        {"start": 0, "end": 15, "label": "PER"},
        {"start": 24, "end": 32, "label": "LOC"},
    ]
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": text, "entities": entities}])
    (s,) = read_tagged(path)
    assert s.words == ["Peter", "Blackburn", "visited", "New", "York", ",", "then", "Paris", "."]
    assert s.tags == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "B-LOC", "O"]
    assert s.text == text and s.offsets is not None
    assert [text[a:b] for a, b in s.offsets] == s.words
    assert s.source_format == "text"
    (u,) = read_tagged(write_jsonl(tmp_path / "u.jsonl", [{"text": text}]), labeled=False)
    assert u.words == s.words and u.tags is None and u.offsets == s.offsets


def test_split_words_offsets_are_character_offsets() -> None:
    text = "Zoë 😀 met Åsa, née Öberg."
    words, offsets = split_words(text)
    assert words == ["Zoë", "😀", "met", "Åsa", ",", "née", "Öberg", "."]
    assert [text[a:b] for a, b in offsets] == words


TEXT = "New York is big"
JSONL_ERRORS: list[tuple[str, list[Any], dict[str, Any], list[str]]] = [
    ("bad_json.jsonl", ['{"tokens": ['], {}, [":1:", "not valid JSON"]),
    ("array.json", ["[", '{"tokens": ["a"]}', "]"], {}, [":1:", "one JSON object per line"]),
    ("array_line.jsonl", ['[{"tokens": ["a"]}]'], {}, [":1:", "a JSON array", "on every line"]),
    ("not_object.jsonl", ["3"], {}, [":1:", "JSON number"]),
    ("no_keys.jsonl", [{"words": ["a"]}], {}, [":1:", "neither 'tokens' nor 'text'", "words"]),
    ("no_tags.jsonl", [{"tokens": ["a"]}], {}, [":1:", "no 'tags'"]),
    ("lengths.jsonl", [{"tokens": ["a", "b"], "tags": ["O"]}], {}, [":1:", "2 tokens but 1 tags"]),
    ("token_type.jsonl", [{"tokens": ["a", 3], "tags": ["O", "O"]}], {}, [":1:", "tokens[1]", "number"]),
    ("tokens_type.jsonl", [{"tokens": "a b", "tags": ["O"]}], {}, [":1:", "'tokens'", "JSON string"]),
    ("tag_type.jsonl", [{"tokens": ["a"], "tags": [None]}], {}, [":1:", "tags[0]", "null"]),
    ("ner_ids.jsonl", [{"tokens": ["a"], "ner_tags": [3]}], {}, [":1:", "ner_tags[0]", "class ids"]),
    ("empty_tokens.jsonl", [{"tokens": [], "tags": []}], {}, [":1:", "'tokens' is empty"]),
    ("blank_token.jsonl", [{"tokens": ["a", " "], "tags": ["O", "O"]}], {}, [":1:", "tokens[1]", "blank"]),
    ("bad_seq.jsonl", ["", {"tokens": ["a", "b"], "tags": ["O", "I-X"]}], {}, [":2:", "tags[1]", "iob1"]),
    ("bioes.jsonl", [{"tokens": ["a"], "tags": ["B-X"]}], {"scheme": "bioes"}, [":1:", "tags[0]", "E-X"]),
    ("text_type.jsonl", [{"text": ["a"], "entities": []}], {}, [":1:", "'text'", "array"]),
    ("empty_text.jsonl", [{"text": "", "entities": []}], {}, [":1:", "'text' is empty"]),
    ("blank_text.jsonl", [{"text": " \t", "entities": []}], {}, [":1:", "'text' is blank"]),
    ("no_entities.jsonl", [{"text": TEXT}], {}, [":1:", "no 'entities'"]),
    ("entities_type.jsonl", [{"text": TEXT, "entities": {}}], {}, [":1:", "'entities'", "object"]),
    ("entity_type.jsonl", [{"text": TEXT, "entities": [[0, 3]]}], {}, [":1:", "entities[0]", "array"]),
    (
        "start_str.jsonl",
        [{"text": TEXT, "entities": [{"start": "0", "end": 3, "label": "X"}]}],
        {},
        [":1:", "entities[0].start", "string"],
    ),
    (
        "end_bool.jsonl",
        [{"text": TEXT, "entities": [{"start": 0, "end": True, "label": "X"}]}],
        {},
        [":1:", "entities[0].end", "boolean"],
    ),
    (
        "no_label.jsonl",
        [{"text": TEXT, "entities": [{"start": 0, "end": 3}]}],
        {},
        [":1:", "entities[0].label is missing"],
    ),
    (
        "prefixed.jsonl",
        [{"text": TEXT, "entities": [{"start": 0, "end": 3, "label": "B-LOC"}]}],
        {},
        [":1:", "B-/I- prefix", "'LOC'"],
    ),
    (
        "label_o.jsonl",
        [{"text": TEXT, "entities": [{"start": 0, "end": 3, "label": "O"}]}],
        {},
        [":1:", "not an entity type"],
    ),
    (
        "outside.jsonl",
        [{"text": TEXT, "entities": [{"start": 12, "end": 16, "label": "X"}]}],
        {},
        [":1:", "12-16", "outside the text", "15"],
    ),
    (
        "empty_span.jsonl",
        [{"text": TEXT, "entities": [{"start": 3, "end": 3, "label": "X"}]}],
        {},
        [":1:", "3-3", "empty"],
    ),
    (
        "cuts.jsonl",
        ["", "", {"text": TEXT, "entities": [{"start": 0, "end": 6, "label": "LOC"}]}],
        {},
        [":3:", "'New Yo'", "cuts the word 'York'"],
    ),
    (
        "cuts_start.jsonl",
        [{"text": TEXT, "entities": [{"start": 1, "end": 8, "label": "LOC"}]}],
        {},
        [":1:", "'ew York'", "cuts the word 'New'"],
    ),
    (
        "whitespace.jsonl",
        [{"text": TEXT, "entities": [{"start": 3, "end": 8, "label": "LOC"}]}],
        {},
        [":1:", "' York'", "whitespace"],
    ),
    (
        "overlap.jsonl",
        [
            {
                "text": TEXT,
                "entities": [{"start": 4, "end": 8, "label": "LOC"}, {"start": 0, "end": 8, "label": "LOC"}],
            }
        ],
        {},
        [":1:", "entities[0] 4-8 'York' overlaps entities[1] 0-8 'New York'"],
    ),
    ("empty.jsonl", ["", "  "], {}, ["no sentences"]),
]


@pytest.mark.parametrize(
    ("name", "records", "options", "parts"), JSONL_ERRORS, ids=[c[0] for c in JSONL_ERRORS]
)
def test_jsonl_errors_name_the_file_and_line(
    tmp_path: Path, name: str, records: list[Any], options: dict[str, Any], parts: list[str]
) -> None:
    path = write_jsonl(tmp_path / name, records)
    with raises([str(path), *parts]) as caught:
        read_tagged(path, **options)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------- predictions


@pytest.mark.parametrize("scheme", SCHEMES)
def test_conll_predictions_round_trip_in_the_files_scheme(tmp_path: Path, scheme: str) -> None:
    gold = [["B-PER", "I-PER", "B-PER"], ["O", "B-LOC"]]
    lines: list[str] = []
    for i, tags in enumerate(gold):
        lines += [*(f"w{i}{j} NN {t}" for j, t in enumerate(from_iob2(tags, scheme))), ""]
    source = write(tmp_path / "in.txt", lines, end="\r\n")
    sentences = read_tagged(source, scheme=scheme)
    assert sample_tags(sentences) == gold
    out = tmp_path / "out" / "pred.txt"
    write_predictions(out, sentences, gold, scheme)
    expected = [f"w0{j} {t}" for j, t in enumerate(from_iob2(gold[0], scheme))]
    expected += ["", *(f"w1{j} {t}" for j, t in enumerate(from_iob2(gold[1], scheme)))]
    assert out.read_text(encoding="utf-8") == "\n".join(expected) + "\n"
    back = read_tagged(out, scheme=scheme)
    assert [(s.words, s.tags) for s in back] == [(s.words, g) for s, g in zip(sentences, gold, strict=True)]
    assert [p.name for p in out.parent.iterdir()] == ["pred.txt"]  # no temporary file left behind


def test_unlabeled_conll_predictions_repair_a_stray_i(tmp_path: Path) -> None:
    sentences = read_tagged(write(tmp_path / "in.txt", ["a", "b", "c"]), labeled=False)
    out = tmp_path / "pred.txt"
    write_predictions(out, sentences, [["O", "I-PER", "I-PER"]], "bioes")
    assert out.read_text(encoding="utf-8") == "a O\nb B-PER\nc E-PER\n"


def test_jsonl_token_predictions_round_trip(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [{"tokens": ["Zoë", "Smith", "sang"], "tags": ["O"] * 3}, {"tokens": ["Paris"], "tags": ["O"]}],
    )
    sentences = read_tagged(source)
    predicted = [["B-PER", "I-PER", "O"], ["B-LOC"]]
    out = tmp_path / "pred.jsonl"
    write_predictions(out, sentences, predicted, "bioes")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"tokens": ["Zoë", "Smith", "sang"], "tags": ["B-PER", "E-PER", "O"]}
    assert "Zoë" in lines[0]  # not \u escaped
    back = read_tagged(out, scheme="bioes")
    assert [(s.words, s.tags) for s in back] == [
        (s.words, p) for s, p in zip(sentences, predicted, strict=True)
    ]


def test_jsonl_text_predictions_are_character_spans(tmp_path: Path) -> None:
    text = "Peter Blackburn visited New York."
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": text}, {"text": "Nothing here"}])
    sentences = read_tagged(source, labeled=False)
    predicted = [["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "O"], ["O", "O"]]
    out = tmp_path / "pred.jsonl"
    write_predictions(out, sentences, predicted, "iob2")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records == [
        {
            "text": text,
            "entities": [{"start": 0, "end": 15, "label": "PER"}, {"start": 24, "end": 32, "label": "LOC"}],
        },
        {"text": "Nothing here", "entities": []},
    ]
    back = read_tagged(out)
    assert [(s.words, s.tags) for s in back] == [
        (sentences[0].words, ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]),
        (sentences[1].words, ["O", "O"]),
    ]


def test_write_predictions_checks_lengths(tmp_path: Path) -> None:
    sentences = read_tagged(write(tmp_path / "in.txt", SAMPLE))
    with pytest.raises(ValueError, match="1 predicted tag sequences for 2 sentences"):
        write_predictions(tmp_path / "p.txt", sentences, [["O"]], "iob2")
    with pytest.raises(ValueError, match=r"in\.txt:5: 1 predicted tags for 2 words"):
        write_predictions(tmp_path / "p.txt", sentences, [["O"] * 3, ["O"]], "iob2")
    assert not (tmp_path / "p.txt").exists()
