"""Server throughput and latency: `electra serve` (batched, unbatched) vs a naive `transformers` server.

Setup (in a temporary directory, never inside the repository): an ELECTRA-Small-shaped discriminator and a
2-label classifier with random weights and a real WordPiece tokenizer (BERT's uncased vocabulary from
../shared/data when present, else one trained on the embedded demo corpus), saved as Hugging Face
directories and exported to fused fp32 ONNX bundles (max_seq_len 128; --int8 adds int8 bundles).

Configurations, each its own server process on a free port, started, polled on /health/ready, loaded, stopped:

  ours_batched     electra serve with its defaults (dynamic batching)
  ours_unbatched   electra serve --max-batch-size 1 (same server, one sequence per model call)
  ours_int8        electra serve, defaults, int8 bundles (only with --int8, CPU)
  naive            bench/naive_server.py: Litestar sync handlers calling transformers on PyTorch eager
                   (ElectraForPreTraining + fast tokenizer; pipeline("text-classification")), one request at
                   a time, truncating at the same 128 tokens

Load: closed loop. At concurrency C, C virtual users (asyncio tasks, each on its own keep-alive connection
with a minimal HTTP/1.1 client: httpx's ~1 ms of CPU per request would starve the server on 2 cores) each
send the next request as soon as the previous one answers, for --warmup-seconds (not recorded) then --seconds
(recorded: requests that complete inside the window). Bodies are single texts {"text": ...} drawn from a
fixed mix of real text: short sentences (GLUE SST-2 dev), single Wikipedia sentences and Wikipedia paragraph
prefixes of 60-100 words (the demo corpus stands in when ../shared/data is absent); every configuration
sees the same sequence. The client runs on the same machine as the server and competes for its cores: on a
small machine the RPS it reports are a lower bound for every configuration alike.

Server overhead: ours' p50 latency at concurrency 1 on /detect minus the median time of ONNX Runtime's
`session.run` on the same single texts, in this process, on the same bundle, before any server starts.
Recorded with it: GET /health/live's p50 per server (the HTTP + client floor of any request) and the
in-process batching ceiling (texts/s of session.run at batch 32, padded, vs batch 1 on the same texts),
against which the server's batched vs unbatched ratio can be read.

    python bench/serve_throughput.py                # CPU: 3 configs x 2 endpoints x 4 levels x 25 s, ~11 min
    python bench/serve_throughput.py --device cuda --out bench/results/serve_throughput_cuda.json
    python bench/serve_throughput.py --quick        # smoke test, ~1-2 min; writes no JSON unless --out
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import importlib.metadata
import json
import logging
import os
import platform
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from benchlib import cpu_name, git_commit, int_list, usable_cores, write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from electra.serving.process import ServerNotReady, ServerProcess, free_port, stop  # noqa: E402
from electra.tokenizer import load_tokenizer, save_tokenizer  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
BERT_VOCAB = SHARED / "models" / "bert-uncased-vocab" / "vocab.txt"
SST2_DEV = SHARED / "glue" / "SST-2" / "dev.tsv"
WIKI_DIR = SHARED / "corpus" / "enwiki-2015-wikiextractor" / "AA"
LABELS = {0: "negative", 1: "positive"}
MAX_SEQ_LEN = 128
DETECTOR, CLASSIFIER = "detector", "sentiment"
ENDPOINTS = ("detect", "classify")
CONFIGS = ("ours_batched", "ours_unbatched", "naive")
# The issue's targets, checked at concurrency 32 on /detect (the main endpoint).
TARGET_CONCURRENCY = 32
TARGET_ENDPOINT = "detect"
TARGETS = {
    "batched_vs_naive_rps_min": 3.0,
    "batched_p99_below_naive": True,
    "batched_vs_unbatched_rps_min": 2.0,
    "overhead_p50_ms_max": 1.0,
}
# Shares of the text mix: short sentences, single long sentences, paragraphs.
MIX = {"short": 0.4, "sentence": 0.3, "paragraph": 0.3}
PARAGRAPH_WORDS = (60, 100)
SENTENCE_WORDS = (15, 45)
MIX_SIZE = 2000
READY_TIMEOUT_S = 600.0
REQUEST_TIMEOUT_S = 120.0
ERROR_SAMPLES = 3
# The server's default --max-batch-size, for the in-process batching ceiling.
BATCH_CEILING_SIZE = 32
FLOOR_REQUESTS = 200

log = logging.getLogger("bench.serve_throughput")


class BenchError(Exception):
    """A setup problem the run cannot continue past; printed as one line."""


# ----------------------------------------------------------------------------------------------------------
# Texts
# ----------------------------------------------------------------------------------------------------------

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
        parts.append(f"short: GLUE SST-2 dev sentences ({SST2_DEV})")
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


def describe_texts(mix: list[tuple[str, str]], tokenizer: Any, max_seq_len: int) -> dict[str, Any]:
    """Word and token counts of the mix (tokens with [CLS]/[SEP], before truncation)."""
    words = [len(t.split()) for _, t in mix]
    tokens = [len(e.ids) for e in tokenizer.encode_batch([t for _, t in mix])]

    def stats(values: list[int]) -> dict[str, float]:
        return {
            "min": min(values),
            "p50": float(np.percentile(values, 50)),
            "mean": float(np.mean(values)),
            "p95": float(np.percentile(values, 95)),
            "max": max(values),
        }

    return {
        "count": len(mix),
        "mix": {k: sum(kind == k for kind, _ in mix) for k in MIX},
        "words": stats(words),
        "tokens": stats(tokens),
        "truncated_fraction": sum(n > max_seq_len for n in tokens) / len(tokens),
    }


# ----------------------------------------------------------------------------------------------------------
# Models and bundles
# ----------------------------------------------------------------------------------------------------------


def build_tokenizer(work: Path, paragraphs: list[str]) -> tuple[Any, str]:
    if BERT_VOCAB.is_file():
        return load_tokenizer(BERT_VOCAB), f"BERT uncased WordPiece vocabulary ({BERT_VOCAB})"
    from electra.training.data.tokenizer_train import train_tokenizer

    lines = paragraphs or demo_paragraphs(work)
    return train_tokenizer(lines, vocab_size=30522), "WordPiece trained on the benchmark's source text"


def build_model_dirs(work: Path, size: str, tokenizer: Any) -> tuple[dict[str, Path], dict[str, Any]]:
    """Random-weight discriminator and classifier HF directories (with the tokenizer) and their shape."""
    import torch

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import build_model

    cfg = ElectraConfig.from_size(size, vocab_size=tokenizer.get_vocab_size(), id2label=LABELS)
    dirs, parameters = {}, {}
    torch.manual_seed(0)
    for name, kind in ((DETECTOR, "discriminator"), (CLASSIFIER, "classifier")):
        model = build_model(kind, cfg)
        parameters[name] = sum(p.numel() for p in model.parameters())
        dirs[name] = save_hf_dir(model, work / f"{name}-hf")
        save_tokenizer(tokenizer, dirs[name])
    info = {
        "size": size,
        "weights": "random (HF-style init)",
        "num_hidden_layers": cfg.num_hidden_layers,
        "hidden_size": cfg.hidden_size,
        "embedding_size": cfg.embedding_size,
        "num_attention_heads": cfg.num_attention_heads,
        "intermediate_size": cfg.intermediate_size,
        "vocab_size": cfg.vocab_size,
        "labels": list(LABELS.values()),
        "parameters": parameters,
    }
    return dirs, info


def export_bundles(
    work: Path, model_dirs: dict[str, Path], precisions: Sequence[str], max_seq_len: int
) -> tuple[dict[str, dict[str, Path]], dict[str, Any]]:
    """{precision: {model name: bundle dir}} and what each bundle's metadata says about it."""
    from electra.onnx.export import export_bundle

    bundles: dict[str, dict[str, Path]] = {}
    info: dict[str, Any] = {}
    for precision in precisions:
        bundles[precision] = {}
        for name, model_dir in model_dirs.items():
            out = work / f"{name}-{precision}"
            t = time.perf_counter()
            meta = export_bundle(model_dir, out, precision=precision, max_seq_len=max_seq_len)
            bundles[precision][name] = out
            info[f"{name}_{precision}"] = {
                "kind": meta["kind"],
                "max_seq_len": meta["max_seq_len"],
                "fused_operators": {k: v for k, v in meta["fused_operators"].items() if v},
                "parity_max_abs_diff": meta["parity"].get("max_abs_diff"),
                "export_s": time.perf_counter() - t,
            }
            print(f"exported {name} {precision} in {time.perf_counter() - t:.0f}s", flush=True)
    return bundles, info


