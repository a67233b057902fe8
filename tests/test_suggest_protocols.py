"""Suggestions through the standard protocols, driven by their own clients against a started `electra serve`:
Open Inference Protocol v2 (tritonclient, the `suggest` parameter and its tensors) and Hugging Face's
fill-mask (huggingface_hub's InferenceClient.fill_mask), which equals transformers' FillMaskPipeline on the
generator the bundle was exported from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError
from tritonclient.utils import InferenceServerException

from electra.serving.process import ServerNotReady, free_port, serve_command, start_server

TEXTS = ["The cat sat on the mat, walking quickly.", "She loved the movie, he hated the book."]


@pytest.fixture(scope="module")
def server(
    suggest_bundle: Path, serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("suggest-protocols")
    port = free_port()
    models = ["--model", f"pair={suggest_bundle}", "--model", f"plain={serving_bundles['detector']}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    url = f"http://127.0.0.1:{port}"
    command = serve_command(*models, "--port", str(port), "--max-suggest", "10")
    with start_server(command, env, url=url, log=tmp / "server.log") as proc:
        try:
            proc.wait_ready(90)
        except ServerNotReady as e:
            pytest.fail(str(e))
        yield url


def detect(server: str, **body: Any) -> dict[str, Any]:
    r = httpx.post(server + "/detect", json={"model": "pair", **body}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def text_input(texts: list[str]) -> triton.InferInput:
    tensor = triton.InferInput("text", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object))
    return tensor


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def test_v2_suggestions_equal_detect(server: str) -> None:
    client = triton.InferenceServerClient(server.removeprefix("http://"))
    outputs = {o["name"]: o for o in client.get_model_metadata("pair")["outputs"]}
    assert (
        outputs["suggestions"]["shape"] == [-1, -1, -1] and outputs["suggested_text"]["datatype"] == "BYTES"
    )
    assert "suggestions" not in {o["name"] for o in client.get_model_metadata("plain")["outputs"]}
    parameters = {"suggest": 3, "threshold": 0.6}
    result = client.infer("pair", [text_input(TEXTS)], parameters=parameters)
    ours = detect(server, texts=TEXTS, suggest=3, threshold=0.6)["results"]
    suggestions = result.as_numpy("suggestions")
    assert suggestions.shape[:2] == result.as_numpy("scores").shape and suggestions.shape[2] == 3
    for i, r in enumerate(ours):
        assert _text(result.as_numpy("suggested_text")[i]) == r["suggested_text"]
        for j, t in enumerate(r["tokens"]):
            got = [_text(x) for x in suggestions[i, j]]
            want = [s["token"] for s in t.get("suggestions", [])]
            assert got == want + [""] * (3 - len(want))
            texts = [_text(x) for x in result.as_numpy("suggestion_texts")[i, j][: len(want)]]
            assert texts == [s["text"] for s in t.get("suggestions", [])]
            scores = result.as_numpy("suggestion_scores")[i, j][: len(want)]
            assert scores == pytest.approx([s["score"] for s in t.get("suggestions", [])], abs=1e-6)
            starts = result.as_numpy("suggestion_starts")[i, j]
            assert starts.tolist() == [s["start"] for s in t.get("suggestions", [])] + [-1] * (3 - len(want))
    # Without `suggest`, the detector's tensors only; asking for a suggestion tensor then is a 400.
    plain = client.infer("pair", [text_input(TEXTS)])
    assert plain.as_numpy("suggestions") is None
    with pytest.raises(InferenceServerException, match="needs the parameter 'suggest'"):
        client.infer("pair", [text_input(TEXTS)], outputs=[triton.InferRequestedOutput("suggestions")])
    with pytest.raises(InferenceServerException, match="has no generator"):
        client.infer("plain", [text_input(TEXTS)], parameters={"suggest": 2})


@pytest.fixture(scope="module")
def fill_mask_pipeline(suggest_bundle: Path) -> Any:
    from transformers import pipeline

    return pipeline("fill-mask", model=str(suggest_bundle.parent / "run" / "generator"), device="cpu")


def special(token: str) -> bool:
    return token.startswith("[") and token.endswith("]")


def expected(pipe: Any, text: str, k: int, **kw: Any) -> list[Any]:
    """The pipeline's answer with special tokens left out (ours never proposes them)."""
    out = pipe(text, top_k=k + 5, **kw)
    nested = isinstance(out[0], list)
    rows = [[e for e in row if not special(e["token_str"])][:k] for row in (out if nested else [out])]
    return rows if nested else rows[0]


