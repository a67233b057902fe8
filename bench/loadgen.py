"""Closed-loop HTTP load against a server subprocess, and the texts it sends: what the serving benchmarks
(bench/serve_throughput.py, bench/suggest_cost.py) share."""

from __future__ import annotations

import asyncio
import atexit
import gzip
import multiprocessing
import os
import random
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.benchlib import ROOT, SHARED_DATA, portable_path
from electra.serving.process import ServerNotReady, ServerProcess, free_port, stop
from electra.tokenizer import load_tokenizer

BERT_VOCAB = SHARED_DATA / "models" / "bert-uncased-vocab" / "vocab.txt"
SST2_DEV = SHARED_DATA / "glue" / "SST-2" / "dev.tsv"
WIKI_DIR = SHARED_DATA / "corpus" / "enwiki-2015-wikiextractor" / "AA"


MAX_SEQ_LEN = 128


# Shares of the text mix: short sentences, single long sentences, paragraphs.
MIX = {"short": 0.4, "sentence": 0.3, "paragraph": 0.3}


PARAGRAPH_WORDS = (60, 100)


SENTENCE_WORDS = (15, 45)


READY_TIMEOUT_S = 600.0


REQUEST_TIMEOUT_S = 120.0


ERROR_SAMPLES = 3


class BenchError(Exception):
    """A setup problem the run cannot continue past; printed as one line."""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def wikiextractor_paragraphs(lines: Iterator[str], min_words: int = 8) -> Iterator[str]:
    """Body paragraphs of WikiExtractor output: no <doc> tags, and no titles or headings (short lines)."""
    for line in lines:
        line = line.strip()
        if not line or line.startswith("<") or len(line.split()) < min_words:
            continue
        yield line


def read_sst2(path: Path) -> list[str]:
    rows = path.read_text(encoding="utf-8").splitlines()[1:]  # header: sentence<TAB>label
    return [r.split("\t")[0].strip() for r in rows if r.split("\t")[0].strip()]


def paragraph_prefix(sentences: Sequence[str], lo: int, hi: int) -> str | None:
    """Whole sentences from the start until at least `lo` words, never past `hi`; None when none fits.

    A paragraph of realistic length ends at a sentence boundary; only a single sentence longer than `hi`
    words is cut mid-sentence (at `hi` words).
    """
    words: list[str] = []
    for sentence in sentences:
        more = sentence.split()
        if len(words) + len(more) > hi:
            if not words:
                return " ".join(more[:hi])
            break
        words += more
        if len(words) >= lo:
            break
    return " ".join(words) if len(words) >= lo else None


