"""A demo pre-training corpus that is the same on every machine with this project installed: docstrings.

The CLI must be able to run its main job offline and without any corpus, so it falls back to English prose
that the install itself brings: the docstrings of the Python sources of a fixed, ordered list of
distributions that `pip install -c constraints.txt -e ".[all]"` installs at an exact, pinned version
(`DEMO_SOURCES`: PyTorch, pinned to 2.13.0). Its files are taken from the distribution's own file list
(RECORD), in sorted order, so nothing else installed on the machine can change the corpus. The Python
standard library is deliberately not used: its docstrings change between Python releases (3.11 and 3.12
differ), and so would the demo model. The extraction itself gives the same bytes on Python 3.11, 3.12 and
3.13 (checked on the pinned sources), and the result is fingerprinted: the cache file's name carries the
source versions, a JSON file beside it the SHA-256, and both are compared with `REFERENCE_CORPUS`, the build
of the pinned sources. A missing source is an error (there is nothing to build from; the message gives the
fix); another version is one warning line and the build goes on (the pipeline demo works the same, only
the corpus and so the demo model differ from the reference).

Sources are parsed with `ast`, never imported, so nothing runs and broken files are simply skipped. The
result is clearly labelled a demo corpus; real training data comes through --corpus.

Output format (what the corpus reader expects): UTF-8 text, one paragraph per line, a blank line between
documents. The docstrings of one module make one document (they share a topic, and docstring-sized
documents would pack into mostly-padding examples); paragraphs are re-flowed onto one line each.

Only prose is kept. The filters are deliberately simple line/paragraph heuristics:

* doctest blocks (``>>>`` / ``...``) and reST directives or comments (``.. note::``) are dropped up to the
  next blank line;
* reST/Sphinx field lists (``:param x:``) likewise, numpydoc ``name : type`` lines, numpydoc section
  headers with their underlines, and Google-style headers (``Args:``, ``Returns:`` ...);
* lines indented by 3+ columns (after the docstring's common indentation is removed) are code blocks,
  literal blocks or field bodies, so they are dropped;
* lines that are mostly punctuation, digits or symbols (underlines, tables) are dropped;
* inline reST markup (``:func:`x```, ````x````, ``*x*``) is reduced to its text;
* a paragraph survives only with at least 6 words, at least 70% ASCII letters among its non-space
  characters, at most 2% non-ASCII characters and nothing unprintable;
* identical paragraphs are written once (many docstrings repeat), and documents left empty are dropped.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import hashlib
import importlib.metadata
import json
import logging
import os
import re
import time
import warnings
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from electra.atomic import atomic_write_bytes, atomic_write_text
from electra.errors import InputError
from electra.logs import say

_LOGGER = "electra.demo_corpus"


@dataclass(frozen=True)
class PinnedSource:
    """A distribution whose docstrings make the demo corpus, at the exact version constraints.txt pins."""

    distribution: str
    version: str
    packages: tuple[str, ...]  # the top-level packages of the distribution that are read


# Read in this order; within one distribution, its files in sorted path order. Only exact pins qualify: torch
# is the one `.[all]` installs at an exact version (onnxruntime is pinned too, but has ~90 kB of docstrings
# and a different wheel, onnxruntime-gpu, on Linux x86_64).
DEMO_SOURCES: tuple[PinnedSource, ...] = (
    PinnedSource("torch", "2.13.0", ("functorch", "torch", "torchgen")),
)


@dataclass(frozen=True)
class ReferenceCorpus:
    sources: dict[str, str]
    bytes: int
    sha256: str


# The build of DEMO_SOURCES at their pinned versions with this extractor (the same on Python 3.11, 3.12 and
# 3.13): any build from these versions with a budget of at least `bytes` must give exactly these bytes.
# Change it only together with the extraction rules or the sources (tests/test_demo_corpus.py checks it).
REFERENCE_CORPUS = ReferenceCorpus(
    sources={"torch": "2.13.0"},
    bytes=2_602_455,
    sha256="b3315813c259ee17d80c74a72564059acc48d58a568aacb4c348460cffe9a9bc",
)
# Part of the cache file's name: bump it whenever the extraction rules change, so old caches are not reused.
CORPUS_FORMAT = "v2"


def _sources_text(sources: Iterable[PinnedSource]) -> str:
    return ", ".join(f"{source.distribution} {source.version}" for source in sources)


DEMO_CORPUS_LABEL = (
    f"demo corpus: docstrings of the pinned {_sources_text(DEMO_SOURCES)} sources (Python documentation, "
    "not real training data; pass --corpus for that)"
)
DEFAULT_MAX_BYTES = 20_000_000

# Directories that hold test suites or caches.
_SKIP_DIRS = frozenset({"test", "tests", "__pycache__"})
# Multi-megabyte .py files are generated tables or vendored bundles: slow to parse, no prose.
_MAX_FILE_BYTES = 4_000_000
_MIN_WORDS = 6
_MIN_LETTER_SHARE = 0.7
_MAX_NON_ASCII_SHARE = 0.02
# Indentation (after the docstring's common indent is removed) from which a line is code or a field body;
# 1-2 columns are bullet-list continuations, which are prose.
_CODE_INDENT = 3
# Files per task sent to a worker: big enough to amortise pickling, small enough that stopping at
# max_bytes wastes little work.
_CHUNK_FILES = 16

_GOOGLE_HEADER_RE = re.compile(
    r"(Args|Arguments|Attributes|Example|Examples|Keyword Args|Keyword Arguments|Methods|Note|Notes|"
    r"Other Parameters|Parameters|Params|Raise|Raises|References|Return|Returns|See Also|Shape|Todo|"
    r"Usage|Warning|Warnings|Warns|Yield|Yields)\s*:",
    re.IGNORECASE,
)
_FIELD_RE = re.compile(r":[^\s:`][^:`]*:(\s|$)")
_NUMPYDOC_PARAM_RE = re.compile(r"\*{0,2}[A-Za-z_][\w.]*(\s*,\s*\*{0,2}[A-Za-z_][\w.]*)*\s+:(\s|$)")
_BULLET_RE = re.compile(r"([-*+•]|\d{1,2}[.)]|#\.)\s+")
_UNDERLINE_RE = re.compile(r"([-=~^*+#`'\".:_])\1{2,}\s*")
_ROLE_RE = re.compile(r":[\w.+-]+(?::[\w.+-]+)*:`([^`]*)`")
# A role whose closing backtick sat on a dropped (indented) line.
_ROLE_PREFIX_RE = re.compile(r":[\w.+-]+(?::[\w.+-]+)*:`")
_LITERAL_RE = re.compile(r"``([^`]*)``")
_INTERPRETED_RE = re.compile(r"`([^`]*)`(__?)?")
_STRONG_RE = re.compile(r"\*\*([^*]+)\*\*")
_EMPHASIS_RE = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")
_FOOTNOTE_RE = re.compile(r"\s*\[[\w#*]+\]_")
_SPACE_RE = re.compile(r"\s+")
_NON_LETTER_BYTES = bytes(b for b in range(256) if not chr(b).isascii() or not chr(b).isalpha())
_WHITESPACE_BYTES = b" \t\n\r\x0b\x0c"


@dataclass(frozen=True)
class DemoCorpusStats:
    files_scanned: int
    files_used: int  # files that contributed at least one document
    documents: int
    paragraphs: int
    bytes: int  # UTF-8 bytes written
    seconds: float
    sha256: str = ""  # of the bytes written


# ---------------------------------------------------------------------------------------------------------
# Source files


def _py_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        found.extend(Path(dirpath, name) for name in filenames if name.endswith(".py"))
    return sorted(found)


def _base_version(version: str) -> str:
    """ "2.13.0+cpu" -> "2.13.0": the CPU and CUDA wheels of one release carry the same Python sources."""
    return version.split("+", 1)[0]


@dataclass(frozen=True)
class SourceCheck:
    """What is installed of one pinned source."""

    source: PinnedSource
    installed: str | None  # the installed version; None when the distribution is missing

    @property
    def matches(self) -> bool:
        return self.installed is not None and _base_version(self.installed) == self.source.version

    def warning(self) -> str:
        """One line for a source installed at another version than the pin."""
        s = self.source
        return (
            f"the demo corpus is pinned to {s.distribution} {s.version} (constraints.txt) but "
            f"{s.distribution} {self.installed} is installed: the corpus, and so the demo model, will differ "
            f"from the reference (pip install {s.distribution}=={s.version} to match)"
        )


def check_sources() -> list[SourceCheck]:
    """The installed version of each of DEMO_SOURCES (nothing is imported)."""
    checks = []
    for source in DEMO_SOURCES:
        try:
            installed: str | None = importlib.metadata.version(source.distribution)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        checks.append(SourceCheck(source, installed))
    return checks


def _missing_error(source: PinnedSource) -> InputError:
    return InputError(
        f"the demo corpus is made of the docstrings of {source.distribution} {source.version}, which is not "
        f"installed: pip install {source.distribution}=={source.version} (the train extra brings it), "
        "or pass --corpus"
    )


def _path_key(relative: str) -> tuple[str, ...]:
    return tuple(relative.split("/"))


def _distribution_files(source: PinnedSource) -> list[Path]:
    """The .py files of `source`'s packages, from its RECORD (so never another distribution's), sorted."""
    try:
        dist = importlib.metadata.distribution(source.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise _missing_error(source) from None
    listed = dist.files
    if listed is None:  # no RECORD (some system packagers drop it): walk the packages' directories instead
        root = Path(str(dist.locate_file("")))
        found = [path for package in source.packages for path in _py_files(root / package)]
        return sorted(found, key=lambda path: _path_key(path.relative_to(root).as_posix()))
    relative = set()
    for entry in listed:
        parts = entry.parts
        if (
            entry.suffix == ".py"
            and len(parts) > 1
            and parts[0] in source.packages
            and not _SKIP_DIRS.intersection(parts[1:-1])
            and not any(part.startswith(".") for part in parts)
        ):
            relative.add("/".join(parts))
    return [Path(str(dist.locate_file(rel))) for rel in sorted(relative, key=_path_key)]


def iter_source_files() -> list[Path]:
    """All .py files to scan, in a deterministic order: each of DEMO_SOURCES in turn, its files sorted.

    Raises InputError when a source is not installed. Nothing else on sys.path or in site-packages counts.
    """
    return [path for source in DEMO_SOURCES for path in _distribution_files(source)]


# ---------------------------------------------------------------------------------------------------------
# Docstring -> paragraphs


def _strip_markup(text: str) -> str:
    def role(match: re.Match[str]) -> str:
        inner = match.group(1).strip()
        if inner.endswith(">") and "<" in inner:  # :ref:`title <target>` reads as its title
            inner = inner[: inner.index("<")].strip()
        if inner.startswith("~"):  # :class:`~a.b.C` renders as C
            inner = inner[1:].rsplit(".", 1)[-1]
        return inner.lstrip("!")

    text = _ROLE_PREFIX_RE.sub("", _ROLE_RE.sub(role, text))
    text = _LITERAL_RE.sub(r"\1", text)
    text = _INTERPRETED_RE.sub(r"\1", text)
    text = _STRONG_RE.sub(r"\1", text)
    text = _EMPHASIS_RE.sub(r"\1", text)
    # Backticks still left are unbalanced markup, never prose.
    return _FOOTNOTE_RE.sub("", text).replace("`", "")


def _letter_counts(text: str) -> tuple[int, int, int]:
    """(ASCII letters, non-space characters, non-ASCII characters), counted at C speed via bytes."""
    ascii_bytes = text.encode("ascii", errors="ignore")
    letters = len(ascii_bytes.translate(None, _NON_LETTER_BYTES))
    visible = len(text) - len(ascii_bytes) + len(ascii_bytes.translate(None, _WHITESPACE_BYTES))
    return letters, visible, len(text) - len(ascii_bytes)


def _is_prose(text: str) -> bool:
    # Prose *about* doctest prompts still looks like a doctest to a reader of the corpus: drop it too.
    if len(text.split()) < _MIN_WORDS or not text.isprintable() or ">>>" in text:
        return False
    letters, visible, non_ascii = _letter_counts(text)
    return letters >= _MIN_LETTER_SHARE * visible and non_ascii <= _MAX_NON_ASCII_SHARE * len(text)


def _is_symbol_line(line: str) -> bool:
    letters, visible, _ = _letter_counts(line)
    return letters < 0.5 * visible


def _docstring_paragraphs(doc: str) -> list[str]:
    lines = doc.splitlines()
    paragraphs: list[str] = []
    current: list[str] = []
    skipping = False  # inside a doctest, directive or field list, which all run to the next blank line

    def flush() -> None:
        if current:
            text = _SPACE_RE.sub(" ", _strip_markup(" ".join(current))).strip()
            if _is_prose(text):
                paragraphs.append(text)
            current.clear()

    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        if not line:
            flush()
            skipping = False
            continue
        if skipping:
            continue
        indent = len(raw) - len(raw.lstrip())
        if indent >= _CODE_INDENT:
            flush()
            continue
        if line.startswith((">>>", "...", ".. ")) or line == ".." or _FIELD_RE.match(line):
            flush()
            skipping = True
            continue
        if i < len(lines) and _UNDERLINE_RE.fullmatch(lines[i].strip()):
            # A numpydoc/reST section title: drop it and its underline.
            flush()
            i += 1
            continue
        if (
            _GOOGLE_HEADER_RE.match(line)
            or _NUMPYDOC_PARAM_RE.match(line)
            or line.startswith(("|", "+"))  # reST grid and line tables
            or _is_symbol_line(line)
        ):
            flush()
            continue
        bullet = _BULLET_RE.match(line)
        if bullet:
            flush()
            line = line[bullet.end() :]
        if line.endswith("::"):
            # reST "text::" introduces a literal block (dropped as indented) and renders as "text:".
            line = line[:-2].rstrip() + ":" if not line[:-2].endswith(" ") else line[:-2].rstrip()
        current.append(line)
    flush()
    return paragraphs


# Statement-list fields through which definitions can nest (e.g. inside `if TYPE_CHECKING:` or `try:`).
_BODY_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")
_body_fields_cache: dict[type, tuple[str, ...]] = {}


def _body_fields(node_type: type) -> tuple[str, ...]:
    fields = _body_fields_cache.get(node_type)
    if fields is None:
        # Lambda and IfExp also have a `body`, but an expression, never reached from statement lists.
        fields = tuple(f for f in _BODY_FIELDS if f in node_type._fields)  # type: ignore[attr-defined]
        _body_fields_cache[node_type] = fields
    return fields


def _docstring_owners(tree: ast.Module) -> Iterator[ast.AST]:
    """The module, then each class/function at any depth, in source order (walks statements only)."""
    yield tree
    stack: list[Iterator[ast.AST]] = [iter(tree.body)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        fields = _body_fields(type(node))
        if fields:
            children = [child for f in fields for child in getattr(node, f)]
            if children:
                stack.append(iter(children))


def extract_documents(source: str) -> list[list[str]]:
    """Python source -> documents (one per docstring, each a list of one-line paragraphs). Never raises."""
    gc_was_enabled = gc.isenabled()
    try:
        # A syntax tree holds no reference cycles, but building one triggers many collections that only
        # re-scan it: pausing the cyclic GC makes parsing ~20% faster.
        gc.disable()
        with warnings.catch_warnings():
            # Old files trip invalid-escape and similar warnings; they say nothing about the prose.
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return []
    finally:
        if gc_was_enabled:
            gc.enable()
    documents: list[list[str]] = []
    for node in _docstring_owners(tree):
        doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
        if doc:
            paragraphs = _docstring_paragraphs(doc)
            if paragraphs:
                documents.append(paragraphs)
    return documents


def _scan_file(path: Path) -> list[list[str]]:
    """Worker: one file's documents; unreadable or oversized files give none."""
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    if b'"""' not in data and b"'''" not in data:
        # A third of the files (by count; a tenth by size) have no triple-quoted string at all, hence at
        # most one-line docstrings, which are too short for the prose filter anyway: skip the parse.
        return []
    return extract_documents(data.decode("utf-8", errors="replace"))


