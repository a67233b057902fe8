"""Length buckets (`--pad-to-multiple-of`): batches padded to a multiple of N tokens, the warm-up that runs
every such length before the server turns ready, and answers that do not change with the padding."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar.testing import TestClient

from electra.padding import pad_rows
from electra.serving.engine.runtime import ModelRunner
from electra.serving.engine.shapes import bucket_lengths, padded_length, warm_up_shapes
from electra.serving.http.app import create_app
from electra.serving.settings import DEFAULT_PAD_MULTIPLE, ModelSpec, ServeSettings

TEXTS = [
    "the cat",
    "the cat sat on the mat",
    "the quick brown fox jumps over the lazy dog and the cat sat on the mat by the river",
    "a",
    "they walked north then east then south, then west to new york at night " * 3,
]


def test_lengths_round_up_to_the_multiple_within_the_model() -> None:
    assert [padded_length(n, 16, 64) for n in (1, 16, 17, 33, 63, 64)] == [16, 16, 32, 48, 64, 64]
    assert padded_length(50, 32, 60) == 60  # the model's length, not 64
    assert [padded_length(n, 1, 64) for n in (3, 17, 64)] == [3, 17, 64]
    assert bucket_lengths(64, 16) == [16, 32, 48, 64] and bucket_lengths(60, 32) == [32, 60]


def test_warm_up_runs_every_bucket_at_one_row_half_the_most_rows_and_the_most() -> None:
    shapes = warm_up_shapes(64, 16, max_batch_size=8, max_batch_tokens=256)
    assert shapes == [
        *[(1, 16), (4, 16), (8, 16), (1, 32), (4, 32), (8, 32)],
        *[(1, 48), (2, 48), (5, 48), (1, 64), (2, 64), (4, 64)],
    ]
    assert warm_up_shapes(64, 16, 1, 8192) == [(1, 16), (1, 32), (1, 48), (1, 64)]
    # Without buckets lengths are unbounded: the few shapes a server meets first.
    assert warm_up_shapes(512, 1, 32, 8192) == [(1, 16), (4, 16), (2, 512)]


def test_pad_rows_pads_to_a_given_width_never_below_the_longest_row() -> None:
    feeds = pad_rows([[5, 6, 7], [5]], [[0, 0, 0], [0]], 0, width=8)
    assert feeds["input_ids"].shape == (2, 8) and feeds["attention_mask"].sum(axis=1).tolist() == [3, 1]
    assert pad_rows([[5, 6, 7]], [[0, 0, 0]], 0, width=2)["input_ids"].shape == (1, 3)


def test_the_default_multiple_is_the_devices() -> None:
    models = (ModelSpec("d", Path("b")),)
    assert ServeSettings(models=models).pad_multiple == DEFAULT_PAD_MULTIPLE["cpu"] == 1
    assert ServeSettings(models=models, device="cuda").pad_multiple == DEFAULT_PAD_MULTIPLE["cuda"] == 32
    assert ServeSettings(models=models, device="cuda", pad_to_multiple_of=8).pad_multiple == 8
    with pytest.raises(Exception, match="pad_to_multiple_of must be at least 1"):
        ServeSettings(models=models, pad_to_multiple_of=0)


class RecordingRunner(ModelRunner):
    """A real runner that records the width of every batch it runs and the thread it ran on, as warm-up or
    (once `warmed` is set) as a request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warmed = threading.Event()
        self.warm_calls: set[tuple[str, int]] = set()
        self.request_calls: set[tuple[str, int]] = set()

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        call = (threading.current_thread().name, feeds["input_ids"].shape[1])
        (self.request_calls if self.warmed.is_set() else self.warm_calls).add(call)
        return super().run(feeds)

    @property
    def warm_widths(self) -> set[int]:
        return {width for _, width in self.warm_calls}

    @property
    def request_widths(self) -> set[int]:
        return {width for _, width in self.request_calls}


def answers(app_runners: dict[str, ModelRunner], multiple: int) -> dict[str, Any]:
    models = tuple(ModelSpec(name, r.path) for name, r in app_runners.items())
    app = create_app(ServeSettings(models=models, pad_to_multiple_of=multiple, max_wait_ms=20), app_runners)
    with TestClient(app) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        out = {
            "detect": c.post("/detect", json={"texts": TEXTS, "model": "detector"}).json(),
            "classify": c.post("/classify", json={"texts": TEXTS, "model": "sentiment"}).json(),
            "tag": c.post(
                "/tag", json={"texts": TEXTS, "model": "tagger", "aggregation_strategy": "none"}
            ).json(),
        }
    return out


