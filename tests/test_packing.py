"""Packing invariants, on the packing functions and on whole prepared datasets."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from electra.tokenizer import load_tokenizer
from electra.training.data import packing
from electra.training.data.dataset import PretrainingData
from electra.training.data.prepare import PrepareConfig, prepare_dataset

CLS, SEP, PAD = 2, 3, 0


def _doc_sentences(
    rng: random.Random, n_docs: int
) -> tuple[np.ndarray, list[tuple[int, list[int], list[int]]]]:
    """Flat tokens where token value encodes (document, sentence): doc d's tokens are 1000 * (d + 1) + s."""
    tokens: list[int] = []
    docs = []
    for d in range(n_docs):
        starts, lengths = [], []
        for s in range(rng.randint(1, 30)):
            n = rng.randint(1, 60)
            starts.append(len(tokens))
            lengths.append(n)
            tokens.extend([1000 * (d + 1) + s] * n)
        docs.append((d, starts, lengths))
    return np.asarray(tokens, dtype=np.int64), docs


def _pack(n_docs: int = 300, max_len: int = 64, seed: int = 0):
    rng = random.Random(seed)
    tokens, docs = _doc_sentences(rng, n_docs)
    builder = packing.ExampleBuilder(max_len, random.Random(seed + 1))
    for _, starts, lengths in docs:
        s, n, _ = packing.cut_long_sentences(
            np.asarray(starts), np.asarray(lengths), np.zeros(len(starts), dtype=np.int64), cap=max_len - 2
        )
        builder.add_document(s.tolist(), n.tolist())
    packed = builder.result()
    ids, seg, lengths = packing.build_arrays(packed, tokens, max_len, CLS, SEP, PAD, np.dtype(np.int32))
    return packed, ids, seg, lengths


def test_examples_have_specials_in_place_and_valid_segments() -> None:
    packed, ids, seg, lengths = _pack()
    max_len = ids.shape[1]
    assert (lengths <= max_len).all() and (lengths >= 3).all()
    for row, (a, b, n) in enumerate(zip(packed.a_len, packed.b_len, lengths, strict=True)):
        assert ids[row, 0] == CLS
        assert ids[row, a + 1] == SEP
        body = ids[row, 1 : a + 1]
        assert not np.isin(body, (CLS, SEP, PAD)).any()
        if b:
            assert n == a + b + 3
            assert ids[row, n - 1] == SEP
            assert not np.isin(ids[row, a + 2 : n - 1], (CLS, SEP, PAD)).any()
            assert (seg[row, : a + 2] == 0).all() and (seg[row, a + 2 : n] == 1).all()
        else:
            assert n == a + 2
            assert (seg[row] == 0).all()
        assert (ids[row, n:] == PAD).all() and (seg[row, n:] == 0).all()