# ---------------------------------------------------------------------------------------------------------
# Build


class _CorpusText:
    """The documents kept so far: paragraphs deduplicated in file order, stopping at `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.seen: set[str] = set()
        self.documents: list[str] = []
        self.size = self.files_scanned = self.files_used = self.paragraphs = 0
        self.full = False

    def add_file(self, file_documents: list[list[str]]) -> None:
        """Add one file's docstrings as one document (what is new and still fits); sets `full` at the limit.

        A module's docstrings make one document: they share a topic, and docstring-sized documents would give
        pre-training examples of ~40 tokens, mostly padding.
        """
        self.files_scanned += 1
        kept: list[str] = []
        for paragraph in (paragraph for document in file_documents for paragraph in document):
            if paragraph in self.seen:
                continue
            # The blank line between documents is paid by a document's first paragraph.
            cost = len(paragraph.encode("utf-8")) + 1 + (1 if self.documents and not kept else 0)
            if self.size + cost > self.max_bytes:
                self.full = True
                break
            self.seen.add(paragraph)
            kept.append(paragraph)
            self.size += cost
        if kept:
            self.documents.append("\n".join(kept) + "\n")
            self.paragraphs += len(kept)
            self.files_used += 1

    def encode(self) -> bytes:
        return "\n".join(self.documents).encode("utf-8")


@contextmanager
def _scanned(files: list[Path], workers: int) -> Iterator[Iterable[list[list[str]]]]:
    """Each file's documents, in file order, parsed by `workers` processes."""
    if workers == 1:
        yield map(_scan_file, files)
        return
    # Spawned, not forked (like prepare's pool): a fork copies whatever locks the parent's other threads hold
    # at that instant (ONNX Runtime's pools, a logging listener in a long-lived process), and a child that
    # inherits a held lock waits forever.
    executor = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        # map yields in submission order whatever the scheduling, which keeps the output byte-identical.
        yield executor.map(_scan_file, files, chunksize=_CHUNK_FILES)
    finally:
        # Stopping at max_bytes leaves queued files unparsed; there is no point waiting for them.
        executor.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _progress_bar(files: int, enabled: bool) -> Iterator[Any]:
    """Progress over the files on stderr (electra.progress: a bar on a terminal, a line now and then
    elsewhere), or None when disabled.

    Enter it after the workers are started: tqdm's monitor thread must not be running at fork time.
    """
    if not enabled:
        yield None
        return
    from electra.progress import progress

    with progress(files, "demo corpus", "file") as bar:
        yield bar