def test_answers_do_not_depend_on_the_padding(serving_bundles: dict[str, Path]) -> None:
    """Every route's scores with lengths padded to a multiple of 16 equal those padded to the longest row:
    the padding is masked out, whatever its width."""

    def runners(multiple: int) -> dict[str, ModelRunner]:
        return {
            name: ModelRunner(name, serving_bundles[name], pad_multiple=multiple)
            for name in ("detector", "sentiment", "tagger")
        }

    exact, buckets = answers(runners(1), 1), answers(runners(16), 16)
    for route in ("detect", "classify", "tag"):
        assert "results" in exact[route], exact[route]
    for got, want in zip(buckets["detect"]["results"], exact["detect"]["results"], strict=True):
        assert [t["text"] for t in got["tokens"]] == [t["text"] for t in want["tokens"]]
        assert np.allclose(
            [t["score"] for t in got["tokens"]], [t["score"] for t in want["tokens"]], atol=2e-6
        )
    for got, want in zip(buckets["classify"]["results"], exact["classify"]["results"], strict=True):
        assert got["label"] == want["label"]
        assert np.allclose(list(got["scores"].values()), list(want["scores"].values()), atol=2e-6)
    for got, want in zip(buckets["tag"]["results"], exact["tag"]["results"], strict=True):
        assert [e["label"] for e in got["entities"]] == [e["label"] for e in want["entities"]]
        assert np.allclose(
            [e["score"] for e in got["entities"]], [e["score"] for e in want["entities"]], atol=2e-6
        )


def test_after_warm_up_no_request_meets_a_width_the_model_has_not_run(
    serving_bundles: dict[str, Path],
) -> None:
    runner = RecordingRunner("detector", serving_bundles["detector"], pad_multiple=16)
    settings = ServeSettings(models=(ModelSpec("detector", runner.path),), pad_to_multiple_of=16)
    app = create_app(settings, {"detector": runner})
    texts = [" ".join(["the"] * n) for n in range(1, 70, 3)]  # 3 .. 64 tokens, and longer ones in windows
    with TestClient(app) as c:
        while c.get("/health/ready").status_code != 200:
            pass
        runner.warmed.set()
        for text in texts:
            assert c.post("/detect", json={"text": text}).status_code == 200
        assert c.post("/detect", json={"texts": texts}).status_code == 200
    assert runner.warm_widths == {16, 32, 48, 64}
    assert runner.request_widths and runner.request_widths <= runner.warm_widths, runner.request_widths
    # Per thread too (a GPU provider's state is per calling thread): requests ran both on the batcher's
    # thread and inline on the event loop, and each (thread, width) they met was warmed on that thread.
    assert len({thread for thread, _ in runner.request_calls}) == 2, runner.request_calls
    assert runner.request_calls <= runner.warm_calls, runner.request_calls - runner.warm_calls


def test_the_generator_pads_and_warms_up_as_its_detector(
    suggest_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Suggestions with buckets equal those without, and warm-up ran the generator at every bucket."""
    import electra.serving.engine.generator as generator_module

    widths: list[int] = []
    real = generator_module.run_session

    def recording(session: Any, feeds: dict[str, np.ndarray], device: str) -> np.ndarray:
        widths.append(feeds["input_ids"].shape[1])
        return real(session, feeds, device)

    monkeypatch.setattr(generator_module, "run_session", recording)
    texts = ["the cat sat on the river", "the dog ran to the city park and the cat sat"]
    found = []
    for multiple in (1, 16):
        widths.clear()
        runner = ModelRunner("detector", suggest_bundle, pad_multiple=multiple)
        settings = ServeSettings(models=(ModelSpec("detector", suggest_bundle),), pad_to_multiple_of=multiple)
        app = create_app(settings, {"detector": runner})
        with TestClient(app) as c:
            while c.get("/health/ready").status_code != 200:
                pass
            warmed = set(widths)
            body = {"texts": texts, "suggest": 3, "threshold": 0.3}
            found.append(c.post("/detect", json=body).json())
        if multiple == 16:
            assert warmed == {16, 32, 48, 64} and set(widths) <= warmed, widths
    exact, buckets = found
    assert exact == buckets or all(
        [s["token"] for t in a["tokens"] for s in t.get("suggestions", [])]
        == [s["token"] for t in b["tokens"] for s in t.get("suggestions", [])]
        for a, b in zip(exact["results"], buckets["results"], strict=True)
    )
    assert any(t.get("suggestions") for r in exact["results"] for t in r["tokens"]), exact
