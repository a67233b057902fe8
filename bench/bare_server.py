"""The floor for bench/serve_throughput.py's overhead probe: the least a Python server can do per request.

A bare ASGI app on uvicorn (uvloop and httptools, as `electra serve` runs): POST /detect reads the body,
decodes {"text": ...}, tokenizes it with the bundle's tokenizer (truncating at the model's length), runs
ONNX Runtime on the event loop and answers the logits as JSON, with the model's time in a Server-Timing
header as `electra serve` sends it. No framework, no validation, no queue, no metrics, no offsets: what is
left of a request's time beyond the model is HTTP over loopback, the event loop, tokenization and the
machine waking its threads and cores, which any server pays. The model is loaded through
electra.serving.engine.runtime.ModelRunner, so the session and its options are exactly the server's.

    python -m bench.bare_server --bundle BUNDLE_DIR --port 8002
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.bare_app import make_app
from electra.serving.engine.runtime import ModelRunner
from electra.serving.settings import ModelSpec, ServeSettings


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8002)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--pad-to-multiple-of", type=int, default=None, help="as electra serve's (its default)")
    args = p.parse_args()
    # The server's defaults for the device: its padding and warm-up, so the two run the same shapes.
    s = ServeSettings(
        models=(ModelSpec("detector", args.bundle),),
        device=args.device,
        pad_to_multiple_of=args.pad_to_multiple_of,
    )
    runner = ModelRunner("detector", args.bundle, args.device, args.threads, s.pad_multiple)
    runner.warm_up(s.max_batch_size, s.max_batch_tokens)
    uvicorn.run(make_app(runner), host=args.host, port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
