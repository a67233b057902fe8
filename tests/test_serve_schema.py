"""The HTTP API fuzzed from its own OpenAPI schema with schemathesis: whatever arrives, never a 5xx, never
slow, and never a lasting cost in memory.

The app runs in-process through schemathesis' ASGI transport, which runs the app's lifespan (batchers,
warm-up) once per app; every test waits for /health/ready first, so the generated requests reach the models
instead of meeting 503 "still loading". Three kinds of cases per inference operation:

- positive: bodies that fit the schema (most answer 400: the schema cannot say "exactly one of text/texts");
- negative: bodies that break the schema (wrong types, missing fields, garbage);
- repaired: positive bodies made acceptable (known fields only, one of text/texts, a loaded model), so the
  generated strings (any Unicode) reach tokenization, batching, inference and post-processing and answer 200.

Every response is also checked against the schema (documented status code, body schema). Every request is
timed (at most ANSWER_S) and the process's resident memory is read after each test against the first
reading (at most RSS_GROWTH_MB more): a status code alone says nothing of an input whose work is out of
proportion to its size, which is why repaired texts (and pairs) run up to the app's --max-chars.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis (a dev extra) drives this test")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.python import asgi as st_asgi  # noqa: E402

from electra.serving.http.app import create_app  # noqa: E402
from electra.serving.settings import ModelSpec, ServeSettings  # noqa: E402
from tests.conftest import SERVING_TAGS  # noqa: E402

pytestmark = pytest.mark.slow

SCHEMA_PATH = "/schema/openapi.json"
MAX_EXAMPLES = 60
READY_TIMEOUT_S = 60.0
KEY = "schema-fuzz-key-0123456789abcdef"
OPERATIONS = [
    ("POST", "/detect"),
    ("POST", "/classify"),
    ("POST", "/tag"),
    ("GET", "/models"),
    ("GET", "/health/live"),
    ("GET", "/health/ready"),
    ("GET", "/metrics"),
    ("GET", "/v2"),
    ("GET", "/v2/health/live"),
    ("GET", "/v2/health/ready"),
    ("GET", "/v2/models/{name}"),
    ("GET", "/v2/models/{name}/versions/{version}"),
    ("GET", "/v2/models/{name}/ready"),
    ("GET", "/v2/models/{name}/versions/{version}/ready"),
    ("GET", "/v2/models/{name}/config"),
    ("GET", "/v2/models/{name}/versions/{version}/config"),
    ("GET", "/v2/models/{name}/stats"),
    ("GET", "/v2/models/{name}/versions/{version}/stats"),
    ("GET", "/v2/models/stats"),
    ("POST", "/v2/models/{name}/infer"),
    ("POST", "/v2/models/{name}/versions/{version}/infer"),
    ("POST", "/hf/{name}"),
    ("POST", "/hf/{name}/pipeline/feature-extraction"),
    ("POST", "/rerank"),
    ("POST", "/predict"),
    ("POST", "/embed"),
]
V2_INFER = {"/v2/models/{name}/infer", "/v2/models/{name}/versions/{version}/infer"}
FEATURE_EXTRACTION = "/hf/{name}/pipeline/feature-extraction"
WITH_BODY = {
    "/detect",
    "/classify",
    "/tag",
    "/hf/{name}",
    FEATURE_EXTRACTION,
    "/rerank",
    "/predict",
    "/embed",
    *V2_INFER,
}
NEEDS_KEY = {
    "/detect",
    "/classify",
    "/tag",
    "/models",
    "/v2",
    "/v2/models/{name}",
    "/v2/models/{name}/versions/{version}",
    "/v2/models/{name}/config",
    "/v2/models/{name}/versions/{version}/config",
    "/v2/models/{name}/stats",
    "/v2/models/{name}/versions/{version}/stats",
    "/v2/models/stats",
    "/hf/{name}",
    FEATURE_EXTRACTION,
    "/rerank",
    "/predict",
    "/embed",
    *V2_INFER,
}
# GET routes that name a model: generated names are mostly not loaded.
NAMES_A_MODEL = {p for m, p in OPERATIONS if m == "GET" and "{name}" in p}
BATCH_FIELDS = ("text", "texts", "inputs")
DETECT_FIELDS = {*BATCH_FIELDS, "threshold", "level", "model", "truncate", "stride"}
CLASSIFY_FIELDS = {"text", "text_pair", "texts", "inputs", "model", "truncate"}
TAG_FIELDS = {
    "text",
    "texts",
    "inputs",
    "model",
    "aggregation_strategy",
    "ignore_labels",
    "truncate",
    "stride",
}
RERANK_FIELDS = {"query", "texts", "truncate", "truncation_direction", "raw_scores", "return_text"}
PREDICT_FIELDS = {"inputs", "truncate", "truncation_direction", "raw_scores"}
EMBED_FIELDS = {"inputs", "normalize", "truncate", "truncation_direction"}
# The apps' limit of characters per text; repaired texts run up to it, a pair's two sides both (the kind of
# input whose truncation was once quadratic: 30 s for a pair of this size at 64 tokens).
MAX_CHARS = 20_000
# Generous on purpose (a loaded 2-core machine runs about 2x slower; the slowest legitimate request here, 8
# texts of MAX_CHARS through windows, takes well under a second): a bound that tells bounded work from
# work out of proportion to the input, not a speed target (bench/ measures speed).
ANSWER_S = 5.0
# The process's resident memory over the module, after its first reading once an app is ready: generous
# (hypothesis, schemathesis and a second app hold memory of their own), where the quadratic truncation once
# grew it by gigabytes in a few requests.
RSS_GROWTH_MB = 250.0
# Words of the fixture vocabulary (some split into pieces: cats, parking, movies), accents, punctuation; up to
# 80 of them, so some texts are over the bundles' 64 tokens (truncation, or 413 with truncate=false).
VOCAB = (
    *("the", "cat", "cats", "sat", "on", "mat", "quick", "brown", "fox", "parking", "movies"),
    *("café", "naïve", "über", "new", "york", ",", ".", "!", "日本語"),
)
WORDS = st.lists(st.sampled_from(VOCAB), max_size=80).map(" ".join)
# How many times a repaired text repeats its words: mostly once, sometimes up to MAX_CHARS.
REPEATS = st.sampled_from([1, 1, 1, 10, 1_000])


def rss_mb() -> float:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(found.group(1)) / 1024 if found else 0.0


_FIRST_RSS: list[float] = []


def check_rss() -> None:
    """This process's RSS against its first reading in the module (taken once an app is ready)."""
    now = rss_mb()
    if not _FIRST_RSS:
        _FIRST_RSS.append(now)
    grown = now - _FIRST_RSS[0]
    assert grown < RSS_GROWTH_MB, f"the process's RSS grew by {grown:.0f} MB since the first fuzzing test"