# ----------------------------------------------------------------------------------------------------------
# Server overhead: ONNX Runtime in process on the same single texts
# ----------------------------------------------------------------------------------------------------------


def measure_ort(
    bundle: Path, texts: Sequence[str], max_seq_len: int, device: str, threads: int | None, repeats: int
) -> dict[str, Any]:
    """Median `session.run` time per single text (each text's median over `repeats`), and tokenization's.

    The session is the server's own (electra.serving.runtime.ModelRunner: the same session options, e.g.
    idle threads that sleep rather than spin, --threads as intra-op threads), so the difference to the
    server's latency is what HTTP, tokenization and batching add; inputs as the server encodes them
    (electra.onnx.export.encode_batch: right-padded, truncated).
    """
    import tokenizers

    from electra.bundle import OUTPUT_NAME
    from electra.onnx.parity import encode_batch
    from electra.serving.runtime import ModelRunner

    session = ModelRunner("overhead", bundle, device, threads or 0).session
    tokenizer = load_tokenizer(bundle)
    names = [i.name for i in session.get_inputs()]
    # encode_batch copies the tokenizer on every call; timing tokenization needs one configured once.
    configured = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    configured.enable_truncation(max_length=max_seq_len)
    feeds = []
    for text in texts:
        batch = encode_batch(tokenizer, [(text, None)], max_seq_len)
        feeds.append({n: batch[n] for n in names})
    for feed in feeds[:5]:  # ORT grows its arenas on the first calls at new shapes
        session.run([OUTPUT_NAME], feed)
    run_s, tokenize_s = [], []
    for text, feed in zip(texts, feeds, strict=True):
        per_text = []
        for _ in range(repeats):
            t = time.perf_counter()
            session.run([OUTPUT_NAME], feed)
            per_text.append(time.perf_counter() - t)
        run_s.append(statistics.median(per_text))
        t = time.perf_counter()
        configured.encode(text)
        tokenize_s.append(time.perf_counter() - t)
    return {
        "texts": len(texts),
        "repeats_per_text": repeats,
        "providers": session.get_providers(),
        "intra_op_num_threads": threads or "onnxruntime default",
        "session_run_median_ms": 1e3 * statistics.median(run_s),
        "tokenize_median_ms": 1e3 * statistics.median(tokenize_s),
        "batching_ceiling": batching_ceiling(
            session, tokenizer, texts, max_seq_len, names, BATCH_CEILING_SIZE
        ),
    }


