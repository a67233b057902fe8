"""`electra serve` as a real process: SIGTERM drain, start-up errors, configuration from ELECTRA_* variables.

Every server runs in a subprocess on a free port, with its output in a log file (a pipe nobody reads could
fill up and stall it), and is stopped in a `finally`. The subprocess environment drops the caller's ELECTRA_*
variables so a developer's shell cannot change what a test sees.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from electra.cli.main import build_parser
from electra.cli.serve_cmd import settings_from
from electra.errors import InputError
from electra.serving.process import (
    ServerNotReady,
    ServerProcess,
    free_port,
    serve_command,
    start_server,
    stop,
    wait_ready,
)
from electra.serving.settings import ModelSpec, ServeSettings
from tests.conftest import ERROR_LINE

httpx = pytest.importorskip("httpx", reason="the serve extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 90.0
CLI_TIMEOUT_S = 90.0
GOOD_KEY = "k3y-for-the-serving-tests-0123456789"
# Different lengths, so one batch pads rows to different widths; mostly words of the fixture vocabulary.
DRAIN_TEXTS = (
    "the cat sat on the mat",
    "the quick brown fox jumps over the lazy dog",
    "good movie",
    "they sat by the river bank in the city park",
    "the dogs ran fast",
    "i love paris and london",
    "a sad story",
    "we walked north then east then south, then west to new york at night",
)


# --------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without ELECTRA_* variables (and without --debug), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    env.update(extra)
    return env


@contextmanager
def running_server(
    args: Sequence[str], log_dir: Path, env: Mapping[str, str] | None = None, port: int | None = None
) -> Iterator[ServerProcess]:
    """`electra serve ARGS --port PORT` (no --port when `port` is None: it comes from env), ready."""
    port_args: list[str] = []
    if port is None and (env is None or "ELECTRA_PORT" not in env):
        port = free_port()
    if port is not None:
        port_args = ["--port", str(port)]
    else:
        assert env is not None
        port = int(env["ELECTRA_PORT"])
    with start_server(
        serve_command(*args, *port_args),
        env if env is not None else clean_env(),
        url=f"http://127.0.0.1:{port}",
        log=log_dir / f"server-{port}.log",
        cwd=ROOT,
    ) as server:
        try:
            server.wait_ready(READY_TIMEOUT_S)
        except ServerNotReady as e:
            pytest.fail(str(e))
        yield server


def exit_code(server: ServerProcess, timeout: float) -> int:
    """The server's exit status once it exits; a test failure with its log when it is still running after
    `timeout` seconds (subprocess's TimeoutExpired would name the command, not what the server said)."""
    try:
        return server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server was still running {timeout:g} s after SIGTERM:\n{server.log_tail()}")


def run_cli(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        serve_command(*args),
        cwd=ROOT,
        env=dict(env) if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def assert_clean_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2 and exactly one line on stderr, `electra serve: error: <what> (<what to do>)`, naming every
    fragment; no traceback."""
    output = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in result.stderr + result.stdout, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, output
    line = lines[0]
    assert line.startswith("electra serve: error: ") and ERROR_LINE.match(line), output
    for fragment in fragments:
        assert fragment.lower() in line.lower(), f"{fragment!r} missing from: {line}"
    return line


def in_progress(url: str, path: str) -> float:
    """Requests to `path` the server is handling now, from Litestar's Prometheus middleware."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=2.0).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_requests_in_progress") and sample.labels.get("path") == path:
                total += sample.value
    return total


def metric_value(url: str, name: str, headers: Mapping[str, str] | None = None, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=2.0, headers=headers).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError(f"no sample {name}{labels} in /metrics")


def reference_detections(bundle: Path, texts: Sequence[str]) -> list[dict[str, Any]]:
    """What /detect must answer for each text alone (default options), computed in this process."""
    import msgspec

    from electra.serving.engine.postprocess import detect_result
    from electra.serving.engine.runtime import ModelRunner

    runner = ModelRunner("detector", bundle, threads=1)
    out = []
    for text in texts:
        encoded = runner.encode([text])
        row = runner.infer(encoded)[0]
        out.append(msgspec.to_builtins(detect_result(text, encoded[0], row, 0.5, "token")))
    return out


def assert_same_detection(text: str, got: dict[str, Any], want: dict[str, Any]) -> None:
    assert [(t["text"], t["start"], t["end"]) for t in got["tokens"]] == [
        (t["text"], t["start"], t["end"]) for t in want["tokens"]
    ]
    assert got["tokens"], text
    for token, ref in zip(got["tokens"], want["tokens"], strict=True):
        assert token["text"] == text[token["start"] : token["end"]]
        assert 0.0 <= token["score"] <= 1.0
        assert token["score"] == pytest.approx(ref["score"], abs=1e-4)
        assert token["replaced"] == (token["score"] >= 0.5)
    replaced = sum(t["replaced"] for t in got["tokens"])
    assert got["replaced_fraction"] == pytest.approx(replaced / len(got["tokens"]), abs=1e-6)
    assert got["replaced_fraction"] == pytest.approx(want["replaced_fraction"], abs=1e-6)
    assert got["truncated"] is want["truncated"] is False


def cuda_device_present() -> bool:
    """True when the CUDA driver sees a GPU (then `--device cuda` may well work, and is not an error)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


# --------------------------------------------------------------------------------------------------------
# SIGTERM: in-flight requests finish, then the process exits and the port is closed
# --------------------------------------------------------------------------------------------------------


def stalled_body(body: bytes, release: threading.Event) -> Iterator[bytes]:
    """A request body that sends its first bytes, then the rest only once `release` is set."""
    yield body[:5]
    if not release.wait(timeout=30.0):
        return  # never released: the request stays incomplete and fails, which the test reports
    yield body[5:]


@pytest.mark.slow
def test_sigterm_drains_in_flight_requests(serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    """Requests in flight at SIGTERM all get their 200 (through the batcher, during shutdown); new connections
    are refused.

    Each request sends its headers and the first bytes of its body, so the server is handling all of them when
    SIGTERM arrives; the bodies are completed only after the server has stopped listening. With
    --max-batch-size 2 and four texts per request, their inputs queue up in the batcher during the drain.
    """
    bundle = serving_bundles["detector"]
    n = len(DRAIN_TEXTS)
    requests = [[DRAIN_TEXTS[(i + k) % n] for k in range(4)] for i in range(n)]
    expected = dict(zip(DRAIN_TEXTS, reference_detections(bundle, DRAIN_TEXTS), strict=True))
    args = [
        "--model",
        f"detector={bundle}",
        "--max-wait-ms",
        "400",
        "--max-batch-size",
        "2",
        "--threads",
        "1",
    ]
    with running_server(args, tmp_path) as server:
        results: dict[int, Any] = {}
        release = threading.Event()
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        with httpx.Client(base_url=server.url, timeout=30.0, limits=limits) as client:

            def send(i: int) -> None:
                body = json.dumps({"texts": requests[i]}).encode()
                headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
                try:
                    results[i] = client.post("/detect", content=stalled_body(body, release), headers=headers)
                except Exception as e:  # reported below, with the others
                    results[i] = e

            threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(n)]
            try:
                for t in threads:
                    t.start()
                deadline = time.monotonic() + 20.0
                while in_progress(server.url, "/detect") < n:
                    assert time.monotonic() < deadline, f"requests never in flight\n{server.log_tail()}"
                    time.sleep(0.02)
                server.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                # The listening socket closes at once; the in-flight requests keep their connections. A probe
                # whose connection the kernel completed just before the close (it waited in the listen
                # backlog, or was accepted as shutdown began) is reset or closed unanswered rather than
                # refused: that is the close happening, not a server still accepting, so probe again.
                while True:
                    try:
                        httpx.get(f"{server.url}/health/live", timeout=2.0)
                    except httpx.ConnectError:
                        break
                    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError):
                        pass
                    assert time.monotonic() - signalled < 5.0, "still accepting connections 5 s after SIGTERM"
                    time.sleep(0.02)
                assert server.poll() is None, "exited before its in-flight requests were answered"
                assert not results, f"answered before their bodies were complete: {results}"
            finally:
                release.set()
                for t in threads:
                    t.join(timeout=30.0)
            code = exit_code(server, 15.0)
            exited_after = time.monotonic() - signalled

        for i, texts in enumerate(requests):
            response = results.get(i)
            assert isinstance(response, httpx.Response), f"request {i}: {response!r}\n{server.log_tail()}"
            assert response.status_code == 200, f"request {i}: {response.status_code} {response.text}"
            body = response.json()
            assert body["model"] == "detector"
            assert len(body["results"]) == len(texts)
            for text, result in zip(texts, body["results"], strict=True):
                assert_same_detection(text, result, expected[text])
        assert exited_after < 5.0, f"exit took {exited_after:.1f} s\n{server.log_tail()}"
        # The exit status itself is test_sigterm_exits_zero's business (a known bug: death by the signal).
        assert code in (0, -signal.SIGTERM), server.log_tail()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/health/live", timeout=2.0)
        log = server.log_tail(100_000)
        assert "Traceback" not in log, log
        assert "ERROR" not in log, log


@pytest.mark.slow
def test_sigterm_exits_zero(serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1"]
    with running_server(args, tmp_path) as server:
        server.send_signal(signal.SIGTERM)
        assert exit_code(server, 15.0) == 0, server.log_tail()


@pytest.mark.slow
@pytest.mark.parametrize(
    "graceful_timeout",
    [
        "1",
        "0.5",
    ],
)
def test_graceful_timeout_bounds_a_stalled_request(
    serving_bundles: dict[str, Path], tmp_path: Path, graceful_timeout: str
) -> None:
    """A client that never finishes its upload holds shutdown for --graceful-timeout seconds, not longer."""
    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1"]
    args += ["--graceful-timeout", graceful_timeout]
    with running_server(args, tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5.0) as stalled:
            stalled.sendall(
                b"POST /detect HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"text": "the cat'
            )
            time.sleep(0.3)  # the request is in the app, reading its body
            server.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            try:
                server.wait(timeout=float(graceful_timeout) + 5.0)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"still running {time.monotonic() - signalled:.1f} s after SIGTERM with "
                    f"--graceful-timeout {graceful_timeout}\n{server.log_tail()}"
                )


# --------------------------------------------------------------------------------------------------------
# Start-up errors: one clear line, exit 2, no traceback, before the port opens
# --------------------------------------------------------------------------------------------------------


def _corrupt_bundle(bundles: dict[str, Path], tmp: Path) -> Path:
    copy = tmp / "corrupt-bundle"
    shutil.copytree(bundles["detector"], copy)
    (copy / "model.onnx").write_bytes(b"this is not an ONNX protobuf\x00\xff" * 64)
    return copy


def _key_file(tmp: Path, text: str) -> Path:
    path = tmp / "keys.txt"
    path.write_text(text, encoding="utf-8")
    return path


# (id, arguments from (bundles, tmp_path), fragments the error line must hold)
CLI_ERRORS: list[tuple[str, Any, tuple[str, ...]]] = [
    ("no-model", lambda b, t: [], ("no model", "--model", "ELECTRA_MODELS")),
    (
        "missing-bundle",
        lambda b, t: ["--model", f"det={t / 'nowhere'}"],
        ("'det'", "nowhere", "no such directory"),
    ),
    ("not-a-bundle", lambda b, t: ["--model", f"det={t}"], ("'det'", "bundle.json")),
    (
        "bundle-is-a-file",
        lambda b, t: ["--model", f"det={b['detector'] / 'model.onnx'}"],
        ("'det'", "not a directory"),
    ),
    (
        "corrupt-onnx",
        lambda b, t: ["--model", f"det={_corrupt_bundle(b, t)}"],
        ("model.onnx", "ONNX Runtime"),
    ),
    (
        "port-not-a-number",
        lambda b, t: ["--model", f"det={b['detector']}", "--port", "abc"],
        ("--port", "'abc'"),
    ),
    (
        "port-out-of-range",
        lambda b, t: ["--model", f"det={b['detector']}", "--port", "70000"],
        ("port", "70000"),
    ),
    ("port-zero", lambda b, t: ["--model", f"det={b['detector']}", "--port", "0"], ("port", "0")),
    (
        "auto-truncate-not-a-boolean",
        lambda b, t: ["--model", f"det={b['detector']}", "--auto-truncate", "maybe"],
        ("--auto-truncate", "'maybe'", "true or false"),
    ),
    (
        "api-key-file-missing",
        lambda b, t: ["--model", f"det={b['detector']}", "--api-key-file", str(t / "no-keys.txt")],
        ("no-keys.txt", "cannot read"),
    ),
    (
        "api-key-file-empty",
        lambda b, t: ["--model", f"det={b['detector']}", "--api-key-file", str(_key_file(t, "# no key\n\n"))],
        ("keys.txt", "no key"),
    ),
    (
        "api-key-too-short",
        lambda b, t: [
            "--model",
            f"det={b['detector']}",
            "--api-key-file",
            str(_key_file(t, f"{GOOD_KEY}\nshort\n")),
        ],
        ("keys.txt", "16 characters"),
    ),
    (
        "api-key-file-is-a-directory",
        lambda b, t: ["--model", f"det={b['detector']}", "--api-key-file", str(t)],
        ("cannot read",),
    ),
    (
        "duplicate-model-names",
        lambda b, t: ["--model", f"det={b['detector']}", "--model", f"det={b['sentiment']}"],
        ("twice", "det"),
    ),
    ("bad-model-name", lambda b, t: ["--model", f"a b={b['detector']}"], ("model name", "'a b=")),
    ("model-without-path", lambda b, t: ["--model", "det="], ("NAME=BUNDLE_DIR",)),
    (
        "unknown-device",
        lambda b, t: ["--model", f"det={b['detector']}", "--device", "tpu"],
        ("device", "tpu"),
    ),
    (
        "bad-log-level",
        lambda b, t: ["--model", f"det={b['detector']}", "--log-level", "loud"],
        ("log level", "loud"),
    ),
    (
        "bad-batch-size",
        lambda b, t: ["--model", f"det={b['detector']}", "--max-batch-size", "0"],
        ("max_batch_size",),
    ),
    (
        "bad-metrics-flush",
        lambda b, t: ["--model", f"det={b['detector']}", "--metrics-flush-ms", "nan"],
        ("metrics_flush_ms", "0..60000", "nan"),
    ),
]


@pytest.mark.parametrize(("args", "fragments"), [c[1:] for c in CLI_ERRORS], ids=[c[0] for c in CLI_ERRORS])
def test_startup_error_is_one_clear_line(
    serving_bundles: dict[str, Path], tmp_path: Path, args: Any, fragments: tuple[str, ...]
) -> None:
    assert_clean_error(run_cli(args(serving_bundles, tmp_path)), *fragments)


def test_bad_environment_value_is_one_clear_line(serving_bundles: dict[str, Path]) -> None:
    env = clean_env(ELECTRA_MODELS=f"det={serving_bundles['detector']}", ELECTRA_PORT="abc")
    assert_clean_error(run_cli([], env), "ELECTRA_PORT", "'abc'")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, True),  # text-embeddings-inference's default
        (["--auto-truncate"], {"ELECTRA_AUTO_TRUNCATE": "false"}, True),  # a switch alone: true, and it wins
        (["--auto-truncate", "false"], {}, False),
        (["--auto-truncate", "0"], {}, False),
        ([], {"ELECTRA_AUTO_TRUNCATE": "False"}, False),
        ([], {"ELECTRA_AUTO_TRUNCATE": "yes"}, True),
    ],
)
def test_auto_truncate_from_the_command_line_and_the_environment(
    argv: list[str], env: dict[str, str], expected: bool
) -> None:
    import argparse

    from electra.cli import serve_cmd

    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--model", "det=somewhere", *argv])
    assert serve_cmd.settings_from(args, environ=env).auto_truncate is expected


def test_taken_port_is_one_clear_line(serving_bundles: dict[str, Path]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(["--model", f"det={serving_bundles['detector']}", "--port", str(port)])
    assert_clean_error(result, "cannot listen", f"127.0.0.1:{port}")


def test_cuda_without_a_gpu_is_a_clean_error(serving_bundles: dict[str, Path]) -> None:
    """onnxruntime-gpu may list CUDAExecutionProvider with no GPU (or no CUDA libraries): still a clean error.

    ONNX Runtime's own native logger may print lines of its own before ours, so only our line is checked to
    be the single `electra:` line, the last one, with no Python traceback.
    """
    if cuda_device_present():
        pytest.skip("a CUDA device is present: --device cuda is expected to work here")
    port = free_port()
    result = run_cli(
        ["--model", f"det={serving_bundles['detector']}", "--device", "cuda", "--port", str(port)]
    )
    output = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in result.stderr + result.stdout, output
    ours = [line for line in result.stderr.splitlines() if line.startswith("electra serve:")]
    assert len(ours) == 1, output
    assert ours[0].startswith("electra serve: error: "), output
    assert "cuda" in ours[0].lower(), output
    assert result.stderr.strip().splitlines()[-1] == ours[0], output


# --------------------------------------------------------------------------------------------------------
# Configuration from the environment
# --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_server_configured_only_by_environment(serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    keys = _key_file(tmp_path, f"# serving test key\n{GOOD_KEY}\n")
    port = free_port()
    env = clean_env(
        ELECTRA_MODELS=f"detector={serving_bundles['detector']}, sentiment={serving_bundles['sentiment']}",
        ELECTRA_HOST="127.0.0.1",
        ELECTRA_PORT=str(port),
        ELECTRA_MAX_BATCH_SIZE="1",
        ELECTRA_MAX_WAIT_MS="0",
        ELECTRA_MAX_TEXTS="3",
        ELECTRA_API_KEY_FILE=str(keys),
        ELECTRA_THREADS="1",
        ELECTRA_LOG_LEVEL="warning",
    )
    auth = {"Authorization": f"Bearer {GOOD_KEY}"}
    with running_server([], tmp_path, env=env) as server:
        assert server.url.endswith(f":{port}")
        # ELECTRA_API_KEY_FILE: keys are required, health stays open.
        assert httpx.get(f"{server.url}/models", timeout=5.0).status_code == 401
        assert httpx.get(f"{server.url}/health/live", timeout=5.0).status_code == 200
        models = httpx.get(f"{server.url}/models", headers=auth, timeout=5.0)
        assert models.status_code == 200, models.text
        assert sorted(m["name"] for m in models.json()["models"]) == ["detector", "sentiment"]

        texts = ["the cat sat", "on the mat", "a quick brown fox"]
        detect = httpx.post(f"{server.url}/detect", json={"texts": texts}, headers=auth, timeout=30.0)
        assert detect.status_code == 200, detect.text
        assert len(detect.json()["results"]) == 3
        # ELECTRA_MAX_TEXTS=3.
        over = httpx.post(
            f"{server.url}/detect", json={"texts": [*texts, "one more"]}, headers=auth, timeout=30.0
        )
        assert over.status_code == 413, over.text
        # ELECTRA_MAX_BATCH_SIZE=1: the three texts of one request ran as three model calls of one input.
        assert metric_value(server.url, "electra_batch_size_count", model="detector") == 3
        assert metric_value(server.url, "electra_batch_size_bucket", model="detector", le="1.0") == 3

        classify = httpx.post(
            f"{server.url}/classify",
            json={"text": "good movie", "model": "sentiment"},
            headers=auth,
            timeout=30.0,
        )
        assert classify.status_code == 200, classify.text
        assert classify.json()["results"][0]["label"] in ("negative", "positive")


# --------------------------------------------------------------------------------------------------------
# settings_from: the command line over ELECTRA_* over the defaults (no process needed)
# --------------------------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_settings_defaults_are_serve_settings_defaults() -> None:
    """The CLI's defaults and the dataclass's defaults must not drift apart."""
    settings = settings_from(parse("--model", "det=/bundles/det"), {})
    assert settings == ServeSettings(models=(ModelSpec("det", Path("/bundles/det")),))


def test_settings_from_environment_only() -> None:
    env = {
        "ELECTRA_MODELS": "det=/b/det, sent=/b/sent,",
        "ELECTRA_HOST": "0.0.0.0",
        "ELECTRA_PORT": "9001",
        "ELECTRA_DEVICE": "cuda",
        "ELECTRA_MAX_BATCH_TOKENS": "4096",
        "ELECTRA_MAX_BATCH_SIZE": "4",
        "ELECTRA_MAX_WAIT_MS": "5.5",
        "ELECTRA_MAX_QUEUE": "64",
        "ELECTRA_MAX_BODY_BYTES": "1000",
        "ELECTRA_MAX_TEXTS": "7",
        "ELECTRA_MAX_CHARS": "300",
        "ELECTRA_API_KEY_FILE": "/secrets/keys.txt",
        "ELECTRA_THREADS": "2",
        "ELECTRA_GRACEFUL_TIMEOUT": "12.5",
        "ELECTRA_HEADER_TIMEOUT": "4.5",
        "ELECTRA_BODY_TIMEOUT": "12",
        "ELECTRA_MAX_CONNECTIONS": "64",
        "ELECTRA_MAX_HEADER_BYTES": "9000",
        "ELECTRA_LOG_LEVEL": "debug",
    }
    s = settings_from(parse(), env)
    assert s.models == (ModelSpec("det", Path("/b/det")), ModelSpec("sent", Path("/b/sent")))
    assert (s.host, s.port, s.device) == ("0.0.0.0", 9001, "cuda")
    assert (s.max_batch_tokens, s.max_batch_size, s.max_wait_ms, s.max_queue) == (4096, 4, 5.5, 64)
    assert (s.max_body_bytes, s.max_texts, s.max_chars) == (1000, 7, 300)
    assert s.api_key_file == Path("/secrets/keys.txt")
    assert (s.threads, s.graceful_timeout_s, s.log_level) == (2, 12.5, "debug")
    assert (s.header_timeout_s, s.body_timeout_s) == (4.5, 12.0)
    assert (s.max_connections, s.max_header_bytes) == (64, 9000)
    assert s.api_keys == frozenset()  # read later (with_keys), not while parsing


def test_command_line_wins_over_environment() -> None:
    env = {
        "ELECTRA_MODELS": "env=/b/env",
        "ELECTRA_PORT": "abc",  # never parsed: --port wins
        "ELECTRA_MAX_BATCH_SIZE": "4",
        "ELECTRA_MAX_WAIT_MS": "9",
        "ELECTRA_LOG_LEVEL": "loud",
        "ELECTRA_MAX_TEXTS": "7",
    }
    args = parse(
        "--model", "cli=/b/cli", "--port", "9002", "--max-batch-size", "16", "--max-wait-ms", "1",
        "--log-level", "error",
    )  # fmt: skip
    s = settings_from(args, env)
    assert s.models == (ModelSpec("cli", Path("/b/cli")),)
    assert (s.port, s.max_batch_size, s.max_wait_ms, s.log_level) == (9002, 16, 1.0, "error")
    assert s.max_texts == 7  # not on the command line: the environment's


def test_example_from_flag_or_environment() -> None:
    """--example / ELECTRA_EXAMPLE: the page's pre-filled text, taken verbatim (quotes, markup, newlines)."""
    text = 'The chef </script> said "hi"\nand left.'
    assert settings_from(parse("--model", "a=/b"), {}).example is None
    assert settings_from(parse("--model", "a=/b", "--example", text), {}).example == text
    assert settings_from(parse("--model", "a=/b"), {"ELECTRA_EXAMPLE": text}).example == text
    both = settings_from(parse("--model", "a=/b", "--example", "cli"), {"ELECTRA_EXAMPLE": text})
    assert both.example == "cli"
    from electra.cli.serve_cmd import OPTIONS, env_name

    assert OPTIONS["example"].help == "text the page at / is pre-filled with"
    assert env_name("example") == "ELECTRA_EXAMPLE"


def test_empty_environment_values_are_unset() -> None:
    s = settings_from(
        parse("--model", "a=/b"), {"ELECTRA_PORT": "", "ELECTRA_MODELS": "", "ELECTRA_HOST": ""}
    )
    assert (s.port, s.host) == (8000, "127.0.0.1")


def test_settings_read_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("ELECTRA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ELECTRA_MODELS", "det=/b/det")
    monkeypatch.setenv("ELECTRA_PORT", "9123")
    s = settings_from(parse())
    assert (s.models, s.port) == ((ModelSpec("det", Path("/b/det")),), 9123)


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        ({"ELECTRA_PORT": "abc"}, ("ELECTRA_PORT", "'abc'", "whole number")),
        ({"ELECTRA_PORT": "80.5"}, ("ELECTRA_PORT", "'80.5'")),
        ({"ELECTRA_PORT": "70000"}, ("port", "70000")),
        ({"ELECTRA_MAX_BATCH_SIZE": "0"}, ("max_batch_size", "0")),
        ({"ELECTRA_MAX_BATCH_SIZE": "many"}, ("ELECTRA_MAX_BATCH_SIZE", "'many'")),
        ({"ELECTRA_MAX_WAIT_MS": "-1"}, ("max_wait_ms",)),
        ({"ELECTRA_MAX_WAIT_MS": "soon"}, ("ELECTRA_MAX_WAIT_MS", "'soon'")),
        ({"ELECTRA_THREADS": "1.5"}, ("ELECTRA_THREADS", "'1.5'")),
        ({"ELECTRA_DEVICE": "tpu"}, ("device", "'tpu'")),
        ({"ELECTRA_BATCH_ORDER": "shortest"}, ("batch_order", "length, arrival", "'shortest'")),
        ({"ELECTRA_LOG_LEVEL": "loud"}, ("log level", "'loud'")),
        ({"ELECTRA_MODELS": "a b=/x"}, ("model name",)),
        ({"ELECTRA_MODELS": "a=/x,a=/y"}, ("twice", "a")),
        ({"ELECTRA_MODELS": ""}, ("no model",)),
        pytest.param({"ELECTRA_MAX_WAIT_MS": "nan"}, ("max_wait_ms",), id="max-wait-nan"),
        pytest.param({"ELECTRA_MAX_WAIT_MS": "inf"}, ("max_wait_ms",), id="max-wait-inf"),
        pytest.param({"ELECTRA_INLINE_MAX_MS": "-0.5"}, ("inline_max_ms",), id="inline-negative"),
        pytest.param({"ELECTRA_INLINE_MAX_MS": "nan"}, ("inline_max_ms",), id="inline-nan"),
        pytest.param({"ELECTRA_GRACEFUL_TIMEOUT": "nan"}, ("graceful",), id="graceful-nan"),
        pytest.param({"ELECTRA_GRACEFUL_TIMEOUT": "inf"}, ("graceful",), id="graceful-inf"),
        pytest.param({"ELECTRA_HEADER_TIMEOUT": "0"}, ("header_timeout_s", "> 0"), id="header-timeout-0"),
        pytest.param({"ELECTRA_HEADER_TIMEOUT": "nan"}, ("header_timeout_s",), id="header-timeout-nan"),
        pytest.param({"ELECTRA_BODY_TIMEOUT": "-1"}, ("body_timeout_s",), id="body-timeout-negative"),
        pytest.param({"ELECTRA_BODY_TIMEOUT": "inf"}, ("body_timeout_s",), id="body-timeout-inf"),
        pytest.param({"ELECTRA_MAX_CONNECTIONS": "0"}, ("max_connections", "at least 1"), id="connections-0"),
        pytest.param({"ELECTRA_MAX_HEADER_BYTES": "4096"}, ("max_header_bytes", "8192"), id="header-bytes"),
    ],
)
def test_bad_values_are_input_errors(env: dict[str, str], fragments: tuple[str, ...]) -> None:
    full = {"ELECTRA_MODELS": "det=/b/det", **env}
    try:
        settings = settings_from(parse(), full)
    except InputError as e:
        message = str(e)
        for fragment in fragments:
            assert fragment.lower() in message.lower(), f"{fragment!r} missing from: {message}"
        return
    values = {k: getattr(settings, k) for k in ("max_wait_ms", "graceful_timeout_s")}
    assert not any(math.isnan(v) or math.isinf(v) for v in values.values()), f"accepted: {values}"
    raise AssertionError(f"{env} was accepted: {settings}")


