"""Shared fixtures: generated corpora and a word-level tokenizer whose tokens identify their document."""

from __future__ import annotations

import logging
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_UNTRACKED = pytest.StashKey[set[str] | None]()
# The one form of a command's error line: `electra <command>: error: <what> (<what to do>)`.
ERROR_LINE = re.compile(r"^electra(?: [a-z]+)*: error: .+ \(.+\)$")
SHARED_DATA = ROOT.parent / "shared" / "data"
N_DOCS = 60
N_WORDS = 40


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never download: a Hub id that is not in a cache the test built fails at once, even on a machine
    with network access (subprocesses inherit it). Tests of the online path take it out themselves."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _threads_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training commands take as many threads as cores are free when they start (electra.threads), which
    on a shared machine changes from one command to the next; the tests that compare two runs need them
    equal, so OMP_NUM_THREADS, which the commands obey, is set. tests/test_threads.py takes it out."""
    from electra.threads import THREADS_ENV, usable_cores

    monkeypatch.setenv(THREADS_ENV, os.environ.get(THREADS_ENV) or str(usable_cores()))


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`electra.cli.main.main` configures logging for the process (electra.logs.configure): every test starts
    unconfigured and the root logger and electra.logs' state are put back after it, so no test sees
    another's configuration."""
    from electra import logs

    root, electra = logging.getLogger(), logging.getLogger("electra")
    saved = (list(root.handlers), root.level, electra.level, logs._configured)
    # Start unconfigured even when a module-scoped fixture ran the CLI before this test.
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, logs.StderrHandler)]
    logs._configured = None
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    electra.setLevel(saved[2])
    logs._configured = saved[3]
    logging.captureWarnings(False)


def _untracked() -> set[str] | None:
    """The untracked entries at the top of the checkout that git does not ignore, empty directories included
    (None without git): where a relative path lands when the suite runs from the root, as CI and the README
    run it. (Deeper ones would also catch a file someone is writing beside a running suite.)"""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "--directory"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {path for path in out.stdout.splitlines() if "/" not in path.rstrip("/")}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_UNTRACKED] = _untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite fails if it left a file or directory in the repository that was not there before (a test
    writes into its tmp_path, never the checkout); xdist workers leave the check to the controller."""
    before = session.config.stash.get(_UNTRACKED, None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    left = sorted((_untracked() or before) - before)
    if left:
        message = f"the tests left in the repository: {', '.join(left)} (a test must write under tmp_path)"
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(message, red=True)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def hf_remote_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """transformers' cache of remote code (trust_remote_code=True) in a temporary directory rather than the
    user's Hugging Face cache; the directory it put on sys.path is taken off afterwards."""
    from transformers import dynamic_module_utils

    cache = tmp_path / "hf-modules"
    monkeypatch.setattr(dynamic_module_utils, "HF_MODULES_CACHE", str(cache))
    monkeypatch.setattr(sys, "path", list(sys.path))
    return cache


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


def prepare_tiny_data(root: Path, n_docs: int, seed: int = 5) -> Path:
    """Pre-training data (max length 32, 10% validation) from a marked corpus and the word vocabulary."""
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    corpus = root / "corpus.txt"
    corpus.write_text(make_marked_corpus(n_docs=n_docs, seed=seed), encoding="utf-8")
    out = root / "data"
    prepare_dataset(
        PrepareConfig(
            corpus=[str(corpus)],
            tokenizer=str(write_word_vocab(root / "vocab.txt")),
            out=out,
            max_seq_len=32,
            val_fraction=0.1,
            workers=1,
            progress=False,
        )
    )
    return out


def tiny_pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    """`electra pretrain` arguments for the tiny model at batch 8, a metric record every step."""
    return [
        "pretrain",
        "--data",
        str(data),
        "--out",
        str(out),
        "--size",
        "tiny",
        "--batch-size",
        "8",
        "--log-every",
        "1",
        *extra,
    ]


@pytest.fixture
def marked_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(make_marked_corpus(), encoding="utf-8")
    return path


@pytest.fixture
def word_vocab(tmp_path: Path) -> Path:
    return write_word_vocab(tmp_path / "vocab.txt")


# ----------------------------------------------------------------------------------------------------------
# Exported ONNX bundles for the serving tests (built once per session: export takes a few seconds)
# ----------------------------------------------------------------------------------------------------------

