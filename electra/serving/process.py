"""Server processes: a free port, a server started with its output in a log file, readiness, a clean stop.

Standard library only (no torch, no HTTP client): loadtests/run.py runs `electra serve` with it, and so do
the benchmarks and the tests.

    port = free_port()
    with start_server(serve_command("--model", f"det={bundle}", "--port", str(port)),
                      url=f"http://127.0.0.1:{port}", log=tmp / "server.log", ready_timeout=90) as server:
        ...  # ready: /health/ready answered 200
    # stopped: SIGTERM (the server drains in-flight requests), SIGKILL if it takes too long
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

READY_PATH = "/health/ready"
# Local servers only: proxies from the environment (http_proxy, ...) must not see these requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServerNotReady(RuntimeError):
    """The server exited before it was ready, or was not ready in time; the message holds its log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_command(*args: str) -> list[str]:
    """`electra serve ARGS` with this interpreter."""
    return [sys.executable, "-m", "electra", "serve", *args]


class ServerProcess(subprocess.Popen):
    """A server subprocess whose stdout and stderr go to `log`: a pipe nobody reads would stall a chatty
    server once full. With `new_session`, it leads its own process group and `stop` signals the group, so
    anything it started stops too."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        url: str,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        new_session: bool = False,
    ) -> None:
        self.url = url
        self.log = Path(log)
        with self.log.open("wb") as out:
            super().__init__(
                list(args),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=new_session,
            )

    def log_tail(self, n: int = 4000) -> str:
        """The last `n` characters of the server's output."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-n:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float, name: str = "the server") -> float:
        return wait_ready(self.url, timeout, self, name=name)


def _output(proc: subprocess.Popen | None) -> str:
    if isinstance(proc, ServerProcess):
        return proc.log_tail()
    if proc is not None and proc.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            out = proc.stderr.read()
            return (out.decode(errors="replace") if isinstance(out, bytes) else out)[-4000:]
    return ""


def wait_ready(
    url: str,
    timeout: float,
    proc: subprocess.Popen | None = None,
    *,
    name: str = "the server",
    interval: float = 0.1,
) -> float:
    """Seconds until GET `url`/health/ready answered 200 (`url`: the server's base, http://host:port).

    ServerNotReady with the process's output (its log, or its stderr when piped) as soon as `proc` exits,
    or once `timeout` seconds have passed, with the last answer.
    """
    ready_url = url.rstrip("/") + READY_PATH
    start = time.monotonic()
    last = "no answer"
    while True:
        if proc is not None and proc.poll() is not None:
            raise ServerNotReady(
                f"{name} exited with {proc.returncode} before it was ready:\n{_output(proc)}"
            )
        elapsed = time.monotonic() - start
        if elapsed >= timeout:
            raise ServerNotReady(
                f"{name} not ready after {timeout:.0f} s (last: {last}); log:\n{_output(proc)}"
            )
        try:
            with _OPENER.open(ready_url, timeout=max(0.1, min(5.0, timeout - elapsed))) as r:
                if r.status == 200:
                    return time.monotonic() - start
                last = f"HTTP {r.status} {r.read()[:200]!r}"
        except urllib.error.HTTPError as e:  # an answer, not 200 yet (503 while loading)
            last = f"HTTP {e.code} {e.read()[:200]!r}"
        except OSError as e:  # not listening yet
            last = repr(e)
        time.sleep(interval)


def stop(
    proc: subprocess.Popen, timeout: float = 15.0, on_kill: Callable[[], None] | None = None
) -> int | None:
    """Make sure the process is gone: SIGTERM (a server drains its in-flight requests), then, after
    `timeout` seconds, `on_kill()` and SIGKILL. A process leading its own group has the group signalled.
    Its exit status."""
    if proc.poll() is None:
        _signal(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if on_kill is not None:
                on_kill()
            _signal(proc, signal.SIGKILL)
            proc.wait(timeout=10)
    return proc.returncode


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        if os.getpgid(proc.pid) == proc.pid:  # started in its own session or group
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass  # already gone


@contextlib.contextmanager
def start_server(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    url: str,
    log: Path,
    cwd: Path | str | None = None,
    ready_timeout: float | None = None,
    stop_timeout: float = 15.0,
    new_session: bool = False,
) -> Iterator[ServerProcess]:
    """A ServerProcess for the `with` block (ready first when `ready_timeout` is given), stopped after it."""
    proc = ServerProcess(args, url=url, log=log, env=env, cwd=cwd, new_session=new_session)
    try:
        if ready_timeout is not None:
            proc.wait_ready(ready_timeout)
        yield proc
    finally:
        stop(proc, stop_timeout)
