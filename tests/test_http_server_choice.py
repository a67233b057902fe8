"""`electra serve --http-server {uvicorn,granian}`: the setting, its flag and variable, and granian serving
with uvicorn's shutdown semantics (SIGTERM drains in-flight requests, exits 0, bounded by
--graceful-timeout) and our log format.

The process tests reuse tests/test_serve_process.py's with `--http-server granian` appended to every
`electra serve` command line they start.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest

from electra.cli.main import build_parser
from electra.cli.serve_cmd import settings_from
from electra.errors import InputError
from electra.serving.process import serve_command
from electra.serving.settings import HTTP_SERVERS, ModelSpec, ServeSettings

pytest.importorskip("httpx", reason="the serve extra is not installed")

from tests import test_serve_process as tsp


def parse(*argv: str) -> Any:
    return build_parser().parse_args(["serve", *argv])


def test_http_server_setting_from_flag_and_environment() -> None:
    assert ServeSettings(models=(ModelSpec("d", Path("/d")),)).http_server == "uvicorn"
    assert HTTP_SERVERS == ("uvicorn", "granian")
    s = settings_from(parse("--model", "d=/d", "--http-server", "granian"), {})
    assert s.http_server == "granian"
    s = settings_from(parse("--model", "d=/d"), {"ELECTRA_HTTP_SERVER": "granian"})
    assert s.http_server == "granian"
    s = settings_from(
        parse("--model", "d=/d", "--http-server", "uvicorn"), {"ELECTRA_HTTP_SERVER": "granian"}
    )
    assert s.http_server == "uvicorn"  # the command line wins
    with pytest.raises(InputError, match="http_server must be one of uvicorn, granian, got 'hypercorn'"):
        settings_from(parse("--model", "d=/d", "--http-server", "hypercorn"), {})


def test_granian_log_config_routes_its_loggers_to_our_handler() -> None:
    from electra.serving.http.server import granian_log_config

    config = granian_log_config("warning")
    assert config["loggers"]["_granian"] == {"handlers": [], "propagate": True, "level": "WARNING"}
    assert config["loggers"]["granian.access"]["propagate"] is True
    assert config["root"]["handlers"] == ["stderr"]  # electra.logs' one handler and format


@pytest.fixture
def granian(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("granian", reason="granian is not installed")
    monkeypatch.setattr(tsp, "serve_command", lambda *args: serve_command(*args, "--http-server", "granian"))


@pytest.mark.slow
def test_granian_serves_and_logs_in_our_format(
    granian: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    import httpx

    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1", "--access-log"]
    with tsp.running_server(args, tmp_path) as server:
        r = httpx.post(f"{server.url}/detect", json={"text": "the cat sat"}, timeout=30.0)
        assert r.status_code == 200, r.text
        assert [t["text"] for t in r.json()["results"][0]["tokens"]] == ["the", "cat", "sat"]
        assert httpx.post(f"{server.url}/detect", content=b"{", timeout=30.0).status_code == 400
        server.send_signal(signal.SIGTERM)
        assert tsp.exit_code(server, 15.0) == 0, server.log_tail()
        log = server.log_tail(100_000)
    lines = [line for line in log.splitlines() if line.strip()]
    plain = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")
    assert lines and all(plain.match(line) for line in lines), log
    assert any("POST /detect" in line and " 200" in line for line in lines), log  # the access log
    assert "experimental" not in log
    assert "Traceback" not in log


@pytest.mark.slow
def test_granian_sigterm_drains_in_flight_requests(
    granian: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    tsp.test_sigterm_drains_in_flight_requests(serving_bundles, tmp_path)


@pytest.mark.slow
def test_granian_sigterm_exits_zero(granian: None, serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    tsp.test_sigterm_exits_zero(serving_bundles, tmp_path)


@pytest.mark.slow
def test_granian_graceful_timeout_bounds_a_stalled_request(
    granian: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    tsp.test_graceful_timeout_bounds_a_stalled_request(serving_bundles, tmp_path, "1")
