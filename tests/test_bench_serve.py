"""The cheap parts of bench/serve_throughput.py, bench/loadgen.py and bench/naive_server.py: statistics, load
driver, text mix, response checks, and the naive server answering like the real one for a tiny model."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import benchlib, loadgen
from bench import serve_throughput as st
from tests.conftest import SERVING_LABELS, write_serving_vocab

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------


def test_summarize_gives_rps_percentiles_and_errors() -> None:
    latencies = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    random.Random(0).shuffle(latencies)
    row = loadgen.summarize(loadgen.PointResult(window_s=2.0, latencies_s=latencies, errors=5))
    assert row["requests"] == 100
    assert row["errors"] == 5
    assert row["error_rate"] == pytest.approx(5 / 105)
    assert row["rps"] == pytest.approx(50.0)  # successful requests only
    assert row["p50_ms"] == pytest.approx(50.5)
    assert row["p95_ms"] == pytest.approx(95.05)
    assert row["p99_ms"] == pytest.approx(99.01)
    assert row["max_ms"] == pytest.approx(100.0)
    assert row["mean_ms"] == pytest.approx(50.5)


def test_summarize_without_successes_has_no_percentiles() -> None:
    row = loadgen.summarize(loadgen.PointResult(window_s=1.0, errors=3, error_samples=["HTTP 503"]))
    assert row["rps"] == 0.0 and row["requests"] == 0
    assert row["p50_ms"] is None and row["p99_ms"] is None
    assert row["error_rate"] == 1.0
    assert row["error_samples"] == ["HTTP 503"]


def _window(
    config: str, rps: float, p99: float = 100.0, c: int = 32, endpoint: str = "detect"
) -> dict[str, Any]:
    return {"config": config, "endpoint": endpoint, "concurrency": c, "rps": rps, "p99_ms": p99, "errors": 0}


def test_round_order_puts_every_config_in_every_position() -> None:
    names = ["a", "b", "c"]
    orders = [benchlib.round_order(names, r) for r in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    for position in range(3):
        assert sorted(order[position] for order in orders) == names
    assert benchlib.round_order(names, 3) == names  # the cycle repeats
    assert benchlib.round_order([], 2) == []


def test_ratios_are_the_median_of_per_round_ratios() -> None:
    # The machine slows down 4-5x in round 1 and speeds up in round 2: each round's batched/naive ratio is
    # 5, 4 and 4, whatever the drift. Pooling the rounds first (the ratio of the medians: 5) would not say so.
    rounds = [
        {"round": 0, "windows": [_window("ours_batched", 500.0), _window("naive", 100.0, p99=900.0)]},
        {"round": 1, "windows": [_window("ours_batched", 100.0), _window("naive", 25.0, p99=900.0)]},
        {"round": 2, "windows": [_window("ours_batched", 1200.0), _window("naive", 300.0, p99=900.0)]},
    ]
    for record in rounds:
        record["windows"].append(_window("ours_unbatched", record["windows"][0]["rps"] / 1.5, p99=300.0))
        record["windows"].append(_window("naive", 1.0, c=8))  # another level: must not be picked
    ratios = st.compute_ratios(rounds)
    r = ratios["detect"]["32"]
    assert r["batched_vs_naive_rps"]["per_round"] == pytest.approx([5.0, 4.0, 4.0])
    assert r["batched_vs_naive_rps"]["median"] == pytest.approx(4.0)
    assert (r["batched_vs_naive_rps"]["min"], r["batched_vs_naive_rps"]["max"]) == (4.0, 5.0)
    pooled = statistics.median([500.0, 100.0, 1200.0]) / statistics.median([100.0, 25.0, 300.0])
    assert pooled == pytest.approx(5.0)  # the ratio of medians: not what is reported
    assert r["batched_vs_unbatched_rps"]["median"] == pytest.approx(1.5)
    assert r["naive_vs_batched_p99"]["median"] == pytest.approx(9.0)
    assert "granian_vs_uvicorn_rps" not in r  # ours_granian did not run
    assert ratios["detect"]["8"]["batched_vs_naive_rps"]["median"] is None  # ours did not run at c=8
    rows = {(row["config"], row["concurrency"]): row for row in st.aggregate(rounds)}
    assert rows["ours_batched", 32]["rps_median"] == 500.0
    assert rows["ours_batched", 32]["rps_per_round"] == [500.0, 100.0, 1200.0]
    assert rows["ours_batched", 32]["rounds"] == 3

    overhead = {"ours_batched": {"overhead_p50_ms": 0.4}}
    targets = st.check_targets(ratios, overhead)
    assert targets["batched_vs_naive_rps"]["measured"] == pytest.approx(4.0)
    assert targets["batched_vs_naive_rps"]["met"] is True
    assert targets["batched_p99_below_naive"]["met"] is True
    assert targets["batched_vs_unbatched_rps"]["met"] is True  # 1.5 >= 1.3
    assert targets["overhead_p50_ms"]["met"] is True  # 0.4 < 0.5
    missing = st.check_targets(st.compute_ratios([{"windows": rounds[0]["windows"][:1]}]), {})
    assert missing["batched_vs_naive_rps"]["met"] is None
    assert missing["overhead_p50_ms"]["met"] is None


def test_a_missing_window_drops_out_of_the_median() -> None:
    values = st.per_round_ratios(
        [
            {"windows": [_window("ours_batched", 300.0), _window("naive", 100.0)]},
            {"windows": [_window("ours_batched", 300.0), _window("naive", 0.0)]},  # naive answered nothing
            {"windows": [_window("ours_batched", 500.0), _window("naive", 100.0)]},
        ],
        "ours_batched",
        "naive",
        "rps",
        "detect",
        32,
    )
    assert values == [3.0, None, 5.0]
    assert benchlib.summarize_ratio(values)["median"] == pytest.approx(4.0)
    assert benchlib.median_or_none([None, None]) is None


def test_overhead_summary_takes_the_median_over_rounds() -> None:
    probes = [0.9, 0.3, 0.4]
    rounds = [
        {
            "windows": [{**_window("ours_batched", 50.0, c=1), "mean_minus_model_ms": m}],
            "overhead": {
                "ours_batched": {"overhead_p50_ms": p, "server_p50_ms": 6.0, "health_live_p50_ms": 0.1}
            },
        }
        for p, m in zip(probes, [1.0, 0.5, 0.6], strict=True)
    ]
    summary = st.overhead_summary(rounds)["ours_batched"]
    assert summary["overhead_p50_ms"] == pytest.approx(0.4)
    assert summary["overhead_p50_ms_per_round"] == probes
    assert summary["c1_window_mean_minus_model_ms"] == pytest.approx(0.6)
    assert summary["health_live_p50_ms"] == pytest.approx(0.1)


def test_overhead_beyond_bare_is_taken_within_each_round() -> None:
    ours, bare = [1.9, 1.2, 1.5], [1.0, 1.0, 0.7]
    rounds = [
        {
            "windows": [],
            "overhead": {"ours_batched": {"overhead_p50_ms": o}, "bare": {"overhead_p50_ms": b}},
        }
        for o, b in zip(ours, bare, strict=True)
    ]
    summary = st.overhead_summary(rounds)
    # Per round 0.9, 0.2, 0.8: the median 0.8, not the difference of the medians (1.5 - 1.0).
    assert summary["ours_batched"]["beyond_bare_p50_ms"] == pytest.approx(0.8)
    assert summary["bare"]["overhead_p50_ms"] == pytest.approx(1.0)
    assert "beyond_bare_p50_ms" not in summary["bare"]
    targets = st.check_targets({}, summary)["overhead_p50_ms"]
    assert targets["measured"] == pytest.approx(1.5) and targets["bare_server"] == pytest.approx(1.0)
    assert targets["beyond_bare"] == pytest.approx(0.8) and targets["met"] is False
    # Ratios 1.9, 1.2, 2.14: the median 1.9, not the ratio of the medians (1.5).
    assert summary["ours_batched"]["vs_bare_ratio"] == pytest.approx(1.9)
    ratio = st.check_targets({}, summary)["overhead_vs_bare"]
    assert ratio["measured"] == pytest.approx(1.9) and ratio["max"] == 1.25 and ratio["met"] is False


def test_server_timing_is_read_from_a_response_head() -> None:
    head = b"HTTP/1.1 200 OK\r\nServer-Timing: tokenize;dur=0.050, model;dur=4.25\r\n\r\n"
    assert st.server_timing(head) == {"tokenize": 0.05, "model": 4.25}
    assert st.server_timing(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n") == {}


@pytest.mark.parametrize("server", ["bare", "ours"])
def test_the_overhead_probe_takes_the_model_time_from_each_answer(
    server: str, serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    from electra.serving.process import free_port, start_server

    port = free_port()
    bundle = serving_bundles["detector"]
    if server == "bare":
        command = [sys.executable, "-m", "bench.bare_server", "--bundle", str(bundle)]
    else:
        command = [sys.executable, "-m", "electra", "serve", "--model", f"detector={bundle}"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    texts = ["the cat sat on the mat", "a b c", "the dog ran " * 20]
    with start_server(command, url=url, log=tmp_path / "server.log", ready_timeout=90, cwd=ROOT):
        probe = asyncio.run(st.overhead_probe(url, "/detect", texts, repeats=2))
    assert probe["texts"] == 3 and probe["repeats"] == 2
    assert 0 < probe["model_p50_ms"] < probe["server_p50_ms"]
    # The overhead is what is left of the latency: positive, its floor (each text's best) at most its median.
    # (Not compared with server_p50_ms: that is the median over every request, this one over texts of
    # different lengths, which a busy machine can put either side of it.)
    assert 0 < probe["overhead_floor_p50_ms"] <= probe["overhead_p50_ms"]
    if server == "ours":
        assert probe["tokenize_p50_ms"] > 0 and probe["queue_p50_ms"] >= 0
    else:
        assert probe["tokenize_p50_ms"] is None


def test_window_costs_and_metrics_parsing() -> None:
    text = (
        "# HELP electra_inference_seconds Time of one ONNX Runtime call (a batch)\n"
        'electra_inference_seconds_bucket{le="0.005",model="detector"} 3.0\n'
        'electra_inference_seconds_sum{model="detector"} 1.5\n'
        'electra_inference_seconds_count{model="detector"} 100.0\n'
        'electra_inference_seconds_sum{model="sentiment"} 0.5\n'
        'electra_inference_seconds_count{model="sentiment"} 20.0\n'
    )
    assert loadgen.inference_totals(text) == {
        "detector": {"sum": 1.5, "count": 100.0},
        "sentiment": {"sum": 0.5, "count": 20.0},
    }
    before = {"cpu_s": 10.0, "inference_s": 2.0, "inference_calls": 120.0}
    after = {"cpu_s": 12.0, "inference_s": 3.0, "inference_calls": 220.0}
    costs = st.window_costs(before, after, completed=400)
    assert costs["cpu_ms_per_request"] == pytest.approx(5.0)
    assert costs["model_ms_per_call"] == pytest.approx(10.0)
    assert costs["inputs_per_call"] == pytest.approx(4.0)
    assert st.window_costs({"cpu_s": 1.0}, {"cpu_s": 2.0}, completed=0) == {"completed": 0}
    assert loadgen.process_cpu_s(os.getpid()) > 0.0


def test_a_servers_cpu_counts_its_child_processes() -> None:
    """A server with --workers does its work in children: their CPU counts while they run, not once reaped."""
    import subprocess

    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\nprint(1)\n"
    child = subprocess.Popen(
        [sys.executable, "-c", burn + "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "1\n"  # it has burnt its 0.3 s
        own = loadgen.process_cpu_s(os.getpid())
        assert loadgen.tree_cpu_s(os.getpid()) - own >= 0.25
    finally:
        child.communicate("")


# ----------------------------------------------------------------------------------------------------------
# Load driver, against a small HTTP/1.1 server on a local port
# ----------------------------------------------------------------------------------------------------------


class FakeServer:
    """Keep-alive HTTP/1.1: answers 200 after `delay_s`, or 503 for bodies holding "bad"; counts requests
    and peak concurrency."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.in_flight = self.peak = self.total = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                body = await reader.readexactly(length)
                self.in_flight += 1
                self.total += 1
                self.peak = max(self.peak, self.in_flight)
                await asyncio.sleep(self.delay_s)
                self.in_flight -= 1
                status, payload = (503, b"busy") if b"bad" in body else (200, b"{}")
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Length: {len(payload)}\r\n\r\n".encode() + payload
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


