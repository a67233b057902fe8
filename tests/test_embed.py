"""text-embeddings-inference's /embed on any encoder bundle: requests and answers valid against TEI's own
OpenAPI document (tests/fixtures/tei/openapi.json, release 1.9.3), vectors equal to the PyTorch backbone's
output pooled by hand ([CLS] and mean) from the same weights, `normalize`, TEI's truncation, `Empty` and
error shapes, and a bundle exported before graphs answered their hidden state refused with what to do."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from litestar.testing import TestClient

from electra.serving.engine.local import local_inference, run
from electra.serving.engine.requests import Embed
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings

FIXTURE = Path(__file__).parent / "fixtures" / "tei" / "openapi.json"
LEGACY_BUNDLE = Path(__file__).parent / "fixtures" / "legacy-0.1" / "bundle-discriminator"
TEXTS = ["paris is the capital of france", "the cat sat on the mat", "berlin", "a b c d e f"]
# 40 words of one token each: 42 tokens with [CLS] and [SEP], over the 32 of the short bundle below.
LONG = " ".join(["paris", "london", "fire", "water"] * 10)
HIDDEN = 64  # the tiny test models' hidden size


def validate(instance: Any, name: str) -> None:
    import jsonschema

    doc = json.loads(FIXTURE.read_text())
    jsonschema.validate(instance, {"$ref": f"#/components/schemas/{name}", "components": doc["components"]})


def model_dir_of(bundle: Path) -> Path:
    """The HF directory a conftest bundle was exported from (its sibling, the bundle's name less -bundle)."""
    return bundle.parent / bundle.name.removesuffix("-bundle")


def reference(model_dir: Path, texts: list[str], pooling: str, normalize: bool, max_len: int) -> np.ndarray:
    """Each text's vector from the PyTorch model of `model_dir`, one text at a time (no padding at all),
    cut to `max_len` tokens as the tokenizer's own truncation cuts it, pooled and normalised here."""
    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer

    model = load_hf_dir(model_dir).eval()
    tokenizer = load_tokenizer(model_dir)
    tokenizer.enable_truncation(max_length=max_len)
    out = []
    for text in texts:
        enc = tokenizer.encode(text)
        ids = torch.tensor([enc.ids])
        with torch.no_grad():
            hidden = model.electra(ids, torch.ones_like(ids), torch.tensor([enc.type_ids]))[0].numpy()
        vector = hidden[0] if pooling == "cls" else hidden.mean(axis=0)
        out.append(vector / np.linalg.norm(vector) if normalize else vector)
    return np.array(out)


@pytest.fixture(scope="module")
def mean_bundle(serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The detector's weights exported again with mean pooling and a 32-token limit."""
    from electra.onnx.export import export_bundle

    out = tmp_path_factory.mktemp("mean") / "mean-bundle"
    export_bundle(model_dir_of(serving_bundles["detector"]), out, max_seq_len=32, pooling="mean")
    return out


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path], mean_bundle: Path) -> Iterator[TestClient]:
    models = (
        ModelSpec("detector", serving_bundles["detector"]),
        ModelSpec("sentiment", serving_bundles["sentiment"]),
        ModelSpec("tagger", serving_bundles["tagger"]),
        ModelSpec("mean", mean_bundle),
        ModelSpec("legacy", LEGACY_BUNDLE),
    )
    app = create_app(ServeSettings(models=models, max_texts=16, max_chars=3000, max_body_bytes=200_000))
    with TestClient(app) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        yield c


def post(client: TestClient, body: dict[str, Any], status: int = 200) -> Any:
    r = client.post("/embed", json=body)
    assert r.status_code == status, r.text
    return r.json()


def test_the_fixture_has_teis_embed() -> None:
    doc = json.loads(FIXTURE.read_text())
    assert "/embed" in doc["paths"] and "EmbedRequest" in doc["components"]["schemas"]


