"""The shared tokenizer: loading every on-disk form, saving for transformers, training, and exact offsets."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers.models import BPE, WordPiece

from electra.errors import InputError
from electra.tokenizer import (
    SPECIAL_TOKENS,
    SpecialIds,
    is_lowercase,
    load_tokenizer,
    save_tokenizer,
    special_ids,
    tokenizer_fingerprint,
    vocab_tokens,
)
from electra.training.data.tokenizer_train import MIN_VOCAB_SIZE, train_tokenizer

BERT_VOCAB = Path(__file__).resolve().parents[1].parent / "shared/data/models/bert-uncased-vocab/vocab.txt"
needs_bert_vocab = pytest.mark.skipif(
    not BERT_VOCAB.is_file(), reason=f"shared BERT vocab not found at {BERT_VOCAB} (../shared is not mounted)"
)

# Words from many scripts, so the trained vocabularies hold real pieces (not just [UNK]) for the awkward
# texts below: precomposed and combining accents, CJK, Hangul (decomposed by NFD when uncased), Devanagari
# and Thai (combining vowel signs), RTL, emoji with ZWJ and skin tones.
CORPUS_TEXT = (
    "the quick brown fox jumps over a lazy dog The Quick Brown Fox running runner runs Hello World "
    "Café café Cafe\u0301 naïve Naïve Ångström résumé über Straße Zürich İstanbul "
    "привет мир Москва Σίσυφος ΟΔΟΣ مرحبا بالعالم שלום עולם 東京都に住んでいます 世界 "
    "한국어를 배우고 있어요 नमस्ते दुनिया สวัสดี 👩\u200d👩\u200d👧 👍🏽 🎉 "
    "it's well-known e-mail, x+y=z (yes) no!"
)
CORPUS_WORDS = CORPUS_TEXT.split()

AWKWARD_TEXTS = [
    "Cafe\u0301 café naïve Ångström",
    "\u0301leading combining mark and a\u0301\u0301 stacked",
    "東京都に住んでいます",
    "👩\u200d👩\u200d👧 👍🏽 🎉👍🏽x",
    "a\x00b\x07c\u200bd\ufeffe",
    "tab\tnewline\ncr\r\nnbsp\u00a0ideographic\u3000end",
    "مرحبا بالعالم",
    "Hello мир 世界 שלום Σίσυφος",
    "한국어를 배우고 있어요 를어있어어 요를있어",
    "नमस्ते दुनिया สวัสดี",
    "İstanbul Straße ǅ ﬁ",
    "short " + "x" * 150 + " end",
    "it's a well-known [MASK] (yes)!",
    "",
    "   \t\n \u00a0 ",
]


def corpus_lines(n: int = 2000, seed: int = 1234) -> Iterator[str]:
    rng = random.Random(seed)
    for i in range(n):
        yield "" if i % 50 == 0 else " ".join(rng.choice(CORPUS_WORDS) for _ in range(10))


@pytest.fixture(scope="module")
def uncased() -> tokenizers.Tokenizer:
    return train_tokenizer(corpus_lines(), vocab_size=400, cased=False)


@pytest.fixture(scope="module")
def cased() -> tokenizers.Tokenizer:
    return train_tokenizer(corpus_lines(), vocab_size=400, cased=True)


@pytest.fixture(params=["uncased", "cased"])
def trained(request: pytest.FixtureRequest) -> tokenizers.Tokenizer:
    return request.getfixturevalue(request.param)


def encodings(tok: tokenizers.Tokenizer) -> list[list[int]]:
    singles = [tok.encode(t).ids for t in AWKWARD_TEXTS]
    pairs = [tok.encode(a, b).ids for a, b in itertools.pairwise(AWKWARD_TEXTS)]
    return singles + pairs


# ----------------------------------------------------------------------------------------------------------
# Training and round trips
# ----------------------------------------------------------------------------------------------------------


def test_trained_special_tokens_have_ids_0_to_4(trained: tokenizers.Tokenizer) -> None:
    assert special_ids(trained) == SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
    assert vocab_tokens(trained)[:5] == list(SPECIAL_TOKENS)


def test_trained_casing(uncased: tokenizers.Tokenizer, cased: tokenizers.Tokenizer) -> None:
    assert is_lowercase(uncased) and not is_lowercase(cased)
    assert uncased.encode("Café").tokens == ["[CLS]", "cafe", "[SEP]"]
    assert "Café" in cased.encode("Café").tokens
    assert all(t == t.lower() for t in vocab_tokens(uncased)[5:])
    assert any(t != t.lower() for t in vocab_tokens(cased)[5:])
    assert tokenizer_fingerprint(uncased) != tokenizer_fingerprint(cased)


def test_trained_pipeline_is_bert(uncased: tokenizers.Tokenizer) -> None:
    enc = uncased.encode("hello world", "the dog")
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2
    assert enc.type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert uncased.decode(uncased.encode("the runner runs").ids) == "the runner runs"
    assert uncased.padding is None and uncased.truncation is None


@pytest.mark.parametrize("form", ["dir", "tokenizer.json", "vocab.txt", "bare vocab.txt"])
def test_round_trip(trained: tokenizers.Tokenizer, tmp_path: Path, form: str) -> None:
    save_tokenizer(trained, tmp_path)
    if form == "bare vocab.txt":  # no tokenizer_config.json beside it: the casing is inferred from the vocab
        (tmp_path / "bare").mkdir()
        source = Path(shutil.copy(tmp_path / "vocab.txt", tmp_path / "bare" / "vocab.txt"))
    else:
        source = tmp_path if form == "dir" else tmp_path / form
    loaded = load_tokenizer(source)
    assert encodings(loaded) == encodings(trained)
    assert tokenizer_fingerprint(loaded) == tokenizer_fingerprint(trained)
    assert vocab_tokens(loaded) == vocab_tokens(trained)
    assert is_lowercase(loaded) == is_lowercase(trained)
    assert special_ids(loaded) == special_ids(trained)


def test_dir_without_tokenizer_json_reads_vocab_and_config(
    cased: tokenizers.Tokenizer, tmp_path: Path
) -> None:
    save_tokenizer(cased, tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    loaded = load_tokenizer(tmp_path)
    assert not is_lowercase(loaded)
    assert encodings(loaded) == encodings(cased)


def test_fingerprint_depends_on_vocab_and_casing(uncased: tokenizers.Tokenizer, tmp_path: Path) -> None:
    save_tokenizer(uncased, tmp_path)
    assert tokenizer_fingerprint(load_tokenizer(tmp_path / "vocab.txt")) == tokenizer_fingerprint(uncased)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    same_vocab_cased = load_tokenizer(tmp_path)
    assert vocab_tokens(same_vocab_cased) == vocab_tokens(uncased)
    assert tokenizer_fingerprint(same_vocab_cased) != tokenizer_fingerprint(uncased)

    smaller = train_tokenizer(corpus_lines(300), vocab_size=MIN_VOCAB_SIZE + 40)
    assert tokenizer_fingerprint(smaller) != tokenizer_fingerprint(uncased)


def test_save_writes_hf_tokenizer_files(cased: tokenizers.Tokenizer, tmp_path: Path) -> None:
    save_tokenizer(cased, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "ElectraTokenizer"
    assert config["do_lower_case"] is False and config["strip_accents"] is None
    assert config["model_max_length"] == 512
    assert config["mask_token"] == "[MASK]" and config["pad_token"] == "[PAD]"
    special = json.loads((tmp_path / "special_tokens_map.json").read_text())
    assert sorted(special.values()) == sorted(SPECIAL_TOKENS)
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1] == vocab_tokens(cased)


def test_padding_and_truncation_are_off(uncased: tokenizers.Tokenizer, tmp_path: Path) -> None:
    padded = tokenizers.Tokenizer.from_str(uncased.to_str())
    padded.enable_padding(pad_id=0, pad_token="[PAD]", length=64)
    padded.enable_truncation(max_length=8)
    save_tokenizer(padded, tmp_path)
    assert padded.padding is not None and padded.truncation is not None  # the caller's object is untouched
    loaded = load_tokenizer(tmp_path)
    assert loaded.padding is None and loaded.truncation is None

    padded.save(str(tmp_path / "padded.json"))
    loaded = load_tokenizer(tmp_path / "padded.json")
    assert loaded.padding is None and loaded.truncation is None
    assert len(loaded.encode("the quick brown fox jumps over a lazy dog").ids) == 11


def test_training_reads_a_generator_once() -> None:
    consumed: list[str] = []

    def lines() -> Iterator[str]:
        for line in corpus_lines(2500):
            consumed.append(line)
            yield line

    tok = train_tokenizer(lines(), vocab_size=300)
    assert len(consumed) == 2500
    assert special_ids(tok).mask == 4


# ----------------------------------------------------------------------------------------------------------
# transformers compatibility
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls_name", ["AutoTokenizer", "ElectraTokenizerFast"])
def test_transformers_loads_saved_dir(trained: tokenizers.Tokenizer, tmp_path: Path, cls_name: str) -> None:
    transformers = pytest.importorskip("transformers")
    save_tokenizer(trained, tmp_path)
    hf = getattr(transformers, cls_name).from_pretrained(str(tmp_path), local_files_only=True)
    assert type(hf).__name__ == "ElectraTokenizerFast"
    assert hf.model_max_length == 512
    for text in AWKWARD_TEXTS:
        assert hf(text)["input_ids"] == trained.encode(text).ids, text
    assert hf("the dog", "a fox")["input_ids"] == trained.encode("the dog", "a fox").ids
    hf_ids = (hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id, hf.mask_token_id)
    assert hf_ids == (0, 1, 2, 3, 4)


def test_loads_a_dir_saved_by_transformers(cased: tokenizers.Tokenizer, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    (tmp_path / "ours").mkdir()
    save_tokenizer(cased, tmp_path / "ours")
    hf = transformers.ElectraTokenizerFast.from_pretrained(str(tmp_path / "ours"), local_files_only=True)
    hf.save_pretrained(str(tmp_path / "hf"))
    loaded = load_tokenizer(tmp_path / "hf")
    assert encodings(loaded) == encodings(cased)
    assert tokenizer_fingerprint(loaded) == tokenizer_fingerprint(cased)


def test_tokenizer_config_overrides_normalizer_like_transformers(
    uncased: tokenizers.Tokenizer, tmp_path: Path
) -> None:
    transformers = pytest.importorskip("transformers")
    save_tokenizer(uncased, tmp_path)
    config_path = tmp_path / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "do_lower_case": False}))
    loaded = load_tokenizer(tmp_path)
    assert not is_lowercase(loaded)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    for text in AWKWARD_TEXTS:
        assert hf(text)["input_ids"] == loaded.encode(text).ids, text


@pytest.mark.shared_data
@needs_bert_vocab
@pytest.mark.parametrize("source", ["file", "dir"])
def test_bert_vocab_matches_bert_tokenizer_fast(source: str) -> None:
    transformers = pytest.importorskip("transformers")
    ours = load_tokenizer(BERT_VOCAB if source == "file" else BERT_VOCAB.parent)
    hf = transformers.BertTokenizerFast(vocab_file=str(BERT_VOCAB))
    # Looked up, never assumed: BERT's [UNK] is 100, not 1.
    assert special_ids(ours) == SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)
    assert is_lowercase(ours)
    texts = [*AWKWARD_TEXTS, "[MASK] [mask] [CLS][SEP] unaffable", "x" * 99, "x" * 100, "x" * 101]
    for text in texts:
        expected = hf(text, return_offsets_mapping=True)
        got = ours.encode(text)
        assert got.ids == expected["input_ids"], text
        assert [tuple(o) for o in got.offsets] == [tuple(o) for o in expected["offset_mapping"]], text
    # transformers treats an empty text_pair as "no pair", so pairs use non-empty texts only.
    non_empty = [t for t in texts if t]
    for a, b in itertools.pairwise(non_empty):
        expected = hf(a, b)
        got = ours.encode(a, b)
        assert (got.ids, got.type_ids) == (expected["input_ids"], expected["token_type_ids"])
    assert json.loads(ours.to_str()) == json.loads(hf.backend_tokenizer.to_str())


@pytest.mark.shared_data
@needs_bert_vocab
def test_bert_vocab_fingerprint_is_the_same_from_every_form(tmp_path: Path) -> None:
    from_file = load_tokenizer(BERT_VOCAB)
    save_tokenizer(from_file, tmp_path)
    fingerprints = {
        tokenizer_fingerprint(load_tokenizer(p)) for p in (BERT_VOCAB, tmp_path, tmp_path / "vocab.txt")
    }
    assert fingerprints == {tokenizer_fingerprint(from_file)}
    assert encodings(load_tokenizer(tmp_path)) == encodings(from_file)


# ----------------------------------------------------------------------------------------------------------
# Offsets
# ----------------------------------------------------------------------------------------------------------


def piece_text(token: str) -> str:
    return token[2:] if token.startswith("##") and len(token) > 2 else token


def expected_normalized(tok: tokenizers.Tokenizer, span: str) -> str:
    """What the normaliser makes of a span, minus the spaces BertNormalizer puts around each CJK ideograph
    (handle_chinese_chars) so that the pre-tokenizer splits them; a CJK character is always its own span."""
    normalized = tok.normalizer.normalize_str(span)
    is_cjk = len(span) == 1 and unicodedata.name(span, "").startswith("CJK")
    if is_cjk and normalized == f" {normalized[1:-1]} ":
        return normalized[1:-1]
    return normalized


def content_tokens(tok: tokenizers.Tokenizer, text: str) -> list[tuple[str, int, int]]:
    enc = tok.encode(text)
    specials = set(SPECIAL_TOKENS) - {"[UNK]"}
    out = []
    for token, (start, end), special in zip(enc.tokens, enc.offsets, enc.special_tokens_mask, strict=True):
        if special:
            assert token in specials and (start, end) == (0, 0)
        else:
            out.append((token, start, end))
    return out


def assert_offset_invariants(tok: tokenizers.Tokenizer, text: str) -> list[tuple[str, int, int]]:
    """Bounds, order and non-emptiness, which hold for every input."""
    tokens = content_tokens(tok, text)
    for token, start, end in tokens:
        span = text[start:end]
        assert 0 <= start < end <= len(text), (token, start, end)
        # Spans never begin or end on whitespace (nor on characters clean_text deletes, some of which Python
        # calls whitespace: \x1c-\x1f, \x85).
        assert not span[0].isspace() and not span[-1].isspace(), (token, span)
    for (_, s1, e1), (_, s2, e2) in itertools.pairwise(tokens):
        assert s1 <= s2 and e1 <= e2, (text, tokens)
        if s2 < e1:
            # Overlap happens only when NFD (applied when stripping accents) expands one original character
            # into several, e.g. a Hangul syllable into 2-3 jamo, and a piece boundary falls between those:
            # both pieces then map back to that whole character. The overlap is then exactly that character.
            assert s2 == e1 - 1, (text, tokens)
            assert len(tok.normalizer.normalize_str(text[s2])) > 1, (text, tokens)
    return tokens


def clusters(tokens: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
    """Runs of tokens whose spans overlap (share an expanded character); disjoint runs otherwise."""
    out: list[list[tuple[str, int, int]]] = []
    for token in tokens:
        if out and token[1] < out[-1][-1][2]:
            out[-1].append(token)
        else:
            out.append([token])
    return out


def assert_offsets_exact(tok: tokenizers.Tokenizer, text: str) -> None:
    """Every token is exactly what the normaliser makes of the original characters its offsets point at."""
    tokens = assert_offset_invariants(tok, text)
    for run in clusters(tokens):
        start, end = run[0][1], run[-1][2]
        if len(run) == 1 and run[0][0] in SPECIAL_TOKENS and text[start:end] == run[0][0]:
            # Special tokens typed in the text are matched on the raw text, before normalisation (which would
            # lowercase "[MASK]"), exactly as transformers does.
            continue
        if any(token == "[UNK]" for token, _, _ in run):
            # An unknown word is one [UNK] spanning the whole pre-token, never sharing characters.
            assert len(run) == 1, (text, run)
            continue
        # Overlapping pieces split one character's expansion between them, so only their concatenation
        # corresponds to characters of the input; a lone token must match on its own.
        pieces = "".join(piece_text(token) for token, _, _ in run)
        assert expected_normalized(tok, text[start:end]) == pieces, (text, run)
    # Nothing is silently dropped: characters outside every span normalise to nothing or to whitespace.
    covered = {i for _, start, end in tokens for i in range(start, end)}
    for i, char in enumerate(text):
        if i not in covered:
            assert not tok.normalizer.normalize_str(char).strip(), (text, i, char)


@pytest.fixture(
    scope="module", params=["uncased", "cased", pytest.param("bert", marks=pytest.mark.shared_data)]
)
def any_tokenizer(request: pytest.FixtureRequest) -> tokenizers.Tokenizer:
    if request.param == "bert":
        if not BERT_VOCAB.is_file():
            pytest.skip(f"shared BERT vocab not found at {BERT_VOCAB}")
        return load_tokenizer(BERT_VOCAB)
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("text", AWKWARD_TEXTS, ids=range(len(AWKWARD_TEXTS)))
def test_offsets_are_exact_on_awkward_text(any_tokenizer: tokenizers.Tokenizer, text: str) -> None:
    assert_offsets_exact(any_tokenizer, text)


def test_offsets_examples(uncased: tokenizers.Tokenizer, cased: tokenizers.Tokenizer) -> None:
    text = "short " + "x" * 150 + " end"
    unk = [(t, s, e) for t, s, e in content_tokens(uncased, text) if t == "[UNK]"]
    assert unk == [("[UNK]", 6, 156)]  # longer than max_input_chars_per_word: one [UNK] for the whole word
    assert content_tokens(uncased, "") == [] and content_tokens(cased, " \t\n\u00a0\u3000") == []
    # Control and zero-width characters are deleted but stay inside the span of the word around them.
    assert content_tokens(uncased, "th\x00e d\u200bog\ufeff") == [("the", 0, 4), ("dog", 5, 9)]
    # A combining mark stripped at the end of a word is outside the word's span (the span ends earlier).
    [(_, start, end)] = content_tokens(uncased, "naïve\u0301")
    assert (start, end) == (0, 5)
    # Same for a decomposed accent; a precomposed one is inside the character, so inside the span.
    assert content_tokens(uncased, "Cafe\u0301") == [("cafe", 0, 4)]
    assert content_tokens(uncased, "Caf\u00e9") == [("cafe", 0, 4)]
    assert content_tokens(cased, "Cafe\u0301") == [("Cafe\u0301", 0, 5)]  # cased keeps the mark


@needs_bert_vocab
def test_hangul_syllable_split_into_jamo_pieces_share_offsets() -> None:
    # Uncased BERT decomposes the syllable U+D55C (one character) into 3 jamo and the vocab only has them as
    # separate pieces: three tokens, each pointing at the same single original character.
    tok = load_tokenizer(BERT_VOCAB)
    expected = [("\u1112", 0, 1), ("##\u1161", 0, 1), ("##\u11ab", 0, 1)]
    assert content_tokens(tok, "\ud55c") == expected


def test_piece_boundary_inside_a_hangul_syllable_gives_overlapping_offsets(tmp_path: Path) -> None:
    # NFD turns the two syllables U+C788 U+C5B4 into the jamo 110B 1175 11BB | 110B 1165. A piece made of
    # the last jamo of the first syllable and all of the second points at both characters, while the pieces
    # before it point at the first only: offsets overlap by exactly one character, because they can only
    # name whole characters of the original text. (Jamo are written as escapes: they render like syllables.)
    text = "\uc788\uc5b4"
    first, second, straddling = "\u110b", "##\u1175", "##\u11bb\u110b\u1165"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, first, second, straddling]) + "\n", encoding="utf-8")
    tok = load_tokenizer(vocab)
    assert content_tokens(tok, text) == [(first, 0, 1), (second, 0, 1), (straddling, 0, 2)]
    assert_offsets_exact(tok, text)


AWKWARD_CHARS = sorted(set("".join(AWKWARD_TEXTS)) | set("\x1c\x1f\x85\u2028\u2029\u00ad\u0345\u200d\ufe0f"))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=st.text(st.one_of(st.characters(), st.sampled_from(AWKWARD_CHARS)), max_size=40))
def test_offsets_on_random_unicode(any_tokenizer: tokenizers.Tokenizer, text: str) -> None:
    assert_offsets_exact(any_tokenizer, text)


def test_offsets_on_random_words_from_many_scripts(uncased: tokenizers.Tokenizer) -> None:
    # Words glued from pieces of the corpus: plenty of multi-piece words and Hangul splits mid-syllable.
    rng = random.Random(7)
    alphabet = "".join(CORPUS_WORDS)
    for _ in range(300):
        text = " ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(3))
        assert_offsets_exact(uncased, text)


# ----------------------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------------------


def assert_input_error(path: Path, *fragments: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_tokenizer(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def write_wordpiece_json(path: Path, tokens: list[str]) -> Path:
    tok = tokenizers.Tokenizer(WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    tok.save(str(path))
    return path


def test_missing_path(tmp_path: Path) -> None:
    assert_input_error(tmp_path / "nope", "does not exist")


def test_dir_without_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert_input_error(
        tmp_path, "has no tokenizer.json or vocab.txt", "electra tokenizer train", "--tokenizer"
    )


@pytest.mark.parametrize("content", ["", "\n", "\n\n  \n"])
def test_empty_vocab(tmp_path: Path, content: str) -> None:
    (tmp_path / "vocab.txt").write_text(content)
    assert_input_error(tmp_path / "vocab.txt", "empty")
    assert_input_error(tmp_path)


@pytest.mark.parametrize("content", ["not json", '{"version": "1.0", "model": ', "{}", ""])
def test_corrupt_tokenizer_json(tmp_path: Path, content: str) -> None:
    (tmp_path / "tokenizer.json").write_text(content)
    assert_input_error(tmp_path / "tokenizer.json", "not a readable tokenizer.json")
    # In a directory the message names the file inside it.
    assert_input_error(tmp_path, str(tmp_path / "tokenizer.json"))


def test_vocab_missing_a_special_token(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    assert_input_error(vocab, "[MASK]")


def test_tokenizer_json_missing_a_special_token(tmp_path: Path) -> None:
    path = write_wordpiece_json(tmp_path / "tokenizer.json", ["[PAD]", "[UNK]", "[SEP]", "[MASK]", "a"])
    assert_input_error(path, "[CLS]")


def test_special_ids_names_the_missing_token() -> None:
    tok = tokenizers.Tokenizer(WordPiece({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}, unk_token="[UNK]"))
    with pytest.raises(InputError, match=r"\[MASK\]"):
        special_ids(tok)


def test_tokenizer_json_not_wordpiece(tmp_path: Path) -> None:
    tok = tokenizers.Tokenizer(BPE({t: i for i, t in enumerate(SPECIAL_TOKENS)}, [], unk_token="[UNK]"))
    tok.save(str(tmp_path / "tokenizer.json"))
    assert_input_error(tmp_path / "tokenizer.json", "BPE", "WordPiece")


def test_vocab_with_duplicate_token(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, "a", "b", "a"]) + "\n")
    assert_input_error(vocab, "'a'", "lines 6 and 8")


def test_vocab_not_utf8(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes("\n".join(SPECIAL_TOKENS).encode() + b"\n\xff\xfe\n")
    assert_input_error(vocab, "UTF-8")


def test_bad_tokenizer_config(tmp_path: Path) -> None:
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS) + "\n")
    (tmp_path / "tokenizer_config.json").write_text("{oops")
    assert_input_error(tmp_path, "tokenizer_config.json", "not valid JSON")


def test_vocab_line_endings_and_id_order(tmp_path: Path) -> None:
    tokens = ["[PAD]", "x", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\x85", "\u2028", "y", "##y"]
    (tmp_path / "unix.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8", newline="")
    (tmp_path / "dos.txt").write_text("\r\n".join(tokens), encoding="utf-8", newline="")
    for name in ("unix.txt", "dos.txt"):
        tok = load_tokenizer(tmp_path / name)
        assert vocab_tokens(tok) == tokens  # id = line number, even for line-separator-like tokens
        assert special_ids(tok) == SpecialIds(pad=0, unk=2, cls=3, sep=4, mask=5)
        assert tok.encode("yy x").ids == [3, 8, 9, 1, 4]


def test_training_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="empty"):
        train_tokenizer([])
    with pytest.raises(InputError, match="empty"):
        train_tokenizer(iter(["", "   ", "\t\n"]))
    with pytest.raises(InputError, match=str(MIN_VOCAB_SIZE)):
        train_tokenizer(["some text"], vocab_size=MIN_VOCAB_SIZE - 1)
    assert len(SPECIAL_TOKENS) + 32 <= MIN_VOCAB_SIZE