def timed_call(case: Any, **kwargs: Any) -> Any:
    """`case.call(...)`, which must answer within ANSWER_S."""
    start = time.perf_counter()
    response = case.call(**kwargs)
    seconds = time.perf_counter() - start
    assert seconds < ANSWER_S, f"{case.method} {case.path} took {seconds:.1f} s: {str(case.body)[:300]}"
    return response


def fuzz_settings(max_examples: int = MAX_EXAMPLES) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        print_blob=True,
    )


def ready(schema: Any) -> Any:
    """`schema`, once its app is ready: warm-up done, so generated requests reach the models.

    The ASGI transport starts the app's lifespan on first use, and schemathesis' pytest plugin ends it when
    each test ends, so every test starts the app afresh and must wait for its warm-up again.
    """
    deadline = time.monotonic() + READY_TIMEOUT_S
    with st_asgi.get_client(schema.app) as client:
        while (answer := client.get("/health/ready")).status_code != 200:
            assert answer.status_code == 503 and answer.json()["status"] == "loading", answer.text
            assert time.monotonic() < deadline, "the app never became ready"
            time.sleep(0.02)
    return schema


def stop_lifespans() -> None:
    # Normally done by schemathesis' pytest plugin after each test; this covers runs with it disabled.
    stop = getattr(st_asgi, "shutdown_lifespans", None)
    if stop is not None:
        stop()


