"""Token classification data: CoNLL column files and JSON lines in, tag schemes, prediction files out.

Inside the package every tag sequence is IOB2 (B-X starts each entity, I-X continues it): the readers
convert from the file's scheme (iob1, iob2, bioes) and `write_predictions` converts back, so the model, its
label ids and the metrics see one scheme whatever the files use.

Two file forms, chosen by extension (.jsonl / .json are JSON lines, anything else CoNLL columns):

* CoNLL columns: one word per line, columns separated by spaces or tabs, the word first and the tag in
  `tag_column` (default: the last), a blank line between sentences, `-DOCSTART-` lines ignored.
* JSON lines: `{"tokens": [...], "tags": [...]}` (or "ner_tags" holding strings), or
  `{"text": "...", "entities": [{"start": 0, "end": 5, "label": "PER"}, ...]}` with character spans that the
  BERT pre-tokenizer's words (split at whitespace and punctuation) must not cut.

Every problem with a file is an `InputError` whose one-line message names the file and line and the fix.
No torch here: the data layer is read (and checked) before a model is built.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers.pre_tokenizers import BertPreTokenizer

from electra.atomic import atomic_write_text
from electra.errors import InputError

SCHEMES = ("iob1", "iob2", "bioes")
OUTSIDE = "O"

# The same scheme under its other common name (seqeval, flair and spaCy say IOBES).
_ALIASES = {"iobes": "bioes"}
_PREFIXES = {"iob1": ("B", "I"), "iob2": ("B", "I"), "bioes": ("B", "I", "E", "S")}
_JSON_SUFFIXES = (".jsonl", ".json")
_DOCSTART = "-DOCSTART-"

CONLL, TOKENS, TEXT = "conll", "tokens", "text"


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a tagging file.

    `guid` is "<file name>:<line>" of its first word (JSON lines: of its record), what errors and prediction
    files refer to. `tags` are IOB2 whatever the file's scheme, None when read unlabeled. `text` and
    `offsets` are set for a JSON `text` record only: the original text and each word's character span in it.
    `source_format` is the form it was read from ("conll", "tokens" or "text"): `write_predictions` answers
    in the same form.
    """

    guid: str
    words: list[str]
    tags: list[str] | None
    line: int
    text: str | None = None
    offsets: list[tuple[int, int]] | None = None
    source_format: str = CONLL

    def word_line(self, index: int) -> int:
        """The file line of word `index`: CoNLL sentences have one word per line, JSON records one line."""
        return self.line + index if self.source_format == CONLL else self.line


class TagSequenceError(ValueError):
    """An invalid tag sequence: `index` is the offending tag's position, `reason` says what is wrong."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"tag {index}: {reason}")
        self.index = index
        self.reason = reason


# ---------------------------------------------------------------------------------------------- schemes


def normalize_scheme(scheme: str) -> str:
    """The canonical name of a scheme ("IOBES" -> "bioes"); ValueError for an unknown one."""
    name = _ALIASES.get(scheme.strip().lower(), scheme.strip().lower())
    if name not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)} (or iobes)")
    return name


def _parse(index: int, tag: str, scheme: str) -> tuple[str, str]:
    """(prefix, type) of a tag, ("O", "") for O; TagSequenceError for anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefixes = _PREFIXES[scheme]
    prefix, dash, kind = tag.partition("-")
    if dash and kind and prefix in prefixes:
        return prefix, kind
    allowed = " / ".join(f"{p}-TYPE" for p in prefixes)
    hint = ""
    if dash and kind and prefix in ("E", "S"):
        hint = "; if the file is BIOES, pass --tag-scheme bioes"
    elif tag.upper() == OUTSIDE or (
        dash and kind and prefix != prefix.upper() and prefix.upper() in prefixes
    ):
        hint = "; tags are case-sensitive"
    raise TagSequenceError(index, f"tag {tag!r} is not O or {allowed} ({scheme.upper()}){hint}")


