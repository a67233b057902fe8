"""Server throughput and latency: `electra serve` (batched, unbatched, on uvicorn or granian) vs a naive
`transformers` server, compared in alternating rounds.

Setup (in a temporary directory, never inside the repository): an ELECTRA-Small-shaped discriminator and a
2-label classifier with random weights and a real WordPiece tokenizer (BERT's uncased vocabulary from
../shared/data when present, else one trained on the embedded demo corpus), saved as Hugging Face
directories and exported to fused fp32 ONNX bundles (max_seq_len 128; --int8 adds int8 bundles).

Configurations, each its own server process on a free port, all started before the first round and kept up
until the last:

  ours_batched     electra serve with its defaults (dynamic batching, uvicorn) and one worker
  ours_unbatched   electra serve --max-batch-size 1 (same server, one sequence per model call)
  ours_granian     electra serve --http-server granian (defaults otherwise; when granian is installed)
  ours_litestar    electra serve --hot-path false (defaults otherwise: every request through Litestar's route
                   and the middlewares, the hot path's comparison)
  ours_int8        electra serve, defaults, int8 bundles (only with --int8, CPU)
  ours_workers2    electra serve --workers 2 (defaults otherwise: each worker's ONNX Runtime gets half the
                   cores); its CPU per request counts the supervisor and its workers
  ours_workers4/8  the same with 4 and 8 workers (for a GPU host's cores: N model instances on one GPU)
  ours_workers2_unbuffered (4, 8): the same with --metrics-flush-ms 0, every metric update written to the
                   workers' shared files at once, as before electra.serving.engine.metric_buffer
  ours_arrival     electra serve --batch-order arrival (a batch takes the next inputs in arrival order, not
                   those of about the oldest one's length); ours_workers4_arrival: with --workers 4 too
  naive            bench/naive_server.py: Litestar sync handlers calling transformers on PyTorch eager
                   (ElectraForPreTraining + fast tokenizer; pipeline("text-classification")), one request at
                   a time, truncating at the same 128 tokens
  bare             bench/bare_server.py: a bare ASGI app on uvicorn that tokenizes, runs the same ONNX
                   session on the event loop and answers the logits; no framework, checks or queue. Only in
                   the overhead probe, as the floor any Python server on this machine pays

Rounds: a shared machine's speed drifts by tens of percent over minutes (other work, thermal limits), so
configurations measured one after another can differ by the drift alone. Each round runs every
(endpoint, concurrency) point for every configuration, one short window each, in an order rotated by one
per round; ratios (batched vs naive, batched vs unbatched, granian vs uvicorn) are taken within each round
and their median over rounds is reported, with each round's value, its load average and the medians of
RPS, latency, server CPU per request and inputs per model call.

Load: closed loop. At concurrency C, C virtual users (asyncio tasks, each on its own keep-alive connection
with a minimal HTTP/1.1 client: httpx's ~1 ms of CPU per request would starve the server on 2 cores) each
send the next request as soon as the previous one answers, for --warmup-seconds (not recorded) then --seconds
(recorded: requests that complete inside the window). Bodies are single texts {"text": ...} (on /detect with
"truncate": true, so every server does the same work on a text over the model's length; on /embed, asked for
with --endpoints ...,embed, text-embeddings-inference's {"inputs": ...}, the naive server's answer coming from
sentence-transformers, and every server's vectors checked against the others' first) drawn from a
fixed mix of real text: short sentences (GLUE SST-2 dev), single Wikipedia sentences and Wikipedia paragraph
prefixes of 60-100 words (the demo corpus stands in when ../shared/data is absent); every configuration
sees the same sequence. The client runs on the same machine as the server and competes for its cores: on a
small machine the RPS it reports are a lower bound for every configuration alike.

Server overhead (per round, for ours_batched, ours_granian, ours_litestar and bare): --probe-texts /detect
texts one at a time, 3 times each; each time the end-to-end latency minus the model's own time for that
request, which the server reports in its Server-Timing header (`model;dur=`: the ONNX Runtime call the request
was in). The overhead is the median over texts of each text's median difference, reported as its median over
rounds; `bare`'s is the floor (HTTP over loopback, the event loop, tokenization, threads and cores waking up
after the model), and ours minus bare, per round, is what electra's request path adds to it. Recorded with it:
GET /health/live's p50 and the in-process batching ceiling (texts/s of session.run at batch 32 of similar
lengths vs batch 1), against which the server's batched vs unbatched ratio can be read.

    python -m bench.serve_throughput                # CPU: 4 configs x 2 endpoints x 2 levels x 5 rounds
    python -m bench.serve_throughput --device cuda --out bench/results/serve_throughput_cuda.json
    python -m bench.serve_throughput --quick        # smoke test, ~1 min; writes no JSON unless --out
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.benchlib import (
    int_list,
    median_or_none,
    model_shape,
    portable_path,
    random_models,
    ratio,
    result_header,
    round_order,
    summarize_ratio,
    usable_cores,
    write_result,
)
from bench.loadgen import (
    MAX_SEQ_LEN,
    MIX,
    REQUEST_TIMEOUT_S,
    BenchError,
    RawHTTP,
    Server,
    ServerSpec,
    build_tokenizer,
    closed_loop,
    load_source_texts,
    raw_request,
    summarize,
    text_mix,
)
from electra.errors import InputError
from electra.serving.http.server_timing import parse as parse_server_timing

LABELS = {0: "negative", 1: "positive"}
DETECTOR, CLASSIFIER = "detector", "sentiment"
ENDPOINTS = ("detect", "classify", "embed")
# /embed (text-embeddings-inference's shape, the detector's sentence vectors) only when asked for: a third
# endpoint makes every round half as long again.
DEFAULT_ENDPOINTS = ("detect", "classify")
# Cosine similarity every server's /embed vectors must have with the first server's (ONNX Runtime's fused
# fp32 graph against PyTorch eager: 1 - 1e-6 in the export's parity checks).
EMBED_MIN_COSINE = 0.999


def request_body(endpoint: str, text: str) -> bytes:
    """One text as the endpoint's JSON body. /detect is sent truncate=true: our server would otherwise score
    a text over the model's length through windows (more work) where the naive server truncates it, so
    the comparison would not be of equal work. /embed is TEI's body, the detector named (our server has two
    models; the naive one serves the detector's encoder only), truncating as TEI does by default."""
    if endpoint == "embed":
        return json.dumps({"inputs": text, "model": DETECTOR, "truncate": True}).encode()
    body: dict[str, Any] = {"text": text}
    if endpoint == "detect":
        body["truncate"] = True
    return json.dumps(body).encode()


