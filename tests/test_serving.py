"""The server in-process: endpoint contracts, offsets on Unicode, word aggregation, batching, limits, auth,
readiness and metrics, on tiny real bundles (ONNX Runtime, no mocks of the model)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from electra.serving.engine.batcher import Arrivals, Batcher, QueueFull
from electra.serving.engine.metrics import ModelMetrics
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http import server_timing as timing
from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings

KEY = "k" * 20 + "-secret"

TEXTS = [
    "The cat sat on the mat.",
    "The quick brown fox jumps over the lazy dog quickly!",
    "She loved the movie, he hated the book.",
    "",
    "New York and Paris are cities; London is a city too.",
]

UNICODE_TEXTS = [
    "Café naïve über — déjà vu",  # accents stripped by the normalizer, offsets still into the original
    "e\u0301cole and cafe\u0301",  # combining accents
    "🙂 emoji 👩‍👩‍👧 family and 🇫🇷 flag",  # astral code points, ZWJ sequences, regional indicators
    "日本語のテキスト and English",  # CJK: one word per character
    "tabs\tand\nnew\r\nlines   and  spaces",
    "שלום world مرحبا",  # right-to-left scripts
    "zero\u200bwidth\u00a0nbsp\ufeffbom",
    "   leading and trailing   ",
    "Ünïcödé ÀÉÎÕÜ ﬁ ligature Ⅻ",  # NFKC-ish oddities
]


def settings_for(bundles: dict[str, Path], *names: str, **overrides: Any) -> ServeSettings:
    models = tuple(ModelSpec(n, bundles[n]) for n in (names or ("detector", "sentiment", "score")))
    return ServeSettings(models=models, **overrides)


def wait_ready(client: TestClient, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while client.get("/health/ready").status_code != 200:
        assert time.monotonic() < deadline, "server never became ready"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    app = create_app(settings_for(serving_bundles, max_texts=16, max_chars=3000, max_body_bytes=200_000))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


def detect(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("model", "detector")
    r = client.post("/detect", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def check_offsets(text: str, tokens: list[dict[str, Any]]) -> None:
    end = 0
    for t in tokens:
        assert text[t["start"] : t["end"]] == t["text"], (text, t)
        assert t["start"] >= end and t["end"] > t["start"], tokens
        gap = text[end : t["start"]]
        # Between tokens only what the tokenizer drops: whitespace, control and format characters.
        assert all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in gap), (text, gap)
        end = t["end"]
    assert all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text[end:])


# ----------------------------------------------------------------------------------------------------------
# /detect
# ----------------------------------------------------------------------------------------------------------


def test_detect_contract(client: TestClient) -> None:
    body = detect(client, text=TEXTS[0])
    assert body["model"] == "detector"
    (result,) = body["results"]
    assert set(result) == {"tokens", "replaced_fraction", "truncated", "windows"}
    assert result["truncated"] is False and result["windows"] == 1
    tokens = result["tokens"]
    assert [t["text"] for t in tokens] == ["The", "cat", "sat", "on", "the", "mat", "."]
    for t in tokens:
        assert set(t) == {"text", "start", "end", "score", "replaced"}
        assert 0.0 <= t["score"] <= 1.0
        assert t["replaced"] == (t["score"] >= 0.5)
    assert result["replaced_fraction"] == pytest.approx(
        sum(t["replaced"] for t in tokens) / len(tokens), abs=1e-6
    )
    check_offsets(TEXTS[0], tokens)
    # Random weights still give scores that differ from token to token (the logits are really per token).
    assert len({round(t["score"], 6) for t in tokens}) > 3


def test_detect_scores_match_onnx_runtime_directly(
    client: TestClient, serving_bundles: dict[str, Path]
) -> None:
    import onnxruntime as ort

    from electra.onnx.parity import encode_batch
    from electra.tokenizer import load_tokenizer

    text = TEXTS[1]
    tokens = detect(client, text=text)["results"][0]["tokens"]
    session = ort.InferenceSession(str(serving_bundles["detector"] / "model.onnx"))
    feeds = encode_batch(load_tokenizer(serving_bundles["detector"]), [(text, None)], 64)
    logits = session.run(["logits"], feeds)[0][0, 1 : 1 + len(tokens)]
    expected = 1 / (1 + np.exp(-logits.astype(np.float64)))
    np.testing.assert_allclose([t["score"] for t in tokens], expected, atol=1e-6)


def decimals(x: float) -> int:
    """The decimals of x as JSON carries it (repr is the shortest string that reads back as x)."""
    text = repr(x)
    return 0 if "e" in text or "." not in text else len(text.split(".")[1])


def test_scores_carry_at_most_six_decimals(client: TestClient) -> None:
    """No more digits than a float32 model's probability holds: 0.915446, not 0.9154459781096238."""
    raw = client.post("/detect", json={"model": "detector", "text": TEXTS[1]}).content
    tokens = json.loads(raw)["results"][0]["tokens"]
    assert tokens and all(decimals(t["score"]) <= 6 for t in tokens), raw
    assert any(decimals(t["score"]) >= 4 for t in tokens)  # rounded, not cut to a few digits
    scores = client.post("/classify", json={"model": "sentiment", "text": "good movie"}).json()
    assert all(decimals(p) <= 6 for p in scores["results"][0]["scores"].values()), scores