def to_iob2(tags: Sequence[str], scheme: str) -> list[str]:
    """The IOB2 form of a tag sequence in `scheme`; TagSequenceError (a ValueError) if it is invalid there."""
    scheme = normalize_scheme(scheme)
    parsed = [_parse(i, tag, scheme) for i, tag in enumerate(tags)]
    if scheme == "iob2":
        _check_iob2(parsed, tags)
        return list(tags)
    if scheme == "iob1":
        return _iob1_to_iob2(parsed)
    return _bioes_to_iob2(parsed, tags)


def _check_iob2(parsed: list[tuple[str, str]], tags: Sequence[str]) -> None:
    prev_prefix, prev_kind = OUTSIDE, ""
    for i, (prefix, kind) in enumerate(parsed):
        if prefix == "I" and (prev_prefix == OUTSIDE or prev_kind != kind):
            after = "the sentence start" if i == 0 else repr(tags[i - 1])
            raise TagSequenceError(
                i,
                f"tag {tags[i]!r} follows {after}: in IOB2 every entity starts with B-{kind}; "
                "if the file is IOB1, pass --tag-scheme iob1",
            )
        prev_prefix, prev_kind = prefix, kind


def _iob1_to_iob2(parsed: list[tuple[str, str]]) -> list[str]:
    # IOB1: I-X starts an entity unless it continues one of type X; B-X is only needed where an entity
    # directly follows another of its type, but is taken as a start anywhere (files in the wild do that).
    out: list[str] = []
    prev_kind = ""
    for prefix, kind in parsed:
        if prefix == OUTSIDE:
            out.append(OUTSIDE)
        elif prefix == "I" and kind == prev_kind:
            out.append(f"I-{kind}")
        else:
            out.append(f"B-{kind}")
        prev_kind = kind
    return out


def _bioes_to_iob2(parsed: list[tuple[str, str]], tags: Sequence[str]) -> list[str]:
    out: list[str] = []
    open_kind = ""  # the type of the entity a B- opened and no E- has closed yet
    for i, (prefix, kind) in enumerate(parsed):
        if open_kind and not (prefix in ("I", "E") and kind == open_kind):
            raise TagSequenceError(
                i,
                f"tag {tags[i]!r} follows {tags[i - 1]!r}: in BIOES the open {open_kind} entity must "
                f"continue with I-{open_kind} or end with E-{open_kind}",
            )
        if not open_kind and prefix in ("I", "E"):
            after = "the sentence start" if i == 0 else repr(tags[i - 1])
            raise TagSequenceError(
                i,
                f"tag {tags[i]!r} follows {after}: in BIOES an entity is S-{kind} alone or "
                f"B-{kind} (I-{kind})* E-{kind}; if the file is IOB1 or IOB2, pass that --tag-scheme",
            )
        if prefix == OUTSIDE:
            out.append(OUTSIDE)
        else:
            out.append(f"{'B' if prefix in ('B', 'S') else 'I'}-{kind}")
        open_kind = kind if prefix in ("B", "I") else ""
    if open_kind:
        last = len(tags) - 1
        raise TagSequenceError(
            last,
            f"the sentence ends inside an entity of type {open_kind}: its last tag {tags[last]!r} must be "
            f"E-{open_kind} (or S-{open_kind} for one word)",
        )
    return out


def from_iob2(tags: Sequence[str], scheme: str) -> list[str]:
    """A valid IOB2 sequence written in `scheme` (inverse of to_iob2); TagSequenceError if it is not valid."""
    scheme = normalize_scheme(scheme)
    parsed = [_parse(i, tag, "iob2") for i, tag in enumerate(tags)]
    _check_iob2(parsed, tags)
    if scheme == "iob2":
        return list(tags)
    out: list[str] = []
    for i, (prefix, kind) in enumerate(parsed):
        if prefix == OUTSIDE:
            out.append(OUTSIDE)
            continue
        if scheme == "iob1":
            follows_same = i > 0 and parsed[i - 1][0] != OUTSIDE and parsed[i - 1][1] == kind
            out.append(f"{'B' if prefix == 'B' and follows_same else 'I'}-{kind}")
            continue
        continues = i + 1 < len(parsed) and parsed[i + 1] == ("I", kind)
        if prefix == "B":
            out.append(f"{'B' if continues else 'S'}-{kind}")
        else:
            out.append(f"{'I' if continues else 'E'}-{kind}")
    return out


