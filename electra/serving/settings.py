"""Server settings: one frozen dataclass, filled from the command line, environment variables or code.

The fields are the one source of every option's name, default and help: `electra serve` builds its flags
(--max-batch-size) and environment variables (ELECTRA_MAX_BATCH_SIZE) from them. Every option has an
environment variable because the Helm chart configures the container through its environment; the command
line wins over the environment, which wins over the defaults.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra.errors import InputError

DEVICES = ("cpu", "cuda")
HTTP_SERVERS = ("uvicorn", "granian")
BATCH_ORDERS = ("length", "arrival")
# The smallest max_header_bytes: hyper (granian's HTTP/1 parser) refuses a smaller read buffer.
MIN_HEADER_BYTES = 8192
# Each worker holds every model: more than this is a typo rather than a machine.
MAX_WORKERS = 64
# --pad-to-multiple-of when not given, per device (electra.serving.engine.shapes says why): on a GPU every
# new input shape is slow the first time, so lengths go in buckets that warm-up can all run; on a CPU
# padding costs compute and a new shape little.
DEFAULT_PAD_MULTIPLE = {"cpu": 1, "cuda": 32}
# ONNX Runtime intra-op threads a model may be given: more than any machine has cores (and ONNX Runtime's
# own integer).
MAX_THREADS = 4096
# --workers when not given: 1 on a CPU, whose cores go to ONNX Runtime's threads; on a GPU, where a process's
# Python side (HTTP, JSON, tokenizing: one core at a time) runs out first, one worker per 4 cores up to 4. On
# one H100 with 16 cores, 4 workers served 2.85x (/classify) and 3.39x (/detect) one worker's requests at 256
# clients and 8 no more (bench/results/gpu/2026-11-28-h100/serve_workers.json).
GPU_MAX_WORKERS = 4
GPU_CORES_PER_WORKER = 4


@dataclass(frozen=True)
class ModelSpec:
    name: str
    path: Path


LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def option(help: str, flag: str | None = None) -> dict[str, Any]:
    """Field metadata of a setting the command line (--FLAG; default: the field's name with '-') and the
    environment (ELECTRA_<FLAG upper-cased, '-' -> '_'>) can set: `electra serve` builds both from it."""
    return {"help": help, "flag": flag}


@dataclass(frozen=True)
class ServeSettings:
    # --model NAME=BUNDLE (repeatable) or ELECTRA_MODELS="name=dir,name2=dir2": parsed by `electra serve`.
    models: tuple[ModelSpec, ...] = ()
    host: str = field(default="127.0.0.1", metadata=option("address to listen on (0.0.0.0 in a container)"))
    port: int = field(default=8000, metadata=option("TCP port"))
    device: str = field(
        default="cpu", metadata=option("cpu or cuda (ONNX Runtime's CUDA provider with IO binding)")
    )
    # Padded tokens (rows x longest row) one model call may take: bounds activation memory and latency.
    max_batch_tokens: int = field(
        default=8192, metadata=option("padded tokens (rows x longest row) per model call")
    )
    max_batch_size: int = field(default=32, metadata=option("inputs per model call (1 turns batching off)"))
    # How long a batch that is not full may wait for company. Requests that arrive while the model is busy
    # are batched anyway, so this only matters when the server is nearly idle.
    max_wait_ms: float = field(
        default=2.0, metadata=option("how long a batch that is not full waits for more inputs")
    )
    # Which inputs a batch takes beside the oldest: queued ones of about its length (less padding) or the next
    # ones in arrival order (no input waits behind later ones); the trade, measured, in
    # electra.serving.engine.batcher.take_batch and docs/serving.md.
    batch_order: str = field(
        default="length",
        metadata=option(
            "which inputs join a batch beside the oldest: 'length' (queued ones of about its length: less "
            "padding) or 'arrival' (the next ones in arrival order: no input waits behind later ones)"
        ),
    )
    # A model call predicted to take at most this long runs on the event loop when the server has nothing
    # else to do, saving two thread hand-offs (0.2-0.5 ms on a 2-core VM; see Batcher._runs_inline); the
    # longest a request can then wait to be read. 0: every call runs in the model's thread.
    inline_max_ms: float = field(
        default=20.0,
        metadata=option("a model call predicted to take at most this long runs on the event loop when idle"),
    )
    # Sequences waiting per model; beyond it requests get 503 + Retry-After rather than an unbounded queue.
    max_queue: int = field(
        default=1024, metadata=option("inputs waiting per model before requests get 503 + Retry-After")
    )
    max_body_bytes: int = field(default=2_000_000, metadata=option("largest request body"))
    max_texts: int = field(default=128, metadata=option("inputs per request"))
    max_chars: int = field(default=50_000, metadata=option("characters per text"))
    # text-embeddings-inference's --auto-truncate, with its default: what /rerank and /predict do with an
    # input over the model's length when the request's `truncate` is absent or null. The native routes keep
    # their own per-route defaults (docs/serving.md).
    auto_truncate: bool = field(
        default=True,
        metadata=option(
            "/rerank and /predict (TEI's routes): truncate an input over the model's length when the request "
            "does not say (false: refuse it, 413), as text-embeddings-inference's --auto-truncate"
        ),
    )
    # The JSON API's common request answered by one ASGI function in front of Litestar's routing
    # (electra.serving.http.hot_path): the same answers and metrics at about half the per-request overhead
    # (docs/serving.md). Off: every request through Litestar's route and the middlewares, for a comparison or
    # should the hot path ever be the suspect.
    hot_path: bool = field(
        default=True,
        metadata=option(
            "answer /detect, /classify and /tag's common request (a plain JSON body) in one ASGI function in "
            "front of the framework, with the same answers and metrics (false: through Litestar's route)"
        ),
    )
    # /detect's `suggest` (and fill-mask's top_k): replacements per flagged token a request may ask for.
    max_suggest: int = field(
        default=20, metadata=option("suggestions per flagged token a request may ask for (/detect's suggest)")
    )
    api_key_file: Path | None = field(
        default=None,
        metadata=option(
            "file of API keys, one per line: /detect, /classify, /tag and /models then "
            "need 'Authorization: Bearer KEY' (health, metrics and the page stay open)"
        ),
    )
    # ONNX Runtime intra-op threads per model; 0 lets ONNX Runtime use every core (with several workers on a
    # CPU, each worker's share of them: electra.serving.http.workers.cpu_threads).
    threads: int = field(
        default=0,
        metadata=option("ONNX Runtime threads per model (0: all cores, shared out among --workers)"),
    )
    # Batches are padded to a multiple of this many tokens (electra.serving.engine.shapes), so the model
    # meets a bounded set of lengths and warm-up runs every one before the server turns ready.
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata=option(
            "pad each batch to a multiple of this many tokens; warm-up then runs every such length before "
            "the server is ready (default: 32 on cuda, 1 on cpu: each batch's longest row)"
        ),
    )
    # Server processes behind the one port (electra.serving.http.workers): the Python side of a request (HTTP,
    # JSON, tokenization, post-processing) holds one core per process, which a GPU server runs out of first.
    workers: int | None = field(
        default=None,
        metadata=option(
            "server processes sharing the port, each with its own copy of every model (on a GPU: that many "
            "instances of each model; default: 1 on cpu, on cuda one per 4 cores up to 4)"
        ),
    )
    # Under --workers every value a metric update touches is a write to a memory-mapped file
    # (prometheus_client's multiprocess mode), 30 for a /detect request; a busy worker gathers them for at
    # most this long and writes each value once (electra.serving.engine.metric_buffer). A scrape may miss
    # another busy worker's last this many ms.
    metrics_flush_ms: float = field(
        default=100.0,
        metadata=option(
            "under --workers, how long a busy worker's metric updates may wait before /metrics sees them "
            "(0: each at once)"
        ),
    )
    # Seconds SIGTERM waits for in-flight requests before closing the remaining connections.
    graceful_timeout_s: float = field(
        default=30.0, metadata=option("seconds SIGTERM waits for in-flight requests", flag="graceful-timeout")
    )
    # Slow and numerous clients (docs/reliability.md). Real clients send their request line and headers
    # in one packet, so 10 s is generous on any link, and a slow-loris connection is dropped 6x sooner than
    # nginx's 60 s would drop it. uvicorn answers 408; granian (hyper) closes the connection.
    header_timeout_s: float = field(
        default=10.0,
        metadata=option(
            "seconds a connection has to send its complete request headers (408 after)", flag="header-timeout"
        ),
    )
    # The longest pause between two reads of a body, as nginx's client_body_timeout (not the whole body's
    # time: a 2 MB body on a slow link may take minutes). 30 s outlasts TCP's retransmission back-off over
    # several lost packets; a client silent for longer is gone or hostile.
    body_timeout_s: float = field(
        default=30.0,
        metadata=option(
            "seconds a request body may pause between two reads (408 after)", flag="body-timeout"
        ),
    )
    # Open connections, idle keep-alive ones included; beyond it a connection gets 503 + Retry-After at once
    # (granian: it waits in the listen backlog). About max_queue, plus room for probes and scrapes: more
    # concurrent requests than the queue holds would get 503 anyway. The server raises its open-file limit
    # to fit (see server.py).
    max_connections: int = field(
        default=1024, metadata=option("open connections; beyond them a connection gets 503 + Retry-After")
    )
    # Request line and headers. 32 KiB is nginx's default total (4 buffers of 8 KiB): bearer tokens and
    # cookies fit many times over; httptools alone would buffer a header of any size. 8 KiB at least: less
    # would refuse ordinary browsers' requests, and granian takes no smaller buffer.
    max_header_bytes: int = field(
        default=32_768, metadata=option("bytes of request line and headers (431 beyond)")
    )
    # The HTTP server in front of the app; granian is optional (pip install granian).
    http_server: str = field(
        default="uvicorn", metadata=option("HTTP server: uvicorn or granian (pip install granian)")
    )
    log_level: str = field(default="info", metadata=option("critical, error, warning, info or debug"))
    # The page at / starts with this text in its box (a URL's ?text= wins); None: an empty box.
    example: str | None = field(default=None, metadata=option("text the page at / is pre-filled with"))
    api_keys: frozenset[str] = field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        problems = []
        if not self.models:
            problems.append("no model: pass --model NAME=BUNDLE_DIR (or set ELECTRA_MODELS)")
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            problems.append(f"model name(s) used twice: {', '.join(duplicates)}")
        if self.device not in DEVICES:
            problems.append(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.http_server not in HTTP_SERVERS:
            problems.append(f"http_server must be one of {', '.join(HTTP_SERVERS)}, got {self.http_server!r}")
        if self.batch_order not in BATCH_ORDERS:
            problems.append(f"batch_order must be one of {', '.join(BATCH_ORDERS)}, got {self.batch_order!r}")
        if not 0 < self.port < 65536:
            problems.append(f"port must be in 1..65535, got {self.port}")
        for name in (
            "max_batch_tokens",
            "max_batch_size",
            "max_queue",
            "max_body_bytes",
            "max_texts",
            "max_suggest",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_chars < 1:
            problems.append(f"max_chars must be at least 1, got {self.max_chars}")
        if not math.isfinite(self.max_wait_ms) or self.max_wait_ms < 0:
            problems.append(f"max_wait_ms must be a finite number >= 0, got {self.max_wait_ms}")
        if not math.isfinite(self.metrics_flush_ms) or not 0 <= self.metrics_flush_ms <= 60_000:
            problems.append(f"metrics_flush_ms must be in 0..60000, got {self.metrics_flush_ms}")
        if not math.isfinite(self.inline_max_ms) or self.inline_max_ms < 0:
            problems.append(f"inline_max_ms must be a finite number >= 0, got {self.inline_max_ms}")
        if not 0 <= self.threads <= MAX_THREADS:
            problems.append(f"threads must be in 0..{MAX_THREADS}, got {self.threads}")
        if self.pad_to_multiple_of is not None and self.pad_to_multiple_of < 1:
            problems.append(f"pad_to_multiple_of must be at least 1, got {self.pad_to_multiple_of}")
        if self.workers is not None and not 1 <= self.workers <= MAX_WORKERS:
            problems.append(f"workers must be in 1..{MAX_WORKERS}, got {self.workers}")
        if not math.isfinite(self.graceful_timeout_s) or self.graceful_timeout_s < 0:
            problems.append(f"graceful_timeout_s must be a finite number >= 0, got {self.graceful_timeout_s}")
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                problems.append(f"{name} must be a finite number > 0, got {value}")
        if self.max_connections < 1:
            problems.append(f"max_connections must be at least 1, got {self.max_connections}")
        if self.max_header_bytes < MIN_HEADER_BYTES:
            problems.append(
                f"max_header_bytes must be at least {MIN_HEADER_BYTES}, got {self.max_header_bytes}"
            )
        if self.example is not None and len(self.example) > self.max_chars:
            problems.append(
                f"example has {len(self.example):,} characters; the limit is max_chars ({self.max_chars:,})"
            )
        if problems:
            raise InputError("; ".join(problems))

    @property
    def pad_multiple(self) -> int:
        """--pad-to-multiple-of, or the device's default."""
        if self.pad_to_multiple_of is not None:
            return self.pad_to_multiple_of
        return DEFAULT_PAD_MULTIPLE.get(self.device, 1)

    @property
    def worker_count(self) -> int:
        """--workers, or the device's default (GPU_MAX_WORKERS)."""
        if self.workers is not None:
            return self.workers
        if self.device == "cpu":
            return 1
        return max(1, min(GPU_MAX_WORKERS, (os.cpu_count() or 1) // GPU_CORES_PER_WORKER))

    def with_keys(self) -> ServeSettings:
        """These settings with api_keys read from api_key_file (one key per line, # comments); once."""
        if self.api_key_file is None or self.api_keys:
            return self
        return dataclasses.replace(self, api_keys=read_api_keys(self.api_key_file))


def parse_model_spec(text: str) -> ModelSpec:
    """NAME=BUNDLE_DIR, or a bare BUNDLE_DIR named after its folder."""
    name, sep, path = text.partition("=")
    if not sep:
        name, path = Path(text).name, text
    name = name.strip()
    if not name or not path:
        raise InputError(f"--model {text!r}: expected NAME=BUNDLE_DIR")
    if not all(c.isalnum() or c in "-_." for c in name):
        raise InputError(f"--model {text!r}: a model name may hold letters, digits, '-', '_' and '.' only")
    return ModelSpec(name, Path(path))


def parse_model_list(text: str) -> list[ModelSpec]:
    """ELECTRA_MODELS: comma-separated NAME=BUNDLE_DIR entries."""
    return [parse_model_spec(item.strip()) for item in text.split(",") if item.strip()]


def read_api_keys(path: Path) -> frozenset[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the API key file ({e.__class__.__name__}: {e})") from None
    keys = frozenset(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))
    if not keys:
        raise InputError(f"{path}: the API key file holds no key (one key per line)")
    short = [k for k in keys if len(k) < 16]
    if short:
        raise InputError(f"{path}: API keys must be at least 16 characters long ({len(short)} shorter)")
    return keys
