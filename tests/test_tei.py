"""text-embeddings-inference's /rerank and /predict: requests and answers valid against TEI's own OpenAPI
document (tests/fixtures/tei/openapi.json, release 1.9.3), scores equal to sentence-transformers'
CrossEncoder for a cross-encoder directory, TEI's truncation and error shapes, and bad input answered 4xx."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings

from .conftest import SERVING_LABELS, build_serving_bundle

FIXTURE = Path(__file__).parent / "fixtures" / "tei" / "openapi.json"
QUERY = "what is the capital of france"
TEXTS = ["paris is the capital of france", "the cat sat on the mat", "berlin is a city", "a b c d e f"]


def schema_of(name: str) -> dict[str, Any]:
    """A component of TEI's OpenAPI document, with its references resolvable."""
    doc = json.loads(FIXTURE.read_text())
    return {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}


def validate(instance: Any, name: str) -> None:
    import jsonschema

    jsonschema.validate(instance, schema_of(name))


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-output classifier exported from a Hugging Face directory, as a sentence-transformers
    cross-encoder is (the directory is the bundle's sibling)."""
    return build_serving_bundle(tmp_path_factory.mktemp("ce"), "classifier", seed=7, id2label={0: "LABEL_0"})


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path], cross_encoder: Path) -> Iterator[TestClient]:
    models = (ModelSpec("ce", cross_encoder), ModelSpec("sentiment", serving_bundles["sentiment"]))
    app = create_app(ServeSettings(models=models, max_texts=16, max_chars=3000, max_body_bytes=200_000))
    with TestClient(app) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        yield c


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> Any:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def test_the_fixture_is_teis_document() -> None:
    doc = json.loads(FIXTURE.read_text())
    assert doc["info"]["title"] == "Text Embeddings Inference" and doc["info"]["version"] == "1.9.3"
    assert {"/rerank", "/predict"} <= set(doc["paths"])


def test_rerank_answers_teis_shape_best_first(client: TestClient) -> None:
    body = {"query": QUERY, "texts": TEXTS, "model": "ce"}
    ranks = post(client, "/rerank", body)
    validate({k: v for k, v in body.items() if k != "model"}, "RerankRequest")
    validate(ranks, "RerankResponse")
    assert sorted(r["index"] for r in ranks) == list(range(len(TEXTS)))
    scores = [r["score"] for r in ranks]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)
    assert all("text" not in r for r in ranks)
    with_text = post(client, "/rerank", {**body, "return_text": True})
    validate(with_text, "RerankResponse")
    assert [r["text"] for r in with_text] == [TEXTS[r["index"]] for r in with_text]
    # raw_scores: the logit, whose sigmoid is the default score, in the same order.
    raw = post(client, "/rerank", {**body, "raw_scores": True})
    assert [r["index"] for r in raw] == [r["index"] for r in ranks]
    for r, p in zip(raw, ranks, strict=True):
        assert 1 / (1 + math.exp(-r["score"])) == pytest.approx(p["score"], abs=1e-6)


def test_rerank_equals_sentence_transformers_cross_encoder(client: TestClient, cross_encoder: Path) -> None:
    from sentence_transformers import CrossEncoder

    model_dir = cross_encoder.parent / cross_encoder.name.removesuffix("-bundle")
    expected = CrossEncoder(str(model_dir), device="cpu").predict([(QUERY, t) for t in TEXTS])
    ranks = post(client, "/rerank", {"query": QUERY, "texts": TEXTS, "model": "ce"})
    got = {r["index"]: r["score"] for r in ranks}
    for i, score in enumerate(expected):
        assert got[i] == pytest.approx(float(score), abs=1e-4)
    assert [r["index"] for r in ranks] == sorted(range(len(TEXTS)), key=lambda i: -float(expected[i]))
    raw = CrossEncoder(str(model_dir), device="cpu", activation_fn=__import__("torch").nn.Identity())
    logits = raw.predict([(QUERY, t) for t in TEXTS])
    answer = post(client, "/rerank", {"query": QUERY, "texts": TEXTS, "model": "ce", "raw_scores": True})
    by_index = {r["index"]: r["score"] for r in answer}
    assert [by_index[i] for i in range(len(TEXTS))] == pytest.approx([float(x) for x in logits], abs=1e-4)