def test_bad_command_line_value_names_the_option() -> None:
    with pytest.raises(InputError, match=r"--max-batch-tokens: 'lots' is not a whole number"):
        settings_from(parse("--model", "a=/b", "--max-batch-tokens", "lots"), {})


# --------------------------------------------------------------------------------------------------------
# electra.serving.process itself: readiness, failing fast, stopping (small stand-in servers, no bundle)
# --------------------------------------------------------------------------------------------------------


def http_server(directory: Path, port: int) -> list[Any]:
    """A stand-in server: the standard library's static file server, on 127.0.0.1:port."""
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", directory]


def test_wait_ready_returns_once_health_ready_answers_200(tmp_path: Path) -> None:
    (tmp_path / "site" / "health").mkdir(parents=True)
    (tmp_path / "site" / "health" / "ready").write_text("ok")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = http_server(tmp_path / "site", port)
    with start_server(cmd, url=url, log=tmp_path / "log", ready_timeout=60) as s:
        assert s.poll() is None and s.url == url
        assert s.wait_ready(5.0) < 5.0
    assert s.returncode is not None, "stopped after the block"


def test_wait_ready_fails_fast_with_the_output_of_a_server_that_died(tmp_path: Path) -> None:
    code = "import sys; print('cannot load the bundle', file=sys.stderr); sys.exit(3)"
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with (
        start_server([sys.executable, "-c", code], url=url, log=tmp_path / "log") as s,
        pytest.raises(ServerNotReady, match=r"(?s)exited with 3 before it was ready:.*cannot load"),
    ):
        s.wait_ready(120.0)
    assert time.monotonic() - started < 60.0, "waited for the timeout instead of failing fast"
    # A plain Popen: its piped stderr goes into the message.
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    with pytest.raises(ServerNotReady, match=r"(?s)electra serve exited with 3.*cannot load the bundle"):
        wait_ready(url, 120.0, proc, name="electra serve")
    proc.wait()


