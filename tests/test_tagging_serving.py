"""/tag: a tagger (token classifier) served in-process on a tiny random-weight bundle (ONNX Runtime, no
mocks): entities with exact offsets, every aggregation strategy against transformers' own
TokenClassificationPipeline on the same logits, batching, long documents through windows, Unicode, limits
and JSON errors. The standard protocols' clients on taggers are in tests/test_protocols.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar.testing import TestClient

from electra.serving.engine.results import Aggregation
from electra.serving.engine.runtime import ModelRunner
from electra.serving.engine.tagging import entities, softmax, tag_result
from electra.serving.engine.windows import TokenLogits, default_stride, merge, split, window_starts
from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings
from tests.conftest import SERVING_TAGS
from tests.test_long_documents import MAX_LEN, SPAN, document
from tests.test_serving import UNICODE_TEXTS, check_offsets, wait_ready

STRATEGIES: tuple[Aggregation, ...] = ("none", "simple", "first", "average", "max")
TAGS = [SERVING_TAGS[i] for i in range(len(SERVING_TAGS))]
TYPES = {"PER", "LOC", "ORG", "O"}
# Words the fixture vocabulary holds, some in several pieces (park ##ing, movie ##s, cat ##s, quick ##ly).
TEXT = "The parking cats sat on the mat in New York, quickly the brown fox ran to Paris and London."
TEXTS = [
    TEXT,
    "the movies",
    "",
    "she loved the film, he hated the book.",
    "café naïve über the river bank",
]


@pytest.fixture(scope="module")
def bundles(serving_bundles: dict[str, Path]) -> dict[str, Path]:
    return serving_bundles


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    models = tuple(ModelSpec(n, serving_bundles[n]) for n in ("tagger", "detector", "sentiment"))
    settings = ServeSettings(models=models, max_texts=16, max_chars=20_000, max_queue=40)
    with TestClient(create_app(settings)) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def runner(serving_bundles: dict[str, Path]) -> ModelRunner:
    return ModelRunner("tagger", serving_bundles["tagger"])


def tag(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/tag", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def one(client: TestClient, **body: Any) -> dict[str, Any]:
    (result,) = tag(client, **body)["results"]
    return result


# ----------------------------------------------------------------------------------------------------------
# The aggregation against transformers' TokenClassificationPipeline, on the same logits
# ----------------------------------------------------------------------------------------------------------


def pipeline(labels: Sequence[str], vocab: Path) -> Any:
    """The real pipeline around a model it never runs (postprocess only reads the config's labels)."""
    pytest.importorskip("transformers")
    from transformers import (
        BertTokenizerFast,
        ElectraConfig,
        ElectraForTokenClassification,
        TokenClassificationPipeline,
    )

    config = ElectraConfig(
        vocab_size=30,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        embedding_size=8,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    model = ElectraForTokenClassification(config)
    return TokenClassificationPipeline(model=model, tokenizer=BertTokenizerFast(vocab_file=str(vocab)))


def pipeline_entities(
    pipe: Any, text: str, logits: np.ndarray, aggregation: str, ignore: list[str]
) -> list[dict[str, Any]]:
    import torch

    enc = pipe.tokenizer(
        text, return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt"
    )
    assert logits.shape[0] == enc["input_ids"].shape[1]
    outputs = {
        "logits": torch.tensor(logits[None], dtype=torch.float32),
        "sentence": text,
        "input_ids": enc["input_ids"],
        "offset_mapping": enc["offset_mapping"],
        "special_tokens_mask": enc["special_tokens_mask"],
    }
    strategy = pipe._sanitize_parameters(aggregation_strategy=aggregation)[2]["aggregation_strategy"]
    return pipe.postprocess([outputs], aggregation_strategy=strategy, ignore_labels=ignore)


def ours(pipe: Any, text: str, logits: np.ndarray, labels: Sequence[str], aggregation: Aggregation) -> list:
    enc = pipe.tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    real = [i for i, special in enumerate(enc["special_tokens_mask"]) if not special]
    spans = [tuple(enc["offset_mapping"][i]) for i in real]
    words = [enc.word_ids()[i] for i in real]
    probs = softmax(logits.astype(np.float32))[real]
    return entities(probs, labels, spans, real, words, aggregation, [])


def assert_same(got: Sequence[Any], want: list[dict[str, Any]], aggregation: str, why: object) -> None:
    assert len(got) == len(want), (why, got, want)
    for g, w in zip(got, want, strict=True):
        assert g.label == (w.get("entity") or w.get("entity_group")), (why, got, want)
        assert (g.start, g.end) == (w["start"], w["end"]), (why, got, want)
        assert g.score == pytest.approx(float(w["score"]), abs=1e-5)
        assert g.grouped == ("entity_group" in w)
        if aggregation == "none":
            assert g.index == w["index"]


TAG_SETS = {
    "iob2": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"],
    "iob2-one-type": ["O", "B-MISC", "I-MISC"],
    "no-prefix": ["O", "PER", "LOC"],
    "mixed": ["O", "B-X", "I-X", "Y", "Z-W"],  # Z-W: no B-/I- prefix, but a dash the group label splits at
}
UNIT_WORDS = ["the", "cat", "sat", "on", "mat", "park", "##ing", "movie", "##s", ".", ",", "new", "york"]
UNIT_TEXT = "The parking cat sat on the mat, movies parking. New York the cat parking movies."


@pytest.fixture(scope="module")
def unit_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab = tmp_path_factory.mktemp("tag-vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *UNIT_WORDS]) + "\n")
    return vocab


@pytest.mark.parametrize("aggregation", STRATEGIES)
@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_aggregation_equals_the_pipeline_on_random_logits(
    aggregation: Aggregation, tag_set: str, unit_vocab: Path
) -> None:
    labels = TAG_SETS[tag_set]
    pipe = pipeline(labels, unit_vocab)
    n = len(pipe.tokenizer(UNIT_TEXT)["input_ids"])
    rng = np.random.default_rng(len(tag_set) * 7 + len(aggregation))
    for trial in range(25):
        # Some trials lean towards O, so runs of entities sit between O tokens; all of them have I- tags after
        # O and after other types (invalid IOB2) as well as valid runs.
        logits = rng.normal(0, 2, size=(n, len(labels))).astype(np.float32)
        logits[:, 0] += rng.choice([0.0, 2.0])
        want = pipeline_entities(pipe, UNIT_TEXT, logits, aggregation, [])
        assert_same(ours(pipe, UNIT_TEXT, logits, labels, aggregation), want, aggregation, trial)


@pytest.mark.parametrize("aggregation", STRATEGIES)
def test_aggregation_equals_the_pipeline_on_invalid_sequences(
    aggregation: Aggregation, unit_vocab: Path
) -> None:
    """Sequences a tagger may well predict: I- after O, I- of another type, B- after B-, a word whose
    pieces disagree."""
    labels = TAG_SETS["iob2"]
    pipe = pipeline(labels, unit_vocab)
    n = len(pipe.tokenizer(UNIT_TEXT)["input_ids"])
    patterns = [
        ["O", "I-PER", "I-PER", "O", "B-PER", "I-LOC", "I-PER", "B-PER", "B-PER", "I-PER"],
        ["I-ORG", "B-ORG", "I-ORG", "I-ORG", "O", "I-ORG", "B-LOC", "I-PER", "O", "O"],
        ["B-LOC", "I-LOC", "B-LOC", "O", "I-LOC", "I-LOC", "B-ORG", "B-PER", "I-PER", "I-ORG"],
    ]
    rng = np.random.default_rng(0)
    for k, pattern in enumerate(patterns):
        chosen = [labels.index(pattern[i % len(pattern)]) for i in range(n)]
        logits = rng.normal(0, 0.5, size=(n, len(labels))).astype(np.float32)
        logits[np.arange(n), chosen] += 3.0
        want = pipeline_entities(pipe, UNIT_TEXT, logits, aggregation, [])
        assert_same(ours(pipe, UNIT_TEXT, logits, labels, aggregation), want, aggregation, k)
        for ignore in (["O"], ["O", "PER", "B-PER"]):
            want = pipeline_entities(pipe, UNIT_TEXT, logits, aggregation, ignore)
            got = [e for e in ours(pipe, UNIT_TEXT, logits, labels, aggregation) if e.label not in ignore]
            assert_same(got, want, aggregation, (k, ignore))


@pytest.mark.parametrize("aggregation", STRATEGIES)
def test_server_equals_the_pipeline_on_the_models_logits(
    client: TestClient, runner: ModelRunner, bundles: dict[str, Path], aggregation: Aggregation
) -> None:
    pipe = pipeline(TAGS, bundles["tagger"] / "vocab.txt")
    for text in TEXTS:
        enc = runner.encode([text])[0]
        assert enc.ids.tolist() == pipe.tokenizer(text)["input_ids"]  # the same tokens as transformers'
        logits = runner.infer([enc])[0]
        for ignore in ([], ["O"]):
            got = one(client, text=text, aggregation_strategy=aggregation, ignore_labels=ignore)["entities"]
            want = pipeline_entities(pipe, text, logits, aggregation, ignore)
            assert len(got) == len(want), (text, got, want)
            for g, w in zip(got, want, strict=True):
                assert g["label"] == (w.get("entity") or w.get("entity_group"))
                assert (g["start"], g["end"]) == (w["start"], w["end"])
                assert g["text"] == text[g["start"] : g["end"]]
                assert g["score"] == pytest.approx(float(w["score"]), abs=1e-5)
                assert g.get("index") == w.get("index")


# ----------------------------------------------------------------------------------------------------------
# The route
# ----------------------------------------------------------------------------------------------------------


def test_tag_contract(client: TestClient) -> None:
    body = tag(client, text=TEXT)
    assert body["model"] == "tagger"
    (result,) = body["results"]
    assert set(result) == {"entities", "windows", "truncated"}
    assert result["windows"] == 1 and result["truncated"] is False
    for e in result["entities"]:
        assert set(e) == {"label", "score", "text", "start", "end"}
        assert e["label"] in TYPES - {"O"}  # the default ignore_labels leaves O out
        assert 0.0 < e["score"] <= 1.0
        assert e["text"] == TEXT[e["start"] : e["end"]] and e["end"] > e["start"]
    tokens = one(client, text=TEXT, aggregation_strategy="none", ignore_labels=[])["entities"]
    assert {t["label"] for t in tokens} <= set(TAGS)
    assert len({t["label"] for t in tokens}) > 2  # the random tagger predicts a mix, so grouping is tested
    for t in tokens:
        assert set(t) == {"label", "score", "text", "start", "end", "index"}
    assert [t["index"] for t in tokens] == list(range(1, len(tokens) + 1))  # [CLS] is 0
    check_offsets(TEXT, tokens)
    detector = client.post("/detect", json={"model": "detector", "text": TEXT}).json()["results"][0]["tokens"]
    assert [(t["start"], t["end"]) for t in tokens] == [(t["start"], t["end"]) for t in detector]


def test_ignore_labels_filters_entities(client: TestClient) -> None:
    everything = one(client, text=TEXT, ignore_labels=[])["entities"]
    default = one(client, text=TEXT)["entities"]
    assert default == [e for e in everything if e["label"] != "O"]
    kinds = {e["label"] for e in everything}
    dropped = sorted(kinds)[0]
    assert one(client, text=TEXT, ignore_labels=[dropped])["entities"] == [
        e for e in everything if e["label"] != dropped
    ]


def test_empty_text_has_no_entities(client: TestClient) -> None:
    assert one(client, text="") == {"entities": [], "windows": 1, "truncated": False}


@pytest.mark.parametrize("aggregation", STRATEGIES)
def test_batched_request_equals_single_requests(client: TestClient, aggregation: Aggregation) -> None:
    together = tag(client, texts=TEXTS, aggregation_strategy=aggregation)["results"]
    assert len(together) == len(TEXTS)
    for text, got in zip(TEXTS, together, strict=True):
        alone = one(client, text=text, aggregation_strategy=aggregation)
        assert_close(got, alone)


def test_inputs_is_the_same_batch_as_texts(client: TestClient) -> None:
    """One batch shape on every native route (issue 54): `inputs` is `texts` under /classify's name."""
    assert tag(client, inputs=TEXTS)["results"] == tag(client, texts=TEXTS)["results"]
    r = client.post("/tag", json={"texts": TEXTS, "inputs": TEXTS})
    assert r.status_code == 400 and "exactly one of 'text'" in r.json()["detail"]


def assert_close(a: dict[str, Any], b: dict[str, Any]) -> None:
    strip = [{k: v for k, v in e.items() if k != "score"} for e in a["entities"]]
    assert strip == [{k: v for k, v in e.items() if k != "score"} for e in b["entities"]]
    np.testing.assert_allclose(
        [e["score"] for e in a["entities"]], [e["score"] for e in b["entities"]], atol=1e-5
    )
    assert (a["windows"], a["truncated"]) == (b["windows"], b["truncated"])


def test_unbatched_server_gives_the_same_answers(bundles: dict[str, Path]) -> None:
    answers = []
    for overrides in ({"max_batch_size": 1}, {"max_batch_size": 32, "max_wait_ms": 50}):
        settings = ServeSettings(models=(ModelSpec("tagger", bundles["tagger"]),), **overrides)  # type: ignore[arg-type]
        with TestClient(create_app(settings)) as c:
            wait_ready(c)
            answers.append(tag(c, texts=TEXTS, aggregation_strategy="none", ignore_labels=[])["results"])
    for a, b in zip(*answers, strict=True):
        assert_close(a, b)


@pytest.mark.parametrize("text", UNICODE_TEXTS)
def test_offsets_are_exact_on_unicode(client: TestClient, text: str) -> None:
    tokens = one(client, text=text, aggregation_strategy="none", ignore_labels=[])["entities"]
    assert tokens, text
    check_offsets(text, tokens)
    detector = client.post("/detect", json={"model": "detector", "text": text}).json()["results"][0]
    assert [(t["start"], t["end"]) for t in tokens] == [(t["start"], t["end"]) for t in detector["tokens"]]
    for aggregation in ("simple", "first", "average", "max"):
        found = one(client, text=text, aggregation_strategy=aggregation, ignore_labels=[])["entities"]
        check_offsets(text, found)  # in order, not overlapping, each the text it spans


# ----------------------------------------------------------------------------------------------------------
# Long documents
# ----------------------------------------------------------------------------------------------------------


def windowed(runner: ModelRunner, text: str, stride: int, aggregation: Aggregation) -> dict[str, Any]:
    """/tag's answer computed here: the document split into windows, each run alone, rows merged."""
    import msgspec

    doc = split(runner.encode_whole([text])[0], runner.max_seq_len, stride)
    logits = merge(doc, [runner.infer([w])[0] for w in doc.windows])
    scored = TokenLogits(doc.full, logits, len(doc.windows))
    result = tag_result(text, scored, runner.labels, aggregation, [])
    return msgspec.to_builtins(result)


@pytest.mark.parametrize("stride", [None, 0, 9, 31])
def test_a_long_document_equals_its_windows_merged(
    client: TestClient, runner: ModelRunner, stride: int | None
) -> None:
    text = "parking " * 5 + document(300, seed=stride or 4) + " movies"
    body: dict[str, Any] = {"text": text, "ignore_labels": []}
    if stride is not None:
        body["stride"] = stride
    overlap = default_stride(MAX_LEN) if stride is None else stride
    for aggregation in STRATEGIES:
        got = one(client, aggregation_strategy=aggregation, **body)
        want = windowed(runner, text, overlap, aggregation)
        assert got["windows"] == want["windows"] > 1 and got["truncated"] is False
        assert_close(got, want)
        check_offsets(text, got["entities"])
    tokens = one(client, aggregation_strategy="none", **body)["entities"]
    pieces = runner.untruncated.encode(text).tokens[1:-1]
    assert [t["text"].lower() for t in tokens] == [re.sub("^##", "", p) for p in pieces]
    assert got["windows"] == len(window_starts(len(pieces), SPAN, overlap))


def test_window_tags_equal_independent_passes(client: TestClient, runner: ModelRunner) -> None:
    """Tokens only the first window holds are tagged as the text cut to the model; tokens only the last
    window holds as the text's tail, a text of its own (cut at a word, so at a token)."""
    text = document(300, seed=3)
    stride = 20
    got = one(client, text=text, stride=stride, aggregation_strategy="none", ignore_labels=[])["entities"]
    n = len(got)

    def single_pass(part: str) -> list[tuple[str, float]]:
        probs = softmax(runner.infer(runner.encode([part]))[0])[1:-1]
        return [(TAGS[int(p.argmax())], float(p.max())) for p in probs]

    def labelled(tokens: list[dict[str, Any]]) -> list[tuple[str, float]]:
        return [(t["label"], t["score"]) for t in tokens]

    only_first = SPAN - stride
    first = single_pass(text)
    assert [x for x, _ in labelled(got[:only_first])] == [x for x, _ in first[:only_first]]
    np.testing.assert_allclose(
        [s for _, s in labelled(got[:only_first])], [s for _, s in first[:only_first]], atol=1e-5
    )
    last = single_pass(text[got[n - SPAN]["start"] :])
    only_last = window_starts(n, SPAN, stride)[-2] + SPAN
    tail = last[only_last - (n - SPAN) :]
    assert [x for x, _ in labelled(got[only_last:])] == [x for x, _ in tail]
    np.testing.assert_allclose([s for _, s in labelled(got[only_last:])], [s for _, s in tail], atol=1e-5)


def test_truncate_tags_the_first_window_only(client: TestClient) -> None:
    text = " ".join(["the cat sat on the mat"] * 30)
    result = one(client, text=text, truncate=True, aggregation_strategy="none", ignore_labels=[])
    assert result["truncated"] is True and result["windows"] == 1
    assert len(result["entities"]) == MAX_LEN - 2
    short = one(client, text="the cat sat", truncate=True)
    assert short["truncated"] is False


# ----------------------------------------------------------------------------------------------------------
# Errors, limits, models, metrics, keys
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"text": "x", "aggregation_strategy": "maxx"}, 400, "aggregation_strategy"),
        ({"text": "x", "aggregation_strategy": None}, 400, "aggregation_strategy"),
        ({"text": "x", "ignore_labels": "O"}, 400, "ignore_labels"),
        ({"text": "x", "ignore_labels": [1]}, 400, "ignore_labels"),
        ({"text": "x", "model": "detector"}, 400, "send it to /detect"),
        ({"text": "x", "model": "sentiment"}, 400, "send it to /classify"),
        ({"text": "x", "model": "nope"}, 404, "'nope' is not loaded; loaded for /tag: tagger"),
        ({}, 400, "exactly one of 'text'"),
        ({"text": "a", "texts": ["b"]}, 400, "exactly one of 'text'"),
        ({"texts": []}, 400, "empty"),
        ({"text": 3}, 400, "Validation failed"),
        ({"text": "x", "threshold": 0.5}, 400, "threshold"),  # a /detect field: unknown here
        ({"text": "x", "level": "word"}, 400, "level"),
        ({"texts": ["x"] * 17}, 413, "the limit is 16"),
        ({"text": "x" * 20_001}, 413, "the limit is 20,000"),
        ({"text": document(100), "stride": 32}, 400, "at most 31"),
        ({"text": document(100), "stride": -1}, 400, "stride"),
        ({"text": document(100), "stride": 1.5}, 400, "stride"),
        ({"text": document(100), "stride": 10, "truncate": True}, 400, "one or the other"),
        ({"texts": [document(2000, seed=1), document(2000, seed=2)]}, 413, "model windows"),
    ],
)
def test_bad_requests_get_clear_4xx(
    client: TestClient, body: dict[str, Any], status: int, message: str
) -> None:
    r = client.post("/tag", json=body)
    assert r.status_code == status, r.text
    payload = r.json()
    assert payload["status_code"] == status and payload["detail"]
    assert message in payload["detail"] or message in json.dumps(payload.get("extra"))
    assert client.get("/health/ready").status_code == 200


