"""The hot path (electra.serving.http.hot_path) against the Litestar app it stands in front of: every request,
valid or not, answers the same status, headers and body, and counts the same metrics, with the hot path as
without it; the common case never reaches the app, everything else does as it came.

Every other server test runs through the hot path too (it is part of every app); this one holds it to the
app's answers request by request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from electra.serving.http.app import create_app
from electra.serving.http.hot_path import HotPath
from electra.serving.http.server_timing import parse
from electra.serving.settings import ModelSpec, ServeSettings

LONG = " ".join(["The committee met on Tuesday to discuss the budget."] * 12)

# (name, path, body, extra headers, whether the hot path answers it itself)
REQUESTS: list[tuple[str, str, bytes, dict[str, str], bool]] = [
    ("detect one", "/detect", b'{"text": "The cat sat on the mat."}', {}, True),
    (
        "detect word level",
        "/detect",
        b'{"texts": ["a b", "The dog"], "level": "word", "threshold": 0.3}',
        {},
        True,
    ),
    ("detect windows", "/detect", json.dumps({"inputs": [LONG], "stride": 8}).encode(), {}, True),
    ("detect truncated", "/detect", json.dumps({"text": LONG, "truncate": True}).encode(), {}, True),
    ("detect as text/plain", "/detect", b'{"text": "x"}', {"content-type": "text/plain"}, True),
    ("classify pair", "/classify", b'{"text": "good", "text_pair": "bad"}', {}, True),
    (
        "classify batch",
        "/classify",
        b'{"inputs": ["a", {"text": "b", "text_pair": "c"}], "raw_scores": true}',
        {},
        True,
    ),
    ("classify regression", "/classify", b'{"text": "fine", "model": "score"}', {}, True),
    ("tag simple", "/tag", b'{"text": "New York and Paris", "aggregation_strategy": "simple"}', {}, True),
    # Refused once the body is the route's type: answered here, by the app's exception handler.
    ("two fields", "/detect", b'{"text": "a", "texts": ["b"]}', {}, True),
    ("no such model", "/detect", b'{"text": "x", "model": "nope"}', {}, True),
    ("model of another kind", "/detect", b'{"text": "x", "model": "sentiment"}', {}, True),
    ("tag on a detector", "/tag", b'{"text": "x", "model": "detector"}', {}, True),
    ("empty batch", "/detect", b'{"texts": []}', {}, True),
    ("too many texts", "/detect", json.dumps({"texts": ["a"] * 17}).encode(), {}, True),
    ("too many characters", "/detect", json.dumps({"text": "a " * 2000}).encode(), {}, True),
    (
        "too long, no truncation",
        "/classify",
        json.dumps({"text": LONG, "truncate": False}).encode(),
        {},
        True,
    ),
    ("pair beside a batch", "/classify", b'{"texts": ["a"], "text_pair": "b"}', {}, True),
    # Not the route's type, strictly: the app decides.
    ("lenient boolean", "/detect", b'{"text": "x", "truncate": "true"}', {}, False),
    ("wrong type", "/detect", b'{"text": 5}', {}, False),
    ("unknown field", "/detect", b'{"text": "x", "extra": 1}', {}, False),
    ("threshold out of range", "/detect", b'{"text": "x", "threshold": 2}', {}, False),
    ("not json", "/detect", b"not json", {}, False),
    ("byte-order mark", "/classify", b'\xef\xbb\xbf{"text": "x"}', {}, False),
    ("NaN", "/detect", b'{"text": "x", "threshold": NaN}', {}, False),
    ("deep", "/tag", b"[" * 5000 + b"]" * 5000, {}, False),
    ("not utf-8", "/detect", b'{"text": "\xff"}', {}, False),
    # Not the common case: the app, untouched.
    ("empty body", "/detect", b"", {}, False),
    ("gzip", "/detect", b"\x1f\x8b not really", {"content-encoding": "gzip"}, False),
    ("cors", "/detect", b'{"text": "x"}', {"origin": "https://example.org"}, False),
    ("over the body limit", "/detect", json.dumps({"text": "a" * 300_000}).encode(), {}, False),
]


@pytest.fixture(scope="module")
def app(serving_bundles: dict[str, Path]) -> Iterator[tuple[TestClient, HotPath]]:
    names = ("detector", "sentiment", "score", "tagger")
    settings = ServeSettings(
        models=tuple(ModelSpec(n, serving_bundles[n]) for n in names),
        max_texts=16,
        max_chars=3000,
        max_body_bytes=200_000,
    )
    application = create_app(settings)
    hot = application.asgi_handler
    assert isinstance(hot, HotPath)
    with TestClient(application) as client:
        while client.get("/health/ready").status_code != 200:
            pass
        yield client, hot
        application.asgi_handler = hot


def _answer(client: TestClient, path: str, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    response = client.post(path, content=body, headers={"content-type": "application/json", **headers})
    timing = response.headers.get("server-timing")
    return {
        "status": response.status_code,
        "body": response.content,
        # The stages a request went through; their durations differ from one call to the next.
        "headers": sorted((k, v) for k, v in response.headers.items() if k != "server-timing"),
        "stages": sorted(parse(timing)) if timing else None,
    }


def _counting(hot: HotPath) -> list[str]:
    """The paths of the requests the app behind `hot` is handed from now on."""
    seen: list[str] = []
    inner = hot.inner

    async def spy(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            seen.append(scope["path"])
        await inner(scope, receive, send)

    hot.inner = spy
    return seen


@pytest.mark.parametrize(
    ("name", "path", "body", "headers", "hot_answers"), REQUESTS, ids=[r[0] for r in REQUESTS]
)
def test_same_answer_with_and_without_the_hot_path(
    app: tuple[TestClient, HotPath],
    name: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    hot_answers: bool,
) -> None:
    client, hot = app
    inner = hot.inner
    handed_on = _counting(hot)
    try:
        with_hot = _answer(client, path, body, headers)
    finally:
        hot.inner = inner
    client.app.asgi_handler = inner
    try:
        without = _answer(client, path, body, headers)
    finally:
        client.app.asgi_handler = hot
    assert with_hot == without
    assert (handed_on == []) == hot_answers, f"{name}: the app was handed {handed_on}"
    assert hot.arrivals.count == 0


def _counts() -> dict[tuple[str, ...], float]:
    """Every HTTP and statistics sample that counts requests, by its labels."""
    wanted = {
        "electra_http_requests_total",
        "electra_http_requests_error_total",
        "electra_http_request_duration_seconds_count",
        "electra_triton_statistic_seconds_count",
    }
    return {
        (sample.name, *sorted(f"{k}={v}" for k, v in sample.labels.items())): sample.value
        for family in REGISTRY.collect()
        for sample in family.samples
        if sample.name in wanted
    }


def test_same_metrics_with_and_without_the_hot_path(app: tuple[TestClient, HotPath]) -> None:
    client, hot = app

    def deltas() -> dict[tuple[str, ...], float]:
        before = _counts()
        for _, path, body, headers, _ in REQUESTS:
            _answer(client, path, body, headers)
        after = _counts()
        return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}

    with_hot = deltas()
    client.app.asgi_handler = hot.inner
    try:
        without = deltas()
    finally:
        client.app.asgi_handler = hot
    assert with_hot == without
    # Both the HTTP layer's counts and the models' statistics moved.
    assert any(k[0] == "electra_triton_statistic_seconds_count" for k in with_hot)
    assert any(k[0] == "electra_http_requests_total" and "status_code=200" in k for k in with_hot)


def test_the_hot_path_can_be_turned_off(serving_bundles: dict[str, Path]) -> None:
    """--hot-path false (ELECTRA_HOT_PATH, the chart's server.hotPath): every request through Litestar's
    route, as the comparisons above take it."""
    import argparse
    import dataclasses

    from electra.cli.serve_cmd import OPTIONS, settings_from

    args = argparse.Namespace(model=None, **{o.replace("-", "_"): None for o in OPTIONS})
    models = f"detector={serving_bundles['detector']}"
    assert settings_from(args, environ={"ELECTRA_MODELS": models}).hot_path
    off = settings_from(args, environ={"ELECTRA_MODELS": models, "ELECTRA_HOT_PATH": "false"})
    assert not off.hot_path
    assert not isinstance(create_app(off).asgi_handler, HotPath)
    assert isinstance(create_app(dataclasses.replace(off, hot_path=True)).asgi_handler, HotPath)