def test_one_text_and_a_batch_answer_teis_shape_with_cls_vectors(
    client: TestClient, serving_bundles: dict[str, Path]
) -> None:
    """A string and a list both answer a list of vectors; a detector bundle pools [CLS] by default, and each
    vector is the PyTorch backbone's [CLS] vector of that text alone, of unit length."""
    model_dir = model_dir_of(serving_bundles["detector"])
    single = {"inputs": TEXTS[0], "model": "detector"}
    one = post(client, single)
    validate({k: v for k, v in single.items() if k != "model"}, "EmbedRequest")
    validate(one, "EmbedResponse")
    assert len(one) == 1 and len(one[0]) == HIDDEN
    batch = post(client, {"inputs": TEXTS, "model": "detector"})
    validate(batch, "EmbedResponse")
    assert len(batch) == len(TEXTS)
    want = reference(model_dir, TEXTS, "cls", normalize=True, max_len=64)
    np.testing.assert_allclose(np.array(batch), want, atol=1e-5)
    # Batched with longer texts (padded) or alone, a text has the same vector.
    np.testing.assert_allclose(np.array(one[0]), np.array(batch[0]), atol=1e-6)
    assert np.allclose(np.linalg.norm(np.array(batch), axis=1), 1.0, atol=1e-6)


def test_normalize_false_answers_the_pooled_vector_itself(
    client: TestClient, serving_bundles: dict[str, Path]
) -> None:
    raw = np.array(post(client, {"inputs": TEXTS, "model": "detector", "normalize": False}))
    want = reference(model_dir_of(serving_bundles["detector"]), TEXTS, "cls", normalize=False, max_len=64)
    np.testing.assert_allclose(raw, want, atol=1e-4)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    unit = np.array(post(client, {"inputs": TEXTS, "model": "detector"}))
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


def test_mean_pooling_as_the_bundle_says(client: TestClient, serving_bundles: dict[str, Path]) -> None:
    """The same weights exported with --pooling mean: the mean over every real token, [CLS] and [SEP]
    included, which differs from the [CLS] vector."""
    model_dir = model_dir_of(serving_bundles["detector"])
    mean = np.array(post(client, {"inputs": TEXTS, "model": "mean", "normalize": False}))
    np.testing.assert_allclose(mean, reference(model_dir, TEXTS, "mean", False, 32), atol=1e-4)
    cls = np.array(post(client, {"inputs": TEXTS, "model": "detector", "normalize": False}))
    assert not np.allclose(mean, cls, atol=1e-2)


def test_every_encoder_bundle_embeds(client: TestClient, serving_bundles: dict[str, Path]) -> None:
    """A fine-tuned classifier and a tagger embed too: their backbones' [CLS] vectors."""
    for name in ("sentiment", "tagger"):
        got = np.array(post(client, {"inputs": TEXTS[:2], "model": name}))
        want = reference(model_dir_of(serving_bundles[name]), TEXTS[:2], "cls", True, 64)
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_truncation_follows_tei(client: TestClient, serving_bundles: dict[str, Path]) -> None:
    """truncate absent: the server's --auto-truncate (on), the text cut to the model's 32 tokens; false: 413
    naming the limit; truncation_direction Left keeps the end instead."""
    model_dir = model_dir_of(serving_bundles["detector"])
    cut = np.array(post(client, {"inputs": [LONG], "model": "mean", "normalize": False}))
    np.testing.assert_allclose(cut, reference(model_dir, [LONG], "mean", False, 32), atol=1e-4)
    assert (
        post(client, {"inputs": [LONG], "model": "mean", "normalize": False, "truncate": True})
        == cut.tolist()
    )
    left = post(
        client, {"inputs": [LONG], "model": "mean", "truncation_direction": "Left", "normalize": False}
    )
    assert not np.allclose(np.array(left), cut, atol=1e-3)
    err = post(client, {"inputs": [LONG], "model": "mean", "truncate": False}, 413)
    validate(err, "ErrorResponse")
    assert err["error_type"] == "Validation" and "42 tokens" in err["error"] and "32" in err["error"]


def test_auto_truncate_off_refuses_a_long_text(mean_bundle: Path) -> None:
    settings = ServeSettings(models=(ModelSpec("mean", mean_bundle),), auto_truncate=False)
    with TestClient(create_app(settings)) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        r = c.post("/embed", json={"inputs": LONG})
        assert r.status_code == 413 and "truncate" in r.json()["error"], r.text
        assert c.post("/embed", json={"inputs": LONG, "truncate": True}).status_code == 200