def batching_ceiling(
    session: Any, tokenizer: Any, texts: Sequence[str], max_seq_len: int, names: list[str], batch_size: int
) -> dict[str, Any]:
    """Texts/s of `session.run` one text at a time vs `batch_size` texts per call (padded to the longest).

    What batching can give on this device at most, with no server around it: the server's batched vs
    unbatched ratio should be read against this.
    """
    from electra.bundle import OUTPUT_NAME
    from electra.onnx.parity import encode_batch

    batch_size = min(batch_size, len(texts))
    texts = list(texts[: len(texts) // batch_size * batch_size])  # whole batches only
    singles = [encode_batch(tokenizer, [(t, None)], max_seq_len) for t in texts]
    batches = [
        encode_batch(tokenizer, [(t, None) for t in texts[i : i + batch_size]], max_seq_len)
        for i in range(0, len(texts), batch_size)
    ]

    def texts_per_s(feeds: list[dict[str, Any]]) -> float:
        session.run([OUTPUT_NAME], {n: feeds[0][n] for n in names})  # this shape's first call allocates
        t = time.perf_counter()
        for feed in feeds:
            session.run([OUTPUT_NAME], {n: feed[n] for n in names})
        return len(texts) / (time.perf_counter() - t)

    # Alternated, best of three: the two are compared on the same noisy machine at the same moments.
    one, many = [], []
    for _ in range(3):
        one.append(texts_per_s(singles))
        many.append(texts_per_s(batches))
    return {
        "texts": len(texts),
        "batch_size": batch_size,
        "batch_1_texts_per_s": max(one),
        "batched_texts_per_s": max(many),
        "gain": max(many) / max(one),
    }


# ----------------------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------------------


@dataclass
class ServerSpec:
    name: str
    command: list[str]  # without --port, which is chosen at start


def server_specs(
    configs: Sequence[str],
    bundles: dict[str, dict[str, Path]],
    model_dirs: dict[str, Path],
    device: str,
    threads: int | None,
    max_seq_len: int,
) -> list[ServerSpec]:
    def ours(precision: str, extra: list[str]) -> list[str]:
        b = bundles[precision]
        cmd = [sys.executable, "-m", "electra", "serve", "--model", f"{DETECTOR}={b[DETECTOR]}"]
        cmd += ["--model", f"{CLASSIFIER}={b[CLASSIFIER]}", "--host", "127.0.0.1", "--device", device]
        cmd += ["--log-level", "warning", *extra]
        return cmd + (["--threads", str(threads)] if threads else [])

    naive = [sys.executable, str(ROOT / "bench" / "naive_server.py"), "--detector", str(model_dirs[DETECTOR])]
    naive += ["--classifier", str(model_dirs[CLASSIFIER]), "--host", "127.0.0.1", "--device", device]
    naive += ["--max-length", str(max_seq_len)] + (["--threads", str(threads)] if threads else [])
    commands = {
        "ours_batched": lambda: ours("fp32", []),
        "ours_unbatched": lambda: ours("fp32", ["--max-batch-size", "1"]),
        "ours_int8": lambda: ours("int8", []),
        "naive": lambda: naive,
    }
    return [ServerSpec(name, commands[name]()) for name in configs]


class Server:
    """A server subprocess on a free port, in its own process group, so stopping it stops anything it started
    too (electra.serving.process does the work)."""

    def __init__(self, spec: ServerSpec, log_dir: Path) -> None:
        self.spec = spec
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

    def log_tail(self) -> str:
        return self.proc.log_tail() if self.proc is not None else "(no log)"

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, 15.0)


# ----------------------------------------------------------------------------------------------------------
# Load
# ----------------------------------------------------------------------------------------------------------


@dataclass
class PointResult:
    """What one closed-loop run recorded inside its measurement window."""

    window_s: float
    latencies_s: list[float] = field(default_factory=list)  # successful requests only
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)


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

    async def post(self, request: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(request)
            head = await self.reader.readuntil(b"\r\n\r\n")
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
) -> PointResult:
    """`concurrency` users, each on its own keep-alive connection, sending its next body as soon as the
    previous one answered.

    Requests completing within [warm-up end, warm-up end + seconds] are recorded; users stop after the
    first request that completes past the window. User i starts at its own offset in `bodies` so the users
    do not send the same text in lockstep.
    """
    url = httpx.URL(base_url)
    host, port = url.host, url.port or 80
    requests = [raw_request(host, port, path, body) for body in bodies]
    start = time.perf_counter()
    window_start, window_end = start + warmup_s, start + warmup_s + seconds
    result = PointResult(window_s=seconds)

    async def user(index: int) -> None:
        conn = RawHTTP(host, port)
        i = index * len(requests) // concurrency
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
    return result