class FakeTarget:
    """What run_rounds needs of a server: a name, a URL, counters and a liveness check."""

    def __init__(self, name: str, server: FakeServer, port: int) -> None:
        self.name, self.server, self.url = name, server, f"http://127.0.0.1:{port}"

    def counters(self) -> dict[str, float]:
        return {"cpu_s": time.process_time()}

    def check_alive(self) -> None:
        pass


def test_run_rounds_alternates_servers_and_their_ratio_holds() -> None:
    """Two servers, one 3x slower per request, through the real load driver: each round runs both, in
    rotated order, on the same keep-alive client; the per-round RPS ratio comes out near 3."""

    async def main() -> tuple[list[dict[str, Any]], list[FakeServer]]:
        fakes = [FakeServer(0.01), FakeServer(0.03)]
        listeners = [await asyncio.start_server(f.handle, "127.0.0.1", 0) for f in fakes]
        targets = [
            FakeTarget(name, fake, listener.sockets[0].getsockname()[1])
            for name, fake, listener in zip(("ours_batched", "naive"), fakes, listeners, strict=True)
        ]
        probed: list[int] = []

        async def probe(r: int) -> dict[str, Any]:
            probed.append(r)
            return {"ours_batched": {"overhead_p50_ms": 0.1}}

        bodies = {"detect": [b'{"text": "a"}', b'{"text": "b"}']}
        try:
            rounds = await st.run_rounds(
                targets, [("detect", 2)], bodies, 2, 0.05, 0.4, probe=probe, say=lambda _: None
            )
        finally:
            for listener in listeners:
                listener.close()
        assert probed == [0, 1]
        return rounds, fakes

    rounds, fakes = asyncio.run(main())
    assert [r["order"] for r in rounds] == [["ours_batched", "naive"], ["naive", "ours_batched"]]
    for record in rounds:
        assert len(record["load_average_start"]) == 3 and len(record["load_average_end"]) == 3
        assert [w["position"] for w in record["windows"]] == [0, 1]
        assert [w["config"] for w in record["windows"]] == record["order"]
        assert all(w["errors"] == 0 and w["requests"] > 0 for w in record["windows"])
        assert all("cpu_ms_per_request" in w for w in record["windows"])
        assert record["overhead"] == {"ours_batched": {"overhead_p50_ms": 0.1}}
    assert all(f.peak == 2 for f in fakes)  # concurrency 2: both users in flight at once
    speedup = st.compute_ratios(rounds)["detect"]["2"]["batched_vs_naive_rps"]
    assert len(speedup["per_round"]) == 2
    assert 1.8 < speedup["median"] < 4.0, speedup


