"""The standard protocols, driven by their own clients against a started `electra serve`:
tritonclient.http (Open Inference Protocol v2, binary and JSON tensors) and huggingface_hub's
InferenceClient (text-classification, token-classification). Answers equal our own routes'; the Hugging
Face shapes equal transformers' own pipelines' post-processing on the same logits."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import struct
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

from electra.serving.engine.tagging import DETECTOR_LABELS, entities
from electra.serving.http.hf_tasks import hf_entity
from electra.serving.process import ServerNotReady, free_port, serve_command, start_server
from tests.test_long_documents import document
from tests.test_tagging_serving import pipeline

KEY = "protocols-key-0123456789abcdef"
TEXTS = ["The cat sat on the mat.", "New York is a city, the quick brown fox", "café naïve"]


@contextlib.contextmanager
def protocol_server(serving_bundles: dict[str, Path], tmp: Path) -> Iterator[str]:
    """`electra serve` with the detector, the two classifiers and the tagger behind an API key and
    --max-texts 16: its URL while it runs."""
    keys = tmp / "keys.txt"
    keys.write_text(KEY + "\n", encoding="utf-8")
    port = free_port()
    models = [
        arg
        for name in ("detector", "sentiment", "score", "tagger")
        for arg in ("--model", f"{name}={serving_bundles[name]}")
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    url = f"http://127.0.0.1:{port}"
    with start_server(
        serve_command(*models, "--port", str(port), "--api-key-file", str(keys), "--max-texts", "16"),
        env,
        url=url,
        log=tmp / "server.log",
    ) as proc:
        try:
            proc.wait_ready(90)
        except ServerNotReady as e:
            pytest.fail(str(e))
        yield url


@pytest.fixture(scope="module")
def server(serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with protocol_server(serving_bundles, tmp_path_factory.mktemp("protocols")) as url:
        yield url


def auth() -> dict[str, str]:
    # A new dict per call: tritonclient adds its own headers to the dict it is given.
    return {"Authorization": f"Bearer {KEY}"}


def ours(server: str, route: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(server + route, json=body, headers=auth(), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def client(server: str) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(server.removeprefix("http://"))


def text_input(texts: list[str], name: str = "text", binary: bool = True) -> triton.InferInput:
    tensor = triton.InferInput(name, [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object), binary_data=binary)
    return tensor


# ----------------------------------------------------------------------------------------------------------
# Open Inference Protocol v2 with tritonclient
# ----------------------------------------------------------------------------------------------------------


def test_v2_health_and_metadata(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("detector") and client.is_model_ready("sentiment", "1")
    assert not client.is_model_ready("nope")
    server = client.get_server_metadata(headers=auth())
    assert server["name"] == "electra"
    assert {"binary_tensor_data", "classification", "model_configuration", "statistics"} <= set(
        server["extensions"]
    )
    meta = client.get_model_metadata("sentiment", headers=auth())
    assert meta["versions"] == ["1"]
    # A text per row, as Triton declares a scalar per batch item; [n] is read the same.
    assert {t["name"]: (t["datatype"], t["shape"]) for t in meta["inputs"]} == {
        "text": ("BYTES", [-1, 1]),
        "text_pair": ("BYTES", [-1, 1]),
    }
    assert {t["name"]: t["shape"] for t in meta["outputs"]} == {
        "probabilities": [-1, 2],
        "label": [-1],
        "truncated": [-1],
        "embeddings": [-1, 64],  # the embedder's, asked for in a request of their own
    }
    detector = client.get_model_metadata("detector", "1", headers=auth())
    assert [t["name"] for t in detector["outputs"]][:5] == ["scores", "replaced", "starts", "ends", "tokens"]


@pytest.mark.parametrize("binary", [True, False])
def test_v2_detector_equals_detect(client: triton.InferenceServerClient, server: str, binary: bool) -> None:
    outputs = (
        None
        if binary
        else [
            triton.InferRequestedOutput(n, binary_data=False)
            for n in ("scores", "starts", "ends", "tokens", "lengths", "replaced")
        ]
    )
    result = client.infer("detector", [text_input(TEXTS, binary=binary)], outputs=outputs, headers=auth())
    want = ours(server, "/detect", {"model": "detector", "texts": TEXTS})["results"]
    lengths = result.as_numpy("lengths")
    assert lengths.tolist() == [len(r["tokens"]) for r in want]
    scores, starts, ends = (result.as_numpy(n) for n in ("scores", "starts", "ends"))
    tokens, replaced = result.as_numpy("tokens"), result.as_numpy("replaced")
    assert scores.shape == (len(TEXTS), max(lengths)) and scores.dtype == np.float32
    for i, r in enumerate(want):
        n = lengths[i]
        np.testing.assert_allclose(scores[i, :n], [t["score"] for t in r["tokens"]], atol=1e-6)
        assert starts[i, :n].tolist() == [t["start"] for t in r["tokens"]]
        assert ends[i, :n].tolist() == [t["end"] for t in r["tokens"]]
        got = [x.decode() if isinstance(x, bytes) else x for x in tokens[i, :n]]
        assert (
            got
            == [t["text"] for t in r["tokens"]]
            == [TEXTS[i][s:e] for s, e in zip(starts[i, :n], ends[i, :n], strict=True)]
        )
        assert replaced[i, :n].tolist() == [t["replaced"] for t in r["tokens"]]
        assert (starts[i, n:] == -1).all() and (scores[i, n:] == 0).all()


def test_v2_parameters_and_long_texts(client: triton.InferenceServerClient, server: str) -> None:
    long = document(200)
    result = client.infer(
        "detector",
        [text_input([long])],
        headers=auth(),
        parameters={"threshold": 0.0, "level": "word", "stride": 10},
    )
    want = ours(
        server,
        "/detect",
        {"text": long, "model": "detector", "threshold": 0.0, "level": "word", "stride": 10},
    )
    (r,) = want["results"]
    assert result.as_numpy("windows").tolist() == [r["windows"]] and r["windows"] > 1
    assert result.as_numpy("replaced").all()
    np.testing.assert_allclose(result.as_numpy("scores")[0], [t["score"] for t in r["tokens"]], atol=1e-6)


def test_v2_classifier_equals_classify(client: triton.InferenceServerClient, server: str) -> None:
    pairs = ["a gripping film", "the cat", "dull"]
    result = client.infer("sentiment", [text_input(TEXTS), text_input(pairs, "text_pair")], headers=auth())
    want = ours(
        server,
        "/classify",
        {
            "model": "sentiment",
            "inputs": [{"text": a, "text_pair": b} for a, b in zip(TEXTS, pairs, strict=True)],
        },
    )
    probabilities = result.as_numpy("probabilities")
    for row, label, r in zip(probabilities, result.as_numpy("label"), want["results"], strict=True):
        np.testing.assert_allclose(row, [r["scores"]["negative"], r["scores"]["positive"]], atol=1e-6)
        assert (label.decode() if isinstance(label, bytes) else label) == r["label"]
    score = client.infer("score", [text_input(TEXTS[:1], binary=False)], headers=auth()).as_numpy("score")
    assert score.tolist() == pytest.approx(
        [ours(server, "/classify", {"model": "score", "text": TEXTS[0]})["results"][0]["score"]], abs=1e-5
    )


def test_v2_tagger_metadata(client: triton.InferenceServerClient) -> None:
    meta = client.get_model_metadata("tagger", headers=auth())
    assert {t["name"]: t["datatype"] for t in meta["inputs"]} == {"text": "BYTES"}
    assert {t["name"]: (t["datatype"], t["shape"]) for t in meta["outputs"]} == {
        "labels": ("BYTES", [-1, -1]),
        "scores": ("FP32", [-1, -1]),
        "starts": ("INT64", [-1, -1]),
        "ends": ("INT64", [-1, -1]),
        "tokens": ("BYTES", [-1, -1]),
        "lengths": ("INT64", [-1]),
        "windows": ("INT64", [-1]),
        "truncated": ("BOOL", [-1]),
        "embeddings": ("FP32", [-1, 64]),
    }


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


@pytest.mark.parametrize("binary", [True, False])
def test_v2_tagger_equals_tag(client: triton.InferenceServerClient, server: str, binary: bool) -> None:
    """Every token with its most probable tag: /tag's answer with aggregation none and nothing ignored."""
    names = ("labels", "scores", "starts", "ends", "tokens", "lengths", "windows", "truncated")
    outputs = None if binary else [triton.InferRequestedOutput(n, binary_data=False) for n in names]
    result = client.infer("tagger", [text_input(TEXTS, binary=binary)], outputs=outputs, headers=auth())
    body = {"model": "tagger", "texts": TEXTS, "aggregation_strategy": "none", "ignore_labels": []}
    want = ours(server, "/tag", body)["results"]
    lengths = result.as_numpy("lengths")
    assert lengths.tolist() == [len(r["entities"]) for r in want]
    labels, scores = result.as_numpy("labels"), result.as_numpy("scores")
    starts, ends, tokens = (result.as_numpy(n) for n in ("starts", "ends", "tokens"))
    assert scores.shape == labels.shape == (len(TEXTS), max(lengths)) and scores.dtype == np.float32
    for i, r in enumerate(want):
        n = lengths[i]
        assert [_text(x) for x in labels[i, :n]] == [e["label"] for e in r["entities"]]
        np.testing.assert_allclose(scores[i, :n], [e["score"] for e in r["entities"]], atol=1e-6)
        assert starts[i, :n].tolist() == [e["start"] for e in r["entities"]]
        assert ends[i, :n].tolist() == [e["end"] for e in r["entities"]]
        assert [_text(x) for x in tokens[i, :n]] == [e["text"] for e in r["entities"]]
        assert (starts[i, n:] == -1).all() and (ends[i, n:] == -1).all() and (scores[i, n:] == 0).all()
        assert all(_text(x) == "" for x in labels[i, n:])
    assert result.as_numpy("windows").tolist() == [1] * len(TEXTS)
    assert not result.as_numpy("truncated").any()


