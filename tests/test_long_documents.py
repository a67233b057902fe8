"""/detect on texts longer than the model: overlapping windows score every token, with exact offsets.

The window arithmetic is checked against brute force on its own; the server is checked against independent
single passes of the same ONNX model (the first and last windows as texts of their own), on the tiny
64-token bundles, so a window is 62 tokens and a few hundred words make a document.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from electra.serving.engine.encoded import Encoded
from electra.serving.engine.runtime import ModelRunner
from electra.serving.engine.windows import default_stride, max_stride, merge, split, window_starts
from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings
from tests.test_serving import check_offsets, wait_ready

MAX_LEN = 64  # the serving fixtures' bundles
SPAN = MAX_LEN - 2
# Words the fixture vocabulary holds whole, so a text cut at a word is cut at a token.
WORDS = ("the", "cat", "sat", "on", "mat", "quick", "brown", "fox", "new", "york")


def document(words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=words)) + "."


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    settings_ = ServeSettings(models=(ModelSpec("detector", serving_bundles["detector"]),), max_queue=40)
    with TestClient(create_app(settings_)) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def runner(serving_bundles: dict[str, Path]) -> ModelRunner:
    return ModelRunner("detector", serving_bundles["detector"])


def detect(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/detect", json=body)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]


def scores(result: dict[str, Any]) -> np.ndarray:
    return np.array([t["score"] for t in result["tokens"]])


def single_pass(runner: ModelRunner, text: str) -> np.ndarray:
    """Sigmoid scores of the real tokens of `text`, truncated to the model, in one model call."""
    enc = runner.encode([text])[0]
    logits = runner.infer([enc])[0].astype(np.float64)
    return (1 / (1 + np.exp(-logits)))[1:-1]


# ----------------------------------------------------------------------------------------------------------
# The arithmetic, against brute force
# ----------------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(tokens=st.integers(0, 2000), span=st.integers(1, 600), data=st.data())
def test_windows_cover_every_token_with_the_overlap_asked(
    tokens: int, span: int, data: st.DataObject
) -> None:
    stride = data.draw(st.integers(0, span // 2))
    starts = window_starts(tokens, span, stride)
    assert starts[0] == 0 and starts == sorted(set(starts))
    if tokens <= span:
        assert starts == [0]
        return
    assert starts[-1] + span == tokens  # the last window ends at the document's end, full length
    for a, b in itertools.pairwise(starts):
        assert a + span - b >= stride  # consecutive windows overlap by at least the stride
    covered = np.zeros(tokens, dtype=bool)
    for a in starts:
        covered[a : a + span] = True
    assert covered.all()
    # The fewest windows that can: k windows of `span` with overlaps >= stride reach (k-1)(span-stride)+span.
    assert len(starts) == max(1, -(-(tokens - span) // (span - stride))) + 1


def fake_document(tokens: int) -> Encoded:
    n = tokens + 2
    return Encoded(
        ids=np.arange(n, dtype=np.int64),
        type_ids=np.zeros(n, dtype=np.int64),
        offsets=[(0, 0)] + [(i, i + 1) for i in range(tokens)] + [(0, 0)],
        special=[1] + [0] * tokens + [1],
        word_ids=[None, *range(tokens), None],
        truncated=False,
    )


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(tokens=st.integers(1, 400), max_len=st.integers(3, 80), data=st.data())
def test_each_token_comes_from_the_window_with_most_context(
    tokens: int, max_len: int, data: st.DataObject
) -> None:
    stride = data.draw(st.integers(0, max_stride(max_len)))
    doc = split(fake_document(tokens), max_len, stride)
    span = max_len - 2
    for w, start in zip(doc.windows, doc.starts, strict=True):
        # A window is the document's own [CLS] + its slice of tokens + [SEP].
        assert w.ids.tolist() == [0, *range(1 + start, 1 + start + min(span, tokens)), tokens + 1]
    # Row of window k: every position says k; the merge must pick, per token, a window of most context.
    rows = [np.full(w.length, float(k)) for k, w in enumerate(doc.windows)]
    picked = merge(doc, rows)[1:-1].astype(int)

    def context(k: int, p: int) -> float:
        a, b = doc.starts[k], doc.starts[k] + min(span, tokens)
        before = p - a if a > 0 else np.inf
        after = b - 1 - p if b < tokens else np.inf
        return min(before, after)

    for p in range(tokens):
        holding = [k for k, a in enumerate(doc.starts) if a <= p < a + span]
        best = max(context(k, p) for k in holding)
        assert picked[p] in holding and context(picked[p], p) == best, (p, holding)


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(tokens=st.integers(1, 300), max_len=st.integers(3, 60), labels=st.integers(1, 5), data=st.data())
def test_a_taggers_rows_merge_whole(tokens: int, max_len: int, labels: int, data: st.DataObject) -> None:
    """(tokens, labels) rows: every label merges as a 1-D row would, and each token keeps the whole row of
    the window with most context (its probabilities stay one softmax of one window's logits)."""
    stride = data.draw(st.integers(0, max_stride(max_len)))
    doc = split(fake_document(tokens), max_len, stride)
    rng = np.random.default_rng(tokens * 1000 + max_len * 10 + labels)
    rows = [rng.normal(size=(w.length, labels)).astype(np.float32) for w in doc.windows]
    merged = merge(doc, rows)
    assert merged.shape == (tokens + 2, labels) and merged.dtype == np.float32
    for k in range(labels):
        np.testing.assert_array_equal(merged[:, k], merge(doc, [row[:, k] for row in rows]))
    picked = merge(doc, [np.full(w.length, float(k)) for k, w in enumerate(doc.windows)]).astype(int)
    for p in range(tokens):
        k = picked[1 + p]
        np.testing.assert_array_equal(merged[1 + p], rows[k][1 + p - doc.starts[k]])
    np.testing.assert_array_equal(merged[0], rows[0][0])
    np.testing.assert_array_equal(merged[-1], rows[-1][-1])


def test_stride_defaults_and_limits() -> None:
    assert default_stride(512) == 127 and max_stride(512) == 255
    assert default_stride(64) == 15 and max_stride(64) == 31


# ----------------------------------------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------------------------------------


def test_a_text_that_fits_is_one_pass(client: TestClient, runner: ModelRunner) -> None:
    text = document(40)
    windowed = detect(client, text=text)
    truncated = detect(client, text=text, truncate=True)
    assert windowed["windows"] == truncated["windows"] == 1
    assert windowed["truncated"] is truncated["truncated"] is False
    assert windowed == truncated
    np.testing.assert_allclose(scores(windowed), single_pass(runner, text), atol=1e-6)


@pytest.mark.parametrize("stride", [None, 0, 7, 31])
def test_every_token_of_a_long_text_is_scored(
    client: TestClient, runner: ModelRunner, stride: int | None
) -> None:
    text = document(400, seed=stride or 0)
    body: dict[str, Any] = {"text": text} if stride is None else {"text": text, "stride": stride}
    result = detect(client, **body)
    tokens = runner.untruncated.encode(text).tokens[1:-1]
    assert [t["text"] for t in result["tokens"]] == [re.sub("^##", "", t) for t in tokens]
    check_offsets(text, result["tokens"])  # exact character offsets across windows, in order, no gaps
    assert result["truncated"] is False
    overlap = default_stride(MAX_LEN) if stride is None else stride
    assert result["windows"] == len(window_starts(len(tokens), SPAN, overlap)) > 1
    replaced = sum(t["replaced"] for t in result["tokens"])
    assert result["replaced_fraction"] == pytest.approx(replaced / len(tokens), abs=1e-6)


def test_window_scores_equal_independent_passes(client: TestClient, runner: ModelRunner) -> None:
    """Tokens only the first window holds score as the text cut to the model; tokens only the last window
    holds score as the text's tail (a text of its own, cut at a word = at a token) in one pass."""
    text = document(300, seed=3)
    stride = 20
    result = detect(client, text=text, stride=stride)
    got = scores(result)
    n = len(got)
    first = single_pass(runner, text)
    only_first = SPAN - stride  # the second window starts here
    np.testing.assert_allclose(got[:only_first], first[:only_first], atol=1e-5)

    tail_start = result["tokens"][n - SPAN]["start"]
    last = single_pass(runner, text[tail_start:])
    assert len(last) == SPAN
    starts = window_starts(n, SPAN, stride)
    only_last = starts[-2] + SPAN  # where the window before the last ends
    np.testing.assert_allclose(got[only_last:], last[only_last - (n - SPAN) :], atol=1e-5)


def test_word_level_across_windows(client: TestClient) -> None:
    text = "parking " * 10 + document(250, seed=5) + " movies" * 10
    words = detect(client, text=text, level="word")
    assert [t["text"] for t in words["tokens"]] == re.findall(r"\w+|[^\w\s]", text)
    check_offsets(text, words["tokens"])
    tokens = detect(client, text=text)
    # A word's score is its highest piece's, wherever the window boundary fell.
    piece_max: dict[int, float] = {}
    for t in tokens["tokens"]:
        word = next(i for i, w in enumerate(words["tokens"]) if w["start"] <= t["start"] < w["end"])
        piece_max[word] = max(piece_max.get(word, 0.0), t["score"])
    assert [w["score"] for w in words["tokens"]] == pytest.approx(
        [piece_max[i] for i in range(len(piece_max))]
    )


def test_long_and_short_texts_in_one_request_equal_alone(client: TestClient) -> None:
    texts = [document(300, seed=1), "the cat sat.", document(150, seed=2)]
    together = client.post("/detect", json={"texts": texts}).json()["results"]
    for text, got in zip(texts, together, strict=True):
        alone = detect(client, text=text)
        assert [t["text"] for t in got["tokens"]] == [t["text"] for t in alone["tokens"]]
        np.testing.assert_allclose(scores(got), scores(alone), atol=1e-5)
        assert got["windows"] == alone["windows"]


def test_windows_share_the_batch_token_budget(serving_bundles: dict[str, Path]) -> None:
    """Windows are inputs to the batcher like any other: a budget of two windows makes calls of two."""
    settings_ = ServeSettings(
        models=(ModelSpec("detector", serving_bundles["detector"]),), max_batch_tokens=2 * MAX_LEN
    )
    with TestClient(create_app(settings_)) as c:
        wait_ready(c)
        before = _batch_sizes(c)
        result = detect(c, text=document(400))
        after = _batch_sizes(c)
    calls = after["count"] - before["count"]
    assert result["windows"] > 4
    assert calls >= result["windows"] / 2
    assert after["sum"] - before["sum"] == result["windows"]


def _batch_sizes(client: TestClient) -> dict[str, float]:
    text = client.get("/metrics").text
    out = {}
    for what in ("count", "sum"):
        m = re.search(rf'^electra_batch_size_{what}{{model="detector"}} (\S+)$', text, re.M)
        out[what] = float(m.group(1)) if m else 0.0
    return out


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"stride": 32}, 400, "at most 31"),
        ({"stride": -1}, 400, "stride"),
        ({"stride": 1.5}, 400, "stride"),
        ({"stride": 10, "truncate": True}, 400, "one or the other"),
    ],
)
def test_bad_strides(client: TestClient, body: dict[str, Any], status: int, message: str) -> None:
    r = client.post("/detect", json={"text": document(100), **body})
    assert r.status_code == status, r.text
    assert message in r.text  # the detail, or the field named in a validation error's extra


def test_more_windows_than_the_queue_holds_is_413(client: TestClient) -> None:
    # The fixture's queue holds 40 inputs; 2 texts of ~2,000 tokens need ~86 windows.
    r = client.post("/detect", json={"texts": [document(2000, seed=1), document(2000, seed=2)]})
    assert r.status_code == 413, r.text
    assert "model windows" in r.json()["detail"] and "40" in r.json()["detail"]
    assert client.get("/health/ready").status_code == 200
