"""`electra serve --workers N`: N server processes on one port, each with its own models, under a supervisor.

What a user of several workers relies on, against real server processes: the server is ready only when every
worker is warm; /metrics and Triton's statistics count every worker's requests; a worker that dies is started
again while the others keep answering; SIGTERM drains in-flight requests in every worker and exits 0 (the
drain tests of tests/test_serve_process.py, run again with `--workers 2`); a model that cannot load stops
the server with one line and exit 2, as without workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from electra.serving.http.workers import REUSE_PORT, cpu_threads
from electra.serving.process import serve_command
from electra.serving.settings import ModelSpec, ServeSettings

httpx = pytest.importorskip("httpx", reason="the serve extra is not installed")

from tests import test_serve_process as tsp  # noqa: E402

WORKERS = 2


@pytest.fixture
def two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tsp, "serve_command", lambda *args: serve_command(*args, "--workers", str(WORKERS)))


def worker_pids(supervisor: int) -> list[int]:
    """The supervisor's worker processes (multiprocessing's resource tracker left out), from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == supervisor and b"spawn_main" in command:
            pids.append(int(stat.parent.name))
    return sorted(pids)


def metric(url: str, name: str, model: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("model") == model:
                return float(sample.value)
    return 0.0


def test_each_worker_on_a_cpu_takes_its_share_of_the_cores() -> None:
    one = ServeSettings(models=(ModelSpec("m", Path("b")),))
    assert cpu_threads(one, cores=16) == 0  # one worker: ONNX Runtime's own choice, every core
    four = ServeSettings(models=one.models, workers=4)
    assert cpu_threads(four, cores=16) == 4 and cpu_threads(four, cores=2) == 1
    assert cpu_threads(ServeSettings(models=one.models, workers=4, threads=3), cores=16) == 3
    assert cpu_threads(ServeSettings(models=one.models, workers=4, device="cuda"), cores=16) == 0


def test_workers_default_to_one_on_a_cpu_and_one_per_four_cores_up_to_four_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = (ModelSpec("m", Path("b")),)
    for cores, want in ((64, 4), (16, 4), (12, 3), (7, 1), (2, 1), (1, 1)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert ServeSettings(models=models, device="cuda").worker_count == want, cores
        assert ServeSettings(models=models).worker_count == 1, cores  # a CPU's cores go to ONNX Runtime
        assert ServeSettings(models=models, device="cuda", workers=2).worker_count == 2
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert ServeSettings(models=models, device="cuda").worker_count == 1


def client_of(server: Any, pid: int) -> httpx.Client:
    """A keep-alive client whose connection the worker `pid` accepted (new connections until one is)."""
    port = int(server.url.rsplit(":", 1)[1])
    for _ in range(100):
        client = httpx.Client(base_url=server.url, timeout=30.0)
        before = connections_by_process([pid], port)[pid]
        assert client.get("/health/live").status_code == 200
        if connections_by_process([pid], port)[pid] > before:
            return client
        client.close()
    raise AssertionError(f"no connection of 100 went to worker {pid}")


@pytest.mark.slow
def test_workers_count_together_and_one_that_dies_is_replaced(
    two_workers: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1"]
    with tsp.running_server(args, tmp_path) as server:
        workers = worker_pids(server.pid)
        assert len(workers) == WORKERS, server.log_tail()
        sent = 24
        for i in range(sent):  # a connection each: the kernel hands them to whichever worker accepts
            r = httpx.post(f"{server.url}/detect", json={"text": f"the cat sat {i}"}, timeout=30.0)
            assert r.status_code == 200, r.text
        assert metric(server.url, "electra_inputs_processed_total", "detector") == sent
        stats = httpx.get(f"{server.url}/v2/models/detector/stats", timeout=10.0).json()["model_stats"][0]
        assert stats["inference_count"] == sent and stats["inference_stats"]["success"]["count"] == sent

        # Each worker accepts on a socket of its own (SO_REUSEPORT): a kept-alive connection the surviving
        # worker accepted asks it, not the new one, for readiness while the new one loads.
        survivor = client_of(server, workers[1])
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 60.0
        while set(worker_pids(server.pid)) & {workers[0]} or len(worker_pids(server.pid)) < WORKERS:
            assert time.monotonic() < deadline, server.log_tail()  # until the supervisor starts another
            time.sleep(0.05)
        details = []
        while True:  # the other worker answers meanwhile; readiness waits for the new one
            assert time.monotonic() < deadline, server.log_tail()
            ready = survivor.get("/health/ready")
            r = httpx.post(f"{server.url}/detect", json={"text": "the dog ran"}, timeout=30.0)
            assert r.status_code in (200, 503), r.text  # 503: the new worker, still warming up
            sent += r.status_code == 200
            if ready.status_code == 200:
                break
            details.append(ready.json().get("detail"))
            time.sleep(0.2)
        survivor.close()
        # Answered by the surviving worker while the new one loads.
        assert details and set(details) == {f"1 of {WORKERS} workers ready"}, (details, server.log_tail())
        # The dead worker's counts stay in the sums.
        assert metric(server.url, "electra_inputs_processed_total", "detector") == sent
        server.send_signal(signal.SIGTERM)
        assert tsp.exit_code(server, 30.0) == 0, server.log_tail()
        assert not worker_pids(server.pid)
        log = server.log_tail(100_000)
    assert f"worker 0 (pid {workers[0]}) exited with -9; starting it again" in log or (
        f"worker 1 (pid {workers[0]}) exited with -9; starting it again" in log
    ), log
    assert "Traceback" not in log


@pytest.mark.slow
def test_a_model_that_cannot_load_stops_the_server_with_one_line(
    serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """bundle.json is fine, so the supervisor starts the workers; the ONNX file is not: they cannot start."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(serving_bundles["detector"], broken)
    (broken / "model.onnx").write_bytes(b"not an onnx file")
    result = subprocess.run(
        serve_command("--model", f"detector={broken}", "--workers", "2", "--port", str(tsp.free_port())),
        cwd=tsp.ROOT,
        env=tsp.clean_env(),
        capture_output=True,
        text=True,
        timeout=tsp.CLI_TIMEOUT_S,
    )
    output = f"exit {result.returncode}\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in result.stderr, output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("electra serve: error: worker ") and "could not start" in last, output
    assert "ONNX Runtime cannot load it" in result.stderr, output


def connections_by_process(pids: list[int], port: int) -> dict[int, int]:
    """How many established TCP connections to local `port` each of `pids` holds (/proc: sockets' inodes
    in each process's fds, matched with /proc/net/tcp and tcp6)."""
    inodes: dict[str, int] = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # 01: ESTABLISHED
                inodes[fields[9]] = 0
    counts = {}
    for pid in pids:
        owned = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    owned.add(target[8:-1])
        counts[pid] = len(owned & inodes.keys())
    return counts


@pytest.mark.slow
@pytest.mark.skipif(not REUSE_PORT, reason="SO_REUSEPORT balances connections only on Linux")
def test_a_burst_of_connections_is_spread_evenly_over_the_workers(
    monkeypatch: pytest.MonkeyPatch, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """256 connections opened at once over 4 workers: each worker gets close to its even share of 64 (with
    one shared listening socket, the worker that woke first took most: 112, 86, 56 and 2 in one run)."""
    workers, connections = 4, 256
    monkeypatch.setattr(tsp, "serve_command", lambda *args: serve_command(*args, "--workers", str(workers)))
    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1"]
    with tsp.running_server(args, tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = b'{"text": "the cat sat"}'
        head = f"POST /detect HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        request = f"{head}Content-Type: application/json\r\n\r\n".encode() + body

        async def burst() -> dict[int, int]:
            opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
            for _, writer in opened:
                writer.write(request)
            heads = [await reader.readuntil(b"\r\n\r\n") for reader, _ in opened]
            assert all(head.startswith(b"HTTP/1.1 200") for head in heads), heads[0]
            counts = connections_by_process(worker_pids(server.pid), port)
            for _, writer in opened:
                writer.close()
            return counts

        # Two bursts: with one shared socket a burst now and then comes out near even by chance.
        for counts in (asyncio.run(burst()), asyncio.run(burst())):
            assert len(counts) == workers and sum(counts.values()) == connections, counts
            # Hashed evenly, a worker's count is 64 +- 7 (binomial): these bounds are 4 of those apart.
            assert min(counts.values()) >= 36 and max(counts.values()) <= 96, counts


def test_workers_out_of_range_is_one_line() -> None:
    result = tsp.run_cli(["--model", "d=somewhere", "--workers", "0"])
    tsp.assert_clean_error(result, "workers must be in 1..64, got 0")


@pytest.mark.slow
def test_sigterm_drains_in_flight_requests_in_every_worker(
    two_workers: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    tsp.test_sigterm_drains_in_flight_requests(serving_bundles, tmp_path)


@pytest.mark.slow
def test_graceful_timeout_bounds_a_stalled_request_in_a_worker(
    two_workers: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    tsp.test_graceful_timeout_bounds_a_stalled_request(serving_bundles, tmp_path, "1")


@pytest.mark.slow
def test_granian_workers_serve_and_drain(
    two_workers: None, monkeypatch: pytest.MonkeyPatch, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """granian's workers each bind the port (SO_REUSEPORT) rather than share the supervisor's socket."""
    pytest.importorskip("granian", reason="granian is not installed")
    workers_command = tsp.serve_command
    monkeypatch.setattr(tsp, "serve_command", lambda *a: workers_command(*a, "--http-server", "granian"))
    tsp.test_sigterm_drains_in_flight_requests(serving_bundles, tmp_path)


@pytest.mark.slow
def test_workers_stop_by_themselves_when_their_supervisor_is_killed(
    two_workers: None, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """No worker is left holding the port and its models (GPU memory) after a SIGKILL of the supervisor."""
    args = ["--model", f"detector={serving_bundles['detector']}", "--threads", "1"]
    with tsp.running_server(args, tmp_path) as server:
        workers = worker_pids(server.pid)
        assert len(workers) == WORKERS
        server.kill()
        server.wait(timeout=10.0)
        deadline = time.monotonic() + 30.0
        while any(Path(f"/proc/{pid}").exists() for pid in workers):
            assert time.monotonic() < deadline, f"workers still running: {workers}\n{server.log_tail()}"
            time.sleep(0.1)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/health/live", timeout=5.0)
