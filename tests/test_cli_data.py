"""The `electra` CLI for tokenizer and data: help, bad input (one line, exit 2), atomic output."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from electra.cli.main import main
from electra.training.data.dataset import PretrainingData
from tests.conftest import ERROR_LINE

from .conftest import make_marked_corpus, shared_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def prepare_args(corpus: Path, vocab: Path, out: Path, *extra: str) -> list[str]:
    return [
        "data",
        "prepare",
        "--corpus",
        str(corpus),
        "--tokenizer",
        str(vocab),
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["tokenizer"],
        ["tokenizer", "train"],
        ["tokenizer", "show"],
        ["data"],
        ["data", "prepare"],
        ["data", "info"],
        ["demo"],
    ],
)
def test_help_on_every_level(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    assert "usage: electra" in capsys.readouterr().out


def test_usage_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["data", "prepare", "--out", "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tokenizer" in err


def test_prepare_then_info(marked_corpus: Path, word_vocab: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "data"
    code, stdout, _ = run(prepare_args(marked_corpus, word_vocab, out, "--max-seq-len", "32"), capsys)
    assert code == 0 and "train" in stdout and "tokens/s" in stdout
    code, stdout, _ = run(["data", "info", str(out), "--verify"], capsys)
    assert code == 0 and "checksums: ok" in stdout
    # The tokenizer travels with the data, so pre-training needs only the data directory.
    assert (out / "tokenizer" / "tokenizer.json").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["max_seq_len"] == 32 and manifest["seed"] == 0
    assert manifest["tokenizer"]["vocab_size"] == 106
    assert len(manifest["tokenizer"]["fingerprint"]) == 64
    assert manifest["counts"]["tokens"] > 0


def _bad(tmp: Path, word_vocab: Path, marked_corpus: Path) -> dict[str, tuple[list[str], str]]:
    empty = tmp / "empty.txt"
    empty.write_text("\n  \n\n")
    binary = tmp / "weights.bin"
    binary.write_bytes(b"\x00\x00\x01\x02" * 64)
    no_vocab = tmp / "no_vocab"
    no_vocab.mkdir()
    (no_vocab / "config.json").write_text("{}")
    exists = tmp / "exists"
    exists.mkdir()
    out = tmp / "out"
    return {
        "missing corpus": (prepare_args(tmp / "nope.txt", word_vocab, out), "nope.txt does not exist"),
        "empty corpus": (prepare_args(empty, word_vocab, out), "empty.txt holds no text"),
        "binary corpus": (prepare_args(binary, word_vocab, out), "weights.bin looks binary"),
        "tokenizer dir without vocab": (prepare_args(marked_corpus, no_vocab, out), "no_vocab"),
        "missing tokenizer": (prepare_args(marked_corpus, tmp / "nothing", out), "nothing"),
        "max-seq-len below 8": (
            prepare_args(marked_corpus, word_vocab, out, "--max-seq-len", "7"),
            "at least 8",
        ),
        "output exists": (prepare_args(marked_corpus, word_vocab, exists), "--overwrite"),
        "bad val fraction": (prepare_args(marked_corpus, word_vocab, out, "--val-fraction", "1.5"), "[0, 1)"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing corpus",
        "empty corpus",
        "binary corpus",
        "tokenizer dir without vocab",
        "missing tokenizer",
        "max-seq-len below 8",
        "output exists",
        "bad val fraction",
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(
    case: str, tmp_path: Path, word_vocab: Path, marked_corpus: Path, capsys
) -> None:
    argv, needle = _bad(tmp_path, word_vocab, marked_corpus)[case]
    code, _, err = run(argv, capsys)
    assert code == 2, err
    assert ERROR_LINE.match(err.rstrip("\n")) and err.count("\n") == 1, err
    assert needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.tmp-*")), "a failed run left its temporary directory"


def test_undecodable_bytes_are_reported_not_fatal(tmp_path: Path, word_vocab: Path, capsys) -> None:
    corpus = tmp_path / "mixed.txt"
    corpus.write_bytes(make_marked_corpus(n_docs=5).encode() + b"Doc1 word1 \xff\xfe word2.\n")
    code, _, err = run(prepare_args(corpus, word_vocab, tmp_path / "out"), capsys)
    assert code == 0
    assert "2 undecodable bytes in" in err and "mixed.txt" in err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["corpus"]["undecodable_bytes"] == {str(corpus): 2}


def test_manifest_that_does_not_match_its_arrays(
    marked_corpus: Path, word_vocab: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "data"
    assert run(prepare_args(marked_corpus, word_vocab, out), capsys)[0] == 0
    ids = out / "train" / "input_ids.bin"
    ids.write_bytes(ids.read_bytes()[:-10])
    code, _, err = run(["data", "info", str(out)], capsys)
    assert code == 2 and "input_ids.bin" in err and "does not match" in err
    code, _, err = run(["data", "info", str(tmp_path)], capsys)
    assert code == 2 and "no manifest.json" in err


def test_checksum_verification_catches_flipped_bytes(
    marked_corpus: Path, word_vocab: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "data"
    assert run(prepare_args(marked_corpus, word_vocab, out), capsys)[0] == 0
    seg = out / "train" / "segment_ids.bin"
    data = bytearray(seg.read_bytes())
    data[5] ^= 1
    seg.write_bytes(bytes(data))
    assert run(["data", "info", str(out)], capsys)[0] == 0  # sizes still agree
    code, _, err = run(["data", "info", str(out), "--verify"], capsys)
    assert code == 2 and "segment_ids.bin does not match the checksum" in err


def test_crash_during_prepare_leaves_no_output_and_keeps_the_old_one(
    marked_corpus: Path, word_vocab: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "data"
    assert run(prepare_args(marked_corpus, word_vocab, out, "--max-seq-len", "16"), capsys)[0] == 0
    before = (out / "train" / "input_ids.bin").read_bytes()

    from electra.training.data import dataset

    calls = {"n": 0}
    original = dataset.SplitWriter.append

    def failing_append(self, *a):
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(28, "No space left on device")
        return original(self, *a)

    monkeypatch.setattr(dataset.SplitWriter, "append", failing_append)
    code, _, err = run(
        prepare_args(marked_corpus, word_vocab, out, "--overwrite", "--max-seq-len", "32"), capsys
    )
    assert code == 1 and "No space left on device" in err
    # The previous dataset is intact and still valid; nothing half-written is left around it.
    assert (out / "train" / "input_ids.bin").read_bytes() == before
    assert PretrainingData.open(out).max_seq_len == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["corpus.txt", "vocab.txt", "data"])


@pytest.mark.slow
def test_kill_9_mid_prepare_never_leaves_a_dataset(word_vocab: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "big.txt.gz"
    corpus.write_bytes(gzip.compress(make_marked_corpus(n_docs=3000, seed=7, max_sentences=60).encode(), 1))
    out = tmp_path / "data"
    cmd = [
        sys.executable,
        "-m",
        "electra",
        "data",
        "prepare",
        "--corpus",
        str(corpus),
        "--tokenizer",
        str(word_vocab),
        "--out",
        str(out),
        "--workers",
        "1",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".data.tmp-*/train/input_ids.bin")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.005)
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists(), "a killed run left a dataset that looks complete"
    # A new run starts from scratch and succeeds.
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = PretrainingData.open(out)
    data.verify_checksums()
    assert len(data.train) > 0


@pytest.mark.slow
@pytest.mark.shared_data
def test_prepare_on_shared_wikipedia_with_the_bert_vocab(tmp_path: Path, capsys) -> None:
    files = sorted(shared_path("corpus/enwiki-2015-wikiextractor/AA").glob("wiki_0[0-2].gz"))
    vocab = shared_path("models/bert-uncased-vocab/vocab.txt")
    out = tmp_path / "wiki"
    code, _, err = run(
        [
            "data",
            "prepare",
            "--corpus",
            *map(str, files),
            "--tokenizer",
            str(vocab),
            "--out",
            str(out),
            "--quiet",
            "--val-fraction",
            "0.05",
        ],
        capsys,
    )
    assert code == 0, err
    data = PretrainingData.open(out)
    assert data.train.input_ids.dtype == np.uint16
    assert len(data.train) > 3000 and len(data.val) > 0
    # Real text packs densely: most examples are full, as in the official builder.
    assert (np.asarray(data.train.lengths) == 128).mean() > 0.7
    ids = np.asarray(data.train.input_ids[:200])
    assert (ids[:, 0] == 101).all()  # BERT's [CLS]
    assert not (ids == 100).mean() > 0.02  # few [UNK]s: the vocab matches the text