@pytest.fixture(scope="module")
def api(serving_bundles: dict[str, Path]) -> Iterator[Any]:
    models = tuple(
        ModelSpec(name, serving_bundles[name]) for name in ("detector", "sentiment", "score", "tagger")
    )
    app = create_app(ServeSettings(models=models, max_texts=8, max_chars=MAX_CHARS))
    try:
        yield schemathesis.openapi.from_asgi(SCHEMA_PATH, app)
    finally:
        stop_lifespans()


@pytest.fixture(scope="module")
def keyed_api(serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"# fuzzing key\n{KEY}\n", encoding="utf-8")
    models = tuple(ModelSpec(name, serving_bundles[name]) for name in ("detector", "sentiment", "tagger"))
    app = create_app(ServeSettings(models=models, max_texts=8, max_chars=MAX_CHARS, api_key_file=keys))
    try:
        yield schemathesis.openapi.from_asgi(SCHEMA_PATH, app)
    finally:
        stop_lifespans()


def validate(case: Any, response: Any) -> None:
    """No 5xx; a documented status code; a body that matches its documented schema."""
    case.validate_response(
        response,
        checks=[
            st_checks.not_a_server_error,
            st_checks.status_code_conformance,
            st_checks.response_schema_conformance,
        ],
    )


def operation(schema: Any, method: str, path: str) -> Any:
    return schema[path][method]


# --------------------------------------------------------------------------------------------------------
# The schema itself
# --------------------------------------------------------------------------------------------------------


def test_schema_is_valid_openapi_3_1(api: Any) -> None:
    raw = api.raw_schema
    assert str(raw["openapi"]).startswith("3.1"), raw["openapi"]
    api.validate()  # schemathesis' own meta-schema validation (jsonschema-rs); raises on an invalid schema
    try:
        from openapi_spec_validator import OpenAPIV31SpecValidator, validate
    except ImportError:
        pass
    else:
        validate(raw, cls=OpenAPIV31SpecValidator)
    documented = {(method.upper(), path) for path, item in raw["paths"].items() for method in item}
    for method, path in OPERATIONS:
        assert (method, path) in documented, f"{method} {path} is not in the schema: {sorted(documented)}"
    for path in sorted(WITH_BODY):
        body = raw["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        assert "application/json" in body["content"]
        assert "200" in raw["paths"][path]["post"]["responses"]


def test_every_documented_operation_is_fuzzed(api: Any) -> None:
    found = {(result.ok().method.upper(), result.ok().path) for result in api.get_all_operations()}
    assert found == set(OPERATIONS), "a new endpoint: add it to OPERATIONS so it is fuzzed too"


def test_schema_says_unknown_fields_are_rejected(api: Any) -> None:
    components = api.raw_schema["components"]["schemas"]
    for name in ("DetectRequest", "ClassifyRequest", "PairInput", "TagRequest"):
        assert components[name].get("additionalProperties") is False, name


# --------------------------------------------------------------------------------------------------------
# Generated requests: never a 5xx
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_never_answer_5xx(api: Any, method: str, path: str) -> None:
    op = operation(ready(api), method, path)
    seen: Counter[int] = Counter()
    modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if path in WITH_BODY else [])
    for mode in modes:

        @fuzz_settings(MAX_EXAMPLES if path in WITH_BODY else 5)
        @given(case=op.as_strategy(mode))
        def run(case: Any) -> None:
            response = timed_call(case)
            seen[response.status_code] += 1
            validate(case, response)

        run()
    check_rss()
    assert seen, "no case was generated"
    assert not [code for code in seen if code >= 500], seen
    if path in NAMES_A_MODEL:
        assert set(seen) <= {200, 404}, seen
    elif path not in WITH_BODY:
        assert set(seen) == {200}, seen  # ready (warm-up done), and no key is configured