def repair_iob2(tags: Sequence[str]) -> list[str]:
    """A model's IOB2 output made valid as conlleval reads it: an I-X that continues no X entity starts one.

    Raises TagSequenceError only for tags that are not O, B-X or I-X at all.
    """
    out: list[str] = []
    prev = ("O", "")
    for i, tag in enumerate(tags):
        prefix, kind = _parse(i, tag, "iob2")
        if prefix == "I" and (prev[0] == OUTSIDE or prev[1] != kind):
            prefix = "B"
        out.append(OUTSIDE if prefix == OUTSIDE else f"{prefix}-{kind}")
        prev = (prefix, kind)
    return out


def entities_of(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word + 1) of every entity of a valid IOB2 sequence, in order."""
    parsed = [_parse(i, tag, "iob2") for i, tag in enumerate(tags)]
    _check_iob2(parsed, tags)
    spans: list[tuple[str, int, int]] = []
    for i, (prefix, kind) in enumerate(parsed):
        if prefix == "B":
            spans.append((kind, i, i + 1))
        elif prefix == "I":
            spans[-1] = (kind, spans[-1][1], i + 1)
    return spans


# ---------------------------------------------------------------------------------------------- label set


def tag_set(sentences: Sequence[TaggedSentence]) -> tuple[str, ...]:
    """The label ids of a training set: "O", then B-X, I-X for every entity type X, types sorted.

    Both tags of a type are in even if the data has only one of them (single-word entities only), so the
    model can output every valid IOB2 sequence over the types it has seen.
    """
    kinds: set[str] = set()
    for s in sentences:
        if s.tags is None:
            raise ValueError(f"{s.guid}: tag_set needs labeled sentences (read with labeled=True)")
        kinds.update(tag[2:] for tag in s.tags if tag != OUTSIDE)
    return (OUTSIDE, *(f"{p}-{kind}" for kind in sorted(kinds) for p in ("B", "I")))


def check_known(sentences: Sequence[TaggedSentence], labels: tuple[str, ...], path: Path) -> None:
    """InputError at the first tag of a dev / test file that the training set's `labels` lack."""
    known = set(labels)
    first: tuple[TaggedSentence, int, str] | None = None
    count = 0
    for s in sentences:
        for i, tag in enumerate(s.tags or ()):
            if tag not in known:
                count += 1
                first = first or (s, i, tag)
    if first is None:
        return
    s, i, tag = first
    more = f" ({count} such tokens in the file)" if count > 1 else ""
    raise InputError(
        f"{path}:{s.word_line(i)}: tag {tag!r} does not occur in the training set{more}; the model can only "
        f"predict {', '.join(labels)}: add {tag[2:] or tag} examples to the training file or fix this one"
    )


# ---------------------------------------------------------------------------------------------- reading


def read_tagged(
    path: Path, *, tag_column: int = -1, scheme: str = "iob2", labeled: bool = True
) -> list[TaggedSentence]:
    """The sentences of a .jsonl / .json file (JSON lines) or of any other file (CoNLL columns), tags IOB2.

    `tag_column` (CoNLL only) is the 0-based column of the tags, negative counting from the end; `scheme`
    is the tag scheme the file uses. With `labeled` False only the words are read and tags are None.
    """
    path = Path(path)
    try:
        scheme = normalize_scheme(scheme)
    except ValueError as e:
        raise InputError(f"{e}; pass --tag-scheme iob1, iob2 or bioes") from e
    data = _read_text(path)
    if path.suffix.lower() in _JSON_SUFFIXES:
        sentences = _read_jsonl(path, data, scheme, labeled)
        expected = (
            'one JSON object per line: {"tokens": [...], "tags": [...]} or {"text": ..., "entities": [...]}'
        )
    else:
        sentences = _read_conll(path, data, tag_column, scheme, labeled)
        expected = "one `word ... tag` line per word and a blank line between sentences (CoNLL)"
    if not sentences:
        raise InputError(f"{path}: no sentences; expected {expected}")
    return sentences