def test_users_split_among_client_processes_share_one_window_and_every_text() -> None:
    """Four users in two client processes: all four in flight at once, each user's first body its own (the
    users start at their offsets among all users, not each process's), and the clients' CPU recorded."""

    async def main() -> tuple[loadgen.PointResult, FakeServer, list[bytes]]:
        fake = FakeServer(0.02)
        seen: list[bytes] = []
        handle = fake.handle

        async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            original = reader.readexactly

            async def readexactly(n: int) -> bytes:  # each connection's (user's) first body, kept
                data = await original(n)
                if reader.readexactly is readexactly:
                    seen.append(data)
                    reader.readexactly = original  # type: ignore[method-assign]
                return data

            reader.readexactly = readexactly  # type: ignore[method-assign]
            await handle(reader, writer)

        listener = await asyncio.start_server(recording, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        bodies = [f'{{"text": "{i}"}}'.encode() for i in range(4)]
        try:
            point = await loadgen.closed_loop(url, "/detect", bodies, 4, 0.05, 0.5, processes=2)
        finally:
            listener.close()
        return point, fake, seen

    point, fake, seen = asyncio.run(main())
    assert fake.peak == 4 and point.errors == 0
    assert point.completed == fake.total and len(point.latencies_s) > 0
    assert sorted(seen) == [b'{"text": "0"}', b'{"text": "1"}', b'{"text": "2"}', b'{"text": "3"}']
    assert point.client_wall_s > 0.5 and point.client_cpu_s > 0
    summary = loadgen.summarize(point)
    assert summary["client_cores"] == pytest.approx(point.client_cpu_s / point.client_wall_s)


# ----------------------------------------------------------------------------------------------------------
# Texts
# ----------------------------------------------------------------------------------------------------------


def test_wikiextractor_paragraphs_drop_tags_titles_and_headings() -> None:
    lines = [
        '<doc id="12" url="http://en.wikipedia.org/wiki?curid=12" title="Anarchism">',
        "Anarchism",
        "",
        "Anarchism is a political philosophy that advocates stateless societies often defined as such.",
        "Etymology and terminology.",
        "The term is a compound word composed from the word anarchy and the suffix ism, itself derived.",
        "</doc>",
    ]
    paragraphs = list(loadgen.wikiextractor_paragraphs(iter(lines)))
    assert paragraphs == [lines[3], lines[5]]


def test_paragraph_prefix_ends_at_a_sentence_boundary() -> None:
    sentences = [" ".join(["w"] * 30) + ".", " ".join(["x"] * 40) + ".", " ".join(["y"] * 50) + "."]
    text = loadgen.paragraph_prefix(sentences, 60, 100)
    assert text is not None and len(text.split()) == 70 and text.endswith("x.")
    assert loadgen.paragraph_prefix(sentences[:1], 60, 100) is None  # too short, nothing to add
    long_one = [" ".join(["z"] * 150) + "."]
    assert len(loadgen.paragraph_prefix(long_one, 60, 100).split()) == 100  # type: ignore[union-attr]


def test_text_mix_has_the_proportions_and_lengths() -> None:
    rng = random.Random(1)

    def sentence() -> str:
        return " ".join(f"word{rng.randrange(50)}" for _ in range(rng.randint(5, 40))).capitalize() + "."

    paragraphs = [" ".join(sentence() for _ in range(rng.randint(1, 8))) for _ in range(200)]
    short = [f"short text number {i} ." for i in range(50)]
    mix = loadgen.text_mix(short, paragraphs, 1000, seed=3)
    assert len(mix) == 1000
    counts = {kind: sum(k == kind for k, _ in mix) for kind in loadgen.MIX}
    assert counts == {kind: round(1000 * share) for kind, share in loadgen.MIX.items()}
    source = " ".join(paragraphs)
    for kind, text in mix:
        words = len(text.split())
        if kind == "short":
            assert text in short
        elif kind == "sentence":
            assert loadgen.SENTENCE_WORDS[0] <= words <= loadgen.SENTENCE_WORDS[1] and text in source
        else:
            assert loadgen.PARAGRAPH_WORDS[0] <= words <= loadgen.PARAGRAPH_WORDS[1] and text in source
    assert loadgen.text_mix(short, paragraphs, 1000, seed=3) == mix  # every configuration gets the same texts
    with pytest.raises(loadgen.BenchError):
        loadgen.text_mix([], paragraphs, 10)


# ----------------------------------------------------------------------------------------------------------
# Response checks
# ----------------------------------------------------------------------------------------------------------


def test_embed_problems_and_disagreements() -> None:
    unit = [0.6, 0.8]
    assert st.embed_problems([unit, [1.0, 0.0]], 2) == []
    assert st.embed_problems([unit], 2) == ["expected a list of 2 vectors"]
    assert st.embed_problems({"embeddings": [unit]}, 1) == ["expected a list of 1 vectors"]
    assert st.embed_problems([["a", "b"]], 1) == ["vectors are not non-empty lists of numbers"]
    assert st.embed_problems([[]], 1) == ["vectors are not non-empty lists of numbers"]
    assert st.embed_problems([[3.0, 4.0]], 1) == [
        "a vector's norm is 5.0000, not 1 (normalize defaults to true)"
    ]
    assert st.embed_problems([unit, [1.0, 0.0, 0.0]], 2) == ["vectors of several lengths [2, 3]"]

    ours = [[0.6, 0.8], [1.0, 0.0]]
    close = [[0.6001, 0.7999], [1.0, 0.0]]
    assert st.embed_disagreements({"ours_batched": ours, "naive": close}) == []
    turned = [[0.8, 0.6], [1.0, 0.0]]  # cosine 0.96 for the first text
    assert st.embed_disagreements({"ours_batched": ours, "naive": turned, "ours_workers2": ours}) == [
        "naive's vector for text 0 has cosine 0.96000 with ours_batched's"
    ]
    nan = [[float("nan"), 0.0], [1.0, 0.0]]
    assert len(st.embed_disagreements({"ours_batched": ours, "naive": nan})) == 1


def test_request_bodies_are_each_endpoints_shape() -> None:
    assert json.loads(st.request_body("detect", "a b")) == {"text": "a b", "truncate": True}
    assert json.loads(st.request_body("classify", "a b")) == {"text": "a b"}
    assert json.loads(st.request_body("embed", "a b")) == {
        "inputs": "a b",
        "model": "detector",
        "truncate": True,
    }
    assert st.parse_args([]).endpoints == ["detect", "classify"]
    assert st.parse_args(["--endpoints", "embed"]).endpoints == ["embed"]


def test_detect_problems_catch_wrong_offsets_and_scores() -> None:
    text = "the cat sat"
    good = {
        "results": [
            {
                "tokens": [
                    {"text": "the", "start": 0, "end": 3, "score": 0.2, "replaced": False},
                    {"text": "cat", "start": 4, "end": 7, "score": 0.9, "replaced": True},
                ],
                "replaced_fraction": 0.5,
                "truncated": False,
            }
        ]
    }
    assert st.detect_problems(good, [text]) == []
    bad = json.loads(json.dumps(good))
    bad["results"][0]["tokens"][1]["start"] = 3
    bad["results"][0]["tokens"][0]["score"] = 1.5
    problems = st.detect_problems(bad, [text])
    assert any("text[3:7]" in p for p in problems) and any("not in [0, 1]" in p for p in problems)
    assert st.detect_problems(good, [text, text]) == ["1 results for 2 texts"]
    labels = {"negative", "positive"}
    ok = {"results": [{"label": "positive", "scores": {"negative": 0.3, "positive": 0.7}}]}
    assert st.classify_problems(ok, 1, labels) == []
    wrong = {"results": [{"label": "negative", "scores": {"negative": 0.3, "positive": 0.7}}]}
    assert st.classify_problems(wrong, 1, labels) == ["label 'negative' is not the top score"]


# ----------------------------------------------------------------------------------------------------------
# The naive server, for a tiny random model
# ----------------------------------------------------------------------------------------------------------


def _tiny_hf_dirs(root: Path) -> dict[str, Path]:
    """Tiny random-weight discriminator and classifier directories (no ONNX export: the naive server reads
    the PyTorch weights)."""
    import torch

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import build_model
    from electra.tokenizer import load_tokenizer, save_tokenizer

    tokenizer = load_tokenizer(write_serving_vocab(root / "vocab.txt"))
    cfg = ElectraConfig.from_size(
        "tiny", vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=128, id2label=SERVING_LABELS
    )
    dirs = {}
    for seed, kind in enumerate(("discriminator", "classifier")):
        torch.manual_seed(seed)
        model = build_model(kind, cfg)
        with torch.no_grad():
            # Off the init's zero biases, so scores differ from token to token and label to label.
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.2)
        dirs[kind] = save_hf_dir(model, root / kind)
        save_tokenizer(tokenizer, dirs[kind])
    return dirs


