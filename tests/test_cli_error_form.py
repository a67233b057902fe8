"""One error form for every command: `electra <command>: error: <what> (<what to do>)`, one line, exit 2.

Each case is a mistake a new user makes (a wrong path, a model of the wrong kind, a typo in an option, a
bad number), run through the real entry point; argparse's own messages are held to the same form.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from electra.cli.error_form import one_form
from electra.cli.main import main

FORM = re.compile(r"^(electra(?: [a-z]+)*): error: (.+) \((.+)\)$")
HF_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def model_dir(tmp: Path) -> Path:
    """A directory that looks like a saved model (config.json), which is not an exported bundle."""
    d = tmp / "models" / "sst2"
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    return d


def a_file(tmp: Path) -> Path:
    f = tmp / "a-file"
    f.write_text("x")
    return f


# (id, arguments given the tmp dir, the command named, fragments the line must hold)
CASES: list[tuple[str, Callable[[Path], list[str]], str, tuple[str, ...]]] = [
    (
        "unknown-command",
        lambda t: ["servee"],
        "electra",
        ("invalid choice: 'servee'", "did you mean 'serve'?", "electra --help"),
    ),
    (
        "option-typo",
        lambda t: ["serve", "--modle", "x=y"],
        "electra serve",
        ("--modle", "electra serve --help"),
    ),
    (
        "nested-option-typo",
        lambda t: ["data", "prepare", "--tokenizer", "x", "--out", "y", "--max-len", "5"],
        "electra data prepare",
        ("--max-len", "electra data prepare --help"),
    ),
    ("bad-number", lambda t: ["demo", "--steps", "0"], "electra demo", ("--steps", "electra demo --help")),
    ("bad-int", lambda t: ["serve", "--model", "d=x", "--port", "abc"], "electra serve", ("--port", "'abc'")),
    (
        "serve-missing-dir",
        lambda t: ["serve", "--model", f"d={t / 'nope'}"],
        "electra serve",
        ("no such directory", "electra export"),
    ),
    (
        "serve-model-dir",
        lambda t: ["serve", "--model", f"d={model_dir(t)}"],
        "electra serve",
        ("not an exported bundle", "electra export --model", "models/sst2 --out"),
    ),
    (
        "serve-hub-id",
        lambda t: ["serve", "--model", "d=google/electra-small-discriminator"],
        "electra serve",
        ("not Hub ids", "electra export --model google/electra-small-discriminator --out bundles/"),
    ),
    (
        "serve-no-model",
        lambda t: ["serve"],
        "electra serve",
        ("--model",),
    ),
    (
        "demo-workdir-file",
        lambda t: ["demo", "--workdir", str(a_file(t)), "--no-serve"],
        "electra demo",
        ("--workdir",),
    ),
    (
        "tokenizer-missing-corpus",
        lambda t: ["tokenizer", "train", "--corpus", str(t / "nope.txt"), "--out", str(t / "tok")],
        "electra tokenizer train",
        ("nope.txt",),
    ),
    (
        "data-info-missing",
        lambda t: ["data", "info", str(t / "nope")],
        "electra data info",
        ("nope",),
    ),
    (
        "pretrain-missing-data",
        lambda t: ["pretrain", "--data", str(t / "nope"), "--out", str(t / "run")],
        "electra pretrain",
        ("nope",),
    ),
    ("plot-missing-run", lambda t: ["plot", str(t / "nope")], "electra plot", ("nope",)),
    (
        "finetune-missing-model",
        lambda t: ["finetune", "--task", "sst2", "--model", str(t / "nope"), "--out", str(t / "o")],
        "electra finetune",
        ("--model", "nope: no such directory (pass a model directory", "Hugging Face Hub id"),
    ),
    (
        "evaluate-missing-model",
        lambda t: ["evaluate", "--task", "sst2", "--model", str(t / "nope")],
        "electra evaluate",
        ("--model", "nope: no such directory (pass a model directory", "Hugging Face Hub id"),
    ),
    (
        "predict-missing-input",
        lambda t: ["predict", "--task", "sst2", "--model", str(t / "nope"), "--input", str(t / "in.tsv")],
        "electra predict",
        ("nope",),
    ),
    (
        "predict-out-is-the-input",
        lambda t: [
            "predict",
            *("--task", "custom", "--model", str(model_dir(t))),
            *("--input", str(a_file(t)), "--out", str(t / "a-file"), "--overwrite"),
        ],
        "electra predict",
        ("is the input file", "choose another --out"),
    ),
    (
        "predict-out-exists",
        lambda t: [
            "predict",
            *("--task", "custom", "--model", str(model_dir(t)), "--input", str(t / "in.tsv")),
            *("--out", str(a_file(t))),
        ],
        "electra predict",
        ("a-file already exists", "--overwrite"),
    ),
    (
        "tokenizer-out-holds-the-corpus",
        lambda t: ["tokenizer", "train", "--corpus", str(a_file(t)), "--out", str(t), "--overwrite"],
        "electra tokenizer train",
        ("is or holds the input", "choose another --out"),
    ),
    (
        "export-missing-model",
        lambda t: ["export", "--model", str(t / "nope"), "--out", str(t / "b")],
        "electra export",
        ("--model", "nope: no such directory (pass a model directory", "Hugging Face Hub id"),
    ),
    (
        "export-model-is-a-file",
        lambda t: ["export", "--model", str(a_file(t)), "--out", str(t / "b")],
        "electra export",
        ("a-file: not a directory (pass a model directory", "Hugging Face Hub id"),
    ),
    (
        "export-missing-generator",
        lambda t: [
            "export",
            "--model",
            str(model_dir(t)),
            "--generator",
            str(t / "nope"),
            "--out",
            str(t / "b"),
        ],
        "electra export",
        ("--generator", "nope: no such directory (", "Hugging Face Hub id"),
    ),
]


@pytest.mark.parametrize(
    ("make_args", "command", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_every_error_has_one_form(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    make_args: Callable[[Path], list[str]],
    command: str,
    fragments: tuple[str, ...],
) -> None:
    for name, value in HF_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("ELECTRA_MODELS", "ELECTRA_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    try:
        code = main(make_args(tmp_path))
    except SystemExit as e:  # argparse exits itself
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    # `electra pretrain` says how many threads it took before its trainer checks the inputs (the choice is
    # the command's, the checks the stage's): that status line is not part of the error.
    lines = [line for line in err.strip().splitlines() if " INFO electra.threads: " not in line]
    assert len(lines) == 1, err
    match = FORM.match(lines[0])
    assert match, f"not `electra <command>: error: <what> (<what to do>)`: {lines[0]}"
    assert match[1] == command, lines[0]
    # The older `<what>; <what to do> (<detail>)` passes the pattern above with the detail read as the fix.
    assert "; pass " not in lines[0], f"the fix is not the part in parentheses: {lines[0]}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} missing from: {lines[0]}"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "x does not exist; create it with `electra data prepare`",
            "x does not exist (create it with `electra data prepare`)",
        ),
        ("a (b); c; d", "a (b); c (d)"),
        ("x is bad (fix it)", "x is bad (fix it)"),
        ("run `a; b`", "run `a; b` (see `electra demo --help`)"),
        ("f(x) returned (1)", "f(x) returned (1)"),
        ("ends in f(x)", "ends in f(x) (see `electra demo --help`)"),
        ("two\nlines; fix", "two lines (fix)"),
        ("--lr 0 must be positive", "--lr 0 must be positive (see `electra demo --help`)"),
    ],
)
def test_one_form(message: str, expected: str) -> None:
    assert one_form(message, "electra demo") == expected


def busy_port() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_demo_checks_the_port_before_building(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workdir = tmp_path / "demo"
    with busy_port() as taken:
        port = taken.getsockname()[1]
        code = main(["demo", "--workdir", str(workdir), "--port", str(port), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err, err
    assert not workdir.exists(), "the demo built something before finding the port taken"


def test_serve_reports_a_wrong_path_before_a_busy_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with busy_port() as taken:
        port = taken.getsockname()[1]
        code = main(["serve", "--model", f"d={tmp_path / 'nope'}", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and "no such directory" in err and "cannot listen" not in err, err