def test_v2_tagger_long_texts_and_parameters(client: triton.InferenceServerClient, server: str) -> None:
    long = document(200)
    result = client.infer("tagger", [text_input([long])], headers=auth(), parameters={"stride": 10})
    body = {
        "model": "tagger",
        "text": long,
        "stride": 10,
        "aggregation_strategy": "none",
        "ignore_labels": [],
    }
    (want,) = ours(server, "/tag", body)["results"]
    assert result.as_numpy("windows").tolist() == [want["windows"]] and want["windows"] > 1
    np.testing.assert_allclose(
        result.as_numpy("scores")[0], [e["score"] for e in want["entities"]], atol=1e-6
    )
    cut = client.infer("tagger", [text_input([long])], headers=auth(), parameters={"truncate": True})
    assert cut.as_numpy("truncated").tolist() == [True] and cut.as_numpy("lengths").tolist() == [62]
    # /tag's aggregation has no place in per-token tensors: ignored, and named back.
    ignored = client.infer(
        "tagger", [text_input(TEXTS)], headers=auth(), parameters={"aggregation_strategy": "max"}
    )
    assert ignored.get_response()["parameters"] == {"ignored_parameters": "aggregation_strategy"}
    with pytest.raises(InferenceServerException, match="one or the other"):
        client.infer(
            "tagger", [text_input(TEXTS)], headers=auth(), parameters={"stride": 3, "truncate": True}
        )
    with pytest.raises(InferenceServerException, match="unknown input 'text_pair'"):
        client.infer("tagger", [text_input(TEXTS), text_input(TEXTS, "text_pair")], headers=auth())