def test_predict_takes_a_text_a_pair_and_a_batch(client: TestClient) -> None:
    labels = set(SERVING_LABELS.values())
    for inputs in ("a fine film", ["a fine film", "a bad one"]):
        body = {"inputs": inputs, "model": "sentiment"}
        validate({"inputs": inputs}, "PredictRequest")
        answer = post(client, "/predict", body)
        validate(answer, "PredictResponse")
        assert {p["label"] for p in answer} == labels
        assert sum(p["score"] for p in answer) == pytest.approx(1.0, abs=1e-5)  # softmax over the labels
        assert [p["score"] for p in answer] == sorted((p["score"] for p in answer), reverse=True)
    batch = [["a fine film"], ["a fine film", "a bad one"], ["dull"]]
    answer = post(client, "/predict", {"inputs": batch, "model": "sentiment"})
    validate(answer, "PredictResponse")
    assert len(answer) == 3 and all(len(row) == len(labels) for row in answer)
    single = post(client, "/predict", {"inputs": "a fine film", "model": "sentiment"})
    assert answer[0] == single  # the batch's first input is the single text
    # The same scores /classify gives, raw_scores its logits.
    scores = post(client, "/classify", {"text": "a fine film", "model": "sentiment"})["results"][0]["scores"]
    assert {p["label"]: p["score"] for p in single} == pytest.approx(scores, abs=1e-6)
    raw = post(client, "/predict", {"inputs": "a fine film", "model": "sentiment", "raw_scores": True})
    logits = post(client, "/classify", {"text": "a fine film", "model": "sentiment", "raw_scores": True})
    assert {p["label"]: p["score"] for p in raw} == pytest.approx(logits["results"][0]["scores"], abs=1e-6)


def test_truncation_follows_tei(client: TestClient) -> None:
    long = " ".join(["word"] * 200)  # over the bundles' 64 tokens
    # truncate absent or null: the server's --auto-truncate, true by default as TEI's since 1.9.0.
    for body in ({"query": QUERY, "texts": [long]}, {"query": QUERY, "texts": [long], "truncate": None}):
        assert len(post(client, "/rerank", {**body, "model": "ce"})) == 1
    assert post(client, "/predict", {"inputs": long, "model": "sentiment"})
    err = post(client, "/rerank", {"query": QUERY, "texts": [long], "model": "ce", "truncate": False}, 413)
    validate(err, "ErrorResponse")
    assert "64 tokens" in err["error"] and err["error_type"] == "Validation"
    assert "texts[0] with the query has 209 tokens" in err["error"]
    err = post(client, "/predict", {"inputs": long, "model": "sentiment", "truncate": False}, 413)
    assert "64 tokens" in err["error"] and "input 0 has 202 tokens" in err["error"]
    # A text longer than the model loses its end (right, TEI's default) or its start (left).
    text = "berlin is a city " * 3 + "the cat sat on the mat " * 20 + "paris is the capital of france"
    base = {"query": QUERY, "texts": [text], "model": "ce", "truncate": True}
    right = post(client, "/rerank", base)
    left = post(client, "/rerank", {**base, "truncation_direction": "Left"})
    assert post(client, "/rerank", {**base, "truncation_direction": "left"}) == left
    assert right[0]["score"] != left[0]["score"]  # the kept tokens differ
    assert post(client, "/rerank", {**base, "truncate": None}) == right


def test_auto_truncate_off_refuses_what_the_request_does_not_ask_to_truncate(
    serving_bundles: dict[str, Path], cross_encoder: Path
) -> None:
    models = (ModelSpec("ce", cross_encoder), ModelSpec("sentiment", serving_bundles["sentiment"]))
    long = " ".join(["word"] * 200)
    with TestClient(create_app(ServeSettings(models=models, auto_truncate=False))) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        err = post(c, "/rerank", {"query": QUERY, "texts": [long], "model": "ce"}, 413)
        assert "64 tokens" in err["error"] and err["error_type"] == "Validation"
        assert post(c, "/predict", {"inputs": long, "model": "sentiment", "truncate": None}, 413)
        assert post(c, "/predict", {"inputs": long, "model": "sentiment", "truncate": True})


def test_an_over_long_query_is_named_as_the_query(client: TestClient) -> None:
    query = " ".join(["word"] * 100)
    body = {"query": query, "texts": ["paris", "berlin"], "model": "ce", "truncate": False}
    err = post(client, "/rerank", body, 413)
    validate(err, "ErrorResponse")
    assert err["error"].startswith("the query has 100 tokens;") and "64 tokens" in err["error"]
    # A query that leaves room for some text: the text that does not fit is named, with the query.
    body = {"query": " ".join(["word"] * 40), "texts": ["paris", " ".join(["word"] * 30)], "model": "ce"}
    err = post(client, "/rerank", {**body, "truncate": False}, 413)
    assert err["error"].startswith("texts[1] with the query has 73 tokens;")
    assert len(post(client, "/rerank", body)) == 2  # truncated by default