def _one_batch(out: dict[str, Any], keep_list: bool, default: Any) -> dict[str, Any]:
    """Exactly one of text / texts / inputs: the first list given (keep_list) or the text, else `default`."""
    given = [k for k in BATCH_FIELDS if out.get(k) is not None]
    keep = next((k for k in given if k != "text"), None) if keep_list else None
    keep = keep or (given[0] if given else None)
    for k in BATCH_FIELDS:
        if k != keep:
            out.pop(k, None)
    if keep is None:
        out["text"] = default
    return out


def _detect_body(
    body: Any, model: str | None, keep_list: bool, fields: set[str] = DETECT_FIELDS
) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k in fields} if isinstance(body, dict) else {}
    out.pop("model", None)
    if model is not None:
        out["model"] = model
    return _one_batch(out, keep_list, "the cat sat on the mat")


def _classify_body(body: Any, model: str, keep_list: bool) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k in CLASSIFY_FIELDS} if isinstance(body, dict) else {}
    out["model"] = model
    out = _one_batch(out, keep_list, "good movie")
    for name in ("texts", "inputs"):
        if isinstance(out.get(name), list):
            out[name] = [
                {k: v for k, v in item.items() if k in ("text", "text_pair")}
                if isinstance(item, dict)
                else item
                for item in out[name]
            ]
    if "text" not in out:
        out.pop("text_pair", None)
    return out


def _rerank_body(body: Any, model: str, keep_list: bool) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k in RERANK_FIELDS} if isinstance(body, dict) else {}
    out["model"] = model
    if not isinstance(out.get("query"), str):
        out["query"] = "the cat"
    if not isinstance(out.get("texts"), list) or not out["texts"]:
        out["texts"] = ["good movie", "the cat sat on the mat"]
    return out


def _predict_body(body: Any, model: str, keep_list: bool) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k in PREDICT_FIELDS} if isinstance(body, dict) else {}
    out["model"] = model
    if not isinstance(out.get("inputs"), str | list) or out["inputs"] == []:
        out["inputs"] = ["good movie", "the cat"] if keep_list else "good movie"
    return out


def _embed_body(body: Any, model: str, keep_list: bool) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k in EMBED_FIELDS} if isinstance(body, dict) else {}
    out["model"] = model
    inputs = out.get("inputs")
    if not isinstance(inputs, str | list) or inputs == [] or not all(isinstance(x, str) for x in inputs):
        out["inputs"] = ["good movie", "the cat"] if keep_list else "good movie"
    return out


def _with_words(body: dict[str, Any], words: str, repeats: int = 1) -> dict[str, Any]:
    """Vocabulary words in front of every generated text (and pair), so real tokens, word pieces and
    truncation occur; `repeats` of them, up to MAX_CHARS, so long texts and long pairs occur too."""
    if not words:
        return body

    def longer(text: Any) -> Any:
        return (f"{words} " * repeats + text)[:MAX_CHARS] if isinstance(text, str) else text

    for key in ("text", "text_pair", "query"):
        if key in body:
            body[key] = longer(body[key])
    for key in ("texts", "inputs"):
        items = body.get(key)
        if isinstance(items, str):
            body[key] = longer(items)
        elif isinstance(items, list):
            body[key] = [
                {k: longer(v) for k, v in item.items()}
                if isinstance(item, dict)
                else [longer(x) for x in item]
                if isinstance(item, list)
                else longer(item)
                for item in items
            ]
    return body


def _inputs(body: dict[str, Any]) -> list[str]:
    for key in ("texts", "inputs"):
        if body.get(key) is not None:
            return [item["text"] if isinstance(item, dict) else item for item in body[key]]
    return [body["text"]]