def build_demo_corpus(
    out_path: Path, max_bytes: int = DEFAULT_MAX_BYTES, workers: int | None = None, progress: bool = False
) -> DemoCorpusStats:
    """Write the demo corpus to `out_path` (atomically) and return what went into it.

    Files are parsed in parallel but consumed in file order, and deduplication happens in that order, so
    the bytes written do not depend on `workers`. Writing stops at the last paragraph that fits in
    `max_bytes`.
    """
    start = time.perf_counter()
    files = iter_source_files()
    workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
    corpus = _CorpusText(max_bytes)
    with _scanned(files, workers) as results, _progress_bar(len(files), progress) as bar:
        for file_documents in results:
            corpus.add_file(file_documents)
            if bar is not None:
                bar.update(1)
                # The size so far, not "of max_bytes": the docstrings run out well before the cap.
                bar.set_postfix_str(f"{corpus.size / 1e6:.1f} MB", refresh=False)
            if corpus.full:
                break
    data = corpus.encode()
    atomic_write_bytes(Path(out_path), data)
    return DemoCorpusStats(
        files_scanned=corpus.files_scanned,
        files_used=corpus.files_used,
        documents=len(corpus.documents),
        paragraphs=corpus.paragraphs,
        bytes=len(data),
        seconds=time.perf_counter() - start,
        sha256=hashlib.sha256(data).hexdigest(),
    )