async def run_point(
    base_url: str, path: str, bodies: Sequence[bytes], concurrency: int, warmup_s: float, seconds: float
) -> PointResult:
    return await closed_loop(base_url, path, bodies, concurrency, warmup_s, seconds)


async def http_floor(base_url: str, requests: int = FLOOR_REQUESTS) -> dict[str, Any]:
    """p50 of GET /health/live one at a time: HTTP and client cost with next to no server work.

    Part of every client-observed latency, so part of the measured overhead too; recorded to tell the
    client's and the framework's share from the request path's.
    """
    url = httpx.URL(base_url)
    conn = RawHTTP(url.host, url.port or 80)
    request = f"GET /health/live HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n\r\n".encode()
    latencies = []
    try:
        for _ in range(requests):
            t = time.perf_counter()
            status, body = await conn.post(request)
            latencies.append(time.perf_counter() - t)
            if status != 200:
                raise BenchError(f"{base_url}/health/live answered {status}: {body[:200]!r}")
    finally:
        conn.close()
    return {"requests": requests, "p50_ms": 1e3 * statistics.median(latencies)}


def check_responses(base_url: str, texts: Sequence[str]) -> None:
    """One request per endpoint and text, checked against the contract, before any load is timed.

    A server that answers fast but wrongly must not win the benchmark.
    """
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
        for text in texts:
            r = client.post("/detect", json={"text": text})
            if r.status_code != 200:
                raise BenchError(f"{base_url}/detect answered {r.status_code}: {r.text[:300]}")
            problems = detect_problems(r.json(), [text])
            r = client.post("/classify", json={"text": text})
            if r.status_code != 200:
                raise BenchError(f"{base_url}/classify answered {r.status_code}: {r.text[:300]}")
            problems += classify_problems(r.json(), 1, set(LABELS.values()))
            if problems:
                raise BenchError(f"{base_url}: wrong response for {text[:60]!r}: {'; '.join(problems[:5])}")