@pytest.mark.parametrize("text", UNICODE_TEXTS)
def test_offsets_are_exact_on_unicode(client: TestClient, text: str) -> None:
    for level in ("token", "word"):
        result = detect(client, text=text, level=level)["results"][0]
        assert result["tokens"], text
        check_offsets(text, result["tokens"])


def test_word_level_merges_pieces_with_max_score(client: TestClient) -> None:
    text = "quickly the cats jumped"
    pieces = detect(client, text=text)["results"][0]["tokens"]
    words = detect(client, text=text, level="word", threshold=0.4)["results"][0]["tokens"]
    assert [w["text"] for w in words] == ["quickly", "the", "cats", "jumped"]
    assert len(pieces) > len(words)  # quick ##ly, cat ##s, jump(s) ##ed: something was merged
    for w in words:
        inside = [p for p in pieces if w["start"] <= p["start"] and p["end"] <= w["end"]]
        assert "".join(p["text"] for p in inside) == w["text"]
        assert w["score"] == pytest.approx(max(p["score"] for p in inside))
        assert w["replaced"] == (w["score"] >= 0.4)


def test_threshold_decides_replaced(client: TestClient) -> None:
    all_replaced = detect(client, text=TEXTS[2], threshold=0.0)["results"][0]
    none_replaced = detect(client, text=TEXTS[2], threshold=1.0)["results"][0]
    assert all_replaced["replaced_fraction"] == 1.0
    assert none_replaced["replaced_fraction"] == 0.0


def test_empty_text_has_no_tokens(client: TestClient) -> None:
    result = detect(client, text="")["results"][0]
    assert result == {"tokens": [], "replaced_fraction": 0.0, "truncated": False, "windows": 1}


def test_batched_request_equals_single_requests(client: TestClient) -> None:
    together = detect(client, texts=TEXTS)["results"]
    alone = [detect(client, text=t)["results"][0] for t in TEXTS]
    assert len(together) == len(TEXTS)
    for a, b in zip(together, alone, strict=True):
        assert [t["text"] for t in a["tokens"]] == [t["text"] for t in b["tokens"]]
        np.testing.assert_allclose(
            [t["score"] for t in a["tokens"]], [t["score"] for t in b["tokens"]], atol=1e-5
        )


def test_truncation_when_asked(client: TestClient) -> None:
    """truncate=true scores the first window only and says so (tests/test_long_documents.py: the rest)."""
    long = " ".join(["the cat sat on the mat"] * 30)
    result = detect(client, text=long, truncate=True)["results"][0]
    assert result["truncated"] is True and result["windows"] == 1
    assert len(result["tokens"]) == 64 - 2
    check_offsets(long[: result["tokens"][-1]["end"]], result["tokens"])


def test_classify_truncates_and_says_so(client: TestClient) -> None:
    long = " ".join(["the cat sat on the mat"] * 30)
    r = client.post("/classify", json={"model": "sentiment", "text": long})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["truncated"] is True
    r = client.post("/classify", json={"model": "sentiment", "text": long, "truncate": False})
    assert r.status_code == 413
    assert "64 tokens" in r.json()["detail"]


# ----------------------------------------------------------------------------------------------------------
# /classify, /models
# ----------------------------------------------------------------------------------------------------------


