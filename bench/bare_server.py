"""The floor for bench/serve_throughput.py's overhead probe: the least a Python server can do per request.

A bare ASGI app on uvicorn (uvloop and httptools, as `electra serve` runs): POST /detect reads the body,
decodes {"text": ...}, tokenizes it with the bundle's tokenizer (truncating at the model's length), runs
ONNX Runtime on the event loop and answers the logits as JSON, with the model's time in a Server-Timing
header as `electra serve` sends it. No framework, no validation, no queue, no metrics, no offsets: what is
left of a request's time beyond the model is HTTP over loopback, the event loop, tokenization and the
machine waking its threads and cores, which any server pays. The model is loaded through
electra.serving.runtime.ModelRunner, so the session and its options are exactly the server's.

    python bench/bare_server.py --bundle BUNDLE_DIR --port 8002
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import msgspec

from electra.serving.runtime import ModelRunner

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


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8002)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    runner = ModelRunner("detector", args.bundle, args.device, args.threads)
    runner.warm_up()
    uvicorn.run(make_app(runner), host=args.host, port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
