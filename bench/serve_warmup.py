"""What an input length the model has not run before costs its first request, with and without length
buckets (`--pad-to-multiple-of`), and what the warm-up over the buckets costs the server's start.

Setup (in a temporary directory): an ELECTRA-Small-shaped detector with random weights and BERT's uncased
WordPiece vocabulary (../shared/data; else one trained on a short text), exported to a fused bundle of
--max-seq-len tokens (fp32; fp16 with --device cuda).

Three configurations of `electra serve` (one worker, its defaults otherwise):

- exact: `--pad-to-multiple-of 1`, each batch padded to its longest row, so every new length is a new shape;
  warm-up runs a few shapes;
- buckets: `--pad-to-multiple-of N` (--multiple, 32 by default), lengths rounded up to a multiple of N, so the
  model meets max_seq_len / N shapes of length, and warm-up runs each of them (at one row, at the most
  rows the token budget allows and at half that) before the server turns ready;
- buckets_no_inline: the same with `--inline-max-ms 0`, so every model call runs on the batcher's thread (none
  on the event loop). On the first H100 run each bucket's first request was slow after warm-up; warm-up
  now runs on both threads. If buckets' first requests are still slow and these are not, the event loop's
  calls are the slow ones; if both are, the cost is not one per calling thread.

Each round starts a fresh server per configuration (order rotated, `benchlib.round_order`) and times it to
ready; then sends one /detect per length of LENGTHS (each the first of its length that server sees: cold),
one at a time, and the same again (warm). A request's model time is the server's own, from its Server-Timing
header (`model;dur`). Per configuration: time to ready, cold and warm model time (median and max over
lengths); between them, per round, the ratios that say what buckets buy (cold max) and what they cost (warm
median: the padding; time to ready: the warm-up), with the median over rounds.

    python -m bench.serve_warmup                         # CPU, 3 rounds
    python -m bench.serve_warmup --device cuda --out bench/results/serve_warmup_cuda.json

Writes bench/results/serve_warmup_{device}.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.benchlib import random_models, result_header, round_order, summarize_ratio, write_result
from bench.loadgen import BERT_VOCAB

CONFIGS = ("exact", "buckets", "buckets_no_inline")
# Lengths in tokens ([CLS] and [SEP] included), none a multiple of 32, spread over a 512-token model.
LENGTHS = (9, 21, 37, 50, 77, 101, 130, 171, 211, 259, 333, 419, 501)
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def build_bundle(work: Path, device: str, max_seq_len: int) -> tuple[Path, dict[str, Any]]:
    from electra.config import ElectraConfig
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer
    from electra.training.data.tokenizer_train import train_tokenizer

    if BERT_VOCAB.is_file():
        tokenizer, vocab = load_tokenizer(BERT_VOCAB), "BERT uncased WordPiece"
    else:
        tokenizer = train_tokenizer(["the quick brown fox jumps over the lazy dog"] * 50, 200)
        vocab = "WordPiece trained on a short text"
    cfg = ElectraConfig.from_size("small", vocab_size=tokenizer.get_vocab_size())
    model = random_models(work, {"detector": ("discriminator", cfg)}, tokenizer)["detector"]
    precision = "fp16" if device == "cuda" else "fp32"
    out = work / "detector-bundle"
    export_bundle(model, out, precision=precision, max_seq_len=max_seq_len)
    return out, {"size": "small", "max_seq_len": max_seq_len, "precision": precision, "vocab": vocab}


def text_of(tokens: int) -> str:
    """A text of exactly `tokens` tokens with [CLS] and [SEP] ("the" is one token in both vocabularies)."""
    return " ".join(["the"] * (tokens - 2))


def model_ms(url: str, text: str) -> float:
    body = json.dumps({"text": text, "truncate": True}).encode()
    request = urllib.request.Request(url + "/detect", body, {"Content-Type": "application/json"})
    with OPENER.open(request, timeout=300) as answer:
        answer.read()
        timing = answer.headers["server-timing"]
    from electra.serving.http.server_timing import parse

    return parse(timing)["model"]


def one_server(
    bundle: Path, work: Path, device: str, multiple: int, extra: list[str], lengths: list[int]
) -> dict[str, Any]:
    from electra.serving.process import free_port, serve_command, start_server

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = serve_command(
        "--model", f"detector={bundle}", "--port", str(port), "--device", device,
        "--pad-to-multiple-of", str(multiple), "--log-level", "warning",
        "--workers", "1",  # every request to the one server whose first calls are timed
        *extra,
    )  # fmt: skip
    started = time.perf_counter()
    with start_server(command, url=url, log=work / f"server-{port}.log", ready_timeout=600):
        ready_s = time.perf_counter() - started
        cold = [model_ms(url, text_of(n)) for n in lengths]
        warm = [model_ms(url, text_of(n)) for n in lengths]
    return {
        "pad_to_multiple_of": multiple,
        "ready_s": ready_s,
        "cold_model_ms": dict(zip(map(str, lengths), cold, strict=True)),
        "warm_model_ms": dict(zip(map(str, lengths), warm, strict=True)),
        "cold_median_ms": statistics.median(cold),
        "cold_max_ms": max(cold),
        "warm_median_ms": statistics.median(warm),
        "warm_max_ms": max(warm),
        "cold_over_warm_median": statistics.median(c / w for c, w in zip(cold, warm, strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--multiple", type=int, default=32, help="the buckets configuration's multiple")
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.multiple < 1:
        parser.error(f"--multiple must be at least 1, got {args.multiple}")
    from electra.config import ElectraConfig

    # From the shortest length timed to the position table of the Small model it builds.
    most = ElectraConfig.from_size("small", vocab_size=2).max_position_embeddings
    if not LENGTHS[0] <= args.max_seq_len <= most:
        parser.error(f"--max-seq-len must be between {LENGTHS[0]} and {most}, got {args.max_seq_len}")
    lengths = [n for n in LENGTHS if n <= args.max_seq_len]
    multiples = {"exact": 1, "buckets": args.multiple, "buckets_no_inline": args.multiple}
    extras = {"buckets_no_inline": ["--inline-max-ms", "0"]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bundle, model = build_bundle(work, args.device, args.max_seq_len)
        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            found: dict[str, Any] = {"load_average_start": list(os.getloadavg())}
            for name in round_order(CONFIGS, r):
                found[name] = one_server(
                    bundle, work, args.device, multiples[name], extras.get(name, []), lengths
                )
                f = found[name]
                print(
                    f"round {r + 1}/{args.rounds} {name:17s} ready {f['ready_s']:.1f} s; "
                    f"model ms cold median {f['cold_median_ms']:.2f} max {f['cold_max_ms']:.2f}, "
                    f"warm median {f['warm_median_ms']:.2f}",
                    flush=True,
                )
            rounds.append(found)

    def ratios(key: str, config: str = "buckets") -> dict[str, Any]:
        return summarize_ratio([r[config][key] / r["exact"][key] for r in rounds])

    record = {
        **result_header("serve_warmup", args.device),
        "model": model,
        "lengths": lengths,
        "method": {
            "rounds": args.rounds,
            "design": "per round, a fresh server per configuration in rotated order, timed to /health/ready; "
            "one /detect per length one at a time (cold: the first of that length), then again (warm)",
            "model_ms": "the request's Server-Timing model;dur, the server's own ONNX Runtime time",
            "configs": {
                name: " ".join([f"--pad-to-multiple-of {m}", *extras.get(name, [])])
                for name, m in multiples.items()
            },
        },
        "rounds": rounds,
        "buckets_vs_exact": {
            "cold_max_ms": ratios("cold_max_ms"),
            "cold_median_ms": ratios("cold_median_ms"),
            "warm_median_ms": ratios("warm_median_ms"),
            "ready_s": ratios("ready_s"),
        },
        "buckets_no_inline_vs_exact": {
            "cold_max_ms": ratios("cold_max_ms", "buckets_no_inline"),
            "cold_median_ms": ratios("cold_median_ms", "buckets_no_inline"),
        },
    }
    path = write_result(record, args.out, f"serve_warmup_{args.device}")
    for config in ("buckets", "buckets_no_inline"):
        for key, summary in record[f"{config}_vs_exact"].items():
            print(f"{config} / exact, {key}: median of per-round ratios {summary['median']:.2f}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