@pytest.mark.parametrize("binary", [True, False])
def test_v2_embeddings_equal_embed(client: triton.InferenceServerClient, server: str, binary: bool) -> None:
    """Any encoder's `embeddings`, asked for by name, are /embed's vectors for the same texts and options;
    a request that asks for nothing else gets the model's own kind's outputs, as before."""
    texts = [*TEXTS, document(400)]
    for model in ("detector", "sentiment", "tagger"):
        asked = [triton.InferRequestedOutput(n, binary_data=binary) for n in ("embeddings", "truncated")]
        for parameters in ({}, {"normalize": False, "truncate": True}):
            result = client.infer(
                model, [text_input(texts)], outputs=asked, parameters=parameters, headers=auth()
            )
            want = ours(server, "/embed", {"model": model, "inputs": texts, **parameters})
            vectors = result.as_numpy("embeddings")
            assert vectors.dtype == np.float32 and vectors.shape == (len(texts), len(want[0]))
            np.testing.assert_allclose(vectors, np.array(want, dtype=np.float32), rtol=1e-6, atol=1e-7)
            assert result.as_numpy("truncated").tolist() == [False, False, False, True]
            norms = np.linalg.norm(vectors, axis=1)
            assert np.allclose(norms, 1.0, atol=1e-5) != ("normalize" in parameters)
        meta = client.get_model_metadata(model, headers=auth())
        assert {"name": "embeddings", "datatype": "FP32", "shape": [-1, vectors.shape[1]]} in meta["outputs"]
    default = client.infer("detector", [text_input(TEXTS)], headers=auth())
    assert default.as_numpy("embeddings") is None and default.as_numpy("scores") is not None
    both = [triton.InferRequestedOutput("embeddings"), triton.InferRequestedOutput("scores")]
    with pytest.raises(InferenceServerException, match="'scores' and 'embeddings' come from different"):
        client.infer("detector", [text_input(TEXTS)], outputs=both, headers=auth())


