"""Hostile clients on raw sockets, and what the fault suite reads back from a server process: its metrics,
its open files and its memory (tests/test_hostile_clients.py).

Standard library only, so what goes over the wire is exactly what is written here: no HTTP client library
that would retry, pool, add headers or send `Expect: 100-continue` on its own.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

# A word list of the fixture vocabulary (tests/conftest.py's SERVING_WORDS), for texts the tokenizer knows.
WORDS = ("the", "cat", "sat", "on", "mat", "dog", "ran", "in", "park", "city", "river", "bank")


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_until_closed(s: socket.socket, timeout: float = 10.0) -> tuple[bytes, str]:
    """Everything the server sends until it closes the connection, and how it ended: "closed" (FIN),
    "reset" (RST) or "timeout" (still open after `timeout` seconds)."""
    s.settimeout(timeout)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    except TimeoutError:
        return data, "timeout"
    return data, "closed"


def status_of(raw: bytes) -> int:
    """The status code of the first response in `raw` (0: no response)."""
    if not raw.startswith(b"HTTP/1."):
        return 0
    return int(raw.split(b" ", 2)[1])


def responses_in(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Every complete response in `raw` (Content-Length framed, as this server frames them): status, headers,
    body. One still arriving (head or body short) is not counted: a reader loops until it is in."""
    out = []
    while raw.startswith(b"HTTP/1.") and b"\r\n\r\n" in raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            break
        out.append((int(lines[0].split(" ", 2)[1]), headers, rest[:length]))
        raw = rest[length:]
    return out


def post(path: str, body: bytes, *extra: str, version: str = "1.1") -> bytes:
    """The bytes of a POST with a JSON body and a Content-Length."""
    lines = [f"POST {path} HTTP/{version}", "Host: localhost", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def detect_body(*texts: str) -> bytes:
    return json.dumps({"texts": list(texts)}).encode()


def long_text(chars: int) -> str:
    """Known words up to about `chars` characters: a text of many model windows."""
    words = []
    n = 0
    for i in range(chars):
        word = WORDS[(i * 7) % len(WORDS)]
        if n + len(word) + 1 > chars:
            break
        words.append(word)
        n += len(word) + 1
    return " ".join(words)


# --------------------------------------------------------------------------------------------------------
# What the server says about itself
# --------------------------------------------------------------------------------------------------------


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics as {(sample name, sorted labels): value}."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def sample(snapshot: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in snapshot.items() if n == name and want <= set(ls))


def http_statuses(snapshot: dict) -> dict[int, float]:
    """electra_http_requests_total by status, every route."""
    out: dict[int, float] = {}
    for (name, labels), value in snapshot.items():
        if name == "electra_http_requests_total":
            status = int(dict(labels)["status_code"])
            out[status] = out.get(status, 0) + value
    return out


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


# --------------------------------------------------------------------------------------------------------
# Ordinary clients and slow-loris ones
# --------------------------------------------------------------------------------------------------------


def latencies(port: int, n: int, body: bytes) -> list[float]:
    """Seconds each of `n` POST /detect took, one after the other on one kept-alive connection; every one
    must answer 200."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    try:
        for _ in range(n):
            start = time.perf_counter()
            c.request("POST", "/detect", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            answer = r.read()
            out.append(time.perf_counter() - start)
            assert r.status == 200, (r.status, answer[:300])
    finally:
        c.close()
    return out


def p99(seconds: list[float]) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass
class SlowLoris:
    """`n` connections that each send a request line, then one more header line every `interval` seconds,
    never ending the head; a connection the server closes is replaced at once, as an attack would."""

    port: int
    n: int = 200
    interval: float = 0.5
    answers: dict[int, int] = field(default_factory=dict)  # status the server answered with -> count
    closed: int = 0  # connections the server closed
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _held: int = 0

    @property
    def held(self) -> int:
        return self._held

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            self._loop(sel)
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            sel.close()

    def _open(self, sel: selectors.BaseSelector) -> None:
        s = connect(self.port)
        s.sendall(b"POST /detect HTTP/1.1\r\nHost: localhost\r\n")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)

    def _loop(self, sel: selectors.BaseSelector) -> None:
        for _ in range(self.n):
            self._open(sel)
        self._held = self.n
        next_line = time.monotonic() + self.interval
        line = 0
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(65536)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if data and status_of(data):
                    self.answers[status_of(data)] = self.answers.get(status_of(data), 0) + 1
                sel.unregister(s)
                s.close()
                self.closed += 1
                if not self._stop.is_set():
                    self._open(sel)
            if time.monotonic() >= next_line:
                line += 1
                for key in list(sel.get_map().values()):
                    # A connection the server closed raises here; select reports it next.
                    with contextlib.suppress(OSError):
                        key.fileobj.send(f"X-Slow-{line}: {line}\r\n".encode())  # type: ignore[union-attr]
                next_line += self.interval

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="slow-loris", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while self._held < self.n:
            assert self._thread.is_alive(), "the slow-loris driver died"
            assert time.monotonic() < deadline, "slow-loris connections not opened in 30 s"
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


@contextmanager
def slow_loris(port: int, n: int = 200) -> Iterator[SlowLoris]:
    attack = SlowLoris(port, n)
    attack.start()
    try:
        yield attack
    finally:
        attack.stop()