@dataclass(frozen=True)
class CorpusFingerprint:
    """What a demo corpus was built from and what came out: saved as JSON beside the cached corpus."""

    sources: dict[str, str]  # distribution -> installed version
    bytes: int
    sha256: str
    max_bytes: int

    def line(self) -> str:
        """One line: the fingerprint and how it compares with REFERENCE_CORPUS."""
        sources = ", ".join(f"{name} {version}" for name, version in self.sources.items())
        return (
            f"demo corpus fingerprint: {sources}; {self.bytes:,} bytes, sha256 {self.sha256[:16]} "
            f"({self.verdict()})"
        )

    def verdict(self) -> str:
        ref = REFERENCE_CORPUS
        if {name: _base_version(version) for name, version in self.sources.items()} != ref.sources:
            return "other source versions than the pinned ones: not the reference corpus"
        if self.max_bytes < ref.bytes:
            return f"a cut of the reference corpus, which is {ref.bytes:,} bytes"
        if self.sha256 == ref.sha256:
            return "identical to the reference corpus"
        return (
            f"DIFFERS from the reference corpus (sha256 {ref.sha256[:16]}) built from the same versions: "
            "the installed source files are not the released ones"
        )


def _read_fingerprint(corpus: Path) -> CorpusFingerprint | None:
    """The saved fingerprint of a cached corpus, or None when it is missing or does not match the file."""
    try:
        saved = json.loads(corpus.with_suffix(".json").read_text(encoding="utf-8"))
        fingerprint = CorpusFingerprint(
            sources=dict(saved["sources"]),
            bytes=int(saved["bytes"]),
            sha256=str(saved["sha256"]),
            max_bytes=int(saved["max_bytes"]),
        )
        data = corpus.read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if saved.get("format") != CORPUS_FORMAT or hashlib.sha256(data).hexdigest() != fingerprint.sha256:
        return None
    return fingerprint