def test_v2_errors_in_the_protocols_shape(client: triton.InferenceServerClient, server: str) -> None:
    with pytest.raises(InferenceServerException, match="missing or wrong API key"):
        client.infer("detector", [text_input(TEXTS)])
    with pytest.raises(InferenceServerException, match="'nope' is not loaded"):
        client.infer("nope", [text_input(TEXTS)], headers=auth())
    with pytest.raises(InferenceServerException, match=r"unknown input 'words'"):
        client.infer("detector", [text_input(TEXTS, "words")], headers=auth())
    with pytest.raises(InferenceServerException, match="threshold"):
        client.infer("detector", [text_input(TEXTS)], headers=auth(), parameters={"threshold": "high"})
    with pytest.raises(InferenceServerException, match="has version 1 only"):
        client.infer("detector", [text_input(TEXTS)], model_version="2", headers=auth())
    with pytest.raises(InferenceServerException, match="the limit is 16"):
        client.infer("detector", [text_input(["x"] * 17)], headers=auth())
    v2 = server + "/v2/models/detector/infer"
    cases = [
        ("not JSON", b"{not json", None),
        ("shape and data disagree", request_json(shape=[2], data=["a"]), None),
        ("a number tensor", request_json(datatype="FP32", data=[1.0]), None),
        ("numbers as BYTES", request_json(data=[1]), None),
        ("binary size past the end", request_json(binary=9), b"\x05\x00"),
        ("header length not a number", b'{"inputs": []}', "x"),
        ("header length past the end", b'{"inputs": []}', "999"),
        ("BYTES not UTF-8", request_json(binary=5), struct.pack("<I", 1) + b"\xff"),
        ("BYTES length cut off", request_json(binary=2), b"\x05\x00"),
        ("bytes left over", request_json(binary=5), struct.pack("<I", 1) + b"ab"),
        ("unknown output", request_json(data=["a"], outputs=[{"name": "logits"}]), None),
        ("no text input", b'{"inputs": [], "input": []}', None),
        (
            "unknown field of an input",
            b'{"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", '
            b'"data": ["a"], "dtype": "BYTES"}]}',
            None,
        ),
        (
            "shared memory",
            request_json(
                data=["a"], outputs=[{"name": "scores", "parameters": {"shared_memory_region": "r"}}]
            ),
            None,
        ),
    ]
    for why, header, tail in cases:
        headers = {}
        if isinstance(tail, str):
            headers["Inference-Header-Content-Length"] = tail
        elif tail is not None:
            headers["Inference-Header-Content-Length"] = str(len(header))
            header += tail
        r = httpx.post(v2, content=header, headers={**auth(), **headers}, timeout=30)
        assert r.status_code == 400, (why, r.status_code, r.text)
        assert set(r.json()) == {"error"} and r.json()["error"], why


def request_json(
    shape: list[int] | None = None,
    datatype: str = "BYTES",
    data: list[Any] | None = None,
    binary: int | None = None,
    outputs: list[dict[str, Any]] | None = None,
) -> bytes:
    tensor: dict[str, Any] = {"name": "text", "shape": shape or [1], "datatype": datatype}
    if binary is not None:
        tensor["parameters"] = {"binary_data_size": binary}
    else:
        tensor["data"] = data
    body: dict[str, Any] = {"inputs": [tensor]}
    if outputs is not None:
        body["outputs"] = outputs
    return json.dumps(body).encode()


# ----------------------------------------------------------------------------------------------------------
# Hugging Face task shapes with InferenceClient
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def hf(server: str) -> InferenceClient:
    return InferenceClient(token=KEY)


