"""Tests for the embedded demo corpus (docstrings of the pinned PyTorch sources)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import site
import sysconfig
from pathlib import Path

import pytest

from electra.errors import InputError
from electra.training.data import demo_corpus
from electra.training.data.demo_corpus import (
    CORPUS_FORMAT,
    DEMO_CORPUS_LABEL,
    DEMO_SOURCES,
    REFERENCE_CORPUS,
    DemoCorpusStats,
    PinnedSource,
    build_demo_corpus,
    cached_demo_corpus,
    check_sources,
    extract_documents,
    iter_source_files,
)

ROOT = Path(__file__).resolve().parents[1]
# The pinned sources are what this environment has (the README's install gives exactly them).
PINNED = all(check.matches for check in check_sources())
needs_pinned = pytest.mark.skipif(not PINNED, reason="the pinned demo corpus sources are not installed")

SYNTHETIC_MODULE = '''\
"""Module summary line that is long enough to keep.

This paragraph is wrapped
across three lines of the
module docstring on purpose.

>>> print("a doctest that must vanish entirely")
a doctest that must vanish entirely
... continuation of the doctest block

.. note::
   A directive body that must not appear anywhere.

:param x: a field list entry that is long enough to count
:returns: another field list entry that is long enough too

The values are listed below for reference purposes only.
12345 67890 13579 24680

You can use the function in your own code like this::

    result = compute(1, 2, 3)
    print(result)

- first bullet item has enough words in it
  and continues on the next line

