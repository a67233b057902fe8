"""bench/serve_warmup.py: its options checked before any work, and one round run for real (three servers, a
small bundle), the record holding what the write-up reads from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import serve_warmup as sw

pytest.importorskip("httpx", reason="the serve extra is not installed")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--multiple", "0"], "--multiple must be at least 1"),
        (["--max-seq-len", "8"], "--max-seq-len must be between 9 and 512"),
        (["--max-seq-len", "513"], "--max-seq-len must be between 9 and 512"),
    ],
)
def test_bad_options_are_one_error_and_exit_2(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        sw.main(args)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_text_of_is_that_many_tokens_with_cls_and_sep() -> None:
    from electra.tokenizer import load_tokenizer

    if not sw.BERT_VOCAB.is_file():
        pytest.skip(f"{sw.BERT_VOCAB} absent (the shared data)")
    tokenizer = load_tokenizer(sw.BERT_VOCAB)
    for n in sw.LENGTHS:
        assert len(tokenizer.encode(sw.text_of(n)).ids) == n


@pytest.mark.slow
def test_one_round_times_both_configurations_and_their_ratios(tmp_path: Path) -> None:
    out = tmp_path / "warmup.json"
    assert sw.main(["--rounds", "1", "--max-seq-len", "64", "--multiple", "16", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["lengths"] == [9, 21, 37, 50]
    (round_,) = record["rounds"]
    assert round_["exact"]["pad_to_multiple_of"] == 1 and round_["buckets"]["pad_to_multiple_of"] == 16
    assert record["method"]["configs"]["buckets_no_inline"] == "--pad-to-multiple-of 16 --inline-max-ms 0"
    for config in ("exact", "buckets", "buckets_no_inline"):
        found = round_[config]
        assert found["ready_s"] > 0
        assert set(found["cold_model_ms"]) == set(found["warm_model_ms"]) == {"9", "21", "37", "50"}
        assert all(v > 0 for v in [*found["cold_model_ms"].values(), *found["warm_model_ms"].values()])
    ratio = record["buckets_vs_exact"]["ready_s"]
    assert ratio["per_round"] == [pytest.approx(round_["buckets"]["ready_s"] / round_["exact"]["ready_s"])]
    assert ratio["median"] == pytest.approx(ratio["per_round"][0])
    cold = record["buckets_no_inline_vs_exact"]["cold_max_ms"]
    want = round_["buckets_no_inline"]["cold_max_ms"] / round_["exact"]["cold_max_ms"]
    assert cold["per_round"] == [pytest.approx(want)]