def test_hf_text_classification(hf: InferenceClient, server: str) -> None:
    got = hf.text_classification(TEXTS[0], model=server + "/hf/sentiment")
    want = ours(server, "/classify", {"model": "sentiment", "text": TEXTS[0]})["results"][0]["scores"]
    assert [x.label for x in got] == sorted(want, key=want.get, reverse=True)
    assert [x.score for x in got] == pytest.approx(sorted(want.values(), reverse=True), abs=1e-6)
    top = hf.text_classification(TEXTS[0], model=server + "/hf/sentiment", top_k=1)
    assert [x.label for x in top] == [got[0].label]
    raw = hf.text_classification(TEXTS[0], model=server + "/hf/sentiment", function_to_apply="sigmoid")
    assert all(0 < x.score < 1 for x in raw) and sum(x.score for x in raw) != pytest.approx(1.0, abs=1e-9)
    score = hf.text_classification(TEXTS[0], model=server + "/hf/score")  # regression: the raw score
    assert score[0].score == pytest.approx(
        ours(server, "/classify", {"model": "score", "text": TEXTS[0]})["results"][0]["score"], abs=1e-5
    )


@pytest.mark.parametrize("aggregation", ["none", "simple", "first", "average", "max"])
def test_hf_token_classification(hf: InferenceClient, server: str, aggregation: str) -> None:
    text = "The parking movies cats sat on the mat, café naïve über."
    got = hf.token_classification(
        text, model=server + "/hf/detector", aggregation_strategy=aggregation, ignore_labels=[]
    )
    tokens = ours(server, "/detect", {"model": "detector", "text": text})["results"][0]["tokens"]
    for e in got:
        assert text[e.start : e.end] == e.word
    if aggregation == "none":
        assert [(e.start, e.end) for e in got] == [(t["start"], t["end"]) for t in tokens]
        assert [e.entity for e in got] == ["replaced" if t["score"] > 0.5 else "original" for t in tokens]
        assert [e.score for e in got] == pytest.approx(
            [max(t["score"], 1 - t["score"]) for t in tokens], abs=1e-6
        )
    else:
        labels = [e.entity_group for e in got]
        assert all(a != b for a, b in itertools.pairwise(labels))  # adjacent groups differ
        assert got[0].start == tokens[0]["start"] and got[-1].end == tokens[-1]["end"]
    only_replaced = hf.token_classification(
        text, model=server + "/hf/detector", aggregation_strategy=aggregation
    )
    assert all((e.entity or e.entity_group) == "replaced" for e in only_replaced)


@pytest.mark.parametrize("aggregation", ["none", "simple", "first", "average", "max"])
def test_hf_token_classification_on_a_tagger(hf: InferenceClient, server: str, aggregation: str) -> None:
    text = "The parking movies cats sat on the mat in New York, café naïve über."
    for ignore in ([], ["O"], None):
        got = hf.token_classification(
            text, model=server + "/hf/tagger", aggregation_strategy=aggregation, ignore_labels=ignore
        )
        body = {"model": "tagger", "text": text, "aggregation_strategy": aggregation}
        if ignore is not None:
            body["ignore_labels"] = ignore
        want = ours(server, "/tag", body)["results"][0]["entities"]  # /tag's default is the pipeline's ["O"]
        assert len(got) == len(want), (ignore, got, want)
        for g, w in zip(got, want, strict=True):
            assert (g.entity if aggregation == "none" else g.entity_group) == w["label"]
            assert (g.start, g.end, g.word) == (w["start"], w["end"], w["text"])
            assert g.score == pytest.approx(w["score"], abs=1e-6)
            assert getattr(g, "index", None) == w.get("index")
        if ignore != []:
            assert all("O" not in (g.entity, g.entity_group) for g in got)


def test_hf_tasks_a_model_does_not_answer(hf: InferenceClient, server: str) -> None:
    with pytest.raises(HfHubHTTPError, match="tagger: it answers token-classification"):
        hf.text_classification("the cat", model=server + "/hf/tagger", top_k=1)
    with pytest.raises(HfHubHTTPError, match="classifier: it answers text-classification"):
        hf.token_classification("the cat", model=server + "/hf/sentiment", aggregation_strategy="max")
    r = httpx.post(
        server + "/hf/tagger",
        json={"inputs": {"text": "the cat", "text_pair": "sat"}},
        headers=auth(),
        timeout=30,
    )
    assert r.status_code == 400 and "texts, not pairs" in r.json()["error"]