def text_mix(short: Sequence[str], paragraphs: Sequence[str], n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (kind, text) pairs in MIX proportions, shuffled: short texts, single sentences, paragraphs.

    short: short texts as they are (SST-2 sentences); paragraphs: source paragraphs that the sentences
    (SENTENCE_WORDS long) and paragraph prefixes (PARAGRAPH_WORDS long) are cut from.
    """
    rng = random.Random(seed)
    sentences = [
        s
        for p in paragraphs
        for s in split_sentences(p)
        if SENTENCE_WORDS[0] <= len(s.split()) <= SENTENCE_WORDS[1]
    ]
    prefixes = [t for p in paragraphs if (t := paragraph_prefix(split_sentences(p), *PARAGRAPH_WORDS))]
    pools = {"short": list(short), "sentence": sentences, "paragraph": prefixes}
    empty = [k for k, pool in pools.items() if not pool]
    if empty:
        raise BenchError(f"no texts of kind {', '.join(empty)} in the source text; cannot build the mix")
    counts = {k: round(n * share) for k, share in MIX.items()}
    counts["short"] += n - sum(counts.values())
    mix = [(kind, rng.choice(pools[kind])) for kind, count in counts.items() for _ in range(count)]
    rng.shuffle(mix)
    return mix


def demo_paragraphs(work: Path, max_bytes: int = 3_000_000) -> list[str]:
    """Paragraphs of the embedded demo corpus (Python docstrings), built into `work`."""
    from electra.training.data.demo_corpus import build_demo_corpus

    path = work / "demo_corpus.txt"
    build_demo_corpus(path, max_bytes=max_bytes)
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_source_texts(work: Path, wiki_files: int = 2) -> tuple[list[str], list[str], str]:
    """(short texts, paragraphs, description): SST-2 dev and Wikipedia when present, else the demo corpus."""
    short: list[str] = read_sst2(SST2_DEV) if SST2_DEV.is_file() else []
    paragraphs: list[str] = []
    files = sorted(WIKI_DIR.glob("wiki_*.gz"))[:wiki_files] if WIKI_DIR.is_dir() else []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            paragraphs += wikiextractor_paragraphs(f)
    parts = []
    if short:
        parts.append(f"short: GLUE SST-2 dev sentences ({portable_path(SST2_DEV)})")
    if paragraphs:
        parts.append(f"sentences and paragraphs: English Wikipedia ({', '.join(p.name for p in files)})")
    if not short or not paragraphs:
        demo = demo_paragraphs(work)
        parts.append("demo corpus (Python docstrings) for what ../shared/data lacks")
        if not paragraphs:
            paragraphs = demo
        if not short:
            short = [s for p in demo for s in split_sentences(p) if 4 <= len(s.split()) < SENTENCE_WORDS[0]]
    return short, paragraphs, "; ".join(parts)


def build_tokenizer(work: Path, paragraphs: list[str]) -> tuple[Any, str]:
    if BERT_VOCAB.is_file():
        return load_tokenizer(BERT_VOCAB), f"BERT uncased WordPiece vocabulary ({portable_path(BERT_VOCAB)})"
    from electra.training.data.tokenizer_train import train_tokenizer

    lines = paragraphs or demo_paragraphs(work)
    return train_tokenizer(lines, vocab_size=30522), "WordPiece trained on the benchmark's source text"


@dataclass
class ServerSpec:
    name: str
    command: list[str]  # without --port, which is chosen at start
    ours: bool = True  # an `electra serve`: has /metrics with the model's own inference time
    loaded: bool = True  # takes part in the load windows (bare is only probed)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far, every thread of it (/proc/PID/stat; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def tree_cpu_s(pid: int) -> float:
    """process_cpu_s of a process and of every live process below it: a server with --workers does its
    work in child processes, whose CPU the parent's /proc/PID/stat counts only once they are reaped."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += process_cpu_s(current)
        todo += children.get(current, [])
    return total


_METRIC_LINE = re.compile(r'^electra_inference_seconds_(sum|count)\{model="([^"]+)"\} (\S+)$', re.MULTILINE)


def inference_totals(metrics_text: str) -> dict[str, dict[str, float]]:
    """{model: {"sum": seconds, "count": calls}} of electra_inference_seconds in a /metrics page."""
    out: dict[str, dict[str, float]] = {}
    for kind, model, value in _METRIC_LINE.findall(metrics_text):
        out.setdefault(model, {})[kind] = float(value)
    return out


class Server:
    """A server subprocess on a free port, in its own process group, so stopping it stops anything it started
    too (electra.serving.process does the work)."""

    def __init__(self, spec: ServerSpec, log_dir: Path) -> None:
        self.spec = spec
        self.name = spec.name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{spec.name}.log"
        self.proc: ServerProcess | None = None
        self.startup_s: float | None = None

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        t = time.perf_counter()
        command = [*self.spec.command, "--port", str(self.port)]
        self.proc = ServerProcess(command, url=self.url, log=self.log_path, cwd=ROOT, new_session=True)
        try:
            self.proc.wait_ready(timeout_s, name=self.spec.name)
        except ServerNotReady as e:
            raise BenchError(str(e)) from None
        self.startup_s = time.perf_counter() - t

    def counters(self) -> dict[str, float]:
        """What a window's deltas are taken of: the process's CPU seconds and, for ours, the model's own
        time (electra_inference_seconds, summed over the models) and calls."""
        if self.proc is None:
            return {}
        out = {"cpu_s": tree_cpu_s(self.proc.pid)}
        if self.spec.ours:
            with httpx.Client(timeout=30.0) as client:
                totals = inference_totals(client.get(f"{self.url}/metrics").text)
            out["inference_s"] = sum(t.get("sum", 0.0) for t in totals.values())
            out["inference_calls"] = sum(t.get("count", 0.0) for t in totals.values())
        return out

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise BenchError(f"{self.name} died under load:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.proc.log_tail() if self.proc is not None else "(no log)"

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, 15.0)


@dataclass
class PointResult:
    """What one closed-loop run recorded inside its measurement window."""

    window_s: float
    latencies_s: list[float] = field(default_factory=list)  # successful requests only
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    completed: int = 0  # every answered request, warm-up and past the window included
    # The load generator's own CPU seconds and wall seconds over the whole run (every process's, summed): at
    # about one core per process, the client and not the server may be what limits the point.
    client_cpu_s: float = 0.0
    client_wall_s: float = 0.0


def summarize(point: PointResult) -> dict[str, Any]:
    """RPS (successful requests per second of the window), latency percentiles in ms, errors.

    Percentiles are numpy's default (linear interpolation between the closest ranks); None when nothing
    succeeded.
    """
    lat = np.asarray(point.latencies_s, dtype=np.float64) * 1e3
    ok = len(lat)

    def pct(q: float) -> float | None:
        return float(np.percentile(lat, q)) if ok else None

    return {
        "requests": ok,
        "errors": point.errors,
        "error_rate": point.errors / (ok + point.errors) if ok + point.errors else 0.0,
        "window_s": point.window_s,
        "rps": ok / point.window_s if point.window_s > 0 else 0.0,
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_ms": float(lat.mean()) if ok else None,
        "max_ms": float(lat.max()) if ok else None,
        "error_samples": point.error_samples,
        "client_cores": point.client_cpu_s / point.client_wall_s if point.client_wall_s > 0 else None,
    }


class RawHTTP:
    """A minimal HTTP/1.1 keep-alive client on one connection: request bytes out, status and body in.

    The load generator shares the server's cores; httpx spends around a millisecond of CPU per request,
    which at concurrency 32-64 on 2 cores starves the server of requests (its queue stays nearly empty) and
    measures the client. This costs a few tens of microseconds per request instead.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.head = b""  # the last response's status line and headers

    async def post(self, request: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(request)
            head = self.head = await self.reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await self.reader.readexactly(length) if length else b""
        except (OSError, asyncio.IncompleteReadError, ValueError):
            self.close()
            raise
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def raw_request(host: str, port: int, path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def closed_loop(
    base_url: str,
    path: str,
    bodies: Sequence[bytes],
    concurrency: int,
    warmup_s: float,
    seconds: float,
    processes: int = 1,
    users: tuple[int, int] | None = None,
    start: float | None = None,
) -> PointResult:
    """`concurrency` users, each on its own keep-alive connection, sending its next body as soon as the
    previous one answered.

    Requests completing within [warm-up end, warm-up end + seconds] are recorded; users stop after the
    first request that completes past the window. User i starts at its own offset in `bodies` so the users
    do not send the same text in lockstep.

    processes > 1 splits the users among that many client processes (one asyncio loop holds about one core,
    which at several thousand requests a second is the client's limit, not the server's), with one window
    for all (`start`: a time.perf_counter() value, which on Linux is one clock for every process); `users`
    (first, total): this process's users are first.. of `total` (their offsets in `bodies`).
    """
    if processes > 1:
        return await _in_processes(base_url, path, bodies, concurrency, warmup_s, seconds, processes)
    first, total = users or (0, concurrency)
    if start is not None:
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    url = httpx.URL(base_url)
    host, port = url.host, url.port or 80
    requests = [raw_request(host, port, path, body) for body in bodies]
    start = time.perf_counter()
    window_start, window_end = start + warmup_s, start + warmup_s + seconds
    result = PointResult(window_s=seconds)

    async def user(index: int) -> None:
        conn = RawHTTP(host, port)
        i = (first + index) * len(requests) // total
        try:
            while True:
                request = requests[i % len(requests)]
                i += 1
                t0 = time.perf_counter()
                error = None
                try:
                    status, body = await asyncio.wait_for(conn.post(request), REQUEST_TIMEOUT_S)
                    if status != 200:
                        error = f"HTTP {status}: {body[:200].decode(errors='replace')}"
                except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as e:
                    conn.close()
                    error = f"{type(e).__name__}: {e}"
                t1 = time.perf_counter()
                result.completed += 1
                if window_start <= t1 <= window_end:
                    if error is None:
                        result.latencies_s.append(t1 - t0)
                    else:
                        result.errors += 1
                        if len(result.error_samples) < ERROR_SAMPLES:
                            result.error_samples.append(error)
                if t1 >= window_end:
                    return
        finally:
            conn.close()

    await asyncio.gather(*(user(u) for u in range(concurrency)))
    result.client_cpu_s = time.process_time() - cpu_start
    result.client_wall_s = time.perf_counter() - wall_start
    return result


# Seconds between handing a point to the client processes and its start: each must be waiting by then.
CLIENT_LEAD_S = 0.5
_pools: dict[int, ProcessPoolExecutor] = {}


def _client_pool(processes: int) -> ProcessPoolExecutor:
    """The client processes, started once (spawned: nothing of the parent's threads or sessions) and kept."""
    pool = _pools.get(processes)
    if pool is None:
        spawn = multiprocessing.get_context("spawn")
        pool = _pools[processes] = ProcessPoolExecutor(processes, mp_context=spawn)
        atexit.register(pool.shutdown)
        # Every process started and its imports done now, not inside the first point's window.
        list(pool.map(time.sleep, [0.2] * processes))
    return pool


def _client_process(*args: Any) -> PointResult:
    return asyncio.run(closed_loop(*args))


async def _in_processes(
    base_url: str,
    path: str,
    bodies: Sequence[bytes],
    concurrency: int,
    warmup_s: float,
    seconds: float,
    processes: int,
) -> PointResult:
    """closed_loop's users split among `processes` client processes, one window for all, merged."""
    pool = _client_pool(processes)
    loop = asyncio.get_running_loop()
    start = time.perf_counter() + CLIENT_LEAD_S
    shares = [concurrency // processes + (i < concurrency % processes) for i in range(processes)]
    firsts = [sum(shares[:i]) for i in range(processes)]
    parts = await asyncio.gather(
        *(
            loop.run_in_executor(
                pool,
                _client_process,
                base_url,
                path,
                list(bodies),
                share,
                warmup_s,
                seconds,
                1,
                (first, concurrency),
                start,
            )
            for share, first in zip(shares, firsts, strict=True)
            if share
        )
    )
    merged = PointResult(window_s=seconds)
    for part in parts:
        merged.latencies_s += part.latencies_s
        merged.errors += part.errors
        merged.error_samples += part.error_samples[: ERROR_SAMPLES - len(merged.error_samples)]
        merged.completed += part.completed
        merged.client_cpu_s += part.client_cpu_s
        merged.client_wall_s = max(merged.client_wall_s, part.client_wall_s)
    return merged