SERVING_WORDS = tuple(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "and",
        "in",
        "is",
        "was",
        "it",
        "that",
        "for",
        "on",
        "with",
        "as",
        "by",
        "at",
        "from",
        "this",
        "be",
        "are",
        "he",
        "she",
        "they",
        "we",
        "you",
        "i",
        "cat",
        "dog",
        "sat",
        "mat",
        "ran",
        "fast",
        "slow",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "river",
        "bank",
        "money",
        "city",
        "park",
        "house",
        "good",
        "bad",
        "great",
        "terrible",
        "movie",
        "film",
        "book",
        "story",
        "love",
        "hate",
        "happy",
        "sad",
        "day",
        "night",
        "year",
        "time",
        "people",
        "café",
        "naïve",
        "über",
        "north",
        "south",
        "east",
        "west",
        "new",
        "york",
        "paris",
        "london",
        "water",
        "fire",
        "earth",
        "wind",
    ]
)
# Word pieces, so some words split into several tokens (word-level aggregation has something to merge).
SERVING_PIECES = ("##s", "##ing", "##ed", "##er", "##ly", "##e", "##a", "##o", "##n", "##t", "##r")
SERVING_CHARS = tuple("abcdefghijklmnopqrstuvwxyz0123456789") + tuple(".,!?;:'\"()-/") + ("日", "本", "語")
SERVING_LABELS = {0: "negative", 1: "positive"}
# A tagger's tags in id order, IOB2 as a fine-tuned named-entity tagger has them.
SERVING_TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC", 5: "B-ORG", 6: "I-ORG"}


def write_serving_vocab(path: Path) -> Path:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for t in (*SERVING_CHARS, *SERVING_WORDS, *SERVING_PIECES):
        if t not in tokens:
            tokens.append(t)
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def build_serving_bundle(root: Path, kind: str, seed: int = 0, **config: object) -> Path:
    """A tiny random-weight HF model of `kind` exported to a fused fp32 bundle under root/<name>-bundle."""
    import torch

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import build_model
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer, save_tokenizer

    vocab = write_serving_vocab(root / "vocab.txt")
    tokenizer = load_tokenizer(vocab)
    cfg = ElectraConfig.from_size(
        "tiny", vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=128, **config
    )
    torch.manual_seed(seed)
    model = build_model(kind, cfg)
    with torch.no_grad():
        # Off the init's zero biases so scores differ from token to token.
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    name = f"{kind}-{seed}-{cfg.num_labels}"
    model_dir = save_hf_dir(model, root / name)
    save_tokenizer(tokenizer, model_dir)
    out = root / f"{name}-bundle"
    export_bundle(model_dir, out, precision="fp32", max_seq_len=64)
    return out


@pytest.fixture(scope="session")
def serving_bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Server bundles: 'detector' (a discriminator), 'sentiment' (2 labels), 'score' (regression), 'tagger'
    (a token classifier with SERVING_TAGS)."""
    root = tmp_path_factory.mktemp("bundles")
    return {
        "detector": build_serving_bundle(root, "discriminator"),
        "sentiment": build_serving_bundle(root, "classifier", id2label=SERVING_LABELS),
        "score": build_serving_bundle(
            root, "classifier", seed=1, id2label={0: "score"}, problem_type="regression"
        ),
        # Seed 5: random weights that still predict a mix of tags (O, B-LOC, I-PER, B-ORG) rather than one.
        "tagger": build_serving_bundle(root, "tagger", seed=5, id2label=SERVING_TAGS),
    }


def build_suggest_pair(root: Path, seed: int = 3) -> Path:
    """A pre-training run's outputs in miniature: root/run/discriminator and root/run/generator, tiny
    random-weight HF directories over the serving vocabulary (the generator sized from the discriminator as
    pre-training sizes it); returns root/run."""
    import torch

    from electra.config import ElectraConfig, generator_config
    from electra.hf_format import save_hf_dir
    from electra.model import build_model
    from electra.tokenizer import load_tokenizer, save_tokenizer

    tokenizer = load_tokenizer(write_serving_vocab(root / "vocab.txt"))
    cfg = ElectraConfig.from_size("tiny", vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=128)
    torch.manual_seed(seed)
    for kind, kind_cfg in (("discriminator", cfg), ("generator", generator_config(cfg))):
        model = build_model(kind, kind_cfg)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.2)
        save_tokenizer(tokenizer, save_hf_dir(model, root / "run" / kind))
    return root / "run"


@pytest.fixture(scope="session")
def suggest_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A detector exported with its generator (fp32, max_seq_len 64); the run it came from is its
    `source_run` sibling (bundle.parent / "run")."""
    from electra.onnx.export import export_bundle

    root = tmp_path_factory.mktemp("suggest")
    run = build_suggest_pair(root)
    out = root / "bundle"
    export_bundle(run / "discriminator", out, max_seq_len=64, generator_dir=run / "generator")
    return out
