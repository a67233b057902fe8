"""The bare ASGI app of bench/bare_server.py, the floor of the server benchmarks: POST /detect reads the body,
decodes {"text": ...}, tokenizes it with the bundle's tokenizer (truncating at the model's length), runs ONNX
Runtime on the event loop and answers the logits as JSON, with the model's time in a Server-Timing header as
`electra serve` sends it. No framework, no validation, no queue, no metrics, no offsets. Shared by the server
that runs it on uvicorn (bench.bare_server) and the in-process layer costs (bench.serve_layers).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from electra.serving.engine.runtime import ModelRunner

READY = b'{"status":"ready"}'


class Detect(msgspec.Struct):
    text: str


def make_app(runner: ModelRunner) -> Any:
    decode = msgspec.json.Decoder(Detect).decode

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if scope["method"] == "GET":
            await answer(send, 200, READY)
            return
        try:
            text = decode(body).text
        except msgspec.DecodeError as e:
            await answer(send, 400, msgspec.json.encode({"detail": str(e)}))
            return
        encoded = runner.encode([text])
        start = time.perf_counter()
        logits = runner.infer(encoded)[0]
        model_ms = 1e3 * (time.perf_counter() - start)
        timing = f"model;dur={model_ms:.3f}".encode()
        await answer(send, 200, msgspec.json.encode({"logits": logits.tolist()}), timing)

    return app


async def answer(send: Any, status: int, body: bytes, timing: bytes | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if timing is not None:
        headers.append((b"server-timing", timing))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