def test_wait_ready_times_out_with_the_last_answer(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (
        start_server(http_server(tmp_path / "empty", port), url=url, log=tmp_path / "log") as s,
        pytest.raises(ServerNotReady, match=r"not ready after 3 s \(last: (HTTP 404|.*refused|.*timed out)"),
    ):
        s.wait_ready(3.0)


def test_stop_kills_a_process_that_ignores_sigterm() -> None:
    code = "import signal as s, time; s.signal(s.SIGTERM, s.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"  # SIGTERM is ignored from here on
    killed: list[bool] = []
    assert stop(proc, 0.5, on_kill=lambda: killed.append(True)) == -signal.SIGKILL
    assert killed == [True]
    proc.stdout.close()
    assert stop(proc) == -signal.SIGKILL  # already gone: nothing to do


def test_stop_ends_the_process_group_of_a_server_in_its_own_session(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "log"
    proc = ServerProcess([sys.executable, "-c", code], url="http://127.0.0.1:1", log=log, new_session=True)
    deadline = time.monotonic() + 30.0
    while not log.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.log_tail()
        time.sleep(0.05)
    child = int(log.read_text().split()[0])
    assert stop(proc, 10.0) == -signal.SIGTERM
    deadline = time.monotonic() + 10.0
    while Path(f"/proc/{child}").exists() and "zombie" not in Path(f"/proc/{child}/status").read_text():
        assert time.monotonic() < deadline, "the server's child outlived it"
        time.sleep(0.05)