def detect_problems(body: Any, texts: Sequence[str]) -> list[str]:
    """What is wrong with a /detect response to `texts` (empty when it follows the contract)."""
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        return ["no results list"]
    if len(body["results"]) != len(texts):
        return [f"{len(body['results'])} results for {len(texts)} texts"]
    problems = []
    for text, result in zip(texts, body["results"], strict=True):
        tokens = result.get("tokens") if isinstance(result, dict) else None
        if not isinstance(tokens, list) or not tokens:
            problems.append("no tokens")
            continue
        for tok in tokens:
            start, end, score = tok.get("start"), tok.get("end"), tok.get("score")
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
                problems.append(f"bad offsets {start}..{end}")
            elif tok.get("text") != text[start:end]:
                problems.append(f"token text {tok.get('text')!r} != text[{start}:{end}] {text[start:end]!r}")
            if not isinstance(score, float | int) or not 0.0 <= score <= 1.0:
                problems.append(f"score {score!r} not in [0, 1]")
            if not isinstance(tok.get("replaced"), bool):
                problems.append("replaced is not a bool")
        if not isinstance(result.get("replaced_fraction"), float | int):
            problems.append("no replaced_fraction")
        if not isinstance(result.get("truncated"), bool):
            problems.append("no truncated flag")
    return problems


def classify_problems(body: Any, n: int, labels: set[str]) -> list[str]:
    """What is wrong with a /classify response for `n` inputs of a model with `labels`."""
    if not isinstance(body, dict) or not isinstance(body.get("results"), list) or len(body["results"]) != n:
        return [f"expected a results list of {n}"]
    problems = []
    for result in body["results"]:
        scores = result.get("scores") if isinstance(result, dict) else None
        if not isinstance(scores, dict) or set(scores) != labels:
            problems.append(f"scores {scores!r} do not cover the labels {sorted(labels)}")
            continue
        if abs(sum(scores.values()) - 1.0) > 1e-3:
            problems.append(f"scores sum to {sum(scores.values()):.4f}")
        if result.get("label") != max(scores, key=scores.__getitem__):
            problems.append(f"label {result.get('label')!r} is not the top score")
    return problems


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------


def find(
    results: list[dict[str, Any]], config: str, endpoint: str, concurrency: int
) -> dict[str, Any] | None:
    return next(
        (
            r
            for r in results
            if r["config"] == config and r["endpoint"] == endpoint and r["concurrency"] == concurrency
        ),
        None,
    )


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def compute_ratios(results: list[dict[str, Any]], concurrency: int) -> dict[str, dict[str, float | None]]:
    """Per endpoint at `concurrency`: batched vs naive RPS and p99, batched vs unbatched RPS (and p99)."""
    out = {}
    for endpoint in sorted({r["endpoint"] for r in results}):
        b = find(results, "ours_batched", endpoint, concurrency) or {}
        u = find(results, "ours_unbatched", endpoint, concurrency) or {}
        n = find(results, "naive", endpoint, concurrency) or {}
        out[endpoint] = {
            "concurrency": concurrency,
            "batched_vs_naive_rps": ratio(b.get("rps"), n.get("rps")),
            # > 1: the naive server's p99 is that many times ours
            "naive_vs_batched_p99": ratio(n.get("p99_ms"), b.get("p99_ms")),
            "batched_vs_unbatched_rps": ratio(b.get("rps"), u.get("rps")),
            "unbatched_vs_batched_p99": ratio(u.get("p99_ms"), b.get("p99_ms")),
        }
    return out