def _read_text(path: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: is not a file")
    try:
        # newline="" keeps "\r" and Unicode line separators inside a word from splitting the line.
        with open(path, encoding="utf-8-sig", newline="") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (bad byte at offset {e.start}); re-save it as UTF-8") from e
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from e


def _lines(data: str) -> list[tuple[int, str]]:
    """(1-based number, line without its CR) for every line: only "\\n" ends a line."""
    return [(n, line.removesuffix("\r")) for n, line in enumerate(data.split("\n"), start=1)]


def _columns(line: str) -> list[str]:
    # Spaces and tabs only: str.split() would also split at a no-break space, which can be part of a word.
    return [c for c in line.replace("\t", " ").split(" ") if c]


def _read_conll(path: Path, data: str, tag_column: int, scheme: str, labeled: bool) -> list[TaggedSentence]:
    sentences: list[TaggedSentence] = []
    rows: list[tuple[int, str, str]] = []  # (line, word, raw tag) of the sentence being read
    width = first = tag_index = 0
    for number, line in _lines(data):
        fields = _columns(line)
        if fields and fields[0] == _DOCSTART:
            fields = []  # a document boundary ends the sentence like a blank line
        if not fields:
            if rows:
                sentences.append(_conll_sentence(path, rows, scheme, labeled))
                rows = []
            continue
        if not width:
            width, first = len(fields), number
            tag_index = _tag_index(path, tag_column, width, first) if labeled else 0
        elif len(fields) != width:
            raise InputError(
                f"{path}:{number}: has {len(fields)} columns, the file's first line has {width} "
                f"(line {first}); every line must hold the same columns (word ... tag) separated by "
                "spaces or tabs: fix or remove it"
            )
        rows.append((number, fields[0], fields[tag_index]))
    if rows:
        sentences.append(_conll_sentence(path, rows, scheme, labeled))
    return sentences


def _tag_index(path: Path, tag_column: int, width: int, first: int) -> int:
    index = tag_column + width if tag_column < 0 else tag_column
    if width == 1:
        raise InputError(
            f"{path}: has 1 column (line {first}: the word only), so no tags; a labeled file needs "
            "`word ... tag` on every line"
        )
    if not 1 <= index < width:
        raise InputError(
            f"{path}: --tag-column {tag_column} is out of range: the file has {width} columns "
            f"(line {first}), the word in column 0 and tags in 1..{width - 1} "
            f"(or -{width - 1}..-1 from the end)"
        )
    return index


def _conll_sentence(
    path: Path, rows: list[tuple[int, str, str]], scheme: str, labeled: bool
) -> TaggedSentence:
    tags = None
    if labeled:
        try:
            tags = to_iob2([tag for _, _, tag in rows], scheme)
        except TagSequenceError as e:
            raise InputError(f"{path}:{rows[e.index][0]}: {e.reason}") from e
    return TaggedSentence(
        guid=f"{path.name}:{rows[0][0]}", words=[w for _, w, _ in rows], tags=tags, line=rows[0][0]
    )


# JSON lines ------------------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {dict: "object", list: "array", str: "string", type(None): "null"}.get(type(value), "value")


def _read_jsonl(path: Path, data: str, scheme: str, labeled: bool) -> list[TaggedSentence]:
    sentences: list[TaggedSentence] = []
    for number, line in _lines(data):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            hint = (
                "; a .json file must hold one JSON object per line" if line.lstrip().startswith("[") else ""
            )
            raise InputError(f"{where}: not valid JSON ({e.msg}){hint}") from e
        if not isinstance(record, dict):
            raise InputError(
                f'{where}: a JSON {_json_type(record)}, expected an object like {{"tokens": [...], '
                '"tags": [...]} or {"text": ..., "entities": [...]} on every line'
            )
        guid = f"{path.name}:{number}"
        if "tokens" in record:
            words, tags = _token_record(where, record, scheme, labeled)
            sentences.append(TaggedSentence(guid, words, tags, number, source_format=TOKENS))
        elif "text" in record:
            text, words, offsets, tags = _text_record(where, record, labeled)
            sentences.append(TaggedSentence(guid, words, tags, number, text, offsets, TEXT))
        else:
            raise InputError(
                f"{where}: the object has neither 'tokens' nor 'text' "
                f"(it has: {', '.join(record) or 'nothing'})"
            )
    return sentences


def _string_list(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise InputError(f"{where}: '{key}' is a JSON {_json_type(value)}, expected an array of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            hint = ""
            if key == "ner_tags" and isinstance(item, int):
                hint = ': it holds class ids, write the tag strings ("B-PER", "O", ...) instead'
            raise InputError(f"{where}: {key}[{i}] is a JSON {_json_type(item)}, expected a string{hint}")
    return value


def _token_record(
    where: str, record: dict[str, Any], scheme: str, labeled: bool
) -> tuple[list[str], list[str] | None]:
    words = _string_list(where, "tokens", record["tokens"])
    if not words:
        raise InputError(f"{where}: 'tokens' is empty; drop the line or give it words")
    for i, word in enumerate(words):
        if not word.strip():
            raise InputError(f"{where}: tokens[{i}] is {'blank' if word else 'empty'}; drop it and its tag")
    if not labeled:
        return words, None
    key = "tags" if "tags" in record or "ner_tags" not in record else "ner_tags"
    if key not in record:
        raise InputError(f"{where}: the object has 'tokens' but no 'tags'; give one tag per token")
    raw = _string_list(where, key, record[key])
    if len(raw) != len(words):
        raise InputError(f"{where}: {len(words)} tokens but {len(raw)} {key}; give one tag per token")
    try:
        return words, to_iob2(raw, scheme)
    except TagSequenceError as e:
        raise InputError(f"{where}: {key}[{e.index}]: {e.reason}") from e


@functools.cache
def _pre_tokenizer() -> BertPreTokenizer:
    return BertPreTokenizer()


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of a text (split at whitespace and punctuation, as BERT does) and their character spans."""
    pieces = _pre_tokenizer().pre_tokenize_str(text)
    return [w for w, _ in pieces], [(int(s), int(e)) for _, (s, e) in pieces]


def _text_record(
    where: str, record: dict[str, Any], labeled: bool
) -> tuple[str, list[str], list[tuple[int, int]], list[str] | None]:
    text = record["text"]
    if not isinstance(text, str):
        raise InputError(f"{where}: 'text' is a JSON {_json_type(text)}, expected a string")
    words, offsets = split_words(text)
    if not words:
        raise InputError(f"{where}: 'text' is {'blank' if text else 'empty'}; drop the line or fill it in")
    if not labeled:
        return text, words, offsets, None
    if "entities" not in record:
        raise InputError(f"{where}: the object has 'text' but no 'entities'; give them ([] for none)")
    spans = _entity_spans(where, text, record["entities"])
    return text, words, offsets, _span_tags(where, text, offsets, spans)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _entity_spans(where: str, text: str, entities: Any) -> list[tuple[int, int, str, int]]:
    """(start, end, label, index in the array) of every entity, sorted, checked for range and overlap."""
    if not isinstance(entities, list):
        raise InputError(f"{where}: 'entities' is a JSON {_json_type(entities)}, expected an array")
    spans: list[tuple[int, int, str, int]] = []
    for k, entity in enumerate(entities):
        name = f"entities[{k}]"
        if not isinstance(entity, dict):
            raise InputError(
                f'{where}: {name} is a JSON {_json_type(entity)}, expected {{"start": ..., "end": ..., '
                '"label": ...}'
            )
        for key, kind in (("start", int), ("end", int), ("label", str)):
            value = entity.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                want = "an integer" if kind is int else "a string"
                got = "missing" if key not in entity else f"a JSON {_json_type(value)}"
                raise InputError(f"{where}: {name}.{key} is {got}, expected {want}")
        start, end, label = entity["start"], entity["end"], entity["label"]
        if not 0 <= start < end <= len(text):
            raise InputError(
                f"{where}: {name} span {start}-{end} is {'empty' if start >= end else 'outside the text'}; "
                f"spans are 0 <= start < end <= {len(text)} (the text's length in characters, end exclusive)"
            )
        if not label.strip() or label == OUTSIDE:
            raise InputError(f"{where}: {name}.label {label!r} is not an entity type; give one like 'PER'")
        if label[:2] in ("B-", "I-"):
            raise InputError(
                f"{where}: {name}.label {label!r} has a B-/I- prefix; give the type alone ({label[2:]!r})"
            )
        spans.append((start, end, label, k))
    spans.sort()
    for (s0, e0, _, k0), (s1, e1, _, k1) in itertools.pairwise(spans):
        if s1 < e0:
            raise InputError(
                f"{where}: entities[{k1}] {s1}-{e1} {_short(text[s1:e1])} overlaps entities[{k0}] {s0}-{e0} "
                f"{_short(text[s0:e0])}; spans must not overlap (nested entities are not supported)"
            )
    return spans


def _span_tags(
    where: str, text: str, offsets: list[tuple[int, int]], spans: list[tuple[int, int, str, int]]
) -> list[str]:
    first_word = {s: i for i, (s, _) in enumerate(offsets)}
    last_word = {e: i for i, (_, e) in enumerate(offsets)}
    tags = [OUTSIDE] * len(offsets)
    for start, end, label, k in spans:
        if start not in first_word or end not in last_word:
            edge = start if start not in first_word else end - 1
            cut = next((text[s:e] for s, e in offsets if s <= edge < e), None)
            how = f"cuts the word {cut!r}" if cut is not None else "starts or ends in whitespace"
            raise InputError(
                f"{where}: entities[{k}] {start}-{end} {_short(text[start:end])} {how}; an entity must start "
                "at a word's start and end at a word's end (words split at whitespace and punctuation)"
            )
        first, last = first_word[start], last_word[end]
        tags[first : last + 1] = [f"B-{label}"] + [f"I-{label}"] * (last - first)
    return tags


# ---------------------------------------------------------------------------------------------- writing


def write_predictions(
    path: Path, sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]], scheme: str
) -> None:
    """Write predicted IOB2 tags in the form the sentences were read from, atomically.

    CoNLL sentences: "word tag" lines in `scheme`, a blank line between sentences. JSON `tokens` records:
    {"tokens", "tags"} lines in `scheme`. JSON `text` records: {"text", "entities"} lines, character spans
    with the bare type as label. A model may output an I-X that continues no entity: it is read as
    starting one (as conlleval does), so the file is valid in `scheme` and can be read back.
    """
    scheme = normalize_scheme(scheme)
    if len(predicted) != len(sentences):
        raise ValueError(f"{len(predicted)} predicted tag sequences for {len(sentences)} sentences")
    forms = {s.source_format for s in sentences}
    if CONLL in forms and len(forms) > 1:
        raise ValueError("write_predictions cannot mix CoNLL sentences with JSON lines in one file")
    chunks: list[str] = []
    for s, tags in zip(sentences, predicted, strict=True):
        if len(tags) != len(s.words):
            raise ValueError(f"{s.guid}: {len(tags)} predicted tags for {len(s.words)} words")
        iob2 = repair_iob2(tags)
        if s.source_format == CONLL:
            out = from_iob2(iob2, scheme)
            chunks.append("".join(f"{w} {t}\n" for w, t in zip(s.words, out, strict=True)))
        elif s.source_format == TOKENS:
            chunks.append(_json_line({"tokens": s.words, "tags": from_iob2(iob2, scheme)}))
        else:
            chunks.append(_json_line({"text": s.text, "entities": _entities_json(s, iob2)}))
    atomic_write_text(path, ("\n" if CONLL in forms else "").join(chunks))


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def _entities_json(s: TaggedSentence, iob2: list[str]) -> list[dict[str, Any]]:
    if s.offsets is None or s.text is None:
        raise ValueError(f"{s.guid}: a text sentence without its text and word offsets")
    offsets = s.offsets
    return [
        {"start": offsets[first][0], "end": offsets[last - 1][1], "label": kind}
        for kind, first, last in entities_of(iob2)
    ]
