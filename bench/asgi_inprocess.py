"""A server app driven in process, without a network: a tiny bundle to serve, one ASGI request through the
app as a real client would make it, and the app's lifespan started. Shared by the benchmarks that measure
what the app itself costs (bench.serve_layers, bench.metric_updates).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bench.benchlib import random_models
from bench.loadgen import BERT_VOCAB, MAX_SEQ_LEN

TEXT = "The chef cooked the river while the guests waited in the garden."
BODY = json.dumps({"text": TEXT, "truncate": True}).encode()


def build_bundle(work: Path, size: str) -> Path:
    from electra.config import ElectraConfig
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer
    from electra.training.data.tokenizer_train import train_tokenizer

    tokenizer = load_tokenizer(BERT_VOCAB) if BERT_VOCAB.is_file() else train_tokenizer([TEXT] * 50, 200)
    cfg = ElectraConfig.from_size(size, vocab_size=tokenizer.get_vocab_size())
    model = random_models(work, {"detector": ("discriminator", cfg)}, tokenizer)["detector"]
    out = work / "detector-bundle"
    export_bundle(model, out, max_seq_len=MAX_SEQ_LEN)
    return out


def scope(path: str, body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def call(app: Any, path: str = "/detect", body: bytes = BODY) -> int:
    """One request through the ASGI app; its status. The client stays until the answer, as a real one
    would: receive() after the body waits (and is cancelled when the app is done with it)."""
    done = asyncio.Event()
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope(path, body), receive, send)
    done.set()
    return status


async def start(app: Any) -> None:
    """The app's lifespan started and its models warmed up, when it has them."""
    queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    started = asyncio.Event()
    await queue.put({"type": "lifespan.startup"})

    async def receive() -> dict[str, str]:
        return await queue.get()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    )
    await started.wait()
    state = getattr(getattr(app, "state", None), "electra", None)
    while state is not None and not state.ready:
        await asyncio.sleep(0.02)
