"""The page at `/` with a detector exported with its generator: it asks /detect for suggestions, puts each
replaced token's in its tooltip (what hovering shows) and the text with the best ones applied below the
result. Rendered by headless Chromium against a real `electra serve`, as tests/test_page.py does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from electra.serving.process import ServerProcess
from tests.test_page import http, page_server, page_url, run_chromium

TEXT = "The cat sat on the mat, walking quickly.\n  She loved the movie!"
SUGGEST = 5  # what the page asks for (index.html's SUGGEST)


@pytest.fixture(scope="module")
def server(
    suggest_bundle: Path, serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from page_server(
        tmp_path_factory,
        "suggest-page-server",
        ["--model", f"pair={suggest_bundle}", "--model", f"plain={serving_bundles['detector']}"],
    )


class SuggestDom(HTMLParser):
    """The body's state, each token span's tooltip and class, and the suggested text (None while hidden)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.state: str | None = None
        self.titles: list[str] = []
        self.suggested_class: list[bool] = []
        self.suggested: str | None = None
        self._in_suggested = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.state = a.get("data-state")
        classes = a.get("class", "").split()
        if tag == "span" and "tok" in classes:
            self.titles.append(a.get("title", ""))
            self.suggested_class.append("suggested" in classes)
        if a.get("id") == "suggested" and "hidden" not in a:
            self.suggested = ""
        if a.get("id") == "suggested-text" and self.suggested is not None:
            self._in_suggested = True

    def handle_endtag(self, tag: str) -> None:
        self._in_suggested = self._in_suggested and tag != "span"

    def handle_data(self, data: str) -> None:
        if self._in_suggested:
            self.suggested = (self.suggested or "") + data


def render(server: ServerProcess, profile: Path, **params: object) -> SuggestDom:
    dom = SuggestDom()
    dom.feed(run_chromium(["--dump-dom", page_url(server, **params)], profile).stdout.decode("utf-8"))
    dom.close()
    assert dom.state == "done", f"page state {dom.state!r}"
    return dom


def detect(server: ServerProcess, **body: object) -> dict:
    status, _, answer = http("POST", f"{server.url}/detect", {"text": TEXT, **body})
    assert status == 200, answer[:500]
    return json.loads(answer)["results"][0]


@pytest.mark.slow
@pytest.mark.parametrize("level", ["token", "word"])
def test_page_shows_suggestions_on_hover_and_the_suggested_text(
    server: ServerProcess, tmp_path: Path, level: str
) -> None:
    expected = detect(server, model="pair", level=level, threshold=0.5, suggest=SUGGEST)
    tokens = expected["tokens"]
    assert any(t["replaced"] for t in tokens) and any(not t["replaced"] for t in tokens)
    dom = render(server, tmp_path / "profile", text=TEXT, model="pair", level=level, threshold=0.5)
    assert len(dom.titles) == len(tokens)
    for title, marked, token in zip(dom.titles, dom.suggested_class, tokens, strict=True):
        assert marked == token["replaced"]
        if not token["replaced"]:
            assert "suggestions" not in title
            continue
        # Hovering a replaced token shows every suggestion, best first, with its probability.
        shown = title.split("\nsuggestions:", 1)[1].splitlines()[1:]
        want = [
            f"{json.dumps(s['text'].strip(), ensure_ascii=False)}  {s['score']:.3f}"
            for s in token["suggestions"]
        ]
        assert [line.strip() for line in shown] == want and len(want) == SUGGEST
    assert dom.suggested == expected["suggested_text"] != TEXT


@pytest.mark.slow
def test_page_asks_no_suggestions_of_a_detector_without_a_generator(
    server: ServerProcess, tmp_path: Path
) -> None:
    dom = render(server, tmp_path / "profile", text=TEXT, model="plain", threshold=0.5)
    assert dom.titles and not any(dom.suggested_class) and dom.suggested is None
    assert not any("suggestions" in t for t in dom.titles)