def check_targets(
    ratios: dict[str, dict[str, float | None]], overhead: dict[str, Any] | None
) -> dict[str, Any]:
    r = ratios.get(TARGET_ENDPOINT, {})

    def met(value: float | None, ok: bool) -> bool | None:
        return None if value is None else ok

    speedup, p99 = r.get("batched_vs_naive_rps"), r.get("naive_vs_batched_p99")
    batching = r.get("batched_vs_unbatched_rps")
    over = overhead.get("overhead_p50_ms") if overhead else None
    return {
        "endpoint": TARGET_ENDPOINT,
        "concurrency": TARGET_CONCURRENCY,
        "batched_vs_naive_rps": {
            "min": TARGETS["batched_vs_naive_rps_min"],
            "measured": speedup,
            "met": met(speedup, speedup is not None and speedup >= TARGETS["batched_vs_naive_rps_min"]),
        },
        "batched_p99_below_naive": {
            "naive_vs_batched_p99": p99,
            "met": met(p99, p99 is not None and p99 > 1.0),
        },
        "batched_vs_unbatched_rps": {
            "min": TARGETS["batched_vs_unbatched_rps_min"],
            "measured": batching,
            "met": met(
                batching, batching is not None and batching >= TARGETS["batched_vs_unbatched_rps_min"]
            ),
        },
        "overhead_p50_ms": {
            "max": TARGETS["overhead_p50_ms_max"],
            "measured": over,
            "met": met(over, over is not None and over < TARGETS["overhead_p50_ms_max"]),
        },
    }


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(results: list[dict[str, Any]]) -> None:
    head = ["config", "endpoint", "conc", "rps", "p50 ms", "p95 ms", "p99 ms", "err"]
    print(f"\n{head[0]:<15} {head[1]:<9} " + " ".join(f"{h:>8}" for h in head[2:]))
    for r in results:
        cells = [f"{r['concurrency']:>8}", f"{r['rps']:>8.1f}"]
        cells += [fmt(r[k], ">8.1f") for k in ("p50_ms", "p95_ms", "p99_ms")] + [f"{r['errors']:>8}"]
        print(f"{r['config']:<15} {r['endpoint']:<9} " + " ".join(cells))


def print_targets(targets: dict[str, Any]) -> None:
    def word(ok: bool | None) -> str:
        return {True: "met", False: "NOT met", None: "not measured"}[ok]

    where = f"/{targets['endpoint']} at concurrency {targets['concurrency']}"
    t = targets["batched_vs_naive_rps"]
    measured = fmt(t["measured"], ".2f")
    print(f"\ntarget: batched >= {t['min']}x naive RPS, {where}: {measured}x ({word(t['met'])})")
    t = targets["batched_p99_below_naive"]
    measured = fmt(t["naive_vs_batched_p99"], ".2f")
    print(f"target: batched p99 below naive's, {where}: naive/ours {measured}x ({word(t['met'])})")
    t = targets["batched_vs_unbatched_rps"]
    measured = fmt(t["measured"], ".2f")
    print(f"target: batching >= {t['min']}x no batching, {where}: {measured}x ({word(t['met'])})")
    t = targets["overhead_p50_ms"]
    measured = fmt(t["measured"], ".2f")
    print(f"target: server overhead < {t['max']} ms at p50, concurrency 1: {measured} ms ({word(t['met'])})")


# ----------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------


