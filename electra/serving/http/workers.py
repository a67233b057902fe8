"""`--workers N`: N server processes behind one port, each with its own copy of every model (on one GPU, N
instances of each model, as a Triton instance group of count N), so that a server bound by one CPU core for
its Python work (HTTP, JSON, tokenization, post-processing) can use N.

The supervisor (the process `electra serve` started) loads no model: it checks what it can, binds the
listening sockets, starts the workers with the spawn method (each a fresh interpreter: no ONNX Runtime or CUDA
state is ever forked) and hands each its socket. On Linux each worker has a socket of its own, all bound to
the port together (SO_REUSEPORT), so the kernel spreads new connections evenly over them: with one socket
shared by all, the worker that woke first took most of a burst of connections (256 over 4 workers came out
as 112, 86, 56 and 2). The sockets stay the supervisor's, so connections waiting on a worker that died are
accepted by its replacement, not lost (they wait for it). Elsewhere the workers share one socket. It
restarts a worker that dies (a worker that dies before it was ever ready, twice in a row, stops the server:
that is not going to get better by retrying), passes SIGTERM on, and exits 0 when they have drained, or 1
when it had to stop for a failure.

What the workers share, besides the socket:

- readiness: /health/ready (and v2's) answers 200 from any worker only when every worker is ready, so a
  pod receives traffic once all of its copies are warm;
- metrics: prometheus_client's multiprocess mode in a directory of the supervisor's, so /metrics from any
  worker counts every worker's requests (gauges summed over live workers), and so do Triton's statistics.

Each worker's limits (--max-queue, --max-connections, ...) are its own; on a CPU, a worker's ONNX Runtime
takes cores / N threads unless --threads says otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from electra import logs
from electra.errors import ElectraError, InputError
from electra.serving.engine.metric_buffer import MULTIPROC_ENV
from electra.serving.settings import ServeSettings

log = logging.getLogger("electra.serving")

# A worker that exits this soon after starting, before it was ever ready, failed to start.
FAILED_START_TIMES = 2
# Seconds a stopping worker gets beyond --graceful-timeout before it is killed.
KILL_MARGIN_S = 10.0
# How often a worker looks for its supervisor, and the supervisor at its workers.
POLL_S = 0.5
# A worker's exit status for bad input (as the CLI's): it will not start however often it is restarted.
EXIT_INPUT = 2


def cpu_threads(settings: ServeSettings, cores: int | None = None) -> int:
    """ONNX Runtime's intra-op threads per model in each worker: --threads when given; on a CPU with several
    workers, an equal share of the cores (N workers do not each start one thread per core); else 0 (all)."""
    if settings.threads or settings.worker_count == 1 or settings.device != "cpu":
        return settings.threads
    return max(1, (cores or os.cpu_count() or 1) // settings.worker_count)


# SO_REUSEPORT spreads connections over a group of listening sockets on Linux; elsewhere it does not balance.
REUSE_PORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def listening_sockets(settings: ServeSettings) -> list[socket.socket]:
    """The socket each uvicorn worker accepts on, by index: one each in one SO_REUSEPORT group where the
    kernel balances such a group, else one shared (InputError, naming the fix, when the port is taken)."""
    count = settings.worker_count
    if not REUSE_PORT:
        return [bind(settings)] * count
    bind(settings).close()  # the port is free: no other process's SO_REUSEPORT socket gets a share of it
    return [bind(settings, reuse_port=True) for _ in range(count)]


def bind(settings: ServeSettings, reuse_port: bool = False) -> socket.socket:
    """A listening socket on the port (InputError, naming the fix, when the port is taken)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as e:
        sock.close()
        raise InputError(
            f"cannot listen on {settings.host}:{settings.port}: {e.strerror or e} (another process holds the "
            "port: stop it, or pick another with --port)"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@dataclass
class _Worker:
    index: int
    process: Any  # multiprocessing's SpawnProcess
    started: float
    was_ready: bool = False


class Supervisor:
    """Starts, watches and stops the workers (see the module's docstring)."""

    def __init__(
        self,
        settings: ServeSettings,
        run_worker: Callable[..., None],
        access_log: bool,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.run_worker = run_worker
        self.access_log = access_log
        self.on_ready = on_ready
        self.all_ready = False
        self.context = multiprocessing.get_context("spawn")
        self.flags = self.context.Array("b", settings.worker_count, lock=False)
        self.workers: dict[int, _Worker] = {}
        self.failed_starts: dict[int, int] = {}
        # A plain flag, not a threading.Event: Event.set() in a signal handler deadlocks when the signal
        # lands while this same thread holds the Event's lock inside Event.wait().
        self.stopping = False
        self.failure: str | None = None
        self.failure_kind: type[ElectraError] = ElectraError

    def serve(self) -> None:
        """Run until SIGTERM/SIGINT (the workers drained), or ElectraError when a failure stopped them."""
        # uvicorn's workers accept on sockets of ours; granian binds the port in each (SO_REUSEPORT).
        count = self.settings.worker_count
        socks = listening_sockets(self.settings) if self.settings.http_server == "uvicorn" else [None] * count
        metrics_dir = tempfile.mkdtemp(prefix="electra-metrics-")
        # Read by prometheus_client when a worker imports it: each worker writes its samples to files here.
        os.environ[MULTIPROC_ENV] = metrics_dir
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            log.info(
                "serving on http://%s:%d with %d workers, each loading every model",
                self.settings.host,
                self.settings.port,
                self.settings.worker_count,
            )
            for index in range(count):
                self._start(index, socks[index])
            while not self.stopping:
                time.sleep(POLL_S)  # a signal's handler runs during the sleep, which then finishes
                if not self.stopping:
                    self._watch(socks)
            _close(socks)  # new connections are refused from now on; the workers drain theirs
            self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            _close(socks)  # closing twice is harmless
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(metrics_dir, ignore_errors=True)
        if self.failure is not None:
            raise self.failure_kind(self.failure)

    def _on_signal(self, *_: Any) -> None:
        self.stopping = True

    def _start(self, index: int, sock: socket.socket | None) -> None:
        self.flags[index] = 0
        fmt, me = logs.current_format(), os.getpid()
        process = self.context.Process(
            target=self.run_worker,
            args=(self.settings, sock, index, self.flags, fmt, self.access_log, me),
            name=f"electra-worker-{index}",
        )
        process.start()
        self.workers[index] = _Worker(index, process, time.monotonic())

    def _watch(self, socks: list[socket.socket | None]) -> None:
        ready = all(self.flags)
        if ready and not self.all_ready:
            log.info("ready: %d workers", self.settings.worker_count)
            if self.on_ready is not None:
                self.on_ready()
                self.on_ready = None  # once: the first time the server is ready
        self.all_ready = ready
        for index, worker in list(self.workers.items()):
            if self.flags[index]:
                worker.was_ready = True
                self.failed_starts[index] = 0
            if worker.process.is_alive():
                continue
            code = worker.process.exitcode
            _forget(worker.process.pid)
            pid = worker.process.pid
            if code == EXIT_INPUT and not worker.was_ready:
                # Bad input (a model that cannot load): another start would fail the same way.
                self.failure, self.failure_kind = (
                    f"worker {index} could not start (its error above)",
                    InputError,
                )
                self.stopping = True
                return
            if worker.was_ready:
                log.error("worker %d (pid %d) exited with %s; starting it again", index, pid, code)
            else:
                self.failed_starts[index] = self.failed_starts.get(index, 0) + 1
                if self.failed_starts[index] >= FAILED_START_TIMES:
                    self.failure = (
                        f"worker {index} exited with {code} before it was ready, {FAILED_START_TIMES} times "
                        "in a row; stopping (its log lines above say why)"
                    )
                    log.error("%s", self.failure)
                    self.stopping = True
                    return
                log.error(
                    "worker %d (pid %d) exited with %s before it was ready; starting it again",
                    index,
                    pid,
                    code,
                )
            self._start(index, socks[index])

    def _stop_all(self) -> None:
        """SIGTERM to every worker (each drains its requests: --graceful-timeout), then SIGKILL if late."""
        for worker in self.workers.values():
            if worker.process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.settings.graceful_timeout_s + KILL_MARGIN_S
        for worker in self.workers.values():
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                log.warning("worker %d did not stop in time; killing it", worker.index)
                worker.process.kill()
                worker.process.join(5)
            _forget(worker.process.pid)


def _forget(pid: int | None) -> None:
    """A gone worker's live gauges leave the sums (prometheus_client's multiprocess mode)."""
    if pid is None:
        return
    from prometheus_client import multiprocess

    with contextlib.suppress(OSError):
        multiprocess.mark_process_dead(pid)


def watch_supervisor(supervisor_pid: int) -> None:
    """In a worker: SIGTERM itself (a graceful stop) if its supervisor goes away, killed without the chance
    to stop its workers, so no worker is left serving alone."""

    def watch() -> None:
        while os.getppid() == supervisor_pid:
            time.sleep(POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


def _close(socks: list[socket.socket | None]) -> None:
    for sock in socks:
        if sock is not None:
            sock.close()