CONFIGS = ("ours_batched", "ours_unbatched", "naive", "bare")
WORKER_COUNTS = (2, 4, 8)
ALL_CONFIGS = (
    *CONFIGS,
    "ours_granian",
    "ours_int8",
    *(f"ours_workers{n}" for n in WORKER_COUNTS),
    *(f"ours_workers{n}_unbuffered" for n in WORKER_COUNTS),
    "ours_arrival",
    "ours_workers4_arrival",
    "ours_litestar",
)
# The issue's targets (issue 15), checked at concurrency 32 on /detect (the main endpoint).
TARGET_CONCURRENCY = 32
TARGET_ENDPOINT = "detect"
TARGETS = {
    "batched_vs_naive_rps_min": 3.0,
    "batched_p99_below_naive": True,
    "batched_vs_unbatched_rps_min": 1.3,
    "overhead_p50_ms_max": 0.5,
    # The server's overhead beyond the model against a bare ASGI app's, at c=1 (median of per-round ratios).
    "overhead_vs_bare_max": 1.25,
}
MIX_SIZE = 2000
# The server's default --max-batch-size, for the in-process batching ceiling.
BATCH_CEILING_SIZE = 32
FLOOR_REQUESTS = 100
# The configurations whose overhead the probe measures (when they run).
PROBED = ("ours_batched", "ours_granian", "ours_litestar", "bare")

log = logging.getLogger("bench.serve_throughput")


# ----------------------------------------------------------------------------------------------------------
# Texts
# ----------------------------------------------------------------------------------------------------------


def portable_arg(arg: str, work: Path) -> str:
    """A server command's argument as the result records it: "python", and paths (NAME=PATH too) portable."""
    if arg == sys.executable:
        return "python"
    head, eq, tail = arg.rpartition("=")
    return (head + eq + portable_path(tail, work)) if os.path.isabs(tail) else arg


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