def test_classify_contract(client: TestClient) -> None:
    r = client.post("/classify", json={"model": "sentiment", "text": "good movie"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "sentiment"
    (result,) = body["results"]
    assert set(result) == {"label", "scores"}
    assert set(result["scores"]) == {"negative", "positive"}
    assert sum(result["scores"].values()) == pytest.approx(1.0)
    assert result["label"] == max(result["scores"], key=result["scores"].get)


def test_classify_pairs_and_batches(client: TestClient) -> None:
    inputs = [{"text": "good movie"}, {"text": "the cat", "text_pair": "sat on the mat"}, {"text": "bad day"}]
    batch = client.post("/classify", json={"model": "sentiment", "inputs": inputs}).json()["results"]
    single = [client.post("/classify", json={"model": "sentiment", **x}).json()["results"][0] for x in inputs]
    for a, b in zip(batch, single, strict=True):
        assert a["label"] == b["label"]
        for label in a["scores"]:
            assert a["scores"][label] == pytest.approx(b["scores"][label], abs=1e-5)
    # A pair is not the same input as its first text alone.
    alone = client.post("/classify", json={"model": "sentiment", "text": "the cat"}).json()["results"][0]
    assert alone["scores"]["positive"] != pytest.approx(batch[1]["scores"]["positive"], abs=1e-6)


def test_one_batch_shape_on_every_route(client: TestClient) -> None:
    """A batch is `texts` or `inputs` (one list under either name) on /detect and /classify alike: a text as a
    string, on /classify a pair as {"text", "text_pair"} (issue 54); each equals the single requests."""
    texts = ["good movie", "the cat sat on the mat"]
    detect = [client.post("/detect", json={"model": "detector", "text": t}).json()["results"] for t in texts]
    detect = [result for results in detect for result in results]
    for name in ("texts", "inputs"):
        r = client.post("/detect", json={"model": "detector", name: texts})
        assert r.status_code == 200, r.text
        assert r.json()["results"] == detect
    pair = {"text": "the cat", "text_pair": "sat on the mat"}
    items = [texts[0], pair, {"text": texts[1]}]
    single = [
        client.post("/classify", json={"model": "sentiment", **body}).json()["results"][0]
        for body in ({"text": texts[0]}, pair, {"text": texts[1]})
    ]
    for name in ("texts", "inputs"):
        r = client.post("/classify", json={"model": "sentiment", name: items})
        assert r.status_code == 200, r.text
        for got, want in zip(r.json()["results"], single, strict=True):
            assert got["label"] == want["label"]
            assert got["scores"] == pytest.approx(want["scores"], abs=1e-5)
    for body in ({"text": "a", "inputs": ["b"]}, {"texts": ["a"], "inputs": ["b"]}, {}):
        r = client.post("/classify", json={"model": "sentiment", **body})
        assert r.status_code == 400 and "exactly one of 'text'" in r.json()["detail"], r.text
    r = client.post("/classify", json={"model": "sentiment", "texts": ["a"], "text_pair": "b"})
    assert r.status_code == 400 and "in 'texts' send a pair as" in r.json()["detail"]
    r = client.post("/detect", json={"model": "detector", "inputs": [pair]})  # no pairs for a detector
    assert r.status_code == 400, r.text


def test_the_schema_shows_the_batch_shapes(client: TestClient) -> None:
    schemas = client.get("/schema/openapi.json").json()["components"]["schemas"]

    def batch(name: str, field: str) -> list[dict[str, Any]]:
        (listed,) = [s for s in schemas[name]["properties"][field]["oneOf"] if s.get("type") == "array"]
        items = listed["items"]
        return items.get("oneOf", [items])

    for name in ("DetectRequest", "TagRequest"):
        for field in ("texts", "inputs"):
            assert batch(name, field) == [{"type": "string"}], (name, field)
    for field in ("texts", "inputs"):
        shapes = batch("ClassifyRequest", field)
        assert {"type": "string"} in shapes and any("PairInput" in s.get("$ref", "") for s in shapes)


def test_regression_model_answers_a_score(client: TestClient) -> None:
    r = client.post("/classify", json={"model": "score", "text": "good movie"})
    assert r.status_code == 200, r.text
    (result,) = r.json()["results"]
    assert set(result) == {"score"} and isinstance(result["score"], float)


@pytest.mark.parametrize(
    ("route", "body", "status", "message"),
    [
        ("/classify", {"text": "x"}, 400, "several models serve /classify"),
        ("/classify", {"text": "x", "model": "nope"}, 404, "'nope' is not loaded"),
        ("/classify", {"text": "x", "model": "detector"}, 400, "send it to /detect"),
        ("/detect", {"text": "x", "model": "sentiment"}, 400, "send it to /classify"),
        ("/detect", {}, 400, "exactly one of 'text'"),
        ("/detect", {"text": "a", "texts": ["b"]}, 400, "exactly one of 'text'"),
        ("/detect", {"texts": []}, 400, "empty"),
        ("/detect", {"text": 3}, 400, "Validation failed"),
        ("/detect", {"text": "x", "threshold": 1.5}, 400, "Validation failed"),
        ("/detect", {"text": "x", "level": "sentence"}, 400, "Validation failed"),
        ("/detect", {"text": "x", "colour": "red"}, 400, "Validation failed"),
        ("/detect", {"texts": ["x"] * 17}, 413, "the limit is 16"),
        ("/detect", {"text": "x" * 3001}, 413, "the limit is 3,000"),
        ("/classify", {"model": "sentiment", "text": "x", "text_pair": "y" * 3001}, 413, "3,000"),
        ("/classify", {"model": "sentiment", "inputs": [{"text": "x"}], "text_pair": "y"}, 400, "text_pair"),
        ("/classify", {"model": "sentiment", "inputs": [{"txt": "x"}]}, 400, "Validation failed"),
    ],
)
def test_bad_requests_get_clear_4xx(
    client: TestClient, route: str, body: dict[str, Any], status: int, message: str
) -> None:
    body = {"model": "detector", **body} if route == "/detect" and "model" not in body else body
    r = client.post(route, json=body)
    assert r.status_code == status, r.text
    payload = r.json()
    assert payload["status_code"] == status
    assert message in payload["detail"] or message in json.dumps(payload.get("extra"))


def test_malformed_bodies_are_400(client: TestClient) -> None:
    for raw in (b"{bad", b"", b"[]", b'"text"', b"\xff\xfe", b'{"text": "\\ud800"}'):
        r = client.post("/detect", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400, (raw, r.status_code, r.text)
        assert r.json()["status_code"] == 400


def test_body_size_limit_is_413(client: TestClient) -> None:
    r = client.post("/detect", json={"model": "detector", "texts": ["word " * 500] * 100})
    assert r.status_code == 413


def test_models_endpoint(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert set(models) == {"detector", "sentiment", "score"}
    assert models["detector"]["kind"] == "discriminator" and models["detector"]["labels"] is None
    assert models["sentiment"]["labels"] == ["negative", "positive"]
    assert models["score"]["problem_type"] == "regression"
    assert models["detector"]["max_seq_len"] == 64
    assert models["detector"]["fused_operators"]["Attention"] == 2


def test_health_schema_page_and_metrics(client: TestClient) -> None:
    assert client.get("/health/live").json() == {"status": "live"}
    assert client.get("/health/ready").json() == {"status": "ready"}
    schema = client.get("/schema/openapi.json").json()
    routes = {"/detect", "/classify", "/tag", "/models", "/health/live", "/health/ready"}
    assert routes <= set(schema["paths"])
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    detect(client, texts=["the cat", "the dog sat"])
    metrics = client.get("/metrics").text
    for name in (
        'electra_batch_size_count{model="detector"}',
        'electra_batch_tokens_count{model="detector"}',
        'electra_tokenization_seconds_count{model="detector"}',
        'electra_inference_seconds_count{model="detector"}',
        'electra_queue_wait_seconds_count{model="detector"}',
        'electra_tokens_processed_total{model="detector"}',
        'electra_queue_size{model="detector"}',
        "electra_http_requests_total",
        "electra_http_request_duration_seconds_bucket",
    ):
        assert name in metrics, name
    assert 'path="/detect"' in metrics


def http_requests(method: str, path: str, status: int) -> float:
    labels = {"method": method, "path": path, "status_code": str(status), "app_name": "electra"}
    return REGISTRY.get_sample_value("electra_http_requests_total", labels) or 0.0


def test_http_metrics_count_each_route_template_and_status(client: TestClient) -> None:
    counted = [
        ("POST", "/detect", 200),
        ("POST", "/detect", 400),
        ("GET", "/v2/models/{name}", 200),
        ("GET", "/metrics", 200),
    ]
    before = [http_requests(*key) for key in counted]
    detect(client, text="the cat")
    assert client.post("/detect", json={"text": 3}).status_code == 400
    assert client.get("/v2/models/detector").status_code == 200
    client.get("/metrics")
    after = [http_requests(*key) for key in counted]
    # Routes are labelled by their template (a series per route, not per model); scrapes are not counted.
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 0]
    labels = {"method": "POST", "path": "/detect", "app_name": "electra"}
    assert REGISTRY.get_sample_value("electra_http_requests_in_progress", labels) == 0
    duration = {**labels, "status_code": "200"}
    assert REGISTRY.get_sample_value("electra_http_request_duration_seconds_count", duration) >= 1


def test_server_timing_says_where_a_requests_time_went(client: TestClient) -> None:
    for path, body in (
        ("/detect", {"text": "the cat sat", "model": "detector"}),
        ("/classify", {"text": "a fine film", "model": "sentiment"}),
        ("/v2/models/sentiment/infer", {"inputs": [v2_text_input(["a fine film"])]}),
    ):
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
        stages = timing.parse(r.headers["server-timing"])
        assert set(stages) == {"tokenize", "queue", "model"}, (path, stages)
        assert all(ms >= 0 for ms in stages.values())
        assert stages["model"] > 0
    assert "server-timing" not in client.get("/health/live").headers
    assert "server-timing" not in client.post("/detect", json={"text": 3}).headers


def v2_text_input(texts: list[str]) -> dict[str, Any]:
    return {"name": "text", "shape": [len(texts)], "datatype": "BYTES", "data": texts}


def test_server_timing_header_parses_back() -> None:
    value = timing.header_value({"tokenize": 0.000061, "model": 0.0054125}).decode()
    assert value == "tokenize;dur=0.061, model;dur=5.412"
    assert timing.parse(value) == {"tokenize": 0.061, "model": 5.412}
    assert timing.parse('cache;desc="hit", db;dur=53, app;desc=x;dur=47.2') == {"db": 53.0, "app": 47.2}


def test_serving_imports_neither_torch_nor_transformers() -> None:
    code = (
        "import sys, electra.serving.http.app, electra.serving.http.server, electra.cli.serve_cmd\n"
        "bad = [m for m in ('torch', 'transformers', 'onnx', 'optimum') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------------------------------------
# API keys, readiness, backpressure, batching
# ----------------------------------------------------------------------------------------------------------


def test_api_keys(serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# production\n{KEY}\n{'z' * 32}\n", encoding="utf-8")
    app = create_app(settings_for(serving_bundles, "detector", api_key_file=keys))
    body = {"text": "the cat"}
    with TestClient(app) as c:
        wait_ready(c)
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": KEY},
            {"Authorization": "Basic x"},
        ):
            r = c.post("/detect", json=body, headers=headers)
            assert r.status_code == 401, headers
            assert "API key" in r.json()["detail"]
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert c.get("/models").status_code == 401
        for key in (KEY, "z" * 32):
            assert c.post("/detect", json=body, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        for open_path in ("/health/live", "/health/ready", "/metrics", "/", "/schema/openapi.json"):
            assert c.get(open_path).status_code == 200, open_path


def test_apps_in_one_process_answer_from_their_own_state(
    serving_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """The route handlers are module-level and get their app's state by dependency injection: two apps built
    in one process, the second after the first, each answer with their own models and keys, through every
    kind of route (the JSON API through Litestar, v2, TEI, health)."""
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n", encoding="utf-8")
    keyed = create_app(settings_for(serving_bundles, "detector", api_key_file=keys, hot_path=False))
    open_ = create_app(settings_for(serving_bundles, "sentiment", hot_path=False))
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(keyed) as k, TestClient(open_) as o:
        wait_ready(k)
        wait_ready(o)
        for _ in range(2):  # each app again after the other has answered
            assert [m["name"] for m in k.get("/models", headers=auth).json()["models"]] == ["detector"]
            assert k.get("/models").status_code == 401
            assert k.post("/detect", json={"text": "the cat"}, headers=auth).json()["model"] == "detector"
            assert k.get("/v2/models/detector", headers=auth).json()["name"] == "detector"
            assert k.get("/v2/models/sentiment", headers=auth).status_code == 404
            assert [m["name"] for m in o.get("/models").json()["models"]] == ["sentiment"]
            assert o.post("/classify", json={"text": "the cat"}).json()["model"] == "sentiment"
            assert o.get("/v2/models/sentiment/ready").json() == {"name": "sentiment", "ready": True}
            assert o.get("/v2/models/detector").status_code == 404
            assert o.post("/predict", json={"inputs": "the cat"}).status_code == 200
            assert o.get("/health/ready").json()["status"] == "ready"


class GatedRunner(ModelRunner):
    """A real runner whose warm-up or inference waits for the test to open a gate."""

    warm_gate: threading.Event | None = None
    infer_gate: threading.Event | None = None
    waiting_at_gate: threading.Event
    batch_sizes: list[int]

    def warm_up_calls(self, max_batch_size: int, max_batch_tokens: int) -> list[Callable[[], object]]:
        return [self._at_warm_gate, *super().warm_up_calls(max_batch_size, max_batch_tokens)]

    def _at_warm_gate(self) -> None:
        if self.warm_gate is not None:
            assert self.warm_gate.wait(30)

    def infer(self, batch: list[Any]) -> list[np.ndarray]:
        if self.infer_gate is not None:
            self.waiting_at_gate.set()
            assert self.infer_gate.wait(30)
        self.batch_sizes.append(len(batch))
        return super().infer(batch)


def gated(path: Path, **gates: threading.Event) -> GatedRunner:
    runner = GatedRunner("detector", path)
    runner.batch_sizes = []
    runner.waiting_at_gate = threading.Event()
    for name, gate in gates.items():
        setattr(runner, name, gate)
    return runner


def test_not_ready_until_warmed_up(serving_bundles: dict[str, Path]) -> None:
    gate = threading.Event()
    settings = settings_for(serving_bundles, "detector")
    app = create_app(settings, {"detector": gated(serving_bundles["detector"], warm_gate=gate)})
    with TestClient(app) as c:
        assert c.get("/health/live").status_code == 200
        r = c.get("/health/ready")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        r = c.post("/detect", json={"text": "the cat"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "loading" in r.json()["detail"]
        gate.set()
        wait_ready(c)
        assert c.post("/detect", json={"text": "the cat"}).status_code == 200


def test_full_queue_answers_503_with_retry_after(serving_bundles: dict[str, Path]) -> None:
    runner = gated(serving_bundles["detector"])
    app = create_app(
        settings_for(serving_bundles, "detector", max_queue=3, max_batch_size=1), {"detector": runner}
    )
    with TestClient(app) as c:
        wait_ready(c)
        runner.infer_gate = gate = threading.Event()
        answers: list[int] = []
        first = threading.Thread(
            target=lambda: answers.append(c.post("/detect", json={"text": "a"}).status_code)
        )
        first.start()
        assert runner.waiting_at_gate.wait(30)  # "a" is in the model
        second = threading.Thread(
            target=lambda: answers.append(c.post("/detect", json={"texts": ["b", "c", "d"]}).status_code)
        )
        second.start()
        wait_for_metric(c, 'electra_queue_size{model="detector"}', 3.0)  # the queue is full
        r = c.post("/detect", json={"text": "e"})
        gate.set()
        first.join(30)
        second.join(30)
        assert r.status_code == 503
        assert int(r.headers["retry-after"]) >= 1
        assert "busy" in r.json()["detail"]
        assert answers == [200, 200]
        assert c.post("/detect", json={"texts": ["a", "b", "c"]}).status_code == 200
        assert 'electra_queue_rejections_total{model="detector"}' in c.get("/metrics").text


def test_more_inputs_than_the_queue_holds_is_413_not_503(serving_bundles: dict[str, Path]) -> None:
    """A 503 says "retry later", and this request could never fit: the client must split it instead."""
    app = create_app(settings_for(serving_bundles, "detector", "sentiment", max_queue=3))
    with TestClient(app) as c:
        wait_ready(c)
        r = c.post("/detect", json={"texts": ["a", "b", "c", "d"]})
        assert r.status_code == 413 and "4 model windows; at most 3" in r.json()["detail"]
        r = c.post("/classify", json={"model": "sentiment", "inputs": [{"text": "a"}] * 4})
        assert r.status_code == 413 and "4 model inputs; at most 3" in r.json()["detail"]
        assert c.post("/detect", json={"texts": ["a", "b", "c"]}).status_code == 200


def wait_for_metric(client: TestClient, sample: str, value: float, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while f"{sample} {value}" not in client.get("/metrics").text:
        assert time.monotonic() < deadline, f"{sample} never reached {value}"
        time.sleep(0.01)


class BrokenRunner(GatedRunner):
    """A real runner whose model calls fail once `broken` is set, and whose description raises an
    unexpected error."""

    broken = False

    def infer(self, batch: list[Any]) -> list[np.ndarray]:
        if self.broken:
            raise RuntimeError("the model call failed")
        return super().infer(batch)

    def describe(self) -> dict[str, Any]:
        raise KeyError("a bug")


def test_model_failures_and_bugs_answer_json_without_internals(serving_bundles: dict[str, Path]) -> None:
    runner = BrokenRunner("detector", serving_bundles["detector"])
    runner.batch_sizes = []
    app = create_app(settings_for(serving_bundles, "detector"), {"detector": runner})
    with TestClient(app) as c:
        wait_ready(c)
        runner.broken = True
        r = c.post("/detect", json={"text": "the cat"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json() == {"status_code": 503, "detail": "model 'detector': the model call failed"}
        r = c.get("/models")
        assert r.status_code == 500
        assert r.json() == {"status_code": 500, "detail": "internal server error (logged)"}


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


def test_batcher_bounds_the_queue_while_the_model_is_busy(serving_bundles: dict[str, Path]) -> None:
    gate = threading.Event()
    runner = gated(serving_bundles["detector"], infer_gate=gate)
    encoded = runner.encode(["the cat sat"])

    async def scenario() -> None:
        batcher = Batcher(runner, ModelMetrics.for_model("gated"), 8192, 4, 0.0, max_queue=4)
        batcher.start()
        first = asyncio.create_task(batcher.submit(encoded))  # taken by the batching task, blocks in infer
        await asyncio.sleep(0.05)
        waiting = [asyncio.create_task(batcher.submit(encoded)) for _ in range(4)]  # fills the queue
        await asyncio.sleep(0.05)
        assert batcher.waiting == 4
        with pytest.raises(QueueFull):
            await batcher.submit(encoded)
        gate.set()
        rows = await asyncio.gather(first, *waiting)
        assert all(np.allclose(r[0], rows[0][0], atol=1e-6) for r in rows)
        await batcher.close()

    run_async(scenario())
    assert runner.batch_sizes == [1, 4]


def test_batcher_groups_concurrent_inputs_under_the_token_budget(serving_bundles: dict[str, Path]) -> None:
    runner = gated(serving_bundles["detector"])
    texts = ["the cat sat on the mat " * 3] * 6  # 6 inputs of 20 tokens
    encoded = runner.encode(texts)
    assert {e.length for e in encoded} == {20}
    alone = [runner.infer([e])[0] for e in encoded]

    async def scenario() -> list[Any]:
        # 50 padded tokens allow 2 rows of 20 per call; a long wait lets the batch fill.
        batcher = Batcher(runner, ModelMetrics.for_model("budget"), 50, 32, 200.0, max_queue=100)
        batcher.start()
        results = await asyncio.gather(*(batcher.submit([e]) for e in encoded))
        await batcher.close()
        return results

    results = run_async(scenario())
    assert runner.batch_sizes[-3:] == [2, 2, 2]
    for (row,), expected in zip(results, alone, strict=True):
        np.testing.assert_allclose(row, expected, atol=1e-5)


def test_batcher_waits_for_requests_on_their_way_then_runs_once(serving_bundles: dict[str, Path]) -> None:
    runner = gated(serving_bundles["detector"])
    encoded = runner.encode(["the cat sat", "the dog ran", "a lazy fox", "new york city"])

    async def scenario() -> None:
        arrivals = Arrivals()
        batcher = Batcher(runner, ModelMetrics.for_model("company"), 8192, 32, 2000.0, 100, arrivals)
        batcher.start()
        for _ in encoded[1:]:
            arrivals.expect()  # three requests still on their way
        first = asyncio.create_task(batcher.submit([encoded[0]]))
        await asyncio.sleep(0.05)
        rest = []
        for e in encoded[1:]:
            arrivals.arrived()
            rest.append(asyncio.create_task(batcher.submit([e])))
        await asyncio.gather(first, *rest)
        await batcher.close()

    run_async(scenario())
    assert runner.batch_sizes == [4]


def test_batches_group_inputs_of_similar_length_oldest_first(serving_bundles: dict[str, Path]) -> None:
    runner = gated(serving_bundles["detector"])
    texts = [
        "the cat sat on the mat and the dog ran over the lazy fox",  # 16 tokens: the oldest
        "the cat",  # 4: under half of 16, waits for a batch of short inputs
        "the dog ran over the lazy fox and the cat sat",  # 13
        "sat",  # 3
        "the quick brown fox jumps over the lazy dog in the new york city park today",  # 18: longer
        "new york and paris are cities",  # 8
    ]
    encoded = runner.encode(texts)
    order: list[list[int]] = []

    def record(batch: list[Any]) -> list[np.ndarray]:
        order.append([e.length for e in batch])
        return ModelRunner.infer(runner, batch)

    runner.infer = record  # type: ignore[method-assign]

    async def scenario() -> list[Any]:
        batcher = Batcher(runner, ModelMetrics.for_model("lengths"), 8192, 32, 0.0, max_queue=100)
        # Queue everything before the batching task starts, so the choice is over the full queue.
        futures = [asyncio.ensure_future(batcher.submit([e])) for e in encoded]
        await asyncio.sleep(0)
        batcher.start()
        results = await asyncio.gather(*futures)
        await batcher.close()
        return results

    results = run_async(scenario())
    assert order == [[16, 13], [4], [3], [18], [8]]
    for (row,), e in zip(results, encoded, strict=True):
        np.testing.assert_allclose(row, ModelRunner.infer(runner, [e])[0], atol=1e-5)


def test_a_lone_request_does_not_wait_for_company(serving_bundles: dict[str, Path]) -> None:
    runner = gated(serving_bundles["detector"])
    encoded = runner.encode(["the cat"])

    async def scenario() -> float:
        batcher = Batcher(runner, ModelMetrics.for_model("lone"), 8192, 32, 10_000.0, max_queue=100)
        batcher.start()
        start = time.perf_counter()
        await batcher.submit(encoded)
        elapsed = time.perf_counter() - start
        await batcher.close()
        return elapsed

    # max_wait is 10 s, but nothing else is on its way, so the request runs at once.
    assert run_async(scenario()) < 5.0
    assert runner.batch_sizes == [1]


def test_unbatched_server_gives_the_same_answers(serving_bundles: dict[str, Path]) -> None:
    app = create_app(settings_for(serving_bundles, "detector", max_batch_size=1))
    with TestClient(app) as c:
        wait_ready(c)
        unbatched = c.post("/detect", json={"texts": TEXTS}).json()["results"]
    app = create_app(settings_for(serving_bundles, "detector", max_batch_size=32, max_wait_ms=50))
    with TestClient(app) as c:
        wait_ready(c)
        batched = c.post("/detect", json={"texts": TEXTS}).json()["results"]
    for a, b in zip(batched, unbatched, strict=True):
        np.testing.assert_allclose(
            [t["score"] for t in a["tokens"]], [t["score"] for t in b["tokens"]], atol=1e-5
        )


def test_cuda_libraries_are_preloaded_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from electra.serving.engine.session import preload_cuda_libraries

    def preload_dlls() -> None:
        print("Failed to load libcublas.so.13: cannot open shared object file")

    said = preload_cuda_libraries(SimpleNamespace(preload_dlls=preload_dlls))
    assert said.startswith("Failed to load libcublas.so.13")
    assert capsys.readouterr() == ("", "")  # kept for the error message, off the console

    def broken() -> None:
        raise OSError("no such directory")

    assert "no such directory" in preload_cuda_libraries(SimpleNamespace(preload_dlls=broken))
    assert preload_cuda_libraries(SimpleNamespace()) == ""  # ONNX Runtime before 1.21