def test_a_tagger_sent_to_detect_is_told_where_to_go(client: TestClient) -> None:
    r = client.post("/detect", json={"model": "tagger", "text": "x"})
    assert r.status_code == 400 and "send it to /tag" in r.json()["detail"]
    r = client.post("/classify", json={"model": "tagger", "text": "x"})
    assert r.status_code == 400 and "send it to /tag" in r.json()["detail"]


def test_no_tagger_or_several(bundles: dict[str, Path]) -> None:
    settings = ServeSettings(models=(ModelSpec("detector", bundles["detector"]),))
    with TestClient(create_app(settings)) as c:
        wait_ready(c)
        r = c.post("/tag", json={"text": "x"})
        assert r.status_code == 404 and "no tagger model is loaded" in r.json()["detail"]
    two = (ModelSpec("a", bundles["tagger"]), ModelSpec("b", bundles["tagger"]))
    with TestClient(create_app(ServeSettings(models=two))) as c:
        wait_ready(c)
        r = c.post("/tag", json={"text": "x"})
        assert r.status_code == 400 and "several models serve /tag; name one in 'model': a, b" in r.text
        assert tag(c, text="the cat", model="b")["model"] == "b"


def test_models_lists_the_tagger_with_its_tags(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert models["tagger"]["kind"] == "tagger"
    assert models["tagger"]["labels"] == TAGS
    assert models["tagger"]["problem_type"] is None and models["tagger"]["max_seq_len"] == MAX_LEN


def test_metrics_per_model(client: TestClient) -> None:
    tag(client, texts=["the cat", "the dog sat"])
    metrics = client.get("/metrics").text
    for name in (
        'electra_batch_size_count{model="tagger"}',
        'electra_tokenization_seconds_count{model="tagger"}',
        'electra_inference_seconds_count{model="tagger"}',
        'electra_inputs_processed_total{model="tagger"}',
        'electra_tokens_processed_total{model="tagger"}',
    ):
        assert name in metrics, name
    assert 'path="/tag"' in metrics


def test_api_keys_guard_tag(bundles: dict[str, Path], tmp_path: Path) -> None:
    key = "tag-key-0123456789abcdef"
    keys = tmp_path / "keys"
    keys.write_text(key + "\n", encoding="utf-8")
    settings = ServeSettings(models=(ModelSpec("tagger", bundles["tagger"]),), api_key_file=keys)
    with TestClient(create_app(settings)) as c:
        wait_ready(c)
        r = c.post("/tag", json={"text": "the cat"})
        assert r.status_code == 401 and "API key" in r.json()["detail"]
        r = c.post("/tag", json={"text": "the cat"}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text


def test_schema_documents_tag(client: TestClient) -> None:
    schema = client.get("/schema/openapi.json").json()
    operation = schema["paths"]["/tag"]["post"]
    assert {"200", "400", "401", "404", "413", "503"} <= set(operation["responses"])
    request = schema["components"]["schemas"]["TagRequest"]
    assert request["additionalProperties"] is False
    assert set(request["properties"]) == {
        "text",
        "texts",
        "inputs",
        "model",
        "aggregation_strategy",
        "ignore_labels",
        "truncate",
        "stride",
    }
