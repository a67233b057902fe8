"""What `suggest` costs on /detect: latency and throughput with and without it, in alternating rounds.

Setup (in a temporary directory): an ELECTRA-Small-shaped discriminator and its generator (as pre-training
sizes it: a quarter of the width, the same depth) with random weights and BERT's uncased WordPiece vocabulary
(../shared/data; else one trained on the benchmark's text), exported into one fused fp32 bundle (max_seq_len
128), served by one `electra serve` process (its defaults).

Texts: bench/serve_throughput.py's mix of real text (short sentences, single sentences, paragraph prefixes).
A random detector's scores say nothing, so each text gets the threshold that flags --flag-share of its tokens
(at least one): every request of both kinds runs the same detection and flags the same tokens, and `suggest`
adds the generator's work for them (with `"suggest": --k`, at --level).

Rounds: each round runs both kinds (plain /detect, /detect with suggest) at every concurrency, one closed-loop
window each, in an order rotated per round; the ratios (suggest / plain: p50 latency, requests/s) are taken
within each round and their median over rounds reported, with every round's value and load average.

    python -m bench.suggest_cost                      # CPU, 5 rounds, concurrency 1 and 8
    python -m bench.suggest_cost --quick              # smoke test; writes no JSON unless --out
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.benchlib import (
    int_list,
    random_models,
    ratio,
    result_header,
    round_order,
    summarize_ratio,
    write_result,
)
from bench.loadgen import (
    MAX_SEQ_LEN,
    BenchError,
    Server,
    ServerSpec,
    build_tokenizer,
    closed_loop,
    load_source_texts,
    summarize,
    text_mix,
)

KINDS = ("plain", "suggest")


def build_bundle(work: Path, tokenizer: Any, size: str) -> tuple[Path, dict[str, Any]]:
    """A random-weight discriminator of `size` and its generator, exported into one bundle."""
    from electra.config import ElectraConfig, generator_config
    from electra.onnx.export import export_bundle

    cfg = ElectraConfig.from_size(size, vocab_size=tokenizer.get_vocab_size())
    kinds = ("discriminator", "generator")
    dirs = random_models(
        work, {k: (k, c) for k, c in zip(kinds, (cfg, generator_config(cfg)), strict=True)}, tokenizer
    )
    t = time.perf_counter()
    meta = export_bundle(
        dirs["discriminator"], work / "bundle", max_seq_len=MAX_SEQ_LEN, generator_dir=dirs["generator"]
    )
    gen = meta["generator"]
    info = {
        "size": size,
        "weights": "random (HF-style init)",
        "discriminator": {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size},
        "generator": {"layers": gen["num_hidden_layers"], "hidden": gen["hidden_size"]},
        "vocab_size": cfg.vocab_size,
        "export_s": time.perf_counter() - t,
    }
    return work / "bundle", info


def thresholds(bundle: Path, texts: list[str], share: float) -> tuple[list[float], list[int]]:
    """Per text, the threshold that flags `share` of its tokens (at least one; the first window, as
    truncate=true scores it, through the server's inference core), and how many tokens that flags."""
    from electra.serving.engine.local import local_inference, run
    from electra.serving.engine.requests import Detect
    from electra.serving.engine.runtime import ModelRunner

    runner = ModelRunner("bench", bundle)
    core = local_inference({runner.name: runner})
    out, flagged = [], []
    for text in texts:
        _, (result,) = run(core.detect(Detect([text], truncate=True), runner))
        scores = np.sort([t.score for t in result.tokens])[::-1]
        n = max(1, round(share * len(scores)))
        out.append(float(scores[n - 1]))
        flagged.append(int((scores >= scores[n - 1]).sum()))
    return out, flagged


def bodies(texts: list[str], cuts: list[float], k: int, level: str) -> dict[str, list[bytes]]:
    plain = [
        {"text": t, "truncate": True, "threshold": c, "level": level}
        for t, c in zip(texts, cuts, strict=True)
    ]
    return {
        "plain": [json.dumps(b).encode() for b in plain],
        "suggest": [json.dumps({**b, "suggest": k}).encode() for b in plain],
    }


async def rounds(
    url: str, requests: dict[str, list[bytes]], concurrency: list[int], n: int, warmup: float, seconds: float
) -> list[dict[str, Any]]:
    out = []
    for r in range(n):
        order = round_order(KINDS, r)
        record: dict[str, Any] = {"round": r, "order": order, "points": {}}
        for c in concurrency:
            for kind in order:
                point = await closed_loop(url, "/detect", requests[kind], c, warmup, seconds)
                record["points"][f"{kind}@{c}"] = summarize(point)
        record["load_average"] = list(os.getloadavg())
        out.append(record)
        print(
            f"round {r + 1}/{n}: "
            + ", ".join(
                f"{name} p50 {p['p50_ms']:.1f} ms {p['rps']:.1f} rps" for name, p in record["points"].items()
            ),
            flush=True,
        )
    return out


def ratios(records: list[dict[str, Any]], concurrency: list[int]) -> dict[str, Any]:
    """suggest / plain per round, for each concurrency and metric: the median of per-round ratios."""
    out: dict[str, Any] = {}
    for c in concurrency:
        for metric in ("p50_ms", "p95_ms", "rps"):
            per_round = [
                ratio(rec["points"][f"suggest@{c}"][metric], rec["points"][f"plain@{c}"][metric])
                for rec in records
            ]
            out[f"suggest_vs_plain_{metric}@{c}"] = summarize_ratio(per_round)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small", help="model size of the discriminator (default: %(default)s)")
    ap.add_argument("--concurrency", type=int_list, default=[1, 8], help="comma-separated (default: 1,8)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=8.0, help="measured window per point")
    ap.add_argument("--warmup-seconds", type=float, default=1.0)
    ap.add_argument("--texts", type=int, default=300, help="texts in the mix (default: %(default)s)")
    ap.add_argument("--flag-share", type=float, default=0.05, help="tokens flagged per text (default: 5%%)")
    ap.add_argument("--k", type=int, default=5, help="suggestions per flagged token (default: %(default)s)")
    ap.add_argument("--level", choices=["token", "word"], default="word")
    ap.add_argument("--threads", type=int, help="--threads of the server (default: ONNX Runtime's)")
    ap.add_argument("--quick", action="store_true", help="2 short rounds at concurrency 1, no JSON")
    ap.add_argument("--out", type=Path, help="result JSON (default: bench/results/suggest_cost_cpu.json)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.concurrency, args.texts = 2, 2.0, [1], 50
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="suggest-cost-") as tmp:
        work = Path(tmp)
        short, paragraphs, source = load_source_texts(work)
        tokenizer, vocab = build_tokenizer(work, paragraphs)
        bundle, model = build_bundle(work, tokenizer, args.size)
        texts = [t for _, t in text_mix(short, paragraphs, args.texts)]
        cuts, flagged = thresholds(bundle, texts, args.flag_share)
        command = [sys.executable, "-m", "electra", "serve", "--model", f"detector={bundle}"]
        command += ["--host", "127.0.0.1", "--log-level", "warning"]
        command += ["--threads", str(args.threads)] if args.threads else []
        server = Server(ServerSpec("suggest", command), work)
        server.start()
        try:
            requests = bodies(texts, cuts, args.k, args.level)
            records = asyncio.run(
                rounds(server.url, requests, args.concurrency, args.rounds, args.warmup_seconds, args.seconds)
            )
        except BenchError:
            print(server.log_tail(), file=sys.stderr)
            raise
        finally:
            server.stop()
    name = args.out.stem if args.out else "suggest_cost_cpu"
    record = {
        **result_header(name),
        "what": "/detect with suggest vs without, same texts, thresholds and flagged tokens",
        "model": model,
        "vocabulary": vocab,
        "texts": {"count": len(texts), "source": source, "flagged_tokens_mean": float(np.mean(flagged))},
        "flag_share": args.flag_share,
        "suggest": args.k,
        "level": args.level,
        "truncate": True,
        "concurrency": args.concurrency,
        "rounds": records,
        "ratios": ratios(records, args.concurrency),
        "seconds": time.perf_counter() - started,
    }
    for name, value in record["ratios"].items():
        print(f"{name}: median {value['median']:.3f}")
    if args.quick and args.out is None:
        return 0
    print(f"wrote {write_result(record, args.out, 'suggest_cost_cpu')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
