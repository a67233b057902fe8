"""Standard clients the protocol tests do not use, unchanged, against one server holding a detector, two
classifiers and a tagger (tests/test_protocols.py's): KServe's Python SDK (JSON and binary tensors, in an
environment of its own: tests/client_env.py), tritonclient with compressed requests and `class_count`, and
Triton's model configuration and statistics read into Triton's own protobuf messages. Also what the
specification lets a server be lenient about, and compressed bodies on every POST route."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.client_env import run_client
from tests.test_protocols import TEXTS, auth, ours, protocol_server, text_input


@pytest.fixture(scope="module")
def server(serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with protocol_server(serving_bundles, tmp_path_factory.mktemp("clients")) as url:
        yield url


@pytest.fixture
def client(server: str) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(server.removeprefix("http://"))


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _classify(server: str, texts: list[str], pairs: list[str] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, str]] = [{"text": t} for t in texts]
    for item, pair in zip(items, pairs or [], strict=False):
        item["text_pair"] = pair
    return ours(server, "/classify", {"model": "sentiment", "inputs": items})["results"]


# ----------------------------------------------------------------------------------------------------------
# KServe's SDK
# ----------------------------------------------------------------------------------------------------------


def test_kserve_sdk_infer_request_json_and_binary(server: str) -> None:
    """InferenceRESTClient.infer with an InferRequest, as KServe's docs show it: the SDK always sends
    `model_name` and an `id`, which the server ignores and echoes."""
    key = auth()["Authorization"].removeprefix("Bearer ")
    got = json.loads(run_client("kserve_sdk.py", server, key, "detector", "sentiment", *TEXTS))
    detect = ours(server, "/detect", {"model": "detector", "texts": TEXTS})["results"]
    classify = _classify(server, TEXTS, [t[::-1] for t in TEXTS])
    for binary in ("False", "True"):
        d = got[f"detector-{binary}"]
        assert d["lengths"] == [len(r["tokens"]) for r in detect]
        for i, r in enumerate(detect):
            n = d["lengths"][i]
            np.testing.assert_allclose(d["scores"][i][:n], [t["score"] for t in r["tokens"]], atol=1e-6)
            assert d["tokens"][i][:n] == [t["text"] for t in r["tokens"]]
            assert d["starts"][i][:n] == [t["start"] for t in r["tokens"]]
        c = got[f"classifier-{binary}"]
        assert c["label"] == [r["label"] for r in classify]
        want = [[r["scores"]["negative"], r["scores"]["positive"]] for r in classify]
        np.testing.assert_allclose(c["probabilities"], want, atol=1e-6)
        assert got[f"classifier-{binary}-parameters"] is None  # nothing the server ignored


# ----------------------------------------------------------------------------------------------------------
# Triton's model configuration and statistics extensions, in Triton's protobuf schema
# ----------------------------------------------------------------------------------------------------------


MODELS = ("detector", "sentiment", "score", "tagger")


def test_model_config_and_statistics_read_into_tritons_protobuf_messages(
    client: triton.InferenceServerClient,
) -> None:
    before = client.get_inference_statistics("detector", headers=auth())["model_stats"][0]
    for n in (1, 3):
        client.infer("detector", [text_input(TEXTS[:n])], headers=auth())
    with pytest.raises(InferenceServerException):  # a failure that reached the model: too long
        client.infer(
            "sentiment", [text_input(["the cat " * 100])], headers=auth(), parameters={"truncate": False}
        )
    configs = [client.get_model_config(m, headers=auth()) for m in MODELS]
    assert client.get_model_config("detector", "1", headers=auth()) == configs[0]
    statistics = client.get_inference_statistics(headers=auth())
    given = json.dumps({"configs": configs, "statistics": statistics})
    parsed = json.loads(run_client("triton_protos.py", stdin=given))

    for name, config, proto in zip(MODELS, configs, parsed["configs"], strict=True):
        assert proto["name"] == name and int(proto["max_batch_size"]) == 16  # --max-texts
        # perf_analyzer takes each tensor's shape from the metadata, less the batch dimension, and
        # max_batch_size and `optional` from here: the two must agree.
        meta = client.get_model_metadata(name, headers=auth())
        for kind, tensors in (("input", meta["inputs"]), ("output", meta["outputs"])):
            dims = {t["name"]: [int(d) for d in t.get("dims", [])] for t in proto[kind]}
            assert dims == {t["name"]: t["shape"][1:] for t in tensors}, (name, kind)
        optional = {t["name"]: t.get("optional", False) for t in proto["input"]}
        assert optional == (
            {"text": False, "text_pair": True} if name in ("sentiment", "score") else {"text": False}
        )
        assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
    types = {t["name"]: t["data_type"] for t in parsed["configs"][0]["output"]}
    assert (
        types["scores"] == "TYPE_FP32"
        and types["tokens"] == "TYPE_STRING"
        and types["replaced"] == "TYPE_BOOL"
    )

    stats = {s["name"]: s for s in parsed["statistics"]["model_stats"]}
    assert set(stats) == set(MODELS)
    after = stats["detector"]
    assert int(after["inference_count"]) - before["inference_count"] == 4  # texts
    assert int(after["execution_count"]) > before["execution_count"]
    success = after["inference_stats"]["success"]
    assert int(success["count"]) - before["inference_stats"]["success"]["count"] == 2
    assert int(success["ns"]) > before["inference_stats"]["success"]["ns"]
    for part in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert int(after["inference_stats"][part]["count"]) == int(success["count"]), part
    assert int(after["last_inference"]) > 0
    assert int(stats["sentiment"]["inference_stats"]["fail"]["count"]) >= 1
    with pytest.raises(InferenceServerException, match="'nope' is not loaded"):
        client.get_model_config("nope", headers=auth())
    with pytest.raises(InferenceServerException, match="version 1 only"):
        client.get_inference_statistics("detector", "2", headers=auth())


# ----------------------------------------------------------------------------------------------------------
# tritonclient: compressed requests, class_count
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_tritonclient_compressed_requests(client: triton.InferenceServerClient, algorithm: str) -> None:
    for model, output in (("detector", "scores"), ("sentiment", "probabilities"), ("tagger", "labels")):
        for binary in (True, False):
            plain = client.infer(model, [text_input(TEXTS, binary=binary)], headers=auth())
            packed = client.infer(
                model,
                [text_input(TEXTS, binary=binary)],
                headers=auth(),
                request_compression_algorithm=algorithm,
                response_compression_algorithm=algorithm,
            )
            assert packed.as_numpy(output).tolist() == plain.as_numpy(output).tolist(), (model, binary)


def test_class_count_returns_the_top_classes(client: triton.InferenceServerClient, server: str) -> None:
    want = _classify(server, TEXTS)
    for count, binary in ((1, True), (2, False), (5, True)):
        output = triton.InferRequestedOutput("probabilities", binary_data=binary, class_count=count)
        result = client.infer("sentiment", [text_input(TEXTS)], outputs=[output], headers=auth())
        classes = result.as_numpy("probabilities")
        assert classes.shape == (len(TEXTS), min(count, 2))  # at most the model's two labels
        for row, r in zip(classes, want, strict=True):
            value, index, label = _text(row[0]).split(":")
            assert label == r["label"] and ["negative", "positive"][int(index)] == label
            assert float(value) == pytest.approx(r["scores"][label], abs=1e-6)
            if len(row) == 2:
                assert float(_text(row[1]).split(":")[0]) <= float(value)
    for model, name in (("detector", "scores"), ("score", "score"), ("sentiment", "label")):
        output = triton.InferRequestedOutput(name, class_count=1)
        with pytest.raises(InferenceServerException, match="cannot be returned as a classification"):
            client.infer(model, [text_input(TEXTS)], outputs=[output], headers=auth())
    body = {
        "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"]}],
        "outputs": [{"name": "probabilities", "parameters": {"classification": 0}}],
    }
    r = httpx.post(server + "/v2/models/sentiment/infer", json=body, headers=auth(), timeout=30)
    assert r.status_code == 400 and "whole number >= 1" in r.json()["error"]


# ----------------------------------------------------------------------------------------------------------
# Leniency: unknown request fields and parameters are ignored, and named
# ----------------------------------------------------------------------------------------------------------


def test_unknown_fields_and_parameters_are_ignored_and_named(
    client: triton.InferenceServerClient, server: str
) -> None:
    body = {
        "model_name": "detector",
        "model_version": "1",
        "something_new": {"nested": True},
        "inputs": [
            {"name": "text", "shape": [1, 1], "datatype": "BYTES", "data": [TEXTS[0]], "parameters": {"x": 1}}
        ],
        "parameters": {"treshold": 0.9, "threshold": 0.0, "model": "sentiment", "binary_data_output": False},
        "outputs": [{"name": "replaced", "parameters": {"binary_data": False, "colour": "red"}}],
    }
    r = httpx.post(server + "/v2/models/detector/infer", json=body, headers=auth(), timeout=30)
    assert r.status_code == 200, r.text
    named = "treshold,model,text.x,replaced.colour"
    assert r.json()["parameters"] == {"ignored_parameters": named}
    assert r.headers["electra-ignored-parameters"] == named.replace(",", ", ")
    want = ours(server, "/detect", {"model": "detector", "text": TEXTS[0], "threshold": 0.0})["results"][0]
    assert r.json()["outputs"][0]["data"] == [True] * len(want["tokens"])  # threshold 0, not 0.9
    # tritonclient shows them in the response; nothing is named when every key is used.
    result = client.infer("detector", [text_input(TEXTS)], headers=auth(), parameters={"levle": "word"})
    assert result.get_response()["parameters"] == {"ignored_parameters": "levle"}
    clean = client.infer("detector", [text_input(TEXTS)], headers=auth(), parameters={"level": "word"})
    assert "parameters" not in clean.get_response()


# ----------------------------------------------------------------------------------------------------------
# Compressed bodies on every POST route
# ----------------------------------------------------------------------------------------------------------


BODIES = {
    "/detect": {"model": "detector", "texts": TEXTS},
    "/classify": {"model": "sentiment", "text": TEXTS[0]},
    "/tag": {"model": "tagger", "text": TEXTS[1]},
    "/hf/detector": {"inputs": TEXTS[0]},
    "/v2/models/sentiment/infer": {
        "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"]}]
    },
}
CODECS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # the zlib format, as RFC 9110 and tritonclient have it
    "deflate (raw)": lambda b: zlib.compress(b)[2:-4],  # what some clients send instead
    "gzip, identity": gzip.compress,
}


@pytest.mark.parametrize("route", list(BODIES))
def test_compressed_bodies_on_every_post_route(server: str, route: str) -> None:
    raw = json.dumps(BODIES[route]).encode()
    plain = httpx.post(server + route, content=raw, headers=auth(), timeout=30)
    assert plain.status_code == 200, plain.text
    for coding, compress in CODECS.items():
        header = coding.removesuffix(" (raw)")
        r = httpx.post(server + route, content=compress(raw), headers={**auth(), "Content-Encoding": header})
        assert (r.status_code, r.json()) == (200, plain.json()), coding
    # Two gzip members in a row are one body (RFC 1952); streamed in small chunks without a length too.
    chunks = gzip.compress(raw[:10]) + gzip.compress(raw[10:])
    streamed = (chunks[i : i + 7] for i in range(0, len(chunks), 7))
    r = httpx.post(
        server + route, content=streamed, headers={**auth(), "Content-Encoding": "gzip"}, timeout=30
    )
    assert (r.status_code, r.json()) == (200, plain.json())


def test_compressed_bodies_that_are_wrong(server: str) -> None:
    route = server + "/detect"
    raw = json.dumps(BODIES["/detect"]).encode()
    key = "detail"

    def post(content: bytes, coding: str) -> httpx.Response:
        return httpx.post(route, content=content, headers={**auth(), "Content-Encoding": coding}, timeout=30)

    # 2 MB of spaces inflate from a 2 kB body: cut off at the limit, which applies to the decoded body.
    bomb = gzip.compress(b" " * 3_000_000)
    assert len(bomb) < 10_000
    for url in (route, server + "/v2/models/detector/infer"):
        r = httpx.post(url, content=bomb, headers={**auth(), "Content-Encoding": "gzip"}, timeout=30)
        assert r.status_code == 413, r.text
        assert "gzip-decoded" in r.text and "2,000,000 bytes" in r.text
    r = post(raw, "br")
    assert r.status_code == 415 and r.headers["accept-encoding"] == "gzip, deflate"
    assert "'br' is not supported" in r.json()[key]
    assert post(raw, "gzip, deflate").status_code == 415
    cases = {
        "not gzip at all": (raw, "gzip", "not valid gzip data"),
        "cut off": (gzip.compress(raw)[:-6], "gzip", "ends before its stream does"),
        "garbage after the member": (gzip.compress(raw) + b"junk", "gzip", "not valid gzip data"),
        "bytes after the deflate stream": (zlib.compress(raw) + b"junk", "deflate", "follow the end"),
        "not deflate": (b"\xff" * 40, "deflate", "not valid deflate data"),
    }
    for why, (content, coding, message) in cases.items():
        r = post(content, coding)
        assert r.status_code == 400 and message in r.json()[key], (why, r.text)
    # An empty compressed body is an empty body: the route says so.
    r = post(b"", "gzip")
    assert r.status_code == 400 and "it is empty" in r.json()[key]
    r = httpx.post(
        server + "/v2/models/detector/infer", content=raw, headers={**auth(), "Content-Encoding": "zstd"}
    )
    assert r.status_code == 415 and set(r.json()) == {"error"}
