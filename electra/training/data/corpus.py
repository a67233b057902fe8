"""Reading pre-training corpora: plain text and WikiExtractor `<doc>` files, compressed or not.

Plain text: one sentence or paragraph per line, a blank line ends a document. WikiExtractor: each
`<doc id=.. url=.. title=..>` ... `</doc>` element is a document, one paragraph per line.

The reader hands out *chunks*: blocks of text cut only between documents, so that chunks can be parsed,
tokenized and packed independently (in parallel) without an example ever crossing a document boundary.
Chunk boundaries depend on the data alone, never on the number of workers, which keeps output deterministic.
"""

from __future__ import annotations

import bz2
import codecs
import glob
import gzip
import html
import lzma
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from electra.errors import InputError

PLAIN = "plain"
WIKIEXTRACTOR = "wikiextractor"

_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
}
_READ_BLOCK = 1 << 20
# Large enough that per-chunk overhead (pickling, process hand-off) is negligible, small enough that two
# workers are busy on a corpus of a few MB.
DEFAULT_CHUNK_CHARS = 2_000_000


@dataclass
class CorpusStats:
    """What reading the corpus found; reported to the user and stored in the dataset manifest."""

    files: list[str] = field(default_factory=list)
    bytes_read: int = 0
    chars: int = 0
    undecodable_bytes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    fmt: str
    source: str


