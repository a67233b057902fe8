"""Fault injection on real sockets: clients that leave, crawl, flood or send too much, against a real
`electra serve` process under uvicorn and under granian (docs/reliability.md).

Every fault is one a client makes, so none may be counted as a 5xx, and afterwards the server must be ready,
with as many open files as before and its memory back at its baseline (test_zz_afterwards runs last, per
server; the baseline is taken after a rehearsal of every fault, see rehearse).

The latency bound (test_slow_loris_leaves_ordinary_clients_their_latency) is the issue's "within 2x of the
unloaded p99", made robust for a shared 2-core CI machine, where one scheduling hiccup of another process
costs tens of milliseconds: rounds alternate loaded and unloaded windows (so a burst of outside load hits
both alike), each window's p99 is taken, the medians over the rounds are compared, and the bound has an
absolute floor of FLOOR_S. A server that made ordinary clients wait on the slow ones would be off by the
header timeout (seconds), far above that floor; a 2 ms request is not held to 4 ms on a machine whose
scheduler alone varies by more.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from electra.serving.process import ServerNotReady, ServerProcess, free_port, serve_command, start_server
from tests import hostile
from tests.hostile import connect, post, read_until_closed, responses_in, status_of

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
HEADER_TIMEOUT_S = 3.0
BODY_TIMEOUT_S = 3.0
MAX_HEADER_BYTES = 16384
MAX_BODY_BYTES = 4_000_000
# Long enough that a request stays queued while another is still being read (leaving_while_queued).
MAX_WAIT_MS = 4000
ROUNDS = 3
# Requests per connection in the slow-loris test's windows, whose length is set by the attack's progress.
LATENCY_CHUNK = 20
# Unloaded p99s here are 5-20 ms (2 cores, another process busy on both).
FLOOR_S = 0.15
SLOW_LORIS = 200
# Memory a server that leaks nothing may still gain. Over repeated rounds of quick faults: observed flat
# (0.1 MiB). Over the whole suite, against the baseline taken after a rehearsal (see rehearse): 4-9 MiB,
# the allocator's high-water mark moving on as the big request's tokenization runs in other threads. Open
# files, the sharper signal, must come back exactly.
RSS_ROUND_GROWTH_BYTES = 8 * 1024 * 1024
RSS_AFTER_BYTES = 32 * 1024 * 1024
# Texts of thousands of model windows in all, seconds of model time: a request to leave while it runs.
BIG_TEXT = hostile.long_text(49_000)
BIG_TEXTS = 8
BIG_BODY = hostile.detect_body(*[BIG_TEXT] * BIG_TEXTS)
LIVE = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


@dataclass
class Target:
    """A running server and what it looked like before the faults."""

    process: ServerProcess
    http_server: str
    port: int
    files: int = 0
    rss: int = 0
    big_calls: int = 0  # model calls BIG_BODY takes
    # 5xx answers by (method, path, status) once ready: /health/ready's 503s while the server warmed up,
    # when wait_ready's poll came between the socket's bind and the end of warm-up.
    starting_errors: dict[tuple[str, str, str], float] = field(default_factory=dict)

    @property
    def uvicorn(self) -> bool:
        return self.http_server == "uvicorn"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}


def server_args(bundle: Path, http_server: str, *extra: str) -> list[str]:
    return [
        "--model", f"detector={bundle}", "--threads", "1", "--http-server", http_server,
        "--header-timeout", str(HEADER_TIMEOUT_S), "--body-timeout", str(BODY_TIMEOUT_S),
        "--max-header-bytes", str(MAX_HEADER_BYTES), "--max-body-bytes", str(MAX_BODY_BYTES),
        "--max-batch-size", "2", "--max-wait-ms", str(MAX_WAIT_MS), "--max-queue", "20000", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module", params=["uvicorn", "granian"])
def target(
    request: pytest.FixtureRequest, serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "granian":
        pytest.importorskip("granian", reason="granian is not installed")
    port = free_port()
    args = server_args(serving_bundles["detector"], request.param, "--max-connections", "300")
    log = tmp_path_factory.mktemp(f"hostile-{request.param}") / "server.log"
    with start_server(
        serve_command(*args, "--port", str(port)),
        clean_env(),
        url=f"http://127.0.0.1:{port}",
        log=log,
        cwd=ROOT,
    ) as process:
        try:
            process.wait_ready(90.0)
        except ServerNotReady as e:
            pytest.fail(str(e))
        t = Target(process, request.param, port)
        t.starting_errors = server_errors(hostile.metrics(port))
        assert set(t.starting_errors) <= {("GET", "/health/ready", "503")}, t.starting_errors
        # BIG_BODY's texts are alike: its model calls are one text's windows, times the texts, in pairs.
        windows = json.loads(detect_alone(port, BIG_TEXT))["results"][0]["windows"]
        t.big_calls = (BIG_TEXTS * windows + 1) // 2
        rehearse(t)
        t.files = settled_files(t)
        t.rss = hostile.rss_bytes(process.pid)
        yield t


def rehearse(t: Target) -> None:
    """One of each fault, before the baseline is taken: the memory a server keeps after its first large
    body, its first hundreds of connections or its first thousands of windows (allocator pools and arenas,
    caches) is what it needs for its work, not what faults left behind; what the faults must not do is add
    to it (test_repeated_faults_leak_neither_files_nor_memory, test_zz_afterwards)."""
    hostile.latencies(t.port, 20, hostile.detect_body("the cat sat on the mat"))
    fault_round(t.port)
    with hostile.slow_loris(t.port, SLOW_LORIS):
        time.sleep(0.5)
    leave_while_running(t)


def settled_files(t: Target, expected: int | None = None, timeout: float = 15.0) -> int:
    """The server's open files once connections answered and lingering have closed (`expected`: wait for
    that many)."""
    deadline = time.monotonic() + timeout
    last = -1
    while True:
        now = hostile.open_files(t.process.pid)
        if (expected is None and now == last) or now == expected or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(0.5)


def exchange(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """What the server answers to `request` on a connection of its own, until it closes it."""
    with connect(port, timeout) as s:
        s.sendall(request)
        return read_until_closed(s, timeout)[0]


def detect_alone(port: int, text: str) -> bytes:
    """The body /detect answers for `text` on a connection of its own."""
    raw = exchange(port, post("/detect", hostile.detect_body(text), "Connection: close"))
    [(status, _, body)] = responses_in(raw)
    assert status == 200, raw[:300]
    return body


def wait_for(condition: object, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def triton_stats(t: Target) -> tuple[int, int]:
    """Requests Triton's statistics extension counts for the model: (success, fail)."""
    raw = exchange(
        t.port, b"GET /v2/models/detector/stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    [(status, _, body)] = responses_in(raw)
    assert status == 200, raw[:300]
    stats = json.loads(body)["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def rejected(t: Target, status: int) -> float:
    """Connections the HTTP layer answered `status` itself (uvicorn_protocol.py)."""
    snapshot = hostile.metrics(t.port)
    return hostile.sample(snapshot, "electra_http_rejected_total", status_code=str(status))


def server_errors(snapshot: dict) -> dict[tuple[str, str, str], float]:
    """5xx answers of the app by (method, path, status)."""
    return {
        (labels["method"], labels["path"], labels["status_code"]): value
        for (name, pairs), value in snapshot.items()
        if name == "electra_http_requests_total" and int((labels := dict(pairs))["status_code"]) >= 500
    }


def statuses_delta(t: Target, before: dict) -> dict[int, float]:
    after = hostile.http_statuses(hostile.metrics(t.port))
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


# --------------------------------------------------------------------------------------------------------
# Clients that leave
# --------------------------------------------------------------------------------------------------------


def test_client_leaving_mid_body_is_499_not_a_server_error(target: Target) -> None:
    before = hostile.http_statuses(hostile.metrics(target.port))
    for _ in range(5):
        with connect(target.port) as s:
            s.sendall(post("/detect", b'{"text": "the cat sat on the mat"}')[:-10])
            time.sleep(0.1)
    wait_for(lambda: statuses_delta(target, before).get(499, 0) >= 5, what="five 499s")
    assert statuses_delta(target, before) == {499: 5}


@pytest.mark.parametrize("how", ["close", "half-close"])
def test_client_leaving_while_queued_drops_its_work(target: Target, how: str) -> None:
    """The request waits in the queue (its batch waits up to --max-wait-ms for a request still being read);
    its client leaves: it is dropped before the model runs, counted 499. A half-close (shutdown of the
    client's sending side) is a leaving client too: TCP cannot tell it from a close."""
    stats = triton_stats(target)  # before the statuses: it is a request too
    snapshot = hostile.metrics(target.port)
    batches = hostile.sample(snapshot, "electra_batch_size_count", model="detector")
    before = hostile.http_statuses(snapshot)
    with connect(target.port) as reading:
        reading.sendall(post("/detect", hostile.detect_body("the dog ran"))[:-5])  # counts as on its way
        time.sleep(0.2)
        with connect(target.port) as queued:
            queued.sendall(post("/detect", hostile.detect_body("the cat sat in the park")))
            wait_for(lambda: queue_size(target) == 1, what="the request to queue")
            reading.sendall(b" ")  # still on its way: its body timeout starts again
            if how == "half-close":
                queued.shutdown(socket.SHUT_WR)
                raw, _ = read_until_closed(queued)
                assert raw == b"", raw[:300]  # gone: nobody answers it
        wait_for(lambda: queue_size(target) == 0, what="the queue to drop the request")
    wait_for(lambda: statuses_delta(target, before).get(499, 0) >= 2, what="two 499s")
    snapshot = hostile.metrics(target.port)
    assert hostile.sample(snapshot, "electra_batch_size_count", model="detector") == batches, "the model ran"
    assert statuses_delta(target, before) == {499: 2}
    assert triton_stats(target) == stats, "counted in Triton's statistics (success, fail)"


def queue_size(t: Target) -> float:
    return hostile.sample(hostile.metrics(t.port), "electra_queue_size", model="detector")


def batches(t: Target) -> float:
    """Model calls so far."""
    return hostile.sample(hostile.metrics(t.port), "electra_batch_size_count", model="detector")


def test_client_leaving_while_the_model_runs_stops_its_work_and_disturbs_no_one(target: Target) -> None:
    """A request of thousands of model windows leaves once its first batches ran: its other windows are
    dropped, and a request that came meanwhile gets its answer, the same as alone."""
    ordinary_text = "the river bank in the city"
    expected = detect_alone(target.port, ordinary_text)
    success, fail = triton_stats(target)
    snapshot = hostile.metrics(target.port)
    calls = hostile.sample(snapshot, "electra_batch_size_count", model="detector")
    before = hostile.http_statuses(snapshot)
    answer = leave_while_running(target, ordinary_text)
    assert json.loads(answer) == json.loads(expected)
    ran = batches(target) - calls - 1  # the ordinary request's own call
    assert ran < target.big_calls / 4, f"{ran} model calls ran of the {target.big_calls} the request needed"
    assert statuses_delta(target, before) == {200: 1, 499: 1}
    # Only the ordinary request is in Triton's statistics: the one that left neither succeeded nor failed.
    assert triton_stats(target) == (success + 1, fail)


def leave_while_running(t: Target, ordinary_text: str = "the cat") -> bytes:
    """BIG_BODY's client leaves once a few of its model calls ran, with an ordinary request queued behind
    it; that request's answer."""
    calls = batches(t)
    with connect(t.port) as big:
        big.sendall(post("/detect", BIG_BODY))
        wait_for(lambda: batches(t) > calls + 5, timeout=60, what="the model to run the big request")
        with connect(t.port) as ordinary:
            ordinary.sendall(post("/detect", hostile.detect_body(ordinary_text), "Connection: close"))
            time.sleep(0.05)
            big.close()
            raw, _ = read_until_closed(ordinary, timeout=60)
    [(status, _, answer)] = responses_in(raw)
    assert status == 200, raw[:300]
    wait_for(lambda: queue_size(t) == 0, what="the queue to empty")
    return answer


# --------------------------------------------------------------------------------------------------------
# Framing the server must keep straight
# --------------------------------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(target: Target) -> None:
    a, b = "the cat sat on the mat", "the dog ran in the park"
    expected = [detect_alone(target.port, a), detect_alone(target.port, b)]
    with connect(target.port) as s:
        s.sendall(
            post("/detect", hostile.detect_body(a))
            + post("/detect", hostile.detect_body(b))
            + b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        raw, how = read_until_closed(s)
    answers = responses_in(raw)
    assert [status for status, _, _ in answers] == [200, 200, 200], raw[:500]
    assert [json.loads(body) for _, _, body in answers[:2]] == [json.loads(e) for e in expected]
    assert json.loads(answers[2][2]) == {"status": "live"}
    assert how == "closed"
    # Headers too large behind a request being answered: that answer first, then the 431.
    too_large = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 100) for i in range(400))
    with connect(target.port) as s:
        s.sendall(
            post("/detect", hostile.detect_body(a)) + b"GET / HTTP/1.1\r\nHost: x\r\n" + too_large + b"\r\n"
        )
        raw, how = read_until_closed(s)
    assert [status for status, _, _ in responses_in(raw)] == [200, 431] and how == "closed", raw[:500]


def test_http_1_0_gets_its_answer_and_the_connection_closed(target: Target) -> None:
    text = "the cat sat on the mat"
    with connect(target.port) as s:
        s.sendall(
            post("/detect", hostile.detect_body(text), version="1.0").replace(b"Host: localhost\r\n", b"")
        )
        raw, how = read_until_closed(s)
    [(status, _, body)] = responses_in(raw)
    assert status == 200 and how == "closed", raw[:300]
    assert json.loads(body) == json.loads(detect_alone(target.port, text))


# --------------------------------------------------------------------------------------------------------
# Clients that crawl
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sent", [b"", b"POST /detect HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1\r\n"])
def test_headers_that_do_not_arrive_in_time(target: Target, sent: bytes) -> None:
    """uvicorn answers 408; granian (hyper) closes the connection without an answer. Either way within
    --header-timeout, however the client trickles."""
    answered = rejected(target, 408)
    with connect(target.port) as s:
        start = time.monotonic()
        s.sendall(sent)
        for i in range(4):  # a byte a second: the deadline is for the whole head, not between reads
            time.sleep(0.5)
            if sent:
                s.sendall(b"X" if i else b"X-")
        raw, how = read_until_closed(s, timeout=HEADER_TIMEOUT_S + 10)
        took = time.monotonic() - start
    assert how == "closed", (how, raw[:300])
    assert HEADER_TIMEOUT_S - 0.5 < took < HEADER_TIMEOUT_S + 5, took
    if target.uvicorn:
        [(status, headers, body)] = responses_in(raw)
        assert status == 408 and headers["connection"] == "close"
        assert "--header-timeout" in json.loads(body)["detail"]
        assert rejected(target, 408) == answered + 1  # counted where the app never sees it
    else:
        assert raw == b""


def test_the_header_deadline_of_a_kept_alive_connections_next_request(target: Target) -> None:
    """uvicorn: the next request's head has --header-timeout from its first byte (the idle time before it is
    uvicorn's keep-alive timeout, 5 s); granian: hyper's deadline runs from the previous answer, idle time
    included. Either way the connection does not stay open on a head that never ends."""
    with connect(target.port) as s:
        s.sendall(post("/detect", hostile.detect_body("the cat sat")))
        raw = b""
        while not responses_in(raw):
            raw += s.recv(65536)
        [(status, _, _)] = responses_in(raw)
        assert status == 200, raw[:300]
        answered_at = time.monotonic()
        time.sleep(1.5)
        s.sendall(b"POST /detect HTTP/1.1\r\nHost: localhost\r\n")
        began = time.monotonic()
        for _ in range(3):
            time.sleep(0.5)
            s.sendall(b"X-Slow: 1\r\n")
        raw, how = read_until_closed(s, timeout=HEADER_TIMEOUT_S + 10)
        closed_at = time.monotonic()
    assert how == "closed", (how, raw[:300])
    if target.uvicorn:
        [(status, headers, _)] = responses_in(raw)
        assert status == 408 and headers["connection"] == "close"
        assert HEADER_TIMEOUT_S - 0.5 < closed_at - began < HEADER_TIMEOUT_S + 5, closed_at - began
    else:
        assert raw == b""
        assert HEADER_TIMEOUT_S - 0.5 < closed_at - answered_at < HEADER_TIMEOUT_S + 5, (
            closed_at - answered_at
        )


def test_a_body_that_stops_arriving_is_408(target: Target) -> None:
    before = hostile.http_statuses(hostile.metrics(target.port))
    with connect(target.port) as s:
        start = time.monotonic()
        s.sendall(post("/detect", hostile.detect_body("the cat sat on the mat"))[:-8])
        raw, how = read_until_closed(s, timeout=BODY_TIMEOUT_S + 10)
        took = time.monotonic() - start
    [(status, headers, body)] = responses_in(raw)
    assert status == 408 and how == "closed", raw[:300]
    assert headers["connection"] == "close"
    assert "--body-timeout" in json.loads(body)["detail"]
    assert BODY_TIMEOUT_S - 0.5 < took < BODY_TIMEOUT_S + 5, took
    assert statuses_delta(target, before) == {408: 1}


def test_slow_loris_leaves_ordinary_clients_their_latency(target: Target) -> None:
    """200 connections trickling headers that never end; ordinary clients keep their p99 within 2x of the
    unloaded one (medians over rounds, FLOOR_S at least: see the module). Each loaded window lasts until
    every slow connection has run into the header deadline and been replaced, so the ordinary clients are
    measured through the server's answers to them and the attack's reconnections, not only beside idle
    sockets; the unloaded window that follows sends as many requests in the same chunks."""
    body = hostile.detect_body("the cat sat on the mat")
    unloaded, loaded, answers, dropped = [], [], {}, []
    for _ in range(ROUNDS):
        sample: list[float] = []
        with hostile.slow_loris(target.port, SLOW_LORIS) as attack:
            deadline = time.monotonic() + HEADER_TIMEOUT_S + 30
            while attack.closed < SLOW_LORIS:
                assert time.monotonic() < deadline, f"{attack.closed} slow connections dropped in time"
                sample += hostile.latencies(target.port, LATENCY_CHUNK, body)
        dropped.append(attack.closed)
        loaded.append(hostile.p99(sample))
        chunks = [
            hostile.latencies(target.port, LATENCY_CHUNK, body) for _ in range(len(sample) // LATENCY_CHUNK)
        ]
        unloaded.append(hostile.p99([s for chunk in chunks for s in chunk]))
        for status, n in attack.answers.items():
            answers[status] = answers.get(status, 0) + n
    base, under = statistics.median(unloaded), statistics.median(loaded)
    ms = [[round(s * 1e3, 1) for s in batch] for batch in (unloaded, loaded)]
    report = f"p99 per round (ms): unloaded {ms[0]}, loaded {ms[1]}"
    assert under <= max(2 * base, FLOOR_S), report
    # The slow connections got nothing but the header deadline's answer (never a 503 of the cap): uvicorn's
    # 408, or hyper's close without an answer.
    if target.uvicorn:
        assert set(answers) == {408} and answers[408] >= ROUNDS * SLOW_LORIS, (answers, dropped)
    else:
        assert answers == {}, (answers, dropped)


# --------------------------------------------------------------------------------------------------------
# Clients that send too much
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["many", "endless"])
def test_oversized_headers_are_431(target: Target, kind: str) -> None:
    answered = rejected(target, 431)
    if kind == "many":
        head = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 100) for i in range(400)) + b"\r\n"
    else:  # one header that never ends: the server must not buffer it
        head = b"X-Endless: " + b"e" * 200_000
    with connect(target.port) as s:
        # Answered and closed while we still sent: the answer is read below.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n" + head)
        raw, _ = read_until_closed(s)
    assert status_of(raw) == 431, raw[:300]
    if target.uvicorn:
        assert "--max-header-bytes" in json.loads(responses_in(raw)[0][2])["detail"]
        assert rejected(target, 431) == answered + 1


