"""electra.logs: one log line format (plain or JSON) for the CLI, the trainers and the server."""

from __future__ import annotations

import importlib.util
import json
import logging
import logging.config
import os
import re
import subprocess
import sys
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from electra import logs
from electra.cli.main import main
from electra.errors import InputError

from .conftest import prepare_tiny_data, tiny_pretrain_args

ROOT = Path(__file__).resolve().parents[1]
PLAIN_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: \S.*")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    return {**env, **extra}


def assert_json_lines(text: str) -> list[dict]:
    records = [json.loads(line) for line in text.splitlines()]
    assert records, "no log line at all"
    for r in records:
        assert tuple(r) == logs.JSON_KEYS, r
        datetime.fromisoformat(r["time"])
    return records


def assert_plain_lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines, "no log line at all"
    for line in lines:
        assert PLAIN_LINE.fullmatch(line), line
    return lines


# ----------------------------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------------------------


def test_json_lines_have_the_same_keys_even_with_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert logs.configure("json") == "json" and logs.is_configured()
    log = logging.getLogger("electra.test")
    log.info("hello %s", "world")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it failed")
    first, second = assert_json_lines(capsys.readouterr().err)
    assert (first["level"], first["logger"], first["message"]) == ("INFO", "electra.test", "hello world")
    assert second["level"] == "ERROR" and "ValueError: boom" in second["message"]


def test_plain_lines_and_levels(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("plain")
    logs.configure("plain")  # again: still one handler
    assert sum(isinstance(h, logs.StderrHandler) for h in logging.getLogger().handlers) == 1
    logging.getLogger("electra.pretrain").info("checkpoint x (periodic)")
    logging.getLogger("some.library").info("chatty")  # other libraries: WARNING and above
    logging.getLogger("some.library").warning("worth saying")
    lines = assert_plain_lines(capsys.readouterr().err)
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO electra.pretrain: checkpoint x (periodic)",
        "WARNING some.library: worth saying",
    ]


def test_the_environment_chooses_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELECTRA_LOG_FORMAT", "json")
    assert logs.configure() == "json" and logs.current_format() == "json"
    assert logs.configure("plain") == "plain"
    monkeypatch.setenv("ELECTRA_LOG_FORMAT", "xml")
    with pytest.raises(InputError, match=r"ELECTRA_LOG_FORMAT is .* \(set it to plain or json\)"):
        logs.configure()
    monkeypatch.delenv("ELECTRA_LOG_FORMAT")
    assert logs.configure() == "plain"


def test_uvicorn_loggers_go_through_the_same_handler(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json")
    logging.config.dictConfig(logs.uvicorn_log_config("info"))
    handlers = logging.getLogger().handlers
    assert len(handlers) == 1 and isinstance(handlers[0], logs.StderrHandler)
    assert isinstance(handlers[0].formatter, logs.JsonFormatter)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        assert logging.getLogger(name).handlers == [] and logging.getLogger(name).propagate
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", "/", "1.1", 200)
    records = assert_json_lines(capsys.readouterr().err)
    # uvicorn's start-up lines come from "uvicorn.error", shown as "uvicorn": nothing failed.
    assert [r["logger"] for r in records] == ["uvicorn", "uvicorn.access"]
    assert records[1]["message"] == '127.0.0.1:1 - "GET / HTTP/1.1" 200'


def test_cli_refuses_an_unknown_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--log-format", "xml", "tokenizer", "show", "--tokenizer", "x", "a"])
    assert e.value.code == 2 and "--log-format" in capsys.readouterr().err
    monkeypatch.setenv("ELECTRA_LOG_FORMAT", "xml")
    assert main(["tokenizer", "show", "--tokenizer", "x", "a"]) == 2
    assert capsys.readouterr().err == (
        "electra tokenizer show: error: ELECTRA_LOG_FORMAT is 'xml' (set it to plain or json)\n"
    )


# ----------------------------------------------------------------------------------------------------------
# Real commands
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_tiny_data(tmp_path_factory.mktemp("logs-data"), n_docs=30)


def pretrain_args(data: Path, out: Path) -> list[str]:
    return tiny_pretrain_args(data, out, "--steps", "3", "--eval-every", "2", "--checkpoint-every", "2")


def test_pretrain_logs_only_json_lines(data_dir: Path, tmp_path: Path) -> None:
    """A real process, stderr a pipe (not a terminal): progress lines, checkpoints, all one JSON shape."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "electra", "--log-format", "json", *pretrain_args(data_dir, run)]
    env = clean_env(ELECTRA_PROGRESS_INTERVAL="0")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("finished 3 steps")  # results stay plain, on stdout
    records = assert_json_lines(done.stderr)
    messages = {(r["logger"], r["message"].split(":")[0].split(" ")[0]) for r in records}
    assert ("electra.progress", "pretrain") in messages and ("electra.pretrain", "checkpoint") in messages
    assert any("3/3 steps (100%)" in r["message"] for r in records)


def test_pretrain_logs_only_plain_lines(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process, the format given after the subcommand; ELECTRA_LOG_FORMAT loses to the flag."""
    monkeypatch.setenv("ELECTRA_PROGRESS_INTERVAL", "0")
    monkeypatch.setenv("ELECTRA_LOG_FORMAT", "json")
    assert main([*pretrain_args(data_dir, tmp_path / "run"), "--log-format", "plain"]) == 0
    lines = assert_plain_lines(capsys.readouterr().err)
    assert any(" INFO electra.progress: pretrain: 1/3 steps (33%)" in line for line in lines)
    assert any(" INFO electra.pretrain: checkpoint " in line for line in lines)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("litestar") is None:
        pytest.skip("the serve extra is not installed")
    from .conftest import build_serving_bundle

    return build_serving_bundle(tmp_path_factory.mktemp("logs-bundle"), "discriminator")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "plain"])
def test_server_and_uvicorn_log_in_one_format(bundle: Path, tmp_path: Path, fmt: str) -> None:
    from electra.serving.process import free_port, serve_command, start_server

    port = free_port()
    args = ["--model", f"det={bundle}", "--port", str(port), "--threads", "1", "--access-log"]
    # json from the environment, plain from the flag: both ways of choosing
    env = clean_env(ELECTRA_LOG_FORMAT="json") if fmt == "json" else clean_env()
    if fmt == "plain":
        args += ["--log-format", "plain"]
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with start_server(serve_command(*args), env, url=url, log=log, cwd=ROOT, ready_timeout=90):
        request = urllib.request.Request(
            f"{url}/detect", data=b'{"text": "the cat sat"}', headers={"content-type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as r:
            assert r.status == 200
    text = log.read_text(encoding="utf-8")  # the server's stdout and stderr
    if fmt == "json":
        names = {r["logger"] for r in assert_json_lines(text)}
    else:
        names = {line.split(" ")[3].rstrip(":") for line in assert_plain_lines(text)}
    assert {"electra.serving", "uvicorn", "uvicorn.access"} <= names and "uvicorn.error" not in names
    assert "POST /detect" in text and "Finished server process" in text
