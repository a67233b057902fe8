"""electra.progress: a tqdm bar on a terminal, plain periodic lines elsewhere; and the stages that use it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from electra import logs
from electra.progress import NullProgress, PlainProgress, progress

from .conftest import make_marked_corpus, write_word_vocab


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_off_a_terminal_a_line_every_interval_and_one_at_the_end() -> None:
    clock, out = FakeClock(), io.StringIO()
    bar = progress(10_000, "pretrain", "step", stream=out, interval=30, clock=clock)
    assert isinstance(bar, PlainProgress)
    for _ in range(29):  # 29 s: nothing yet
        clock.now += 1
        bar.update(40)
    assert lines(out) == []
    clock.now += 1
    bar.set_postfix_str("mlm 7.120 disc 0.301")  # shown with the next line, not a line of its own
    assert lines(out) == []
    bar.update(30)  # 30 s: the first line
    assert lines(out) == ["pretrain: 1,190/10,000 steps (12%), 39.7 steps/s, ETA 4 min, mlm 7.120 disc 0.301"]
    clock.now += 10
    bar.update(10)  # 10 s after that line: none
    assert len(lines(out)) == 1
    clock.now += 20
    bar.update(0)  # 30 s after it: the second
    assert len(lines(out)) == 2
    assert lines(out)[1].startswith("pretrain: 1,200/10,000 steps (12%), 20.0 steps/s")
    assert bar.n == 1200
    clock.now += 5
    bar.close()
    bar.close()  # once only
    assert len(lines(out)) == 3
    last = "pretrain: 1,200/10,000 steps (12%), 18.5 steps/s, took 65 s, mlm 7.120 disc 0.301"
    assert lines(out)[2] == last


def test_interval_zero_writes_on_every_update_and_units_scale() -> None:
    clock, out = FakeClock(), io.StringIO()
    with progress(2_000_000, "prepare", "B", unit_scale=True, stream=out, interval=0, clock=clock) as bar:
        clock.now += 2
        bar.update(500_000)
        bar.set_postfix(tokens="1,234")
        clock.now += 2
        bar.update(1_500_000)
    assert lines(out) == [
        "prepare: 500.0 kB/2.0 MB (25%), 250.0 kB/s, ETA 6 s",
        "prepare: 2.0 MB/2.0 MB (100%), 500.0 kB/s, ETA 0 s, tokens=1,234",
        "prepare: 2.0 MB/2.0 MB (100%), 500.0 kB/s, took 4 s, tokens=1,234",
    ]


def test_without_a_total_no_percentage_and_a_resumed_rate() -> None:
    clock, out = FakeClock(), io.StringIO()
    bar = progress(None, "tokenizer", "line", stream=out, interval=0, clock=clock)
    clock.now += 4
    bar.update(12_000)
    assert lines(out) == ["tokenizer: 12,000 lines, 3,000 lines/s"]
    out2 = io.StringIO()
    resumed = progress(100, "pretrain", "step", initial=40, stream=out2, interval=0, clock=clock)
    clock.now += 10
    resumed.update(5)  # the rate counts this run's steps only
    assert lines(out2) == ["pretrain: 45/100 steps (45%), 0.50 steps/s, ETA 2 min"]


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELECTRA_PROGRESS_INTERVAL", "5")
    clock, out = FakeClock(), io.StringIO()
    bar = progress(10, "x", stream=out, clock=clock)
    clock.now += 4
    bar.update()
    assert lines(out) == []
    clock.now += 1
    bar.update()
    assert len(lines(out)) == 1
    monkeypatch.setenv("ELECTRA_PROGRESS_INTERVAL", "soon")
    assert progress(10, "x", stream=out).interval == 30


def test_a_failure_inside_the_block_writes_no_last_line() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), progress(10, "x", stream=out, interval=60) as bar:
        bar.update(3)
        raise RuntimeError("boom")
    assert out.getvalue() == ""


def test_on_a_terminal_the_tqdm_bar() -> None:
    from tqdm import tqdm

    out = TtyStream()
    bar = progress(50, "pretrain", "step", initial=10, stream=out)
    assert isinstance(bar, tqdm)
    assert (bar.total, bar.n, bar.desc, bar.unit) == (50, 10, "pretrain", "step")
    bar.update(5)
    bar.set_postfix_str("mlm 1.000")
    bar.close()
    assert "pretrain" in out.getvalue() and "15/50" in out.getvalue()


def test_disabled_shows_nothing_even_on_a_terminal() -> None:
    out = TtyStream()
    with progress(50, "pretrain", "step", enabled=False, stream=out) as bar:
        assert isinstance(bar, NullProgress)
        bar.update(5)
        bar.set_postfix_str("x")
        bar.set_postfix(a=1)
    assert bar.n == 5 and out.getvalue() == ""


def test_lines_go_through_logging_once_configured(capsys: pytest.CaptureFixture[str]) -> None:
    bar = progress(4, "demo corpus", "file", interval=3600)
    bar.update(4)
    bar.close()
    assert capsys.readouterr().err.startswith("demo corpus: 4/4 files (100%)")  # not configured: plain
    logs.configure("json")
    bar = progress(4, "demo corpus", "file", interval=3600)
    bar.update(4)
    bar.close()
    import json

    record = json.loads(capsys.readouterr().err)
    assert record["logger"] == "electra.progress" and record["message"].startswith("demo corpus: 4/4 files")


# ----------------------------------------------------------------------------------------------------------
# The stages
# ----------------------------------------------------------------------------------------------------------


def test_prepare_reports_progress_off_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_marked_corpus(n_docs=10), encoding="utf-8")
    config = PrepareConfig(
        corpus=[str(corpus)],
        tokenizer=str(write_word_vocab(tmp_path / "vocab.txt")),
        out=tmp_path / "data",
        max_seq_len=32,
        workers=1,
    )
    prepare_dataset(config)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("prepare: ") and "(100%)" in err[0] and "tokens=" in err[0]
    prepare_dataset(PrepareConfig(**{**config.__dict__, "out": tmp_path / "quiet", "progress": False}))
    assert capsys.readouterr().err == ""


class CapturedBars:
    """Replaces tokenizer_train.progress: real bars writing to a string, kept for inspection."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.bars: list[Any] = []
        self.out = TtyStream() if tty else io.StringIO()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bar = progress(*args, **kwargs, stream=self.out)
        self.bars.append(bar)
        return bar