def test_unknown_fields_are_ignored_and_named(client: TestClient) -> None:
    body = {"query": QUERY, "texts": TEXTS, "model": "ce"}
    plain = client.post("/rerank", json=body)
    extra = client.post("/rerank", json={**body, "top_n": 2, "zzz": {"a": 1}})
    assert extra.status_code == 200 and extra.json() == plain.json()
    assert extra.headers["electra-ignored-fields"] == "top_n, zzz"
    assert "electra-ignored-fields" not in plain.headers
    predict = client.post("/predict", json={"inputs": "a film", "model": "sentiment", "normalize": True})
    assert predict.status_code == 200 and predict.headers["electra-ignored-fields"] == "normalize"


@pytest.mark.parametrize("field", ["raw_scores", "return_text", "truncate"])
@pytest.mark.parametrize("value", ["true", 1, 0, "false", [True]])
def test_booleans_are_json_booleans_only(client: TestClient, field: str, value: Any) -> None:
    err = post(client, "/rerank", {"query": QUERY, "texts": TEXTS, "model": "ce", field: value}, 400)
    validate(err, "ErrorResponse")
    assert err["error_type"] == "Validation" and f"{field}: Expected `bool" in err["error"]
    if field != "return_text":
        body = {"inputs": "a film", "model": "sentiment", field: value}
        assert f"{field}: Expected `bool" in post(client, "/predict", body, 400)["error"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/rerank", {"query": QUERY, "texts": []}),
        ("/rerank", {"query": "", "texts": [""]}),
        ("/rerank", {"query": "", "texts": ["paris", ""]}),
        ("/predict", {"inputs": ""}),
        ("/predict", {"inputs": [""]}),
        ("/predict", {"inputs": ["", ""]}),
        ("/predict", {"inputs": [["a film"], [""]]}),
        ("/predict", {"inputs": []}),
    ],
)
def test_empty_inputs_answer_400_empty(client: TestClient, path: str, body: dict[str, Any]) -> None:
    model = "ce" if path == "/rerank" else "sentiment"
    err = post(client, path, {**body, "model": model}, 400)
    validate(err, "ErrorResponse")
    assert err["error_type"] == "Empty" and "empty" in err["error"], err


def test_one_empty_side_is_not_an_empty_input(client: TestClient) -> None:
    """As TEI's: a pair is empty only when both of its texts are."""
    assert len(post(client, "/rerank", {"query": "", "texts": ["paris"], "model": "ce"})) == 1
    assert len(post(client, "/rerank", {"query": QUERY, "texts": [""], "model": "ce"})) == 1
    assert post(client, "/predict", {"inputs": ["", "a film"], "model": "sentiment"})


def test_scores_are_teis_float32_and_ranked_unrounded(client: TestClient) -> None:
    import numpy as np

    texts = [*TEXTS, TEXTS[1], TEXTS[1]]
    for raw in (False, True):
        ranks = post(client, "/rerank", {"query": QUERY, "texts": texts, "model": "ce", "raw_scores": raw})
        for r in ranks:  # each score the shortest decimal of a float32, as TEI's JSON writes it
            assert repr(r["score"]) == str(np.float32(r["score"]))
        # Equal scores (the same text three times): the later first, as TEI's stable sort then reverse.
        tied = [r["index"] for r in ranks if r["index"] in (1, 4, 5)]
        assert tied == [5, 4, 1]
    for r in post(client, "/predict", {"inputs": "a fine film", "model": "sentiment"}):
        assert repr(r["score"]) == str(np.float32(r["score"]))


