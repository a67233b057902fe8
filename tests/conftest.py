"""Shared fixtures: generated corpora and a word-level tokenizer whose tokens identify their document."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
N_DOCS = 60
N_WORDS = 40


def shared_path(relative: str) -> Path:
    """A path under ../shared/data, or a skip when this machine does not have it."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared data set is not on this machine")
    return path


def make_marked_corpus(n_docs: int = N_DOCS, seed: int = 0, max_sentences: int = 40) -> str:
    """Plain-text corpus: every sentence starts with its document's marker word `docN` and ends with '.'.

    Paragraph lines hold one to three sentences (so sentence splitting matters), a blank line ends a document.
    Sentence lengths vary from 3 to 30 words so packing sees every case.
    """
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        sentences = []
        for _ in range(rng.randint(1, max_sentences)):
            words = [f"word{rng.randrange(N_WORDS)}" for _ in range(rng.randint(2, 29))]
            sentences.append(f"Doc{d} " + " ".join(words) + ".")
        lines, i = [], 0
        while i < len(sentences):
            k = rng.randint(1, 3)
            lines.append(" ".join(sentences[i : i + k]))
            i += k
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


def write_word_vocab(path: Path, n_docs: int = N_DOCS) -> Path:
    """A vocab.txt in which every word of the marked corpus is exactly one token."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."]
    tokens += [f"doc{d}" for d in range(n_docs)] + [f"word{w}" for w in range(N_WORDS)]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def marked_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(make_marked_corpus(), encoding="utf-8")
    return path


@pytest.fixture
def word_vocab(tmp_path: Path) -> Path:
    return write_word_vocab(tmp_path / "vocab.txt")