def test_no_example_crosses_a_document_and_segments_split_at_sentence_boundaries() -> None:
    packed, ids, _, lengths = _pack()
    for row, (a, b, n) in enumerate(zip(packed.a_len, packed.b_len, lengths, strict=True)):
        content = ids[row, 1 : a + 1].tolist() + (ids[row, a + 2 : n - 1].tolist() if b else [])
        assert len({t // 1000 for t in content}) == 1, f"example {row} mixes documents"
        if b:
            # A ends with a whole sentence and B starts a new one: the token values change across the cut.
            last_a, first_b = ids[row, a], ids[row, a + 2]
            assert last_a != first_b
            assert ids[row, 1] != first_b
            # Segments are consecutive text: B's first sentence follows A's last.
            assert first_b % 1000 > last_a % 1000


def test_length_distribution_matches_the_official_probabilities() -> None:
    packed, _, _, lengths = _pack(n_docs=3000, max_len=64)
    n = len(packed)
    assert 0.03 < packed.random_target_examples / n < 0.07  # 5% random target lengths
    single = (packed.b_len == 0).mean()
    assert 0.10 <= single < 0.35  # 10% by draw, plus documents whose last example holds one sentence
    assert (lengths == 64).mean() > 0.5  # most examples are full


def test_long_sentences_are_cut_not_dropped() -> None:
    starts, lengths, docs = packing.cut_long_sentences(
        np.array([0, 300, 301]), np.array([300, 1, 0]), np.array([0, 0, 1]), cap=126
    )
    assert lengths.tolist() == [126, 126, 48, 1]
    assert starts.tolist() == [0, 126, 252, 300]
    assert docs.tolist() == [0, 0, 0, 0]


def test_max_len_below_eight_is_refused() -> None:
    with pytest.raises(ValueError):
        packing.ExampleBuilder(7, random.Random(0))


def _prepare(corpus: Path, vocab: Path, out: Path, **kw) -> PretrainingData:
    cfg = PrepareConfig(corpus=[str(corpus)], tokenizer=str(vocab), out=out, progress=False, **kw)
    prepare_dataset(cfg)
    return PretrainingData.open(out)


def _doc_of_tokens(vocab: Path) -> dict[int, int]:
    tok = load_tokenizer(vocab)
    return {i: int(t[3:]) for t, i in tok.get_vocab().items() if t.startswith("doc")}


def test_prepared_dataset_invariants(marked_corpus: Path, word_vocab: Path, tmp_path: Path) -> None:
    data = _prepare(
        marked_corpus, word_vocab, tmp_path / "out", max_seq_len=32, val_fraction=0.2, chunk_chars=3000
    )
    doc_of = _doc_of_tokens(word_vocab)
    tok = load_tokenizer(word_vocab)
    cls, sep, pad, dot = (tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "."))
    docs_in = {}
    for name, split in data.splits.items():
        assert split.input_ids.dtype == np.uint16
        assert split.input_ids.shape == (len(split), 32)
        docs = set()
        for ids, seg, n in zip(split.input_ids, split.segment_ids, split.lengths, strict=True):
            ids = ids.tolist()
            assert ids[0] == cls and ids[n - 1] == sep and all(t == pad for t in ids[n:])
            example_docs = {doc_of[t] for t in ids[:n] if t in doc_of}
            assert len(example_docs) <= 1, "an example crosses documents"
            docs |= example_docs
            seps = [i for i in range(n) if ids[i] == sep]
            if len(seps) == 2:  # two segments: A ends a sentence, B starts one with its marker
                assert ids[seps[0] - 1] == dot
                assert ids[seps[0] + 1] in doc_of
                assert seg[seps[0] + 1 : n].tolist() == [1] * (n - seps[0] - 1)
            assert seg[: seps[0] + 1].tolist() == [0] * (seps[0] + 1)
        docs_in[name] = docs
    assert docs_in["train"] and docs_in["val"]
    assert not docs_in["train"] & docs_in["val"], "a document is in both splits"
    m = data.manifest
    assert m["counts"]["documents"] == 60
    assert m["splits"]["train"]["examples"] + m["splits"]["val"]["examples"] > 0


def test_same_seed_same_bytes_any_worker_count(marked_corpus: Path, word_vocab: Path, tmp_path: Path) -> None:
    kw = {"max_seq_len": 24, "chunk_chars": 2000, "val_fraction": 0.1}
    a = _prepare(marked_corpus, word_vocab, tmp_path / "a", seed=3, workers=1, **kw)
    b = _prepare(marked_corpus, word_vocab, tmp_path / "b", seed=3, workers=2, **kw)
    c = _prepare(marked_corpus, word_vocab, tmp_path / "c", seed=4, workers=1, **kw)
    for name in ("train", "val"):
        assert np.array_equal(a.splits[name].input_ids, b.splits[name].input_ids)
        assert np.array_equal(a.splits[name].segment_ids, b.splits[name].segment_ids)
    assert a.manifest["splits"] == b.manifest["splits"]
    assert not np.array_equal(a.train.input_ids[: len(c.train)], c.train.input_ids[: len(a.train)])