def test_oversized_body_reaches_the_client_as_413(target: Target) -> None:
    """Without Expect: 100-continue the client sends the whole body before it reads: the server reads and
    discards it, so the 413 arrives (urllib closes the connection after each request, requests and
    http.client keep it, and it stays usable). With it, the 413 comes before any body."""
    body = b'{"text": "' + b"a" * 20_000_000 + b'"}'
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(
        f"http://127.0.0.1:{target.port}/detect", data=body, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as answered:
        opener.open(req, timeout=60)
    assert answered.value.code == 413
    assert "--max-body-bytes" in json.loads(answered.value.read())["detail"]

    import http.client

    c = http.client.HTTPConnection("127.0.0.1", target.port, timeout=60)
    c.request("POST", "/detect", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 413 and json.loads(r.read())["status_code"] == 413
    c.request("POST", "/detect", hostile.detect_body("the cat"), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]  # the same connection, still in step
    c.close()

    for length, sent in ((MAX_BODY_BYTES + 1, b"Expect: 100-continue\r\n"), (1 << 30, b"")):
        with connect(target.port) as s:
            s.sendall(
                b"POST /detect HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n%s\r\n" % (length, sent)
            )
            raw, how = read_until_closed(s)
        assert status_of(raw) == 413 and how == "closed", raw[:300]  # no 100 Continue first
        assert responses_in(raw)[0][1]["connection"] == "close"


# --------------------------------------------------------------------------------------------------------
# Repeated faults leave nothing behind
# --------------------------------------------------------------------------------------------------------


def fault_round(port: int) -> None:
    """One of each quick fault, several times."""
    good = post("/detect", hostile.detect_body("the cat sat on the mat"))
    for _ in range(20):
        with connect(port) as s:  # leaves mid-body
            s.sendall(good[:-7])
        with connect(port) as s:  # leaves mid-head
            s.sendall(good[:20])
            s.shutdown(socket.SHUT_WR)
    for _ in range(5):
        with connect(port) as s:  # headers too large
            with contextlib.suppress(OSError):
                s.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"b" * 40_000 + b"\r\n\r\n")
            read_until_closed(s)
        with connect(port) as s:  # pipelined, then closed at once
            s.sendall(good * 3)
    with connect(port) as s:  # a body over the limit, drained
        s.sendall(post("/detect", b"x" * (MAX_BODY_BYTES + 1_000_000), "Connection: close"))
        read_until_closed(s, timeout=30)
    hostile.latencies(port, 20, hostile.detect_body("the dog ran in the park"))


def test_repeated_faults_leak_neither_files_nor_memory(target: Target) -> None:
    rss = []
    for _ in range(4):
        fault_round(target.port)
        assert settled_files(target, target.files) == target.files
        rss.append(hostile.rss_bytes(target.process.pid))
    mib = [f"{r / 2**20:.1f}" for r in rss]
    assert rss[-1] - rss[0] < RSS_ROUND_GROWTH_BYTES, f"RSS after each round (MiB): {mib}"


# --------------------------------------------------------------------------------------------------------
# The connection cap (servers of their own: a cap of a few connections)
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("http_server", ["uvicorn", "granian"])
def test_connections_beyond_the_cap(
    serving_bundles: dict[str, Path], tmp_path: Path, http_server: str
) -> None:
    """uvicorn answers 503 with Retry-After at once; granian leaves the connection in the listen backlog
    until one of the others closes, then answers it."""
    if http_server == "granian":
        pytest.importorskip("granian", reason="granian is not installed")
    port = free_port()
    args = server_args(serving_bundles["detector"], http_server, "--max-connections", "4")
    with start_server(
        serve_command(*args, "--port", str(port)),
        clean_env(),
        url=f"http://127.0.0.1:{port}",
        log=tmp_path / "server.log",
        cwd=ROOT,
        ready_timeout=90.0,
    ):
        held = [connect(port) for _ in range(4)]
        try:
            time.sleep(0.2)
            with connect(port) as extra:
                extra.sendall(LIVE)
                if http_server == "uvicorn":
                    raw, how = read_until_closed(extra)
                    [(status, headers, body)] = responses_in(raw)
                    assert (status, headers["retry-after"], how) == (503, "1", "closed"), raw[:300]
                    assert "--max-connections" in json.loads(body)["detail"]
                else:
                    raw, how = read_until_closed(extra, timeout=1.0)
                    assert (raw, how) == (b"", "timeout"), "answered beyond the cap"
                    held.pop().close()
                    raw, how = read_until_closed(extra)
                    assert status_of(raw) == 200, raw[:300]
            if http_server == "uvicorn":
                held.pop().close()
                time.sleep(0.2)
                with connect(port) as again:  # a slot is free again
                    again.sendall(LIVE)
                    assert status_of(read_until_closed(again)[0]) == 200
                snapshot = hostile.metrics(port)
                assert hostile.sample(snapshot, "electra_http_rejected_total", status_code="503") == 1
                assert hostile.sample(snapshot, "electra_http_connections") == 4  # 3 held, the scrape's
        finally:
            for s in held:
                s.close()


# --------------------------------------------------------------------------------------------------------
# Afterwards (runs last for each server: pytest keeps the order of a module's tests)
# --------------------------------------------------------------------------------------------------------


def test_zz_afterwards_no_5xx_ready_and_back_to_baseline(target: Target) -> None:
    snapshot = hostile.metrics(target.port)
    assert server_errors(snapshot) == target.starting_errors, target.process.log_tail(20_000)
    errors = hostile.sample(snapshot, "electra_http_requests_error_total")
    assert errors == sum(target.starting_errors.values())
    assert hostile.sample(snapshot, "electra_http_requests_in_progress") == 0
    assert hostile.sample(snapshot, "electra_queue_size") == 0
    with connect(target.port) as s:
        s.sendall(b"GET /health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert status_of(read_until_closed(s)[0]) == 200
    assert settled_files(target, target.files) == target.files
    rss = hostile.rss_bytes(target.process.pid)
    mib = f"{target.rss / 2**20:.1f} MiB before the faults, {rss / 2**20:.1f} MiB after"
    assert rss - target.rss < RSS_AFTER_BYTES, mib
    if target.uvicorn:
        assert hostile.sample(snapshot, "electra_http_connections") <= 1  # this scrape's own
    log = target.process.log_tail(1_000_000)
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