def name_list(choices: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {', '.join(choices)}")
        return values

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--size", default="small", help="model size preset (default small)")
    ap.add_argument("--seconds", type=float, default=20.0, help="recorded seconds per load point")
    ap.add_argument("--warmup-seconds", type=float, default=5.0, help="unrecorded seconds before each point")
    ap.add_argument("--concurrency", type=int_list, default=[1, 8, 32, 64])
    ap.add_argument("--endpoints", type=name_list(ENDPOINTS), default=list(ENDPOINTS))
    ap.add_argument(
        "--configs",
        type=name_list((*CONFIGS, "ours_int8")),
        default=list(CONFIGS),
        help=f"default {','.join(CONFIGS)}",
    )
    ap.add_argument("--int8", action="store_true", help="also export int8 bundles and run ours_int8 (CPU)")
    ap.add_argument("--threads", type=int, default=None, help="--threads for every server (default: theirs)")
    ap.add_argument("--max-seq-len", type=int, default=MAX_SEQ_LEN)
    ap.add_argument("--overhead-texts", type=int, default=200, help="texts timed in process for the overhead")
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 s points, concurrency 1,8, few texts")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep models, bundles and logs here")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup_seconds, args.overhead_texts = 2.0, 0.5, 20
        args.concurrency = [c for c in args.concurrency if c <= 8] or [1]
    if args.int8 and "ours_int8" not in args.configs:
        args.configs.append("ours_int8")
    if args.seconds <= 0 or args.warmup_seconds < 0:
        ap.error("--seconds must be positive and --warmup-seconds not negative")
    if args.device == "cuda" and "ours_int8" in args.configs:
        ap.error("int8 bundles are CPU only (no CUDA kernels for the dynamic-quantisation ops)")
    return args


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import onnxruntime as ort
    import torch

    started = time.perf_counter()
    load_start = os.getloadavg()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BenchError("--device cuda, but torch sees no CUDA device")

    short, paragraphs, source = load_source_texts(work)
    tokenizer, tokenizer_source = build_tokenizer(work, paragraphs)
    mix = text_mix(short, paragraphs, MIX_SIZE, seed=0)
    texts = [t for _, t in mix]
    text_info = {"source": source, **describe_texts(mix, tokenizer, args.max_seq_len)}
    print(
        f"texts: {len(texts)} ({text_info['mix']}), tokens p50 {text_info['tokens']['p50']:.0f}, "
        f"max {text_info['tokens']['max']}, {100 * text_info['truncated_fraction']:.1f}% truncated",
        flush=True,
    )
    model_dirs, model_info = build_model_dirs(work, args.size, tokenizer)
    precisions = ["fp32", "int8"] if "ours_int8" in args.configs else ["fp32"]
    bundles, bundle_info = export_bundles(work, model_dirs, precisions, args.max_seq_len)
    setup_s = time.perf_counter() - started

    # Before any server starts, so nothing else of ours competes for the cores.
    ort_detect = measure_ort(
        bundles["fp32"][DETECTOR],
        texts[: args.overhead_texts],
        args.max_seq_len,
        args.device,
        args.threads,
        5,
    )
    ceiling = ort_detect["batching_ceiling"]
    print(
        f"in-process ORT session.run on /detect texts: median {ort_detect['session_run_median_ms']:.2f} ms "
        f"one at a time; batch {ceiling['batch_size']} gives {ceiling['gain']:.2f}x the texts/s of batch 1",
        flush=True,
    )

    bodies = {
        "detect": [json.dumps({"text": t}).encode() for t in texts],
        "classify": [json.dumps({"text": t}).encode() for t in texts],
    }
    specs = server_specs(args.configs, bundles, model_dirs, args.device, args.threads, args.max_seq_len)
    results: list[dict[str, Any]] = []
    configs: dict[str, Any] = {}
    for spec in specs:
        server = Server(spec, work)
        try:
            server.start()
            print(f"{spec.name}: ready in {server.startup_s:.1f}s on port {server.port}", flush=True)
            check_responses(server.url, texts[:3])
            floor = asyncio.run(http_floor(server.url))
            for endpoint in args.endpoints:
                for c in args.concurrency:
                    point = asyncio.run(
                        run_point(
                            server.url, f"/{endpoint}", bodies[endpoint], c, args.warmup_seconds, args.seconds
                        )
                    )
                    row = {"config": spec.name, "endpoint": endpoint, "concurrency": c, **summarize(point)}
                    results.append(row)
                    latency = f"p50 {fmt(row['p50_ms'], '.1f')}  p99 {fmt(row['p99_ms'], '.1f')} ms"
                    print(
                        f"{spec.name:<15} /{endpoint:<8} c={c:<3} {row['rps']:8.1f} rps  {latency}  "
                        f"errors {row['errors']}",
                        flush=True,
                    )
                    if server.proc is not None and server.proc.poll() is not None:
                        raise BenchError(f"{spec.name} died under load:\n{server.log_tail()}")
        finally:
            server.stop()
        configs[spec.name] = {
            # The interpreter and the temporary directory say nothing about another machine's run.
            "command": [
                "python" if a == sys.executable else a.replace(str(work), "$WORK") for a in spec.command
            ],
            "startup_s": server.startup_s,
            "health_live_p50_ms": floor["p50_ms"],
        }

    overhead = None
    c1 = find(results, "ours_batched", "detect", 1)
    if c1 is not None and c1["p50_ms"] is not None:
        overhead = {
            "endpoint": "detect",
            "server_p50_ms_c1": c1["p50_ms"],
            "ort_session_run": ort_detect,
            "overhead_p50_ms": c1["p50_ms"] - ort_detect["session_run_median_ms"],
            "health_live_p50_ms": configs["ours_batched"]["health_live_p50_ms"],
            "overhead_beyond_health_live_p50_ms": (
                c1["p50_ms"]
                - ort_detect["session_run_median_ms"]
                - configs["ours_batched"]["health_live_p50_ms"]
            ),
            "note": (
                "client-observed p50 (HTTP over loopback, JSON, tokenization, queueing, post-processing) "
                "minus the median in-process session.run on the same texts; the client's own time is "
                "included. health_live_p50_ms: GET /health/live one at a time, the HTTP + client floor "
                "of any request"
            ),
        }
    ratios = compute_ratios(results, TARGET_CONCURRENCY)
    targets = check_targets(ratios, overhead)
    print_table(results)
    print_targets(targets)

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else cpu_name()
    import transformers

    return {
        "benchmark": "serve_throughput",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "device": device_name,
        "device_type": args.device,
        "threads": {
            "cores": usable_cores(),
            "server_threads": args.threads or "each server's default",
            "torch_default_num_threads": torch.get_num_threads(),
        },
        "versions": {
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "litestar": importlib.metadata.version("litestar"),
            "httpx": httpx.__version__,
            "numpy": np.__version__,
        },
        "model": {**model_info, "tokenizer": tokenizer_source, "max_seq_len": args.max_seq_len},
        "bundles": bundle_info,
        "texts": text_info,
        "load": {
            "kind": "closed loop: each virtual user sends its next request when the previous one answers",
            "client": "asyncio, a minimal HTTP/1.1 client, one keep-alive connection per user, same machine",
            "body": 'one text per request: {"text": ...}',
            "seconds": args.seconds,
            "warmup_seconds": args.warmup_seconds,
            "concurrency": args.concurrency,
            "endpoints": args.endpoints,
            "recorded": "requests completing inside the window; rps = successful ones / window",
            "percentiles": "numpy.percentile (linear) of successful requests' latencies",
            "quick": args.quick,
        },
        "configs": configs,
        "targets": targets,
        "ratios": ratios,
        "overhead": overhead,
        "results": results,
        "setup_s": setup_s,
        "wall_s": time.perf_counter() - started,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)

    def on_sigterm(signum: int, frame: Any) -> None:
        # SystemExit unwinds through the finally blocks that stop the servers and remove the work dir.
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="electra-serve-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        record = run(args, work)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.quick and args.out is None:
        # A smoke test's numbers mean nothing; they must not overwrite or sit next to real results.
        print(f"(--quick: no JSON written; pass --out to keep it) ({record['wall_s']:.0f}s)")
        return 0
    out = write_result(record, args.out, f"serve_throughput_{args.device}")
    print(f"-> {out} ({record['wall_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