def _check_detect(body: dict[str, Any], answer: dict[str, Any]) -> None:
    texts = _inputs(body)
    assert answer["model"] == "detector"
    assert len(answer["results"]) == len(texts)
    threshold = body.get("threshold", 0.5)
    for text, result in zip(texts, answer["results"], strict=True):
        last_start = 0
        for token in result["tokens"]:
            start, end = token["start"], token["end"]
            assert 0 <= start <= end <= len(text), (text, token)
            assert start >= last_start, (text, result["tokens"])
            last_start = start
            assert token["text"] == text[start:end], (text, token)
            assert 0.0 <= token["score"] <= 1.0
            assert token["replaced"] == (token["score"] >= threshold)
        n = len(result["tokens"])
        replaced = sum(t["replaced"] for t in result["tokens"])
        assert math.isclose(
            result["replaced_fraction"], replaced / n if n else 0.0, abs_tol=1e-6
        )  # rounded to 6 decimals


def _check_classify(body: dict[str, Any], answer: dict[str, Any]) -> None:
    assert answer["model"] == body["model"]
    assert len(answer["results"]) == len(_inputs(body))
    for result in answer["results"]:
        if body["model"] == "score":
            assert math.isfinite(result["score"])
        else:
            assert set(result["scores"]) == {"negative", "positive"}
            assert math.isclose(sum(result["scores"].values()), 1.0, abs_tol=1e-6)
            assert result["label"] == max(result["scores"], key=result["scores"].get)


def _tag_body(body: Any, model: str | None, keep_list: bool) -> dict[str, Any]:
    return _detect_body(body, model, keep_list, TAG_FIELDS)


def _check_tag(body: dict[str, Any], answer: dict[str, Any]) -> None:
    texts = _inputs(body)
    aggregation = body.get("aggregation_strategy", "simple")
    ignored = set(body.get("ignore_labels", ["O"]))
    assert answer["model"] == "tagger"
    assert len(answer["results"]) == len(texts)
    for text, result in zip(texts, answer["results"], strict=True):
        assert result["windows"] >= 1 and result["truncated"] in (True, False)
        last_end = 0
        for entity in result["entities"]:
            start, end = entity["start"], entity["end"]
            assert last_end <= start <= end <= len(text), (text, result["entities"])
            last_end = start if aggregation == "none" else end  # groups never overlap
            assert entity["text"] == text[start:end], (text, entity)
            assert 0.0 < entity["score"] <= 1.0 + 1e-9
            assert entity["label"] not in ignored
            assert ("index" in entity) == (aggregation == "none")
            if aggregation == "none":
                assert entity["label"] in SERVING_TAGS.values()
            else:
                assert entity["label"] in {"O", "PER", "LOC", "ORG"}


def _check_rerank(body: dict[str, Any], answer: list[dict[str, Any]]) -> None:
    assert sorted(r["index"] for r in answer) == list(range(len(body["texts"])))
    scores = [r["score"] for r in answer]
    assert scores == sorted(scores, reverse=True)
    if body.get("return_text"):
        assert all(r["text"] == body["texts"][r["index"]] for r in answer)


def _check_predict(body: dict[str, Any], answer: list[Any]) -> None:
    inputs = body["inputs"]
    single = isinstance(inputs, str) or isinstance(inputs[0], str)
    rows = [answer] if single else answer
    assert single or len(rows) == len(inputs)
    labels = {"sentiment": {"negative", "positive"}, "score": {"score"}}[body["model"]]
    for row in rows:
        assert {p["label"] for p in row} == labels
        assert [p["score"] for p in row] == sorted((p["score"] for p in row), reverse=True)


def _check_embed(body: dict[str, Any], answer: list[list[float]]) -> None:
    inputs = body["inputs"]
    assert len(answer) == (1 if isinstance(inputs, str) else len(inputs))
    assert {len(vector) for vector in answer} == {64}  # the tiny models' hidden size
    if body.get("normalize", True):
        assert all(math.isclose(math.hypot(*vector), 1.0, abs_tol=1e-5) for vector in answer)


