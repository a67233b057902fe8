"""Requests that once made the server work, or answer, out of proportion to their size: each is now refused
with a 4xx before the work, or served at a cost linear in its size.

- v2 shapes: the dimensions a client sends were multiplied before anything else was checked (a shape of a
  few hundred 18-digit dimensions made a product too long to print: a 500);
- v2 answers: every text's tensors are padded to the longest text (and to k suggestions), so one long text
  beside many short ones made tensors of texts x longest x k elements (gigabytes from 50 kB);
- /detect `suggest`: flagged tokens x suggest suggestions, with every token flagged at threshold 0;
- fill-mask `targets`: any number of words, each tokenized;
- combining marks after many tokens, and JSON nested just short of the recursion limit.

Where the limit is a constant of the server, the tests lower it (monkeypatch) so that small requests cross
it; the constants' values are the server's choice, what is tested is that crossing one is a 4xx before the
work. CPU bounds here are generous on purpose (tests/test_truncation.py says why): they tell a linear cost
from a quadratic one, not a fast machine from a slow one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from electra.serving.engine import core
from electra.serving.engine.postprocess import with_marks
from electra.serving.http import protocols
from electra.serving.http.app import create_app
from electra.serving.http.json_body import MalformedBody, decode
from electra.serving.http.middleware.content_encoding import MAX_MEMBERS
from electra.serving.http.open_inference import MAX_DIMS
from electra.serving.settings import ModelSpec, ServeSettings
from tests.test_serving import wait_ready


@pytest.fixture(scope="module")
def client(suggest_bundle: Path, serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    models = (
        ModelSpec("pair", suggest_bundle),
        ModelSpec("tagger", serving_bundles["tagger"]),
    )
    with TestClient(create_app(ServeSettings(models=models))) as c:
        wait_ready(c)
        yield c


def v2(
    client: TestClient, model: str, texts: list[str], shape: list[int] | None = None, **parameters: Any
) -> Any:
    body: dict[str, Any] = {
        "inputs": [{"name": "text", "shape": shape or [len(texts)], "datatype": "BYTES", "data": texts}]
    }
    if parameters:
        body["parameters"] = parameters
    return client.post(f"/v2/models/{model}/infer", json=body)


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ([10**18] * 240, "dimensions"),  # its product has 4,320 digits: printing it raised (a 500)
        ([1] * 9, "dimensions"),
        ([2**64 - 1, 2**64 - 1, 0], "more elements than the body"),
        ([1, 10**30], "more elements than the body"),
        ([-(10**30)], "negative"),
    ],
)
def test_v2_shapes_are_checked_before_their_dimensions_are_multiplied(
    client: TestClient, shape: list[int], says: str
) -> None:
    r = v2(client, "pair", ["the cat"], shape=shape)
    assert r.status_code == 400 and says in r.json()["error"], r.text


def generator_inputs() -> float:
    return REGISTRY.get_sample_value("electra_inputs_processed_total", {"model": "pair/generator"}) or 0.0


def test_v2_answers_padded_past_the_limit_are_refused(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nine one-word texts beside one of about 80 tokens: 10 x 80 padded elements a tensor."""
    texts = ["the cat sat on the mat " * 13, *["cat"] * 9]
    for model in ("pair", "tagger"):
        assert v2(client, model, texts).status_code == 200
    monkeypatch.setattr(protocols, "MAX_TENSOR_ELEMENTS", 500)
    for model in ("pair", "tagger"):
        r = v2(client, model, texts)
        assert r.status_code == 413 and "send long texts in requests of their own" in r.json()["error"], (
            r.text
        )
    # With suggestions each token's are padded to k: 10 texts x 3 tokens fit, x 20 suggestions do not.
    short = ["the cat sat", *["cat"] * 9]
    assert v2(client, "pair", short, suggest=2, threshold=0.0).status_code == 200
    r = v2(client, "pair", short, suggest=20, threshold=0.0)
    assert r.status_code == 413 and "20 suggestions" in r.json()["error"], r.text


def test_detect_suggestions_past_the_limit_are_refused_before_the_generator_runs(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "MAX_SUGGESTIONS", 50)
    text = "the cat sat on the mat " * 5  # 30 tokens, every one flagged at threshold 0
    body = {"model": "pair", "text": text, "threshold": 0.0}
    assert client.post("/detect", json={**body, "suggest": 1}).status_code == 200
    before = generator_inputs()
    r = client.post("/detect", json={**body, "suggest": 2})
    assert r.status_code == 413 and "60 suggestions" in r.json()["detail"], r.text
    assert generator_inputs() == before


def test_fill_mask_targets_are_bounded(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "MAX_TARGETS", 5)
    words = ["cat", "mat", "sat", "the", "on", "fox"]
    ok = client.post("/hf/pair", json={"inputs": "the [MASK] sat", "parameters": {"targets": words[:5]}})
    assert ok.status_code == 200, ok.text
    r = client.post("/hf/pair", json={"inputs": "the [MASK] sat", "parameters": {"targets": words}})
    assert r.status_code == 413 and "'targets' holds 6 words" in r.json()["error"], r.text


def test_a_word_with_no_room_in_any_window_still_gets_its_suggestions(client: TestClient) -> None:
    """At stride 0 windows do not overlap, so a word of several pieces across a window's edge has no window
    that holds it whole; it was given none, and the request failed."""
    # 62-token windows; "parking" is two pieces, five tokens a repeat: the word at 123-124 crosses the edge
    # between the second window and the third.
    text = "a b c parking " * 60
    body = {"model": "pair", "text": text, "level": "word", "stride": 0, "threshold": 0.0, "suggest": 1}
    r = client.post("/detect", json=body)
    assert r.status_code == 200, r.text
    result = r.json()["results"][0]
    assert result["windows"] > 1 and all(t.get("suggestions") for t in result["tokens"])


def test_marks_after_many_tokens_cost_linear_time() -> None:
    """Each token followed by a combining mark searched every token's start for the next one: 50,000 such
    tokens took minutes. Bound: 2 s of this thread's CPU, generous."""
    n = 50_000
    text = ",\u0301" * n
    start = time.thread_time()
    out = with_marks(text, [(2 * i, 2 * i + 1) for i in range(n)])
    assert time.thread_time() - start < 2.0
    assert out[0] == (0, 2) and out[-1] == (2 * n - 2, 2 * n)


def test_json_nested_near_the_recursion_limit_is_malformed() -> None:
    """msgspec decodes nesting up to the recursion limit and calls an unfinished body truncated; the standard
    library's decoder, asked why, recursed further per level and raised RecursionError (a 500) for bodies a
    little less deep than the limit, wherever on the stack the request was decoded."""

    def at_depth(frames: int, nesting: int) -> str:
        if frames:
            return at_depth(frames - 1, nesting)
        try:
            decode(b"[" * nesting)
        except MalformedBody as e:
            return str(e)
        return "decoded"

    limit = sys.getrecursionlimit()
    for frames in range(0, 60, 3):
        for nesting in range(limit - 220, limit, 2):
            assert at_depth(frames, nesting) != "decoded"  # MalformedBody, or RecursionError fails the test


def test_the_docs_state_the_limits() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "serving.md").read_text(encoding="utf-8")
    text = " ".join(text.split())
    for stated in (
        f"more than {core.MAX_SUGGESTIONS:,} suggestions",
        f"more than {protocols.MAX_TENSOR_ELEMENTS:,} elements",
        f"more than {core.MAX_TARGETS:,} fill-mask",
        f"more than {MAX_MEMBERS} gzip members",
        f"more than {MAX_DIMS} dimensions",
    ):
        assert stated in text, stated
