"""Files and options a command reads that got past its checks into an internal error: a manifest without
the fields `electra data info` prints, a metrics line that is not a record, an eval_results.json whose config
is null, standard input that is not UTF-8, sizes past what the tokenizer library counts in. Each is now the
one-line error of tests/test_cli_error_form.py (exit 2), or, where the file is optional, read as absent."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import pytest

from electra.cli.main import main
from electra.errors import InputError

LEGACY_DATA = Path(__file__).parent / "fixtures" / "legacy-0.1" / "data"


def prepared(tmp_path: Path, change: dict[str, object]) -> Path:
    data = shutil.copytree(LEGACY_DATA, tmp_path / "data")
    manifest = json.loads((data / "manifest.json").read_text())
    for key, value in change.items():
        if value is None:
            manifest.pop(key)
        else:
            manifest[key] = value
    (data / "manifest.json").write_text(json.dumps(manifest))
    return data


@pytest.mark.parametrize(
    ("change", "says"),
    [({"counts": None}, "counts.documents, counts.sentences missing"), ({"seed": "7"}, "seed missing")],
)
def test_a_manifest_without_what_readers_need_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], says: str
) -> None:
    data = prepared(tmp_path, change)
    assert main(["data", "info", str(data)]) == 2
    assert says in capsys.readouterr().err


def test_a_manifest_array_of_no_shape_is_refused(tmp_path: Path) -> None:
    from electra.training.data.dataset import PretrainingData

    data = prepared(tmp_path, {})
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["train"]["arrays"]["input_ids"]["shape"] = ["x"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="describes an array wrongly"):
        PretrainingData.open(data)


def test_plot_reads_records_only_and_writes_only_where_it_may(tmp_path: Path) -> None:
    from electra.training.pretrain.diagnostics.plot import plot_run

    run = tmp_path / "run"
    run.mkdir()
    lines = ["[1, 2]", '"text"', json.dumps({"split": "train", "step": 1, "disc_loss": 0.5, "lr": 1e-4})]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    png = plot_run(run)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert plot_run(run, png) == png  # an earlier plot is replaced
    with pytest.raises(InputError, match="does not exist"):
        plot_run(run, tmp_path / "nodir" / "x.png")
    with pytest.raises(InputError, match="is not a PNG"):
        plot_run(run, run / "metrics.jsonl")
    assert lines[2] in (run / "metrics.jsonl").read_text()


def test_an_eval_results_config_that_is_not_an_object_is_read_as_absent(tmp_path: Path) -> None:
    from electra.cli.export_cmd import _dev_set

    (tmp_path / "eval_results.json").write_text('{"config": null}')
    assert _dev_set(argparse.Namespace(task=None, data_dir=None, model=tmp_path)) is None


def test_standard_input_that_is_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import write_serving_vocab

    vocab = write_serving_vocab(tmp_path / "vocab.txt")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"abc \xff")))
    assert main(["tokenizer", "show", "--tokenizer", str(vocab)]) == 2
    assert "standard input is not UTF-8 text (byte 4)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ((10**30, 2, 1000), "--vocab-size"),
        ((30_000, 2**40, 1000), "--min-frequency"),
        ((30_000, 2, 2**40), "--limit"),
    ],
)
def test_tokenizer_sizes_past_what_the_library_counts(options: tuple[int, int, int], says: str) -> None:
    from electra.training.data.tokenizer_train import _check_options

    with pytest.raises(InputError, match=says):
        _check_options(*options)


def test_an_out_below_a_file_is_refused_before_the_work(tmp_path: Path) -> None:
    from electra.atomic import check_output_dir

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n")
    with pytest.raises(InputError, match=r"corpus\.txt is a file, not a folder"):
        check_output_dir(corpus / "tok" / "deeper", overwrite=False)