def _per_text(model_dir: Path, texts: list[str], max_len: int, output: str) -> list[np.ndarray]:
    """Our own PyTorch model's output per text (unpadded), as the reference the naive server must match:
    "logits" (the model's own head) or "cls" (the backbone's last hidden state at [CLS], what /embed pools
    with "cls")."""
    import torch

    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer

    model = load_hf_dir(model_dir)
    tokenizer = load_tokenizer(model_dir)
    tokenizer.enable_truncation(max_length=max_len)
    out = []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tokenizer.encode(text).ids])
            args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
            out.append((model(*args)[0] if output == "logits" else model.electra(*args)[0, 0]).numpy())
    return out


@pytest.mark.slow
def test_naive_server_answers_detect_classify_and_embed_like_the_model(tmp_path: Path) -> None:
    from litestar.testing import TestClient

    from bench import naive_server

    dirs = _tiny_hf_dirs(tmp_path)
    max_len = 16
    models = naive_server.NaiveModels(dirs["discriminator"], dirs["classifier"], max_len, "cpu")
    texts = [
        "The quick brown fox jumps over the lazy dog.",
        "the cat sat",
        "the dog ran fast in the park and the cat sat on the mat all day and all night long",
    ]
    with TestClient(app=naive_server.create_app(models)) as client:
        assert client.get("/health/ready").json() == {"status": "ready"}

        r = client.post("/detect", json={"texts": texts, "threshold": 0.5})
        assert r.status_code == 200, r.text
        body = r.json()
        assert st.detect_problems(body, texts) == []
        expected = _per_text(dirs["discriminator"], texts, max_len, "logits")
        for result, logits in zip(body["results"], expected, strict=True):
            scores = np.array([t["score"] for t in result["tokens"]])
            # [CLS]/[SEP] and padding are not tokens of the text: the rest match our model's sigmoid.
            np.testing.assert_allclose(scores, 1 / (1 + np.exp(-logits[1:-1])), atol=1e-5)
            assert [t["replaced"] for t in result["tokens"]] == [t["score"] > 0.5 for t in result["tokens"]]
            replaced = sum(t["replaced"] for t in result["tokens"])
            assert result["replaced_fraction"] == pytest.approx(replaced / len(result["tokens"]), abs=1e-6)
        assert [r["truncated"] for r in body["results"]] == [False, False, True]
        assert len(body["results"][2]["tokens"]) == max_len - 2
        one = client.post("/detect", json={"text": texts[1], "threshold": 0.0}).json()
        assert all(t["replaced"] for t in one["results"][0]["tokens"])

        r = client.post("/classify", json={"inputs": [{"text": t} for t in texts]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert st.classify_problems(body, len(texts), set(SERVING_LABELS.values())) == []
        expected = _per_text(dirs["classifier"], texts, max_len, "logits")
        for result, logits in zip(body["results"], expected, strict=True):
            probs = np.exp(logits) / np.exp(logits).sum()
            got = [result["scores"][SERVING_LABELS[i]] for i in range(len(SERVING_LABELS))]
            np.testing.assert_allclose(got, probs, atol=1e-5)
        single = client.post("/classify", json={"text": texts[0]}).json()["results"][0]
        assert single["label"] == body["results"][0]["label"]
        for label, score in body["results"][0]["scores"].items():
            assert single["scores"][label] == pytest.approx(score, abs=1e-5)

        # /embed: [CLS]'s last hidden state of our own backbone, unit length, truncated at max_len.
        r = client.post("/embed", json={"inputs": texts})
        assert r.status_code == 200, r.text
        vectors = np.array(r.json())
        assert st.embed_problems(r.json(), len(texts)) == []
        expected = np.stack(_per_text(dirs["discriminator"], texts, max_len, "cls"))
        np.testing.assert_allclose(
            vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-5
        )
        raw = client.post("/embed", json={"inputs": texts[1], "normalize": False}).json()
        np.testing.assert_allclose(raw, expected[1:2], atol=1e-4)
        for bad in ({"inputs": []}, {"inputs": 3}, {"inputs": "a", "normalize": "yes"}):
            assert client.post("/embed", json=bad).status_code == 400, bad

        assert client.post("/detect", json={"texts": []}).status_code == 400
        assert client.post("/detect", json={"text": "a", "threshold": 2}).status_code == 400
        assert client.post("/classify", json={"inputs": [{"text_pair": "x"}]}).status_code == 400