def build_model_dirs(work: Path, size: str, tokenizer: Any) -> tuple[dict[str, Path], dict[str, Any]]:
    """Random-weight discriminator and classifier HF directories (with the tokenizer) and their shape."""
    from electra.config import ElectraConfig
    from electra.hf_format import load_hf_dir

    cfg = ElectraConfig.from_size(size, vocab_size=tokenizer.get_vocab_size(), id2label=LABELS)
    dirs = random_models(work, {DETECTOR: ("discriminator", cfg), CLASSIFIER: ("classifier", cfg)}, tokenizer)
    parameters = {name: sum(p.numel() for p in load_hf_dir(d).parameters()) for name, d in dirs.items()}
    info = {
        "size": size,
        "weights": "random (HF-style init)",
        **model_shape(cfg),
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
# The model in process (the batching ceiling), and the server overhead probe
# ----------------------------------------------------------------------------------------------------------


class InProcessModel:
    """The server's own runtime (electra.serving.engine.runtime.ModelRunner: the same session options, e.g.
    idle threads that sleep rather than spin, --threads as intra-op threads) loaded in this process."""

    def __init__(self, bundle: Path, device: str, threads: int | None) -> None:
        from electra.serving.engine.runtime import ModelRunner

        self.runner = ModelRunner("in-process", bundle, device, threads or 0)
        self.session = self.runner.session


def batching_ceiling(model: InProcessModel, texts: Sequence[str], batch_size: int) -> dict[str, Any]:
    """Texts/s of `session.run` one text at a time vs `batch_size` texts per call, in alternating rounds.

    Batches as the server forms them under load: texts sorted by length and cut into batches of
    neighbours (the batcher takes company of a similar length), each padded to its longest. What batching
    can give on this device at most, with no server around it: the server's batched vs unbatched ratio
    should be read against this.
    """
    from electra.bundle import OUTPUT_NAME

    batch_size = min(batch_size, len(texts))
    texts = list(texts[: len(texts) // batch_size * batch_size])  # whole batches only
    encoded = sorted(model.runner.encode(list(texts)), key=lambda e: e.length)
    singles = [model.runner.pad([e]) for e in encoded]
    batches = [model.runner.pad(encoded[i : i + batch_size]) for i in range(0, len(encoded), batch_size)]

    def texts_per_s(feeds: list[dict[str, Any]]) -> float:
        t = time.perf_counter()
        for feed in feeds:
            model.session.run([OUTPUT_NAME], feed)
        return len(texts) / (time.perf_counter() - t)

    texts_per_s(singles[:5])
    texts_per_s(batches[:2])  # a shape's first call allocates
    gains, one, many = [], [], []
    for _ in range(3):
        one.append(texts_per_s(singles))
        many.append(texts_per_s(batches))
        gains.append(many[-1] / one[-1])
    return {
        "texts": len(texts),
        "batch_size": batch_size,
        "batches": "texts sorted by length, consecutive groups, each padded to its longest",
        "rounds": 3,
        "batch_1_texts_per_s": one,
        "batched_texts_per_s": many,
        "gain_median": statistics.median(gains),
    }


async def overhead_probe(base_url: str, path: str, texts: Sequence[str], repeats: int = 3) -> dict[str, Any]:
    """Per text, `repeats` requests one at a time (keep-alive, this process's client): each one's latency
    minus the model's time for it, from the server's Server-Timing header
    (electra.serving.http.server_timing).

    overhead_p50_ms: the median over texts of each text's median difference; overhead_floor_p50_ms: the
    same with each text's minimum, which drops the moments another process had the cores. Both hold HTTP
    over loopback and this client, JSON, tokenization, queueing, the hand-off to ONNX Runtime and back, and
    post-processing; the model's own time is out, measured by the server around the very call, so the
    machine's drift cancels request by request.
    """
    url = httpx.URL(base_url)
    conn = RawHTTP(url.host, url.port or 80)
    requests = [raw_request(url.host, url.port or 80, path, request_body(path.strip("/"), t)) for t in texts]
    latency_ms: list[float] = []
    stages_ms: list[dict[str, float]] = []
    overhead: list[list[float]] = []  # per text, latency - model of each repeat
    try:
        for request in requests:
            overhead.append([])
            for _ in range(repeats):
                t = time.perf_counter()
                status, body = await conn.post(request)
                latency_ms.append(1e3 * (time.perf_counter() - t))
                if status != 200:
                    raise BenchError(f"{base_url}{path} answered {status}: {body[:200]!r}")
                stages_ms.append(server_timing(conn.head))
                if "model" not in stages_ms[-1]:
                    raise BenchError(f"{base_url}{path}: no model time in its Server-Timing header")
                overhead[-1].append(latency_ms[-1] - stages_ms[-1]["model"])
    finally:
        conn.close()
    out = {
        "texts": len(texts),
        "repeats": repeats,
        "server_p50_ms": statistics.median(latency_ms),
        "overhead_p50_ms": statistics.median(statistics.median(o) for o in overhead),
        "overhead_floor_p50_ms": statistics.median(min(o) for o in overhead),
    }
    for stage in ("model", "tokenize", "queue"):
        values = [st[stage] for st in stages_ms if stage in st]
        out[f"{stage}_p50_ms"] = statistics.median(values) if values else None
    return out


def server_timing(head: bytes) -> dict[str, float]:
    """The Server-Timing durations (ms) in a response head; {} without the header."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"server-timing":
            return parse_server_timing(value.decode("latin-1"))
    return {}


async def http_floor(base_url: str, requests: int = FLOOR_REQUESTS) -> float:
    """p50 ms of GET /health/live one at a time: HTTP and client cost with next to no server work.

    Part of every client-observed latency, so part of the measured overhead too; recorded to tell the
    client's and the HTTP server's share from the request path's.
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
    return 1e3 * statistics.median(latencies)


# ----------------------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------------------


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
        if "--workers" not in extra:  # one worker on every device (a GPU's default is several)
            cmd += ["--workers", "1"]
        return cmd + (["--threads", str(threads)] if threads else [])

    naive = [sys.executable, "-m", "bench.naive_server", "--detector", str(model_dirs[DETECTOR])]
    naive += ["--classifier", str(model_dirs[CLASSIFIER]), "--host", "127.0.0.1", "--device", device]
    naive += ["--max-length", str(max_seq_len)] + (["--threads", str(threads)] if threads else [])
    bare = [sys.executable, "-m", "bench.bare_server", "--bundle"]
    bare += [str(bundles["fp32"][DETECTOR]), "--host", "127.0.0.1", "--device", device]
    bare += ["--threads", str(threads)] if threads else []
    commands = {
        "ours_batched": lambda: ours("fp32", []),
        "ours_unbatched": lambda: ours("fp32", ["--max-batch-size", "1"]),
        "ours_granian": lambda: ours("fp32", ["--http-server", "granian"]),
        "ours_int8": lambda: ours("int8", []),
        **{f"ours_workers{n}": (lambda n=n: ours("fp32", ["--workers", str(n)])) for n in WORKER_COUNTS},
        **{
            f"ours_workers{n}_unbuffered": (
                lambda n=n: ours("fp32", ["--workers", str(n), "--metrics-flush-ms", "0"])
            )
            for n in WORKER_COUNTS
        },
        "ours_arrival": lambda: ours("fp32", ["--batch-order", "arrival"]),
        "ours_workers4_arrival": lambda: ours("fp32", ["--workers", "4", "--batch-order", "arrival"]),
        "ours_litestar": lambda: ours("fp32", ["--hot-path", "false"]),
        "naive": lambda: naive,
        "bare": lambda: bare,
    }
    return [
        ServerSpec(name, commands[name](), ours=name.startswith("ours"), loaded=name != "bare")
        for name in configs
    ]


# ----------------------------------------------------------------------------------------------------------
# Load
# ----------------------------------------------------------------------------------------------------------


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


def embed_problems(body: Any, n: int) -> list[str]:
    """What is wrong with an /embed response for `n` texts (TEI's: a list of unit vectors, one per text)."""
    if not isinstance(body, list) or len(body) != n:
        return [f"expected a list of {n} vectors"]
    if not all(isinstance(v, list) and v and all(isinstance(x, float | int) for x in v) for v in body):
        return ["vectors are not non-empty lists of numbers"]
    problems = []
    if len({len(v) for v in body}) != 1:
        problems.append(f"vectors of several lengths {sorted({len(v) for v in body})}")
    for v in body:
        norm = math.sqrt(sum(x * x for x in v))
        if not math.isfinite(norm) or abs(norm - 1.0) > 1e-3:
            problems.append(f"a vector's norm is {norm:.4f}, not 1 (normalize defaults to true)")
    return problems


def embeddings(base_url: str, texts: Sequence[str]) -> list[list[float]]:
    """/embed's vectors for `texts`, in one request."""
    body = {"inputs": list(texts), "model": DETECTOR, "truncate": True}
    r = httpx.post(f"{base_url}/embed", json=body, timeout=REQUEST_TIMEOUT_S)
    if r.status_code != 200:
        raise BenchError(f"{base_url}/embed answered {r.status_code}: {r.text[:300]}")
    if problems := embed_problems(r.json(), len(texts)):
        raise BenchError(f"{base_url}/embed: {'; '.join(problems[:5])}")
    return r.json()


def embed_disagreements(vectors: dict[str, list[list[float]]]) -> list[str]:
    """Servers whose /embed vectors for the same texts point elsewhere than the first server's (cosine below
    EMBED_MIN_COSINE): both must embed the same model the same way for their speeds to be compared."""
    (first, reference), *others = vectors.items()
    problems = []
    for name, vs in others:
        for i, (a, b) in enumerate(zip(reference, vs, strict=True)):
            cosine = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
            if not cosine >= EMBED_MIN_COSINE:
                problems.append(f"{name}'s vector for text {i} has cosine {cosine:.5f} with {first}'s")
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
# Rounds: every configuration for a short window per round, order rotated, servers up throughout
# ----------------------------------------------------------------------------------------------------------


async def run_rounds(
    servers: Sequence[Any],
    points: Sequence[tuple[str, int]],
    bodies: dict[str, Sequence[bytes]],
    rounds: int,
    warmup_s: float,
    seconds: float,
    probe: Callable[[int], Awaitable[dict[str, Any]]] | None = None,
    say: Callable[[str], None] = print,
    client_processes: int = 1,
) -> list[dict[str, Any]]:
    """`rounds` rounds; in each, for every (endpoint, concurrency) point, every server for one closed-loop
    window (warm-up + seconds), in round_order; then `probe(round)` (the overhead probe) if given.

    `servers`: objects with name, url, counters() (a dict of monotonic totals; the window records their
    deltas) and check_alive(). Each round records the load average at its start and end.
    """
    by_name = {s.name: s for s in servers}
    records = []
    for r in range(rounds):
        order = round_order(list(by_name), r)
        record: dict[str, Any] = {"round": r, "load_average_start": list(os.getloadavg()), "order": order}
        windows = []
        for endpoint, c in points:
            for position, name in enumerate(order):
                server = by_name[name]
                before = server.counters()
                point = await closed_loop(
                    server.url, f"/{endpoint}", bodies[endpoint], c, warmup_s, seconds, client_processes
                )
                after = server.counters()
                server.check_alive()
                row = {
                    "round": r,
                    "position": position,
                    "config": name,
                    "endpoint": endpoint,
                    "concurrency": c,
                    **summarize(point),
                    **window_costs(before, after, point.completed),
                }
                if c == 1 and row.get("model_ms_per_call") is not None and row["mean_ms"] is not None:
                    row["mean_minus_model_ms"] = row["mean_ms"] - row["model_ms_per_call"]
                windows.append(row)
                say(
                    f"round {r + 1}/{rounds} {name:<15} /{endpoint:<8} c={c:<3} {row['rps']:8.1f} rps  "
                    f"p50 {fmt(row['p50_ms'], '.1f')}  p99 {fmt(row['p99_ms'], '.1f')} ms  "
                    f"cpu/req {fmt(row.get('cpu_ms_per_request'), '.2f')} ms  "
                    f"client {fmt(row['client_cores'], '.2f')} cores  errors {row['errors']}"
                )
        record["windows"] = windows
        if probe is not None:
            record["overhead"] = await probe(r)
        record["load_average_end"] = list(os.getloadavg())
        records.append(record)
    return records


def window_costs(before: dict[str, float], after: dict[str, float], completed: int) -> dict[str, Any]:
    """Per request of a window (warm-up included, as the counters are): server CPU ms, and for ours the
    model's own ms per call and inputs per model call."""
    out: dict[str, Any] = {"completed": completed}
    if "cpu_s" in before and completed:
        out["cpu_ms_per_request"] = 1e3 * (after["cpu_s"] - before["cpu_s"]) / completed
    if "inference_s" in before:
        calls = after["inference_calls"] - before["inference_calls"]
        seconds = after["inference_s"] - before["inference_s"]
        out["model_calls"] = calls
        out["model_ms_per_call"] = 1e3 * seconds / calls if calls else None
        out["inputs_per_call"] = completed / calls if calls else None
    return out


# ----------------------------------------------------------------------------------------------------------
# Report: medians over rounds, and the median of per-round ratios
# ----------------------------------------------------------------------------------------------------------

# name: (numerator config, denominator config, metric). Computed within each round, then the median taken.
RATIOS = {
    "batched_vs_naive_rps": ("ours_batched", "naive", "rps"),
    "naive_vs_batched_p99": ("naive", "ours_batched", "p99_ms"),  # > 1: naive's p99 is that many times ours
    "batched_vs_unbatched_rps": ("ours_batched", "ours_unbatched", "rps"),
    "unbatched_vs_batched_p99": ("ours_unbatched", "ours_batched", "p99_ms"),
    "granian_vs_uvicorn_rps": ("ours_granian", "ours_batched", "rps"),
    "uvicorn_vs_granian_p50": ("ours_batched", "ours_granian", "p50_ms"),  # > 1: granian is faster
    "uvicorn_vs_granian_cpu_per_request": ("ours_batched", "ours_granian", "cpu_ms_per_request"),
    "naive_vs_batched_cpu_per_request": ("naive", "ours_batched", "cpu_ms_per_request"),
    "int8_vs_fp32_rps": ("ours_int8", "ours_batched", "rps"),
    "workers2_vs_workers1_rps": ("ours_workers2", "ours_batched", "rps"),
    "workers1_vs_workers2_p50": ("ours_batched", "ours_workers2", "p50_ms"),  # > 1: two workers are faster
    "workers1_vs_workers2_p99": ("ours_batched", "ours_workers2", "p99_ms"),
    **{
        name: spec
        for n in WORKER_COUNTS[1:]
        for name, spec in (
            (f"workers{n}_vs_workers1_rps", (f"ours_workers{n}", "ours_batched", "rps")),
            (f"workers1_vs_workers{n}_p99", ("ours_batched", f"ours_workers{n}", "p99_ms")),
        )
    },
    # Metric updates gathered per worker (the default) against each written at once (--metrics-flush-ms 0).
    **{
        name: spec
        for n in WORKER_COUNTS
        for name, spec in (
            (
                f"workers{n}_buffered_vs_unbuffered_rps",
                (f"ours_workers{n}", f"ours_workers{n}_unbuffered", "rps"),
            ),
            (
                f"workers{n}_unbuffered_vs_buffered_cpu_per_request",  # > 1: buffering saves CPU
                (f"ours_workers{n}_unbuffered", f"ours_workers{n}", "cpu_ms_per_request"),
            ),
        )
    },
    # Batches in arrival order against length order (--batch-order): throughput, and the tail.
    "arrival_vs_length_rps": ("ours_arrival", "ours_batched", "rps"),
    "length_vs_arrival_p99": ("ours_batched", "ours_arrival", "p99_ms"),  # > 1: arrival order's p99 is lower
    "workers4_arrival_vs_length_rps": ("ours_workers4_arrival", "ours_workers4", "rps"),
    "workers4_length_vs_arrival_p99": ("ours_workers4", "ours_workers4_arrival", "p99_ms"),
}


def find(
    rows: Sequence[dict[str, Any]], config: str, endpoint: str, concurrency: int
) -> dict[str, Any] | None:
    return next(
        (
            r
            for r in rows
            if r["config"] == config and r["endpoint"] == endpoint and r["concurrency"] == concurrency
        ),
        None,
    )


def per_round_ratios(
    rounds: Sequence[dict[str, Any]], a: str, b: str, metric: str, endpoint: str, concurrency: int
) -> list[float | None]:
    """`a`'s metric over `b`'s in each round (None where either is missing or b's is 0)."""
    out = []
    for record in rounds:
        ra = find(record["windows"], a, endpoint, concurrency) or {}
        rb = find(record["windows"], b, endpoint, concurrency) or {}
        out.append(ratio(ra.get(metric), rb.get(metric)))
    return out


def compute_ratios(rounds: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{endpoint: {concurrency: {ratio name: {median, min, max, per_round}}}} for every RATIOS entry whose
    two configurations ran."""
    windows = [w for record in rounds for w in record["windows"]]
    configs = {w["config"] for w in windows}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for endpoint in sorted({w["endpoint"] for w in windows}):
        for c in sorted({w["concurrency"] for w in windows if w["endpoint"] == endpoint}):
            level = out.setdefault(endpoint, {}).setdefault(str(c), {})
            for name, (a, b, metric) in RATIOS.items():
                if a in configs and b in configs:
                    level[name] = summarize_ratio(per_round_ratios(rounds, a, b, metric, endpoint, c))
    return out


SUMMARY_KEYS = (
    "rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "cpu_ms_per_request",
    "model_ms_per_call",
    "inputs_per_call",
    "client_cores",
)


def aggregate(rounds: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (config, endpoint, concurrency): the median over rounds of each figure, and rps per round."""
    windows = [w for record in rounds for w in record["windows"]]
    keys = sorted(
        {(w["config"], w["endpoint"], w["concurrency"]) for w in windows}, key=lambda k: (k[1], k[2], k[0])
    )
    rows = []
    for config, endpoint, c in keys:
        mine = [w for w in windows if (w["config"], w["endpoint"], w["concurrency"]) == (config, endpoint, c)]
        row: dict[str, Any] = {"config": config, "endpoint": endpoint, "concurrency": c, "rounds": len(mine)}
        for key in SUMMARY_KEYS:
            row[f"{key}_median"] = median_or_none([w.get(key) for w in mine])
        row["rps_per_round"] = [w["rps"] for w in mine]
        row["errors"] = sum(w["errors"] for w in mine)
        rows.append(row)
    return rows


def overhead_summary(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per probed configuration: the median over rounds of the probe's figures and each round's overhead;
    for ours, also the median over rounds of (ours - bare) within the round, and of the c=1 windows' mean
    latency minus the server's own mean inference time (a second estimate, from its /metrics)."""
    out: dict[str, Any] = {}
    configs = sorted({name for record in rounds for name in record.get("overhead", {})})
    for config in configs:
        probes = [record["overhead"][config] for record in rounds if config in record.get("overhead", {})]
        keys = ("overhead_p50_ms", "overhead_floor_p50_ms", "server_p50_ms", "model_p50_ms")
        out[config] = {key: median_or_none([p.get(key) for p in probes]) for key in keys} | {
            "tokenize_p50_ms": median_or_none([p.get("tokenize_p50_ms") for p in probes]),
            "queue_p50_ms": median_or_none([p.get("queue_p50_ms") for p in probes]),
            "health_live_p50_ms": median_or_none([p.get("health_live_p50_ms") for p in probes]),
            "overhead_p50_ms_per_round": [p.get("overhead_p50_ms") for p in probes],
            "overhead_floor_p50_ms_per_round": [p.get("overhead_floor_p50_ms") for p in probes],
        }
        if config == "bare":
            continue
        beyond = [
            record["overhead"][config]["overhead_p50_ms"] - record["overhead"]["bare"]["overhead_p50_ms"]
            for record in rounds
            if config in record.get("overhead", {}) and "bare" in record["overhead"]
        ]
        out[config]["beyond_bare_p50_ms"] = median_or_none(beyond)
        out[config]["beyond_bare_p50_ms_per_round"] = beyond
        ratios = [
            record["overhead"][config]["overhead_p50_ms"] / record["overhead"]["bare"]["overhead_p50_ms"]
            for record in rounds
            if config in record.get("overhead", {}) and "bare" in record["overhead"]
        ]
        out[config]["vs_bare_ratio"] = median_or_none(ratios)
        out[config]["vs_bare_ratio_per_round"] = ratios
        c1 = [
            w.get("mean_minus_model_ms")
            for record in rounds
            for w in record["windows"]
            if w["config"] == config and w["concurrency"] == 1 and w["endpoint"] == TARGET_ENDPOINT
        ]
        out[config]["c1_window_mean_minus_model_ms"] = median_or_none(c1)
    return out


def check_targets(ratios: dict[str, Any], overhead: dict[str, Any]) -> dict[str, Any]:
    r = ratios.get(TARGET_ENDPOINT, {}).get(str(TARGET_CONCURRENCY), {})

    def median(name: str) -> float | None:
        return r.get(name, {}).get("median")

    def met(value: float | None, ok: bool) -> bool | None:
        return None if value is None else ok

    speedup, p99 = median("batched_vs_naive_rps"), median("naive_vs_batched_p99")
    batching = median("batched_vs_unbatched_rps")
    over = overhead.get("ours_batched", {}).get("overhead_p50_ms")
    floor = overhead.get("bare", {}).get("overhead_p50_ms")
    ratio = overhead.get("ours_batched", {}).get("vs_bare_ratio")
    return {
        "endpoint": TARGET_ENDPOINT,
        "concurrency": TARGET_CONCURRENCY,
        "statistic": "median of per-round ratios",
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
            # Not a target: the same figure for bench/bare_server.py, the floor of any Python server here.
            "bare_server": floor,
            "beyond_bare": overhead.get("ours_batched", {}).get("beyond_bare_p50_ms"),
        },
        "overhead_vs_bare": {
            "max": TARGETS["overhead_vs_bare_max"],
            "measured": ratio,
            "met": met(ratio, ratio is not None and ratio <= TARGETS["overhead_vs_bare_max"]),
        },
    }


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ["config", "endpoint", "conc", "rps", "p50 ms", "p99 ms", "cpu/req", "in/call", "client", "err"]
    print(f"\nmedians over rounds\n{head[0]:<15} {head[1]:<9} " + " ".join(f"{h:>8}" for h in head[2:]))
    for r in rows:
        cells = [f"{r['concurrency']:>8}", f"{r['rps_median']:>8.1f}"]
        cells += [fmt(r[f"{k}_median"], ">8.2f") for k in ("p50_ms", "p99_ms", "cpu_ms_per_request")]
        cells += [fmt(r["inputs_per_call_median"], ">8.2f"), fmt(r["client_cores_median"], ">8.2f")]
        cells.append(f"{r['errors']:>8}")
        print(f"{r['config']:<15} {r['endpoint']:<9} " + " ".join(cells))


def print_ratios(ratios: dict[str, Any]) -> None:
    print("\nmedian of per-round ratios [min, max]")
    for endpoint, levels in ratios.items():
        for c, named in levels.items():
            for name, s in named.items():
                print(
                    f"  /{endpoint:<8} c={c:<3} {name:<36} {fmt(s['median'], '.2f')}  "
                    f"[{fmt(s['min'], '.2f')}, {fmt(s['max'], '.2f')}]"
                )


def print_targets(targets: dict[str, Any]) -> None:
    def word(ok: bool | None) -> str:
        return {True: "met", False: "NOT met", None: "not measured"}[ok]

    where = f"/{targets['endpoint']} at concurrency {targets['concurrency']}, median of per-round ratios"
    t = targets["batched_vs_naive_rps"]
    print(
        f"\ntarget: batched >= {t['min']}x naive RPS, {where}: "
        f"{fmt(t['measured'], '.2f')}x ({word(t['met'])})"
    )
    t = targets["batched_p99_below_naive"]
    measured = fmt(t["naive_vs_batched_p99"], ".2f")
    print(f"target: batched p99 below naive's, {where}: naive/ours {measured}x ({word(t['met'])})")
    t = targets["batched_vs_unbatched_rps"]
    print(
        f"target: batching >= {t['min']}x no batching, {where}: "
        f"{fmt(t['measured'], '.2f')}x ({word(t['met'])})"
    )
    t = targets["overhead_p50_ms"]
    measured = fmt(t["measured"], ".2f")
    print(f"target: server overhead < {t['max']} ms at p50, concurrency 1: {measured} ms ({word(t['met'])})")
    if t.get("bare_server") is not None:
        print(
            f"        a bare ASGI server's overhead by the same measure: {fmt(t['bare_server'], '.2f')} ms; "
            f"ours beyond it: {fmt(t.get('beyond_bare'), '.2f')} ms"
        )
    t = targets["overhead_vs_bare"]
    print(
        f"target: server overhead <= {t['max']}x a bare ASGI server's, concurrency 1, median of per-round "
        f"ratios: {fmt(t['measured'], '.2f')}x ({word(t['met'])})"
    )


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


def default_configs() -> list[str]:
    """CONFIGS, with ours_granian when granian is installed."""
    return [*CONFIGS, *(["ours_granian"] if importlib.util.find_spec("granian") else [])]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--size", default="small", help="model size preset (default small)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (every configuration once per point each)")
    ap.add_argument("--seconds", type=float, default=4.0, help="recorded seconds per window")
    ap.add_argument("--warmup-seconds", type=float, default=1.0, help="unrecorded seconds before each window")
    ap.add_argument("--concurrency", type=int_list, default=[1, 32])
    ap.add_argument("--endpoints", type=name_list(ENDPOINTS), default=list(DEFAULT_ENDPOINTS))
    ap.add_argument(
        "--configs",
        type=name_list(ALL_CONFIGS),
        default=None,
        help=f"default {','.join(CONFIGS)} (and ours_granian when granian is installed)",
    )
    ap.add_argument("--int8", action="store_true", help="also export int8 bundles and run ours_int8 (CPU)")
    ap.add_argument("--threads", type=int, default=None, help="--threads for every server (default: theirs)")
    ap.add_argument("--max-seq-len", type=int, default=MAX_SEQ_LEN)
    ap.add_argument(
        "--probe-texts", type=int, default=100, help="texts of the overhead probe, per round (0: none)"
    )
    ap.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="client processes the users are split among (one holds about one core: several for thousands "
        "of requests a second)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 rounds of 1 s windows, few texts")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep models, bundles and logs here")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.configs is None:
        args.configs = default_configs()
    if args.quick:
        args.rounds, args.seconds, args.warmup_seconds, args.probe_texts = 2, 1.0, 0.3, 10
    if args.int8 and "ours_int8" not in args.configs:
        args.configs.append("ours_int8")
    if args.seconds <= 0 or args.warmup_seconds < 0 or args.rounds < 1:
        ap.error("--seconds and --rounds must be positive and --warmup-seconds not negative")
    if not 1 <= args.client_processes <= (os.cpu_count() or 1) * 4:
        ap.error(f"--client-processes must be between 1 and 4 per core, got {args.client_processes}")
    if args.device == "cuda" and "ours_int8" in args.configs:
        ap.error("int8 bundles are CPU only (no CUDA kernels for the dynamic-quantisation ops)")
    return args


@dataclass
class Setup:
    """What the servers serve: the texts, the models and their bundles, and what the record says of them."""

    texts: list[str]
    text_info: dict[str, Any]
    model_info: dict[str, Any]
    tokenizer_source: str
    model_dirs: dict[str, Path]
    bundles: dict[str, dict[str, Path]]
    bundle_info: dict[str, Any]
    seconds: float


def set_up(args: argparse.Namespace, work: Path) -> Setup:
    """The text mix, the random-weight models and their bundles."""
    started = time.perf_counter()
    short, paragraphs, source = load_source_texts(work)
    tokenizer, tokenizer_source = build_tokenizer(work, paragraphs)
    mix = text_mix(short, paragraphs, MIX_SIZE, seed=0)
    text_info = {"source": source, **describe_texts(mix, tokenizer, args.max_seq_len)}
    print(
        f"texts: {len(mix)} ({text_info['mix']}), tokens p50 {text_info['tokens']['p50']:.0f}, "
        f"max {text_info['tokens']['max']}, {100 * text_info['truncated_fraction']:.1f}% truncated",
        flush=True,
    )
    model_dirs, model_info = build_model_dirs(work, args.size, tokenizer)
    precisions = ["fp32", "int8"] if "ours_int8" in args.configs else ["fp32"]
    bundles, bundle_info = export_bundles(work, model_dirs, precisions, args.max_seq_len)
    return Setup(
        [t for _, t in mix],
        text_info,
        model_info,
        tokenizer_source,
        model_dirs,
        bundles,
        bundle_info,
        time.perf_counter() - started,
    )


def in_process_ceiling(args: argparse.Namespace, setup: Setup) -> dict[str, Any]:
    """The detector as the servers run it, in this process, before any server starts: what batching can
    gain at most."""
    model = InProcessModel(setup.bundles["fp32"][DETECTOR], args.device, args.threads)
    sample = setup.texts[: max(BATCH_CEILING_SIZE * 4, args.probe_texts)]
    ceiling = batching_ceiling(model, sample, BATCH_CEILING_SIZE)
    print(
        f"in-process batching ceiling: batch {ceiling['batch_size']} of similar lengths gives "
        f"{ceiling['gain_median']:.2f}x the texts/s of batch 1",
        flush=True,
    )
    return ceiling


def serve_and_measure(
    args: argparse.Namespace, setup: Setup, work: Path
) -> tuple[list[Server], list[dict[str, Any]]]:
    """Every configuration's server up, checked, then the rounds (load windows and the overhead probe);
    the servers stopped whatever happens."""
    texts = setup.texts
    bodies = {endpoint: [request_body(endpoint, t) for t in texts] for endpoint in ENDPOINTS}
    specs = server_specs(
        args.configs, setup.bundles, setup.model_dirs, args.device, args.threads, args.max_seq_len
    )
    servers = [Server(spec, work) for spec in specs]
    points = [(endpoint, c) for endpoint in args.endpoints for c in args.concurrency]
    probe_texts = texts[: args.probe_texts]
    try:
        for server in servers:  # all up before the first round, kept up to the last
            server.start()
            print(f"{server.name}: ready in {server.startup_s:.1f}s on port {server.port}", flush=True)
            if server.spec.loaded:  # bare answers bare logits
                check_responses(server.url, texts[:3])
        if "embed" in args.endpoints:
            vectors = {s.name: embeddings(s.url, texts[:8]) for s in servers if s.spec.loaded}
            if problems := embed_disagreements(vectors):
                raise BenchError(f"/embed vectors differ between servers: {'; '.join(problems[:5])}")
        # --probe-texts 0: load windows only (the probe's medians need texts).
        probed = [s for s in servers if s.name in PROBED] if probe_texts else []

        async def probe(round_index: int) -> dict[str, Any]:
            out = {}
            for server in round_order(probed, round_index):
                # Every probe text's shape once first: ONNX Runtime grows its arenas on a shape's first calls.
                if round_index == 0:
                    await overhead_probe(server.url, f"/{TARGET_ENDPOINT}", probe_texts, repeats=1)
                result = await overhead_probe(server.url, f"/{TARGET_ENDPOINT}", probe_texts)
                result["health_live_p50_ms"] = await http_floor(server.url, FLOOR_REQUESTS)
                out[server.name] = result
            return out

        rounds = asyncio.run(
            run_rounds(
                [s for s in servers if s.spec.loaded],
                points,
                bodies,
                args.rounds,
                args.warmup_seconds,
                args.seconds,
                probe=probe if probed else None,
                say=lambda line: print(line, flush=True),
                client_processes=args.client_processes,
            )
        )
    finally:
        for server in servers:
            server.stop()
    for record in rounds:
        for name, p in record.get("overhead", {}).items():
            print(
                f"round {record['round'] + 1} overhead probe {name:<13}: latency p50 "
                f"{p['server_p50_ms']:.2f} ms, model p50 {p['model_p50_ms']:.2f} ms, "
                f"overhead p50 {p['overhead_p50_ms']:.2f} ms (floor {p['overhead_floor_p50_ms']:.2f} ms)",
                flush=True,
            )
    return servers, rounds


def versions() -> dict[str, str]:
    import onnxruntime as ort
    import torch
    import transformers

    out = {
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "litestar": importlib.metadata.version("litestar"),
        "uvicorn": importlib.metadata.version("uvicorn"),
        "httpx": httpx.__version__,
        "numpy": np.__version__,
    }
    if importlib.util.find_spec("granian"):
        out["granian"] = importlib.metadata.version("granian")
    return out


def method(args: argparse.Namespace) -> dict[str, Any]:
    """How the figures were taken, as the record says it."""
    return {
        "rounds": args.rounds,
        "design": (
            "all servers up for the whole run; each round runs every (endpoint, concurrency) point "
            "for every configuration, one window each, in an order rotated by one per round; then the "
            "overhead probe. Ratios are taken within each round and their median reported (with min, "
            "max and every round's value), so a change in the machine's speed during the run moves "
            "both sides of a ratio"
        ),
        "window": {"warmup_seconds": args.warmup_seconds, "seconds": args.seconds},
        "load": "closed loop: each virtual user sends its next request when the previous one answers",
        "client": "asyncio, a minimal HTTP/1.1 client, one keep-alive connection per user, same machine; "
        f"{args.client_processes} client process(es), the users split among them",
        "client_cores": "the load generator's CPU seconds (every client process's) per wall second: near "
        "one per process, the client may be what limits the point",
        "body": 'one text per request: {"text": ...}, on /detect with "truncate": true (request_body)',
        "recorded": "requests completing inside the window; rps = successful ones / window",
        "percentiles": "numpy.percentile (linear) of successful requests' latencies",
        "cpu_ms_per_request": "server CPU (user+system, every thread of the process and of its child "
        "processes, /proc) over the window incl. warm-up / requests completed in it",
        "model_ms_per_call": "electra_inference_seconds (the server's own ONNX Runtime time) per call",
        "overhead": (
            "per round, for ours_batched, ours_granian, ours_litestar and bare, on /detect: probe_texts texts"
            " one at a time, 3 times each; each time the end-to-end latency (this client, loopback, "
            "keep-alive) minus the model's time for that request, from the server's Server-Timing header "
            "(model;dur: the ONNX Runtime call it was in, timed by the server around the call). "
            "overhead_p50_ms = median over texts of each text's median difference; overhead_floor_p50_ms = "
            "the same with each text's minimum; reported: their medians over rounds. bare "
            "(bench/bare_server.py: uvicorn, a bare ASGI app, tokenize + the same session on the event loop +"
            " JSON logits) is the floor any Python server pays here; beyond_bare_p50_ms = median over rounds "
            "of (ours - bare) in the round, vs_bare_ratio = median over rounds of (ours / bare) in the round."
            " c1_window_mean_minus_model_ms: a second estimate, the c=1 windows' mean latency minus the "
            "server's own mean inference time (its /metrics). health_live_p50_ms: GET /health/live one at a "
            "time"
        ),
        "probe_texts": args.probe_texts,
        "concurrency": args.concurrency,
        "endpoints": args.endpoints,
        "configs": args.configs,
        "quick": args.quick,
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Set-up, the in-process ceiling, the servers and their rounds, then the report."""
    import torch

    started = time.perf_counter()
    load_start = os.getloadavg()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BenchError("--device cuda, but torch sees no CUDA device")
    setup = set_up(args, work)
    ceiling = in_process_ceiling(args, setup)
    servers, rounds = serve_and_measure(args, setup, work)
    rows = aggregate(rounds)
    ratios = compute_ratios(rounds)
    overhead = overhead_summary(rounds)
    targets = check_targets(ratios, overhead)
    print_table(rows)
    print_ratios(ratios)
    print_targets(targets)
    configs = {
        s.name: {
            # The interpreter and this machine's paths say nothing about another machine's run.
            "command": [portable_arg(a, work) for a in s.spec.command],
            "startup_s": s.startup_s,
        }
        for s in servers
    }
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else None
    return {
        **result_header("serve_throughput", device_name),
        "device_type": args.device,
        "threads": {
            "cores": usable_cores(),
            "server_threads": args.threads or "each server's default",
            "torch_default_num_threads": torch.get_num_threads(),
        },
        "versions": versions(),
        "model": {**setup.model_info, "tokenizer": setup.tokenizer_source, "max_seq_len": args.max_seq_len},
        "bundles": setup.bundle_info,
        "texts": setup.text_info,
        "method": method(args),
        "load_average": {
            "start": list(load_start),
            "end": list(os.getloadavg()),
            "per_round": [
                {"round": r["round"], "start": r["load_average_start"], "end": r["load_average_end"]}
                for r in rounds
            ],
            "note": "1, 5 and 15 minute load averages of the whole machine (other users' work included)",
        },
        "batching_ceiling": ceiling,
        "configs": configs,
        "targets": targets,
        "ratios": ratios,
        "overhead": overhead,
        "results": rows,
        "rounds": rounds,
        "setup_s": setup.seconds,
        "wall_s": time.perf_counter() - started,
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
    except (BenchError, InputError) as e:  # InputError: e.g. a --work-dir that already holds a run's models
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