REPAIRS: dict[str, tuple[Callable[..., dict[str, Any]], list[str | None], Callable[..., None]]] = {
    "/detect": (_detect_body, [None, "detector"], _check_detect),
    "/classify": (_classify_body, ["sentiment", "score"], _check_classify),
    "/tag": (_tag_body, [None, "tagger"], _check_tag),
    "/rerank": (_rerank_body, ["score"], _check_rerank),
    "/predict": (_predict_body, ["sentiment", "score"], _check_predict),
    "/embed": (_embed_body, ["detector", "sentiment", "tagger"], _check_embed),
}


@pytest.mark.parametrize("path", sorted(REPAIRS))
def test_repaired_generated_requests_reach_the_model(api: Any, path: str) -> None:
    """Generated text (any Unicode) through the whole pipeline: 200 with consistent offsets, or a 4xx."""
    repair, models, check = REPAIRS[path]
    op = operation(ready(api), "POST", path)
    seen: Counter[int] = Counter()

    @fuzz_settings()
    @given(
        case=op.as_strategy(),
        model=st.sampled_from(models),
        keep_list=st.booleans(),
        words=WORDS,
        repeats=REPEATS,
    )
    def run(case: Any, model: str | None, keep_list: bool, words: str, repeats: int) -> None:
        case.body = _with_words(repair(case.body, model, keep_list), words, repeats)
        response = timed_call(case)
        seen[response.status_code] += 1
        validate(case, response)
        if response.status_code == 200:
            check(case.body, response.json())

    run()
    check_rss()
    assert not [code for code in seen if code >= 500], seen
    # The app was ready: the repaired requests were answered by the models, not with 503.
    assert seen[200] >= MAX_EXAMPLES // 4, seen
    assert seen[503] == 0, seen


# --------------------------------------------------------------------------------------------------------
# With API keys: generated requests without the key are 401, never 5xx; the open endpoints stay open
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_without_the_key(keyed_api: Any, method: str, path: str) -> None:
    op = operation(ready(keyed_api), method, path)
    seen: Counter[int] = Counter()
    modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if path in WITH_BODY else [])
    for mode in modes:

        @fuzz_settings(MAX_EXAMPLES // 2 if path in WITH_BODY else 3)
        @given(case=op.as_strategy(mode), wrong_key=st.sampled_from([None, "Bearer nope", f"Basic {KEY}"]))
        def run(case: Any, wrong_key: str | None) -> None:
            headers = {"Authorization": wrong_key} if wrong_key is not None else None
            response = timed_call(case, headers=headers)
            seen[response.status_code] += 1
            validate(case, response)
            if path in NEEDS_KEY:
                assert response.status_code == 401, (case.body, response.status_code, response.text)
                # schemathesis' Response: lower-cased header names, each with a list of values.
                challenge = response.headers.get("www-authenticate", [""])[0]
                assert challenge.lower().startswith("bearer"), response.headers

        run()
    if path in NEEDS_KEY:
        assert set(seen) == {401}, seen
    else:
        assert set(seen) <= ({200, 404} if path in NAMES_A_MODEL else {200}) and seen, seen


def test_the_key_opens_what_it_guards(keyed_api: Any) -> None:
    """The 401s above come from the key check, not from something else: with the key, the routes answer."""
    with st_asgi.get_client(ready(keyed_api).app) as client:
        auth = {"Authorization": f"Bearer {KEY}"}
        assert client.get("/models", headers=auth).status_code == 200
        detect = client.post("/detect", json={"text": "the cat sat"}, headers=auth)
        assert detect.status_code == 200, detect.text
        classify = client.post("/classify", json={"text": "good movie"}, headers=auth)
        assert classify.status_code == 200, classify.text
        tag = client.post("/tag", json={"text": "the cat sat in paris"}, headers=auth)
        assert tag.status_code == 200, tag.text
        assert client.post("/detect", json={"text": "the cat sat"}).status_code == 401