def test_hf_feature_extraction_equals_embed(hf: InferenceClient, server: str) -> None:
    """InferenceClient.feature_extraction on a URL of the hosted API's shape for the task
    (/models/NAME/pipeline/feature-extraction) answers /embed's vectors, its options at the body's top
    level."""
    long = document(400)
    for model in ("detector", "sentiment", "tagger"):
        url = f"{server}/hf/{model}/pipeline/feature-extraction"
        got = hf.feature_extraction(TEXTS[0], model=url)
        want = ours(server, "/embed", {"model": model, "inputs": TEXTS[0]})
        assert got.dtype == np.float32 and got.shape == (1, len(want[0]))
        np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))
        raw = hf.feature_extraction(long, model=url, normalize=False, truncate=True)
        want = ours(server, "/embed", {"model": model, "inputs": long, "normalize": False, "truncate": True})
        np.testing.assert_array_equal(raw, np.array(want, dtype=np.float32))
        assert abs(float(np.linalg.norm(raw[0])) - 1.0) > 1e-3  # not normalized
    with pytest.raises(HfHubHTTPError, match="takes at most"):
        hf.feature_extraction(long, model=f"{server}/hf/detector/pipeline/feature-extraction", truncate=False)
    with pytest.raises(HfHubHTTPError, match="is not loaded"):
        hf.feature_extraction("x", model=f"{server}/hf/nope/pipeline/feature-extraction")
    url = f"{server}/hf/detector/pipeline/feature-extraction"
    for body, says in [
        ({"inputs": "x", "model": "sentiment"}, "the path names 'detector'"),
        ({"inputs": "x", "normalize": "yes"}, "normalize"),
        ({"inputs": ""}, "empty"),
        ({"texts": ["x"]}, "inputs"),
    ]:
        r = httpx.post(url, json=body, headers=auth(), timeout=30)
        assert r.status_code == 400 and says in r.json()["error"], (body, r.text)


def test_hf_errors(hf: InferenceClient, server: str) -> None:
    with pytest.raises(HfHubHTTPError, match="is not loaded"):
        hf.text_classification("x", model=server + "/hf/nope")
    with pytest.raises(HfHubHTTPError, match="aggregation_strategy"):
        hf.token_classification("x", model=server + "/hf/detector", aggregation_strategy="maxx")  # type: ignore[arg-type]
    r = httpx.post(server + "/hf/detector", content=b"\xff{", headers=auth(), timeout=30)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = httpx.post(server + "/hf/detector", json={"inputs": "x"}, timeout=30)
    assert r.status_code == 401 and "API key" in r.json()["error"]


# ----------------------------------------------------------------------------------------------------------
# The aggregation, against transformers' own pipeline on the same probabilities
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", ["none", "simple", "first", "average", "max"])
def test_aggregation_equals_the_transformers_pipeline(aggregation: str, tmp_path: Path) -> None:
    words = ["the", "cat", "sat", "on", "mat", "park", "##ing", "movie", "##s", ".", ","]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8"
    )
    pipe = pipeline(DETECTOR_LABELS, vocab)
    tokenizer = pipe.tokenizer
    text = "The parking cat sat on the mat, movies parking."
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt")
    rng = np.random.default_rng(0)
    import torch

    for trial in range(20):
        logit = rng.normal(0, 2, size=enc["input_ids"].shape[1])
        logits = torch.tensor(np.stack([np.zeros_like(logit), logit], axis=-1)[None], dtype=torch.float32)
        outputs = {
            "logits": logits,
            "sentence": text,
            "input_ids": enc["input_ids"],
            "offset_mapping": enc["offset_mapping"],
            "special_tokens_mask": enc["special_tokens_mask"],
        }
        want = pipe.postprocess(
            [outputs],
            aggregation_strategy=pipe._sanitize_parameters(aggregation_strategy=aggregation)[2][
                "aggregation_strategy"
            ],
            ignore_labels=[],
        )
        real = [i for i, s in enumerate(enc["special_tokens_mask"][0].tolist()) if not s]
        offsets = enc["offset_mapping"][0].tolist()
        p = 1 / (1 + np.exp(-logit))
        probs = np.stack([1 - p, p], axis=-1)[real]  # a detector: softmax of (0, logit)
        spans = [(offsets[i][0], offsets[i][1]) for i in real]
        word_ids = [enc.word_ids(0)[i] for i in real]
        found = entities(probs, DETECTOR_LABELS, spans, real, word_ids, aggregation, [])  # type: ignore[arg-type]
        got = [hf_entity(e, text) for e in found]
        assert len(got) == len(want), (trial, got, want)
        for g, w in zip(got, want, strict=True):
            assert (g.entity or g.entity_group) == (w.get("entity") or w.get("entity_group"))
            assert (g.start, g.end) == (w["start"], w["end"])
            assert g.score == pytest.approx(float(w["score"]), abs=1e-5)
            if aggregation == "none":
                assert g.index == w["index"]