@pytest.mark.parametrize("tty", [False, True])
def test_tokenizer_training_progress_has_the_real_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    from electra.training.data import tokenizer_train
    from electra.training.data.corpus import CorpusStats

    text = make_marked_corpus(n_docs=40)
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    files[0].write_text(text, encoding="utf-8")
    files[1].write_text(text[: len(text) // 2], encoding="utf-8")
    captured = CapturedBars(tty)
    monkeypatch.setattr(tokenizer_train, "progress", captured)

    stats = CorpusStats()
    tokenizer_train.train_tokenizer_on_files(files, stats, vocab_size=120, show_progress=True)
    (bar,) = captured.bars
    size = sum(f.stat().st_size for f in files)
    assert bar.total == size and bar.n == size == stats.bytes_read
    assert "tokenizer" in captured.out.getvalue()

    lines_ = text.splitlines()
    tokenizer_train.train_tokenizer(lines_, vocab_size=120, show_progress=True)
    assert captured.bars[1].total == len(lines_) and captured.bars[1].n == len(lines_)

    tokenizer_train.train_tokenizer(iter(lines_), vocab_size=120, show_progress=True)
    assert captured.bars[2].total is None and captured.bars[2].n == len(lines_)  # unknown, never 0


def test_tokenizer_training_on_files_learns_the_same_vocabulary(tmp_path: Path) -> None:
    from electra.training.data.corpus import iter_corpus_lines
    from electra.training.data.tokenizer_train import train_tokenizer, train_tokenizer_on_files

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_marked_corpus(n_docs=20), encoding="utf-8")
    from_lines = train_tokenizer(iter_corpus_lines([corpus]), vocab_size=120)
    from_files = train_tokenizer_on_files([corpus], vocab_size=120)
    assert set(from_files.get_vocab()) == set(from_lines.get_vocab())  # ids of ties vary from run to run