def cached_demo_corpus(cache_dir: Path, progress: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """The demo corpus in `cache_dir`, built there once per source versions and size; announced on stderr
    with its fingerprint. InputError when a pinned source is missing; one warning line per other version."""
    say(_LOGGER, f"using the {DEMO_CORPUS_LABEL}")
    checks = check_sources()
    for check in checks:
        if check.installed is None:
            raise _missing_error(check.source)
        if not check.matches:
            say(_LOGGER, check.warning(), logging.WARNING)
    sources = {check.source.distribution: str(check.installed) for check in checks}
    tag = "-".join(f"{name}-{_base_version(version)}" for name, version in sources.items())
    size = f"-{max_bytes // 1_000_000}mb" if max_bytes != DEFAULT_MAX_BYTES else ""
    path = cache_dir / f"demo-corpus-{CORPUS_FORMAT}-{tag}{size}.txt"
    fingerprint = _read_fingerprint(path) if path.is_file() else None
    if fingerprint is None:
        try:
            stats = build_demo_corpus(path, max_bytes=max_bytes, progress=progress)
            fingerprint = CorpusFingerprint(sources, stats.bytes, stats.sha256, max_bytes)
            saved = {"format": CORPUS_FORMAT, **dataclasses.asdict(fingerprint)}
            atomic_write_text(path.with_suffix(".json"), json.dumps(saved, indent=2) + "\n")
        except OSError as e:
            raise InputError(
                f"cannot write the demo corpus to {path} ({e}); set ELECTRA_CACHE to a writable dir"
            ) from e
        say(
            _LOGGER,
            f"built the demo corpus {path}: {stats.documents:,} documents, {stats.bytes / 1e6:.1f} MB "
            f"in {stats.seconds:.0f} s",
        )
    say(_LOGGER, fingerprint.line())
    return path