def same(ours: list[Any], theirs: list[dict[str, Any]]) -> None:
    assert [e.token for e in ours] == [e["token"] for e in theirs]
    assert [e.token_str for e in ours] == [e["token_str"] for e in theirs]
    assert [e.score for e in ours] == pytest.approx([e["score"] for e in theirs], abs=1e-5)


def test_fill_mask_equals_the_transformers_pipeline(server: str, fill_mask_pipeline: Any) -> None:
    client = InferenceClient()
    one = "The cat sat on the [MASK]."
    got = client.fill_mask(one, model=f"{server}/hf/pair")
    same(got, expected(fill_mask_pipeline, one, 5))
    for e in got:  # the caller's text with the proposal in place of [MASK] (a piece joins the word before)
        piece = e.token_str.startswith("##")
        mask = " [MASK]" if piece else "[MASK]"
        assert e.sequence == one.replace(mask, e.token_str.removeprefix("##"))
    two = "The [MASK] sat on the [MASK]."
    got2 = client.fill_mask(two, model=f"{server}/hf/pair", top_k=3)
    theirs = expected(fill_mask_pipeline, two, 3)
    assert len(got2) == 2
    for ours_row, their_row in zip(got2, theirs, strict=True):
        same(ours_row, their_row)
    targets = ["dog", "river", "paris"]
    same(
        client.fill_mask(one, model=f"{server}/hf/pair", targets=targets),
        expected(fill_mask_pipeline, one, 5, targets=targets),
    )


def test_fill_mask_without_a_mask_fills_the_flagged_tokens(server: str) -> None:
    r = httpx.post(f"{server}/hf/pair", json={"inputs": TEXTS, "parameters": {"top_k": 2}}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    ours = detect(server, texts=TEXTS, suggest=2, threshold=0.5)["results"]
    for per_text, result in zip(body, ours, strict=True):
        flagged = [t for t in result["tokens"] if t["replaced"]]
        rows = per_text if len(flagged) != 1 else [per_text]
        assert len(rows) == len(flagged)
        for row, t in zip(rows, flagged, strict=True):
            assert [e["token_str"] for e in row] == [s["token"] for s in t["suggestions"]]
            text = TEXTS[ours.index(result)]
            applied = [text[: s["start"]] + s["text"] + text[s["end"] :] for s in t["suggestions"]]
            assert [e["sequence"] for e in row] == applied


def test_token_classification_still_answers_on_a_detector_with_a_generator(server: str) -> None:
    client = InferenceClient()
    entities = client.token_classification(TEXTS[0], model=f"{server}/hf/pair")
    assert all(e.entity_group == "replaced" for e in entities)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"inputs": "a [MASK]", "parameters": {"top_k": 2, "aggregation_strategy": "first"}}, "another task"),
        ({"inputs": "a [MASK]", "parameters": {"top_k": 11}}, "--max-suggest"),
        ({"inputs": "a [MASK]", "parameters": {"top_k": 0}}, "top_k"),
        ({"inputs": "a [MASK]", "parameters": {"top_k": -1}}, "top_k"),
        ({"inputs": "a [MASK]", "parameters": {"top_k": 1.5}}, "top_k"),
        ({"inputs": "a [MASK]", "parameters": {"top_k": 10**30}}, "--max-suggest"),
        # Every proposal repeats the text: 2,000 masks x 10 x 14,000 characters would answer 280M of them.
        ({"inputs": "[MASK] " * 2000, "parameters": {"top_k": 10}}, "characters of 'sequence'"),
        ({"inputs": "a [MASK]", "parameters": {"targets": ["   "]}}, "targets"),
        ({"inputs": {"text": "a [MASK]", "text_pair": "b"}}, "not pairs"),
    ],
)
def test_fill_mask_errors(server: str, body: dict[str, Any], says: str) -> None:
    r = httpx.post(f"{server}/hf/pair", json=body, timeout=30)
    assert 400 <= r.status_code < 500 and says in r.json()["error"], r.text


@pytest.mark.parametrize(
    ("suggest", "status", "says"),
    [(-1, 400, "suggest"), (2.5, 400, "suggest"), ("2", 400, "suggest"), (10**30, 413, "--max-suggest")],
)
def test_v2_bad_suggest_is_a_clear_4xx(server: str, suggest: Any, status: int, says: str) -> None:
    body = {
        "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": [TEXTS[0]]}],
        "parameters": {"suggest": suggest},
    }
    r = httpx.post(f"{server}/v2/models/pair/infer", json=body, timeout=30)
    assert r.status_code == status and says in r.json()["error"], r.text


def test_fill_mask_on_a_detector_without_a_generator(server: str) -> None:
    with pytest.raises(HfHubHTTPError, match="exported with its generator"):
        InferenceClient().fill_mask("a [MASK]", model=f"{server}/hf/plain", top_k=2)