@pytest.mark.parametrize("inputs", [[], "", ["a text", ""]])
def test_empty_inputs_answer_400_empty(client: TestClient, inputs: Any) -> None:
    err = post(client, {"inputs": inputs, "model": "detector"}, 400)
    validate(err, "ErrorResponse")
    assert err["error_type"] == "Empty" and "empty" in err["error"], err


def test_unknown_fields_are_ignored_and_named(client: TestClient) -> None:
    r = client.post("/embed", json={"inputs": "paris", "model": "detector", "top_k": 3, "pooling": "max"})
    assert r.status_code == 200, r.text
    assert r.headers["Electra-Ignored-Fields"] == "pooling, top_k"


def test_an_old_bundle_is_told_to_export_again(client: TestClient) -> None:
    """A bundle written before graphs answered their hidden state serves its own routes, and /embed refuses
    it in words: what is missing and the command that fixes it."""
    err = post(client, {"inputs": "paris", "model": "legacy"}, 400)
    validate(err, "ErrorResponse")
    assert "exported before" in err["error"] and "electra export --model" in err["error"]
    assert client.post("/detect", json={"text": "paris", "model": "legacy"}).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"inputs": "paris", "model": "detector", "normalize": "true"}, 400, "normalize: Expected `bool"),
        ({"inputs": [[5, 6, 7]], "model": "detector"}, 400, "token ids"),
        ({"inputs": "paris", "model": "detector", "prompt_name": "query"}, 400, "prompt"),
        ({"inputs": "paris", "model": "detector", "dimensions": 8}, 400, "'dimensions' is 8"),
        ({"inputs": "paris", "model": "detector", "truncation_direction": "up"}, 400, "truncation_direction"),
        ({"inputs": "paris", "model": "nowhere"}, 404, "not loaded"),
        ({"inputs": "paris"}, 400, "several models serve /embed; name one in 'model'"),
    ],
)
def test_bad_requests_answer_4xx_in_teis_error_shape(
    client: TestClient, body: dict[str, Any], status: int, words: str
) -> None:
    err = post(client, body, status)
    validate(err, "ErrorResponse")
    assert words in err["error"], err


def test_dimensions_of_the_models_own_size_pass(client: TestClient) -> None:
    assert len(post(client, {"inputs": "paris", "model": "detector", "dimensions": HIDDEN})[0]) == HIDDEN


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"null", b'{"inputs": [1]}', b'{"inputs": {"a": 1}}'])
def test_malformed_bodies_answer_400_never_500(client: TestClient, raw: bytes) -> None:
    r = client.post("/embed", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, (raw, r.text)
    validate(r.json(), "ErrorResponse")


def test_any_body_answers_under_500_in_teis_shape(client: TestClient) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
    fields = ["inputs", "normalize", "truncate", "truncation_direction", "prompt_name", "dimensions", "model"]
    shaped = st.dictionaries(st.sampled_from(fields), values, max_size=len(fields)).map(
        lambda d: json.dumps(d).encode()
    )

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(raw=st.binary(max_size=60) | shaped)
    def fuzz(raw: bytes) -> None:
        r = client.post("/embed", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code < 500, (raw, r.text)
        if r.status_code >= 400:
            validate(r.json(), "ErrorResponse")

    fuzz()


def test_the_engine_embeds_without_a_server(serving_bundles: dict[str, Path], tmp_path: Path) -> None:
    """The core's embed, run locally: the same vectors; and an old bundle's refusal, from a copy of the
    detector whose bundle.json lacks `embedding`."""
    runner = ModelRunner("detector", serving_bundles["detector"])
    _, embedded = run(local_inference({"detector": runner}).embed(Embed(TEXTS)))
    want = reference(model_dir_of(serving_bundles["detector"]), TEXTS, "cls", True, 64)
    np.testing.assert_allclose(np.array(embedded.vectors), want, atol=1e-5)
    assert embedded.truncated == [False] * len(TEXTS)

    old = tmp_path / "old"
    shutil.copytree(serving_bundles["detector"], old)
    raw = json.loads((old / "bundle.json").read_text())
    del raw["embedding"]
    (old / "bundle.json").write_text(json.dumps(raw))
    from electra.serving.engine.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="export it again"):
        run(local_inference({"old": ModelRunner("old", old)}).embed(Embed(TEXTS)))
