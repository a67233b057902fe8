"""Corpus reading: formats, compression, document boundaries, chunking, bad files."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import pytest

from electra.errors import InputError
from electra.training.data.corpus import (
    PLAIN,
    WIKIEXTRACTOR,
    CorpusStats,
    iter_chunks,
    iter_corpus_lines,
    parse_documents,
    resolve_sources,
)
from electra.training.data.sentences import split_sentences

from .conftest import make_marked_corpus, shared_path

WIKI = """<doc id="12" url="https://en.wikipedia.org/wiki?curid=12" title="Anarchism">
Anarchism

Anarchism is a political philosophy. It has many schools.
Etymology and terminology.
</doc>
<doc id="25" url="https://en.wikipedia.org/wiki?curid=25" title="Autism">
Autism

Autism is a developmental disorder.
</doc>
"""


def test_plain_documents_are_separated_by_blank_lines() -> None:
    text = "a b c\n d e \n\n\n  \nf g\n\nh\n"
    assert parse_documents(text, PLAIN) == [["a b c", "d e"], ["f g"], ["h"]]


def test_wikiextractor_documents_drop_the_repeated_title() -> None:
    docs = parse_documents(WIKI, WIKIEXTRACTOR)
    assert docs == [
        ["Anarchism is a political philosophy. It has many schools.", "Etymology and terminology."],
        ["Autism is a developmental disorder."],
    ]


@pytest.mark.parametrize("compress", [None, gzip.compress, bz2.compress, lzma.compress])
def test_compression_is_detected_by_content_not_extension(tmp_path: Path, compress) -> None:
    data = WIKI.encode()
    path = tmp_path / "wiki_00"  # WikiExtractor output has no extension
    path.write_bytes(compress(data) if compress else data)
    lines = list(iter_corpus_lines([path]))
    assert lines[0].startswith("Anarchism is")
    assert len(lines) == 3


def test_chunks_end_only_at_document_boundaries(tmp_path: Path) -> None:
    text = make_marked_corpus(n_docs=40, seed=1)
    path = tmp_path / "c.txt"
    path.write_text(text, encoding="utf-8")
    stats = CorpusStats()
    chunks = list(iter_chunks([path], stats, chunk_chars=500))
    assert len(chunks) > 5
    assert "".join(c.text for c in chunks) == text
    assert [c.index for c in chunks] == list(range(len(chunks)))
    docs = [d for c in chunks for d in parse_documents(c.text, c.fmt)]
    assert docs == parse_documents(text, PLAIN)
    assert stats.chars == len(text)


def test_a_file_ends_a_document_and_chunks_never_span_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("three\n")
    chunks = list(iter_chunks(resolve_sources([tmp_path]), CorpusStats()))
    assert [c.text for c in chunks] == ["one\ntwo\n", "three\n"]


def test_resolve_sources_expands_dirs_and_globs(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("x\n")
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / ".hidden").write_text("x\n")
    assert [p.name for p in resolve_sources([tmp_path])] == ["a.txt", "b.txt"]
    assert [p.name for p in resolve_sources([str(tmp_path / "*.txt")])] == ["a.txt"]
    # Naming a file twice reads it once.
    assert len(resolve_sources([tmp_path / "a.txt", str(tmp_path / "*.txt")])) == 1


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d / "missing.txt", "does not exist"),
        (lambda d: str(d / "*.nothing"), "matches no files"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "contains no files"),
    ],
)
def test_bad_corpus_paths(tmp_path: Path, setup, message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_sources([setup(tmp_path)])


def test_binary_file_is_rejected_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x00\x01\x02binary\x00" * 100)
    with pytest.raises(InputError, match=r"model\.bin looks binary"):
        list(iter_corpus_lines([path]))


def test_corrupt_gzip_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "broken.gz"
    path.write_bytes(gzip.compress(("some text\n" * 10000).encode())[:200])
    with pytest.raises(InputError, match=r"broken\.gz is corrupt or truncated"):
        list(iter_corpus_lines([path]))


def test_corrupt_gzip_data_is_reported(tmp_path: Path) -> None:
    """Flipped bytes inside the deflate data raise zlib.error, not OSError."""
    data = bytearray(gzip.compress("".join(f"line {i} of some text\n" for i in range(50)).encode() * 2000))
    for i in range(20, 60):
        data[i] ^= 0xFF
    path = tmp_path / "flipped.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"flipped\.gz is corrupt or truncated"):
        list(iter_corpus_lines([path]))


def test_undecodable_bytes_are_replaced_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café crème\nnaïve\n".encode("latin-1") + "ok ünïcode\n".encode())
    stats = CorpusStats()
    lines = list(iter_corpus_lines([path], stats))
    assert lines == ["caf\ufffd cr\ufffdme", "na\ufffdve", "ok ünïcode"]
    assert stats.undecodable_bytes == {str(path): 3}


def test_undecodable_sequence_split_across_read_blocks(tmp_path: Path) -> None:
    # A valid multi-byte character straddling the 1 MiB read boundary must survive intact.
    text = "a" * ((1 << 20) - 1) + "é" + "\n"
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    stats = CorpusStats()
    lines = list(iter_corpus_lines([path], stats))
    assert lines == [text.strip()]
    assert stats.undecodable_bytes == {}


def test_sentence_splitter_keeps_abbreviations_and_initials() -> None:
    text = (
        'Mr. Smith met J. R. R. Tolkien, e.g. in the U.S. once. "Why?" he asked. (It was 1950.) Then 3 left.'
    )
    assert split_sentences(text) == [
        "Mr. Smith met J. R. R. Tolkien, e.g. in the U.S. once.",
        '"Why?" he asked.',
        "(It was 1950.)",
        "Then 3 left.",
    ]
    assert split_sentences("no break here at all, just one long lowercase clause. and more") == [
        "no break here at all, just one long lowercase clause. and more"
    ]


@pytest.mark.shared_data
def test_shared_wikipedia_file_reads_as_documents() -> None:
    path = shared_path("corpus/enwiki-2015-wikiextractor/AA/wiki_00.gz")
    chunks = list(iter_chunks([path], CorpusStats()))
    docs = [d for c in chunks for d in parse_documents(c.text, c.fmt)]
    assert chunks[0].fmt == WIKIEXTRACTOR
    assert len(docs) > 10
    assert not any(line.startswith("<doc") or line == "</doc>" for d in docs for line in d)