def test_ranking_reads_the_unrounded_scores() -> None:
    from electra.serving.engine.core import ranked
    from electra.serving.engine.rounding import as_float32, rounded

    near = [0.1234561, 0.1234564, 3e-7, 4e-7]
    assert rounded(near) == [0.123456, 0.123456, 0.0, 0.0]  # the 6-decimal answers tie them
    assert ranked(near) == [1, 0, 3, 2]
    assert as_float32(near)[2:] == [3e-7, 4e-7]  # small scores stay small, as TEI writes them
    assert ranked([0.5, 0.5, 0.5]) == [2, 1, 0]


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/rerank", {"query": QUERY, "texts": TEXTS, "model": "sentiment"}, 400, "scores 2 labels"),
        ("/rerank", {"query": QUERY, "texts": TEXTS}, 400, "several models serve /classify"),
        ("/rerank", {"query": QUERY, "texts": ["x"] * 10_000, "model": "ce"}, 413, "the limit is 16"),
        ("/rerank", {"query": "q" * 3001, "texts": TEXTS, "model": "ce"}, 413, "3,001 characters"),
        ("/rerank", {"query": QUERY, "texts": "a text", "model": "ce"}, 400, "texts"),
        ("/rerank", {"query": 5, "texts": TEXTS, "model": "ce"}, 400, "query"),
        ("/rerank", {"texts": TEXTS, "model": "ce"}, 400, "query"),
        ("/rerank", {"query": QUERY, "texts": TEXTS, "model": "ce", "truncation_direction": "up"}, 400, ""),
        ("/rerank", {"query": QUERY, "texts": TEXTS, "model": "nope"}, 404, "'nope' is not loaded"),
        ("/predict", {"inputs": ["a", "b", "c"], "model": "sentiment"}, 400, "a pair"),
        ("/predict", {"inputs": [["a", "b", "c"]], "model": "sentiment"}, 400, "inputs[0]"),
        ("/predict", {"inputs": [["a"], "b"], "model": "sentiment"}, 400, "inputs[1]"),
        ("/predict", {"inputs": [[]], "model": "sentiment"}, 400, "inputs[0]"),
        ("/predict", {"inputs": 7, "model": "sentiment"}, 400, "inputs"),
        ("/predict", {"inputs": [["x"]] * 10_000, "model": "sentiment"}, 413, "the limit is 16"),
        ("/predict", {"input": "a", "model": "sentiment"}, 400, ""),
    ],
)
def test_bad_requests_answer_4xx_in_teis_error_shape(
    client: TestClient, path: str, body: dict[str, Any], status: int, words: str
) -> None:
    err = post(client, path, body, status)
    validate(err, "ErrorResponse")
    assert words in err["error"]


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"[]", b"null", b'{"query": "q", "texts": [1]}'])
def test_malformed_bodies_answer_400_never_500(client: TestClient, raw: bytes) -> None:
    for path in ("/rerank", "/predict"):
        r = client.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (path, raw, r.text)
        validate(r.json(), "ErrorResponse")


def _fuzz_bodies(route: str) -> Any:
    from hypothesis import strategies as st

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
    fields = ["query", "texts", "truncate", "truncation_direction", "raw_scores", "return_text", "model"]
    if route == "/predict":
        fields = ["inputs", "truncate", "truncation_direction", "raw_scores", "model"]
    shaped = st.dictionaries(st.sampled_from(fields), values, max_size=len(fields)).map(
        lambda d: json.dumps(d).encode()
    )
    return st.binary(max_size=60) | values.map(lambda v: json.dumps(v).encode()) | shaped


@pytest.mark.parametrize("route", ["/rerank", "/predict"])
def test_any_body_answers_under_500_in_teis_shape(client: TestClient, route: str) -> None:
    from hypothesis import HealthCheck, given, settings

    seen: dict[int, int] = {}

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(raw=_fuzz_bodies(route))
    def fuzz(raw: bytes) -> None:
        r = client.post(route, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code < 500, (raw, r.text)
        if r.status_code >= 400:
            validate(r.json(), "ErrorResponse")
        seen[r.status_code] = seen.get(r.status_code, 0) + 1

    fuzz()
    assert seen.get(400), seen


def test_a_full_queue_is_overloaded_and_a_loading_server_unhealthy(cross_encoder: Path) -> None:
    """TEI's error_type follows the engine's error: QueueFull is Overloaded (TEI's 'model is overloaded'),
    a server still warming up is Unhealthy; both 503 with Retry-After."""
    from electra.serving.engine.errors import QueueFull

    app = create_app(ServeSettings(models=(ModelSpec("ce", cross_encoder),)))
    body = {"query": QUERY, "texts": TEXTS}
    with TestClient(app) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        engine = app.state.electra.engine
        engine.ready = False  # as before warm-up ends
        loading = c.post("/rerank", json=body)
        engine.ready = True

        async def full(*_: Any) -> Any:
            raise QueueFull("ce", 1024, 1024, 3)

        engine.batchers["ce"].submit = full
        busy = c.post("/rerank", json=body)
    assert loading.status_code == 503 and loading.json()["error_type"] == "Unhealthy", loading.text
    assert busy.status_code == 503 and busy.headers["retry-after"] == "3", busy.text
    assert busy.json()["error_type"] == "Overloaded" and "busy" in busy.json()["error"]
