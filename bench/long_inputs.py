"""What one long input costs the server: a pair whose two sides are each near the character limit.

Setup (in a temporary directory): an ELECTRA-Small-shaped cross-encoder (a classifier of one output) with
random weights and BERT's uncased WordPiece vocabulary (../shared/data; else one trained on a short text),
exported to a fused fp32 bundle of 512 tokens and served by one `electra serve` process (its defaults).

Two parts:

- server: the query `"q " * W` and the passage `"p " * W` (W words each; 24,999 by default, 50 kB a side,
  the issue's shape) sent --repeats times to each route (/rerank, /classify with `text_pair`, /predict with a
  pair, all `truncate: true`; and /classify with `truncate: false`, which must refuse it), one request at a
  time. Per request: its wall time and status, the server's CPU seconds and resident memory (VmRSS) after
  it, and the slowest `/health/live` answer while it ran (a thread polls every 20 ms); the RSS once the
  server is ready and warm, and after --idle seconds of rest at the end. A request after which the server's
  RSS passes --rss-guard-mb stops the part, so a run of the quadratic code cannot take the machine's memory.
- tokenization, in process: the tokenizers library's own truncating encode of the pair (the model's length
  set as its truncation) against the runner's `encode`, at each of --sizes words a side, in alternating
  rounds; the median of the per-round time ratios (library / runner) is what to read.

--label names the code measured ("before", "after"): each run replaces its own label's record in the
results file and keeps the others, with its own header (commit, load average).

    python -m bench.long_inputs --label after
    python -m bench.long_inputs --label before --repeats 2 --sizes 1000,2500,5000

Writes bench/results/long_inputs_cpu.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.benchlib import (
    RESULTS,
    int_list,
    random_models,
    result_header,
    round_order,
    summarize_ratio,
    write_result,
)
from bench.loadgen import BERT_VOCAB, process_cpu_s

MAX_SEQ_LEN = 512
WORDS = 24_999
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CONFIGS = ("library", "runner")


def routes(words: int) -> dict[str, tuple[str, dict[str, Any], int]]:
    """name -> (path, body, the status it should answer)."""
    query, passage = "q " * words, "p " * words
    return {
        "rerank": ("/rerank", {"query": query, "texts": [passage], "truncate": True}, 200),
        "classify_pair": ("/classify", {"text": query, "text_pair": passage, "truncate": True}, 200),
        "predict_pair": ("/predict", {"inputs": [query, passage], "truncate": True}, 200),
        "classify_refused": ("/classify", {"text": query, "text_pair": passage, "truncate": False}, 413),
    }


def build_bundle(work: Path) -> tuple[Path, dict[str, Any]]:
    from electra.config import ElectraConfig
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer
    from electra.training.data.tokenizer_train import train_tokenizer

    if BERT_VOCAB.is_file():
        tokenizer, vocab = load_tokenizer(BERT_VOCAB), "BERT uncased WordPiece"
    else:
        tokenizer = train_tokenizer(["the quick brown fox jumps over the lazy dog p q"] * 50, 200)
        vocab = "WordPiece trained on a short text"
    cfg = ElectraConfig.from_size("small", vocab_size=tokenizer.get_vocab_size(), id2label={0: "LABEL_0"})
    model = random_models(work, {"ce": ("classifier", cfg)}, tokenizer)["ce"]
    out = work / "ce-bundle"
    export_bundle(model, out, max_seq_len=MAX_SEQ_LEN)
    return out, {"size": "small", "kind": "one-output classifier", "max_seq_len": MAX_SEQ_LEN, "vocab": vocab}


def rss_mb(pid: int) -> float | None:
    try:
        found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


def post(url: str, body: bytes, timeout: float) -> int:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with OPENER.open(request, timeout=timeout) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as e:
        e.read()
        return e.code


class LivenessProbe:
    """GET /health/live every 20 ms in a thread while a request runs: the slowest answer seen."""

    def __init__(self, url: str) -> None:
        self.url = url + "/health/live"
        self.slowest = 0.0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.is_set():
            start = time.perf_counter()
            try:
                with OPENER.open(self.url, timeout=120) as answer:
                    answer.read()
            except OSError:
                pass
            self.slowest = max(self.slowest, time.perf_counter() - start)
            self.stopped.wait(0.02)

    def __enter__(self) -> LivenessProbe:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join()


def server_part(bundle: Path, work: Path, words: int, repeats: int, idle_s: float, guard_mb: float) -> dict:
    from electra.serving.process import free_port, serve_command, start_server

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = serve_command("--model", f"ce={bundle}", "--port", str(port), "--log-level", "warning")
    requests: list[dict[str, Any]] = []
    stopped = None
    with start_server(command, url=url, log=work / "server.log", ready_timeout=180) as server:
        post(url + "/rerank", json.dumps({"query": "q", "texts": ["p"]}).encode(), 60)
        start_rss = rss_mb(server.pid)
        for name, (path, body, expected) in routes(words).items():
            raw = json.dumps(body).encode()
            for i in range(repeats):
                cpu = process_cpu_s(server.pid)
                with LivenessProbe(url) as probe:
                    t = time.perf_counter()
                    status = post(url + path, raw, timeout=600)
                    wall = time.perf_counter() - t
                rss = rss_mb(server.pid)
                requests.append(
                    {
                        "route": name,
                        "path": path,
                        "repeat": i,
                        "status": status,
                        "expected": expected,
                        "wall_s": wall,
                        "server_cpu_s": process_cpu_s(server.pid) - cpu,
                        "slowest_liveness_s": probe.slowest,
                        "rss_mb_after": rss,
                    }
                )
                print(f"{name} #{i}: {status} in {wall:.3f} s, RSS {rss:.0f} MB, live {probe.slowest:.3f} s")
                if rss is not None and rss > guard_mb:
                    stopped = f"after {name} #{i}: RSS {rss:.0f} MB over the guard of {guard_mb:.0f} MB"
                    break
            if stopped:
                break
        time.sleep(idle_s)
        idle_rss = rss_mb(server.pid)
    return {
        "words_per_side": words,
        "body_bytes": {name: len(json.dumps(body)) for name, (_, body, _) in routes(words).items()},
        "rss_mb_ready": start_rss,
        "rss_mb_after_idle": idle_rss,
        "idle_s": idle_s,
        "rss_growth_mb": None if idle_rss is None or start_rss is None else idle_rss - start_rss,
        "stopped": stopped,
        "requests": requests,
        "by_route": {
            name: {
                "statuses": sorted({r["status"] for r in requests if r["route"] == name}),
                "median_wall_s": _median([r["wall_s"] for r in requests if r["route"] == name]),
                "median_slowest_liveness_s": _median(
                    [r["slowest_liveness_s"] for r in requests if r["route"] == name]
                ),
            }
            for name in routes(words)
        },
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def tokenization_part(bundle: Path, sizes: list[int], rounds: int) -> dict:
    """The library's truncating encode of the pair against the runner's, alternating rounds per size."""
    import tokenizers

    from electra.serving.engine.runtime import ModelRunner

    runner = ModelRunner("ce", bundle)
    library = tokenizers.Tokenizer.from_str(runner.untruncated.to_str())
    library.enable_truncation(max_length=runner.max_seq_len)
    calls = {
        "library": lambda pair: library.encode(*pair),
        "runner": lambda pair: runner.encode([pair], truncate=True),
    }
    out = {}
    for words in sizes:
        pair = ("q " * words, "p " * words)
        per_round = []
        for r in range(rounds):
            times = {}
            for config in round_order(CONFIGS, r):
                t = time.perf_counter()
                calls[config](pair)
                times[config] = time.perf_counter() - t
            per_round.append(times)
        ratios = [t["library"] / t["runner"] for t in per_round]
        out[str(words)] = {"per_round_s": per_round, "library_over_runner": summarize_ratio(ratios)}
        print(f"{words} words a side: library / runner, median {statistics.median(ratios):.1f}x")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True, help="which code this measures (before, after, ...)")
    ap.add_argument("--words", type=int, default=WORDS, help="words a side (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="requests per route (default: %(default)s)")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of rest before the last RSS")
    ap.add_argument("--rss-guard-mb", type=float, default=8000.0, help="stop the server part past this RSS")
    ap.add_argument(
        "--sizes", type=int_list, default=[1000, 2500, 5000, 10000], help="words a side (in process)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per size (default: 3)")
    ap.add_argument("--out", type=Path, help="results JSON (default: bench/results/long_inputs_cpu.json)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="long-inputs-") as tmp:
        work = Path(tmp)
        bundle, model = build_bundle(work)
        record = {
            **result_header("long_inputs_cpu"),
            "label": args.label,
            "model": model,
            "server": server_part(bundle, work, args.words, args.repeats, args.idle, args.rss_guard_mb),
            "tokenization": tokenization_part(bundle, args.sizes, args.rounds),
        }
    record["seconds"] = time.perf_counter() - started
    path = args.out or RESULTS / "long_inputs_cpu.json"
    existing = json.loads(path.read_text()) if path.is_file() else {}
    runs = {**existing.get("runs", {}), args.label: record}
    print(f"wrote {write_result({'benchmark': 'long_inputs_cpu', 'runs': runs}, path, 'long_inputs_cpu')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