def resolve_sources(specs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files, directories (recursively, hidden entries skipped) and glob patterns, in sorted order."""
    paths: list[Path] = []
    for spec in specs:
        spec = str(spec)
        p = Path(spec)
        if p.is_dir():
            found = sorted(
                Path(root) / name
                for root, dirs, files in os.walk(p)
                for name in files
                if not name.startswith(".")
                and not any(part.startswith(".") for part in Path(root).relative_to(p).parts)
            )
            if not found:
                raise InputError(f"corpus directory {p} contains no files; point --corpus at text files")
            paths.extend(found)
        elif p.exists():
            if not p.is_file():
                raise InputError(f"corpus path {p} is not a regular file")
            paths.append(p)
        elif glob.has_magic(spec):
            matched = sorted(Path(m) for m in glob.glob(spec, recursive=True) if Path(m).is_file())
            if not matched:
                raise InputError(f"corpus pattern {spec!r} matches no files")
            paths.extend(matched)
        else:
            raise InputError(f"corpus path {p} does not exist")
    if not paths:
        raise InputError(
            "no corpus given; pass --corpus FILE... (text, .gz, .bz2, .xz or WikiExtractor files)"
        )
    # The same file named twice (a dir and a glob, say) would be read twice; keep the first mention.
    seen: set[Path] = set()
    unique = []
    for path in paths:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def _open_binary(path: Path) -> BinaryIO:
    """Open a file, decompressing by content (not by extension: WikiExtractor output has none)."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except OSError as e:
        raise InputError(f"cannot read corpus file {path}: {e.strerror or e}") from e
    head = raw.read(6)
    raw.seek(0)
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            if kind == "gzip":
                return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
            if kind == "bz2":
                return bz2.BZ2File(raw, mode="rb")  # type: ignore[return-value]
            return lzma.LZMAFile(raw, mode="rb")  # type: ignore[return-value]
    return raw


class _ReplacementCounter:
    """A codec error handler that substitutes U+FFFD and counts the bytes it replaced."""

    def __init__(self) -> None:
        self.count = 0
        self.name = f"electra-count-{id(self)}"
        codecs.register_error(self.name, self)

    def __call__(self, err: UnicodeError) -> tuple[str, int]:
        assert isinstance(err, UnicodeDecodeError)
        self.count += err.end - err.start
        return "\ufffd", err.end


def read_text_blocks(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[str, int]]:
    """Yield (decoded text block, undecodable bytes so far) for one file.

    Undecodable bytes become U+FFFD and are counted, never fatal. A file with NUL bytes in its first block is
    rejected as binary: decoding it would feed garbage to the tokenizer.
    `on_bytes` receives the number of bytes consumed *on disk* (compressed), for progress bars.
    """
    counter = _ReplacementCounter()
    decoder = codecs.getincrementaldecoder("utf-8")(errors=counter.name)
    stream = _open_binary(path)
    raw = getattr(stream, "fileobj", None) or getattr(stream, "_fp", None) or stream
    last_pos = 0
    first = True
    try:
        with stream:
            while True:
                try:
                    block = stream.read(_READ_BLOCK)
                except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
                    raise InputError(f"corpus file {path} is corrupt or truncated ({e}); re-create it") from e
                if first:
                    if b"\x00" in block[:65536]:
                        raise InputError(
                            f"corpus file {path} looks binary (it contains NUL bytes); pass UTF-8 text files"
                        )
                    first = False
                # Windows line ends would hide blank lines (document boundaries) from the chunker.
                text = decoder.decode(block, final=not block).replace("\r\n", "\n")
                if on_bytes is not None:
                    try:
                        pos = raw.tell()
                    except (OSError, ValueError, AttributeError):
                        pos = last_pos
                    on_bytes(pos - last_pos)
                    last_pos = pos
                if text:
                    yield text, counter.count
                if not block:
                    break
    except UnicodeDecodeError as e:  # pragma: no cover - the handler replaces everything
        raise InputError(f"corpus file {path} cannot be decoded: {e}") from e


def detect_format(text_start: str) -> str:
    stripped = text_start.lstrip()
    return WIKIEXTRACTOR if stripped.startswith("<doc ") or stripped.startswith("<doc>") else PLAIN


def _next_boundary(text: str, start: int, fmt: str) -> int:
    """Index just past the first document boundary at or after `start`, or -1 if there is none yet."""
    if fmt == WIKIEXTRACTOR:
        i = text.find("</doc>", start)
        if i < 0:
            return -1
        j = text.find("\n", i)
        return -1 if j < 0 else j + 1
    i = text.find("\n\n", max(0, start - 1))
    return -1 if i < 0 else i + 2


def iter_chunks(
    paths: list[Path],
    stats: CorpusStats,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[Chunk]:
    """Cut the corpus into chunks of about `chunk_chars` characters, each ending at a document boundary.

    A file always ends a document. A single document longer than 4x the chunk size is cut at a line boundary
    (only pathological inputs have one; the alternative is unbounded memory).
    """
    index = 0
    for path in paths:
        stats.files.append(str(path))
        pending = ""
        fmt = ""
        undecodable = 0

        def on_file_bytes(n: int) -> None:
            stats.bytes_read += n
            if on_bytes is not None:
                on_bytes(n)

        for text, replaced_so_far in read_text_blocks(path, on_file_bytes):
            undecodable = replaced_so_far
            if not fmt:
                fmt = detect_format(text[:4096])
            pending += text
            while len(pending) >= chunk_chars:
                cut = _next_boundary(pending, chunk_chars, fmt)
                if cut < 0 and len(pending) >= 4 * chunk_chars:
                    cut = pending.rfind("\n") + 1
                if cut <= 0:
                    break  # the document goes on in the next block
                stats.chars += cut
                yield Chunk(index, pending[:cut], fmt, str(path))
                index += 1
                pending = pending[cut:]
        if undecodable:
            stats.undecodable_bytes[str(path)] = undecodable
        if pending.strip():
            stats.chars += len(pending)
            yield Chunk(index, pending, fmt or PLAIN, str(path))
            index += 1


_DOC_OPEN = re.compile(r"^<doc\b[^>]*>$")
_DOC_TITLE = re.compile(r'\btitle="([^"]*)"')


def parse_documents(text: str, fmt: str) -> list[list[str]]:
    """Split a chunk into documents, each a list of non-empty stripped lines."""
    if fmt == WIKIEXTRACTOR:
        return _parse_wikiextractor(text)
    docs: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


def _parse_wikiextractor(text: str) -> list[list[str]]:
    docs: list[list[str]] = []
    current: list[str] | None = None
    title: str | None = None
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if line.startswith("<doc") and _DOC_OPEN.match(line):
            if current:
                docs.append(current)
            m = _DOC_TITLE.search(line)
            current, title = [], (html.unescape(m.group(1)) if m else None)
            continue
        if line == "</doc>":
            if current:
                docs.append(current)
            current, title = None, None
            continue
        if current is None:  # text outside any <doc>: keep it as its own document rather than drop it
            current, title = [], None
        if title is not None and not current and line == title:
            continue  # WikiExtractor repeats the title as the first line; it is not a sentence
        current.append(line)
    if current:
        docs.append(current)
    return docs


def iter_corpus_lines(paths: list[Path], stats: CorpusStats | None = None) -> Iterator[str]:
    """Every non-empty line of every document, in order (what tokenizer training consumes)."""
    stats = stats if stats is not None else CorpusStats()
    for chunk in iter_chunks(paths, stats):
        for doc in parse_documents(chunk.text, chunk.fmt):
            yield from doc