The word café appears once in this fairly long English sentence about coffee.
"""

import os


class Widget:
    """A widget class docstring with enough words in it.

    Parameters
    ----------
    size : int
        The size of the widget in pixels, which must be positive.
    name, label : str, optional
        Names of the widget, used when it is displayed to people.

    Notes
    -----
    Widgets are rendered lazily, so creating many of them is cheap.

    Example::

        w = Widget(3)
        w.render()
    """

    def method(self):
        """Short."""

    async def fetch(self):
        """Fetch the remote widget state over the network.

        Args:
            timeout: seconds to wait before giving up on the request.

        Returns:
            The state dictionary, exactly as the server sent it back.
        """


def outer():
    """日本語のテキストはここにあります。これは英語ではありません。とても長い文章です。"""

    def inner():
        """Inner functions contribute documents in source order too, after their parents."""


if os.name:

    def conditional():
        """Definitions under an if statement are found as well, like all the others."""


def markup():
    """Compute it.

    ====== ======
    1.0    2.0
    ====== ======

    Returns ``value`` via :func:`~pkg.mod.compute` and :class:`Thing <pkg.Thing>` in *place*.
    """
'''

EXPECTED_DOCUMENTS = [
    [
        "Module summary line that is long enough to keep.",
        "This paragraph is wrapped across three lines of the module docstring on purpose.",
        "The values are listed below for reference purposes only.",
        "You can use the function in your own code like this:",
        "first bullet item has enough words in it and continues on the next line",
        "The word café appears once in this fairly long English sentence about coffee.",
    ],
    [
        "A widget class docstring with enough words in it.",
        "Widgets are rendered lazily, so creating many of them is cheap.",
    ],
    ["Fetch the remote widget state over the network."],
    ["Inner functions contribute documents in source order too, after their parents."],
    ["Definitions under an if statement are found as well, like all the others."],
    ["Returns value via compute and Thing in place."],
]


def _doc(*paragraphs: str) -> str:
    return '"""' + "\n\n".join(paragraphs) + '\n"""\n'


P1 = "The first paragraph of the first module talks about parsing files."
P2 = "The second paragraph of the first\nmodule is wrapped over two lines."
P2_FLOWED = "The second paragraph of the first module is wrapped over two lines."
P3 = "A function docstring that joins its module's document in the corpus."
P4 = "A brand new paragraph in the second module that nobody has seen before."


@pytest.fixture
def synthetic_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    src = tmp_path / "src"
    src.mkdir()
    a = src / "a.py"
    a.write_text(_doc(P1, P2) + f"\n\ndef f():\n    {_doc(P3).strip()}\n", encoding="utf-8")
    b = src / "b.py"  # repeats P1, which must not be written twice
    b.write_text(_doc(P1, P4), encoding="utf-8")
    missing = src / "missing.py"
    a_directory = src / "dir.py"
    a_directory.mkdir()
    broken = src / "broken.py"
    broken.write_text('"""Never parsed because of the syntax error below it."""\ndef f(:\n', encoding="utf-8")
    latin1 = src / "latin1.py"  # not valid UTF-8: decoded with replacement characters, still parsed
    latin1.write_bytes(
        b"# caf\xe9\n" + _doc("This module was saved in latin-1 but its docstring is plain ASCII.").encode()
    )
    files = [a, b, missing, a_directory, broken, latin1]
    monkeypatch.setattr(demo_corpus, "iter_source_files", lambda: list(files))
    return files


def _assert_well_formed(text: str) -> None:
    assert text.endswith("\n") and not text.startswith("\n")
    assert "\n\n\n" not in text, "a document separator must be exactly one blank line"
    for line in text.split("\n")[:-1]:
        if line:
            assert ">>>" not in line and "\r" not in line and line == line.strip()
            assert len(line.split()) >= 6, line


# ---------------------------------------------------------------------------------------------------------
# extract_documents


def test_extract_documents_keeps_exactly_the_prose() -> None:
    assert extract_documents(SYNTHETIC_MODULE) == EXPECTED_DOCUMENTS


@pytest.mark.parametrize(
    "source",
    [
        'def f(:\n    """Looks like a docstring but the file does not parse at all."""\n',
        'print "python 2 source with a docstring that cannot be parsed now"\n',
        '"""A docstring followed by a NUL byte in the source code file."""\nx = 1\0\n',
        "x" + "+1" * 200_000,  # RecursionError while building the tree
        "-" * 200_000 + "1",  # MemoryError (parser stack overflow)
        '"""A lone surrogate \ud800 cannot even be encoded for the parser."""',
        "",
    ],
    ids=["syntax-error", "python2", "nul-byte", "recursion", "memory", "surrogate", "empty"],
)
def test_extract_documents_never_raises_on_bad_input(source: str) -> None:
    assert extract_documents(source) == []


def test_extract_documents_reflows_and_collapses_whitespace() -> None:
    source = _doc("Wrapped   lines with\t\nirregular    spacing\tare joined\ninto one single line.  ")
    assert extract_documents(source) == [
        ["Wrapped lines with irregular spacing are joined into one single line."]
    ]


def test_extract_documents_drops_documents_without_prose() -> None:
    source = _doc("Short.", ">>> 1 + 1\n2") + "\ndef f():\n    '''x = compute(a, b) + 1 * 2 / 3'''\n"
    assert extract_documents(source) == []


def test_extract_documents_on_real_stdlib_module_reads_as_prose() -> None:
    path = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"
    documents = extract_documents(path.read_text(encoding="utf-8"))
    assert len(documents) >= 5
    for document in documents:
        for paragraph in document:
            assert "\n" not in paragraph and ">>>" not in paragraph
            assert len(paragraph.split()) >= 6


# ---------------------------------------------------------------------------------------------------------
# iter_source_files


def test_iter_source_files_are_the_pinned_distributions_files_in_sorted_order() -> None:
    files = iter_source_files()
    assert files == iter_source_files()
    dist = importlib.metadata.distribution("torch")
    root = Path(str(dist.locate_file("")))
    relative = [path.relative_to(root).as_posix() for path in files]
    assert relative == sorted(relative, key=lambda rel: tuple(rel.split("/")))
    assert all(rel.endswith(".py") for rel in relative)
    assert {rel.split("/")[0] for rel in relative} == set(DEMO_SOURCES[0].packages)
    assert not any({"test", "tests", "__pycache__"} & set(rel.split("/")[:-1]) for rel in relative)
    assert "torch/nn/modules/module.py" in relative
    # Only files the distribution itself installed (its RECORD): nothing else in site-packages.
    recorded = {entry.as_posix() for entry in dist.files or []}
    assert set(relative) <= recorded


def test_pinned_sources_are_the_pins_of_constraints_txt() -> None:
    constraints = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    for source in DEMO_SOURCES:
        assert re.search(
            rf"^{re.escape(source.distribution)}=={re.escape(source.version)}$", constraints, re.M
        )
    assert REFERENCE_CORPUS.sources == {source.distribution: source.version for source in DEMO_SOURCES}


def _fake_site(root: Path) -> Path:
    """A site directory holding an unrelated installed package, with docstrings and a RECORD."""
    package = root / "zz_unrelated_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        _doc("An unrelated package whose docstrings must never reach the demo corpus at all."),
        encoding="utf-8",
    )
    info = root / "zz_unrelated_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-unrelated-pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("zz_unrelated_pkg/__init__.py,,\nzz_unrelated_pkg-1.0.dist-info/RECORD,,\n")
    (info / "top_level.txt").write_text("zz_unrelated_pkg\n")
    return root


def test_other_installed_packages_do_not_change_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = build_demo_corpus(tmp_path / "before.txt", max_bytes=200_000, workers=1)
    extra = _fake_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(extra))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(extra), *site.getsitepackages()])
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"stdlib": str(extra), "purelib": str(extra)})
    assert importlib.metadata.version("zz-unrelated-pkg") == "1.0"  # it is installed, as far as Python knows
    assert not any(path.is_relative_to(extra) for path in iter_source_files())
    after = build_demo_corpus(tmp_path / "after.txt", max_bytes=200_000, workers=1)
    assert (tmp_path / "before.txt").read_bytes() == (tmp_path / "after.txt").read_bytes()
    assert before.sha256 == after.sha256
    assert b"unrelated package" not in (tmp_path / "after.txt").read_bytes()


def test_a_missing_source_is_one_input_error_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = PinnedSource("electra-no-such-distribution", "1.2.3", ("electra_no_such_distribution",))
    monkeypatch.setattr(demo_corpus, "DEMO_SOURCES", (missing,))
    expected = (
        r"electra-no-such-distribution 1\.2\.3, which is not installed: pip install .*==1\.2\.3.*--corpus"
    )
    with pytest.raises(InputError, match=expected):
        build_demo_corpus(tmp_path / "corpus.txt", workers=1)
    with pytest.raises(InputError, match=expected):
        cached_demo_corpus(tmp_path / "cache")
    assert not (tmp_path / "corpus.txt").exists() and not (tmp_path / "cache").exists()


# ---------------------------------------------------------------------------------------------------------
# build_demo_corpus on synthetic sources


def test_build_writes_documents_deduplicated_and_separated(
    synthetic_files: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "out" / "corpus.txt"
    stats = build_demo_corpus(out, workers=1)
    text = out.read_text(encoding="utf-8")
    assert text == (
        f"{P1}\n{P2_FLOWED}\n{P3}\n\n{P4}\n\n"
        "This module was saved in latin-1 but its docstring is plain ASCII.\n"
    )
    _assert_well_formed(text)
    assert isinstance(stats, DemoCorpusStats)
    assert (stats.files_scanned, stats.files_used, stats.documents, stats.paragraphs) == (6, 3, 3, 5)
    assert stats.bytes == len(text.encode("utf-8")) == out.stat().st_size
    assert stats.seconds >= 0


def test_build_is_identical_whatever_the_number_of_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for i in range(80):
        path = src / f"m{i:03d}.py"
        # Every third module repeats an earlier paragraph, so dedup order matters.
        paragraphs = [f"Module number {i} explains how the number {i} is used in this synthetic package."]
        paragraphs.append(f"Shared paragraph number {i % 7} appears in several modules of the package.")
        path.write_text(_doc(*paragraphs) + f"\ndef f{i}():\n    {_doc(paragraphs[0] + ' Again.').strip()}\n")
        files.append(path)
    monkeypatch.setattr(demo_corpus, "iter_source_files", lambda: list(files))
    one = build_demo_corpus(tmp_path / "one.txt", workers=1)
    two = build_demo_corpus(tmp_path / "two.txt", workers=2)
    assert (tmp_path / "one.txt").read_bytes() == (tmp_path / "two.txt").read_bytes()
    assert (one.documents, one.paragraphs, one.bytes) == (two.documents, two.paragraphs, two.bytes)
    assert one.paragraphs == 80 + 7 + 80


def test_build_respects_max_bytes_at_a_paragraph_boundary(
    synthetic_files: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "corpus.txt"
    budget = len(f"{P1}\n{P2_FLOWED}\n{P3}\n") - 1  # one byte short of fitting P3
    stats = build_demo_corpus(out, max_bytes=budget, workers=1)
    assert out.read_text(encoding="utf-8") == f"{P1}\n{P2_FLOWED}\n"
    assert stats.bytes <= budget and stats.documents == 1 and stats.files_scanned == 1


def test_build_progress_bar_goes_to_stderr(
    synthetic_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_demo_corpus(tmp_path / "corpus.txt", workers=1, progress=True)
    captured = capsys.readouterr()
    assert "demo corpus" in captured.err and captured.out == ""


def test_failed_scan_leaves_no_file(
    synthetic_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_scan = demo_corpus._scan_file
    calls = []

    def scan_then_fail(path: Path) -> list[list[str]]:
        calls.append(path)
        if len(calls) == 3:
            raise RuntimeError("simulated crash mid-build")
        return real_scan(path)

    monkeypatch.setattr(demo_corpus, "_scan_file", scan_then_fail)
    out = tmp_path / "corpus.txt"
    with pytest.raises(RuntimeError, match="mid-build"):
        build_demo_corpus(out, workers=1)
    assert not out.exists()


def test_failed_write_keeps_the_old_file_and_no_temporary(
    synthetic_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "corpus.txt"
    out.write_text("previous corpus\n", encoding="utf-8")

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError("simulated disk failure at the final rename")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="final rename"):
        build_demo_corpus(out, workers=1)
    assert out.read_text(encoding="utf-8") == "previous corpus\n"
    assert sorted(p.name for p in out_dir.iterdir()) == ["corpus.txt"]

    monkeypatch.undo()
    missing = out_dir / "new.txt"
    monkeypatch.setattr(demo_corpus, "iter_source_files", lambda: list(synthetic_files))
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        build_demo_corpus(missing, workers=1)
    assert not missing.exists()


# ---------------------------------------------------------------------------------------------------------
# cached_demo_corpus: built once per source versions and size, fingerprinted, then reused


def _torch_tag() -> str:
    return "torch-" + importlib.metadata.version("torch").split("+")[0]


def test_cache_builds_once_then_reuses(
    synthetic_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    cache = tmp_path / "cache"
    path = cached_demo_corpus(cache)
    assert path == cache / f"demo-corpus-{CORPUS_FORMAT}-{_torch_tag()}.txt", (
        "the default size is not in the name"
    )
    first = capsys.readouterr()
    assert first.out == ""
    assert f"using the {DEMO_CORPUS_LABEL}" in first.err
    assert f"built the demo corpus {path}: 3 documents" in first.err
    built = path.read_bytes()
    assert built.startswith(P1.encode())
    sha = hashlib.sha256(built).hexdigest()
    saved = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["sha256"] == sha and saved["bytes"] == len(built) and saved["format"] == CORPUS_FORMAT
    assert saved["sources"] == {"torch": importlib.metadata.version("torch")}
    installed = importlib.metadata.version("torch")
    assert f"demo corpus fingerprint: torch {installed}; {len(built):,} bytes, " in first.err
    assert f"sha256 {sha[:16]}" in first.err

    def no_rebuild(*args: object, **kwargs: object) -> DemoCorpusStats:
        raise AssertionError("the cached corpus was rebuilt")

    monkeypatch.setattr(demo_corpus, "build_demo_corpus", no_rebuild)
    assert cached_demo_corpus(cache) == path and path.read_bytes() == built
    again = capsys.readouterr()
    assert f"using the {DEMO_CORPUS_LABEL}" in again.err and "built the demo corpus" not in again.err
    assert f"sha256 {sha[:16]}" in again.err, "the fingerprint is printed on reuse too"

    monkeypatch.undo()
    monkeypatch.setattr(demo_corpus, "iter_source_files", lambda: list(synthetic_files))
    small = cached_demo_corpus(cache, max_bytes=3_000_000)
    assert small != path and small.name.endswith("-3mb.txt") and small.read_bytes() == built


def test_cache_rebuilds_a_corpus_that_does_not_match_its_fingerprint(
    synthetic_files: list[Path], tmp_path: Path, capsys
) -> None:
    path = cached_demo_corpus(tmp_path)
    built = path.read_bytes()
    path.write_bytes(built[:-10])  # truncated (a full disk, a stray edit)
    capsys.readouterr()
    assert cached_demo_corpus(tmp_path) == path and path.read_bytes() == built
    assert "built the demo corpus" in capsys.readouterr().err
    path.with_suffix(".json").write_text("{not json", encoding="utf-8")
    assert cached_demo_corpus(tmp_path) == path and path.read_bytes() == built
    assert "built the demo corpus" in capsys.readouterr().err


def test_another_source_version_is_one_warning_line_and_still_builds(
    synthetic_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(demo_corpus, "DEMO_SOURCES", (PinnedSource("torch", "0.0.1", ("torch",)),))
    reference = dataclasses.replace(REFERENCE_CORPUS, sources={"torch": "0.0.1"})
    monkeypatch.setattr(demo_corpus, "REFERENCE_CORPUS", reference)
    installed = importlib.metadata.version("torch")
    path = cached_demo_corpus(tmp_path)
    assert path.is_file() and _torch_tag() in path.name
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: the demo corpus is pinned to torch 0.0.1 (constraints.txt) but torch {installed} is "
        "installed: the corpus, and so the demo model, will differ from the reference (pip install "
        "torch==0.0.1 to match)"
    ]
    assert "not the reference corpus" in err


def test_unwritable_cache_is_one_clear_input_error(synthetic_files: list[Path], tmp_path: Path) -> None:
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file where the cache directory should be\n", encoding="utf-8")
    expected = r"cannot write the demo corpus to .*; set ELECTRA_CACHE to a writable dir"
    with pytest.raises(InputError, match=expected):
        cached_demo_corpus(not_a_dir)


# ---------------------------------------------------------------------------------------------------------
# build_demo_corpus on the real pinned sources


def test_real_build_is_small_prose_and_deterministic(tmp_path: Path) -> None:
    max_bytes = 300_000
    one = build_demo_corpus(tmp_path / "one.txt", max_bytes=max_bytes, workers=1)
    two = build_demo_corpus(tmp_path / "two.txt", max_bytes=max_bytes, workers=2)
    data = (tmp_path / "one.txt").read_bytes()
    assert data == (tmp_path / "two.txt").read_bytes()
    assert 0 < len(data) <= max_bytes and one.bytes == two.bytes == len(data)
    assert one.sha256 == two.sha256 == hashlib.sha256(data).hexdigest()
    # PyTorch has well over 300 kB of docstrings, so the budget is nearly filled.
    assert len(data) > max_bytes * 0.9
    assert one.files_used <= one.files_scanned < len(iter_source_files())
    text = data.decode("utf-8")
    _assert_well_formed(text)
    lines = [line for line in text.split("\n") if line]
    assert len(set(lines)) == len(lines), "paragraphs are deduplicated"
    letters = sum(ch.isascii() and ch.isalpha() for ch in text)
    assert letters > 0.75 * len(text.replace(" ", "").replace("\n", ""))


@pytest.fixture(scope="module")
def reference_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoCorpusStats]:
    out = tmp_path_factory.mktemp("reference") / "corpus.txt"
    return out, build_demo_corpus(out, workers=2)


@pytest.mark.slow
@needs_pinned
def test_full_build_of_the_pinned_sources_is_the_reference_corpus(
    reference_build: tuple[Path, DemoCorpusStats],
) -> None:
    stats = reference_build[1]
    assert (stats.bytes, stats.sha256) == (REFERENCE_CORPUS.bytes, REFERENCE_CORPUS.sha256), (
        "the demo corpus changed: if that is intended, update REFERENCE_CORPUS (and CORPUS_FORMAT)"
    )
    # Size and time stay reasonable for the demo (the build takes ~10 s on 2 cores).
    assert 1_000_000 < stats.bytes < 20_000_000 and stats.documents > 1000


@pytest.mark.slow
@needs_pinned
def test_the_demo_example_sentences_are_not_in_the_corpus(
    reference_build: tuple[Path, DemoCorpusStats],
) -> None:
    from electra.demo import EXAMPLE_SENTENCES

    text = reference_build[0].read_text(encoding="utf-8")
    assert [sentence for sentence in EXAMPLE_SENTENCES if sentence in text] == []


def test_label_says_it_is_a_demo_of_the_pinned_sources() -> None:
    assert DEMO_CORPUS_LABEL.startswith("demo corpus:") and "--corpus" in DEMO_CORPUS_LABEL
    assert "not real training data" in DEMO_CORPUS_LABEL
    for source in DEMO_SOURCES:
        assert f"{source.distribution} {source.version}" in DEMO_CORPUS_LABEL
