"""The HTML page at `/`: served by the real `electra serve`, rendered by headless Chromium.

The page runs a detection (or, for a tagger, a tagging) on load when its box has a text (the URL's `?text=`
or the server's --example), so `chromium --dump-dom` shows the finished DOM: token or entity spans with the
server's character offsets, and the original text rebuilt exactly around them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from electra.serving.process import ServerNotReady, ServerProcess, free_port, serve_command, start_server

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "electra" / "serving" / "http" / "static" / "index.html"
SCREENSHOT = ROOT / "bench" / "results" / "page_screenshot.png"
READY_TIMEOUT_S = 120.0
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Lower case words of the fixture vocabulary, some split into word pieces (cats, parking, movies), with runs
# of spaces, a tab and blank lines that the page must keep.
PLAIN_TEXT = "the quick brown fox jumps over the lazy dog.\n\n  the cats sat   on the mat,\tparking movies!  "
# Accents (precomposed and combining), emoji (outside the BMP, so UTF-16 and code-point offsets differ; one
# with a skin-tone modifier), CJK and a character the vocabulary lacks: the page must place every token by the
# server's code-point offsets and still show the string exactly.
UNICODE_TEXT = "Café naïve über — the cat 🐱 sat in 日本語 city 東京!\nnaı̈ve e\u0301 👍🏽 ok 🇫🇷."


# ----------------------------------------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------------------------------------


def http(
    method: str, url: str, body: object | None = None, timeout: float = 30.0
) -> tuple[int, dict[str, str], bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def page_server(
    tmp_path_factory: pytest.TempPathFactory, label: str, args: list[str], name: str = "electra serve"
) -> Iterator[ServerProcess]:
    """`electra serve ARGS` on a free port of 127.0.0.1, logging under a temporary directory named after
    `label`: yields it once ready (the test fails if it never is) and stops it afterwards. For a module's
    server fixture to `yield from`."""
    port = free_port()
    log = tmp_path_factory.mktemp(label) / "server.log"
    cmd = serve_command(*args, "--host", "127.0.0.1", "--port", str(port))
    with start_server(cmd, url=f"http://127.0.0.1:{port}", log=log, cwd=ROOT) as srv:
        try:
            srv.wait_ready(READY_TIMEOUT_S, name=name)
        except ServerNotReady as e:
            pytest.fail(str(e))
        yield srv


@pytest.fixture(scope="module")
def server(
    serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    args = ["--model", f"detector={serving_bundles['detector']}"]
    args += ["--model", f"tagger={serving_bundles['tagger']}"]
    yield from page_server(tmp_path_factory, "page-server", args)


# The server's --example: markup, quotes and a script end tag must reach the box as text.
EXAMPLE = "The chef cooked the river. </script><b>not bold</b> \"quoted\" & 'single'\n\tsecond line 🙂"


@pytest.fixture(scope="module")
def example_server(
    serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from page_server(
        tmp_path_factory,
        "page-example-server",
        ["--model", f"detector={serving_bundles['detector']}", "--example", EXAMPLE],
        name="electra serve --example",
    )


def detect(server: ServerProcess, text: str, **options: object) -> dict:
    return post(server, "/detect", {"text": text, **options})


def post(server: ServerProcess, route: str, body: dict) -> dict:
    status, _, answer = http("POST", f"{server.url}{route}", body)
    assert status == 200, f"{route} answered {status}: {answer[:500]!r}"
    return json.loads(answer)


# ----------------------------------------------------------------------------------------------------------
# Chromium
# ----------------------------------------------------------------------------------------------------------


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("headless Chromium is absent (`chromium` not on PATH; Debian: apt-get install chromium)")
    return path


# Chromium resolves no host name but the server's: a page that needs the internet fails as it would offline.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def run_chromium(args: list[str], profile: Path, timeout: float = 90.0) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", OFFLINE]
    # A private profile: parallel or leftover Chromium processes never share (and lock) one.
    cmd += [f"--user-data-dir={profile}", "--no-first-run", "--virtual-time-budget=10000", *args]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr.decode()[-3000:]}"
    return proc


def page_url(server: ServerProcess, **params: object) -> str:
    return f"{server.url}/?{urllib.parse.urlencode({k: str(v) for k, v in params.items()})}"


@dataclass
class Span:
    start: int
    end: int
    score: float
    replaced: bool
    text: str = ""
    label: str | None = None  # an entity's (class "ent")


class PageDom(HTMLParser):
    """What the test reads from the dumped DOM: body state and kind, error text, token spans, entity spans,
    #result's text and the text box's initial content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.state: str | None = None
        self.kind: str | None = None
        self.spans: list[Span] = []
        self.entities: list[Span] = []
        self.result_text = ""
        self.error_text = ""
        self.textarea: str | None = None
        self._in_textarea = False
        self._result_depth = 0  # >0 while inside #result: counts its open elements to find its end
        self._span: Span | None = None
        self._in_error = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.state = a.get("data-state")
            self.kind = a.get("data-kind")
        if a.get("id") == "error":
            self._in_error = True
        if tag == "textarea":
            self._in_textarea = True
            self.textarea = ""
        if self._result_depth:
            self._result_depth += 1
            classes = a.get("class", "").split()
            if tag == "span" and "tok" in classes:
                self._span = Span(
                    int(a["data-start"]), int(a["data-end"]), float(a["data-score"]), "replaced" in classes
                )
                self.spans.append(self._span)
            elif tag == "span" and "ent" in classes:
                self._span = Span(
                    int(a["data-start"]),
                    int(a["data-end"]),
                    float(a["data-score"]),
                    False,
                    label=a["data-label"],
                )
                self.entities.append(self._span)
        elif a.get("id") == "result":
            self._result_depth = 1

    def handle_endtag(self, tag: str) -> None:
        self._in_textarea = self._in_textarea and tag != "textarea"
        if self._result_depth:
            self._result_depth -= 1
            self._span = None
        self._in_error = self._in_error and tag != "div"

    def handle_data(self, data: str) -> None:
        if self._in_textarea:
            self.textarea = (self.textarea or "") + data
        if self._result_depth:
            self.result_text += data
            if self._span is not None:
                self._span.text += data
        if self._in_error:
            self.error_text += data


def dump_dom(server: ServerProcess, profile: Path, **params: object) -> PageDom:
    out = run_chromium(["--dump-dom", page_url(server, **params)], profile).stdout.decode("utf-8")
    dom = PageDom()
    dom.feed(out)
    dom.close()
    assert dom.state is not None, f"no <body data-state> in the dumped DOM:\n{out[:2000]}"
    return dom


# ----------------------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------------------


def test_page_is_self_contained() -> None:
    html = PAGE.read_text(encoding="utf-8")
    # The cluster may have no internet: nothing may load from another origin.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert not re.search(r"""url\(\s*["']?(?:https?:)?//|@import""", html, re.I)
    # User text must only ever reach the DOM as text.
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "document.write" not in html
    assert 'id="result"' in html


def test_root_serves_the_page(server: ServerProcess) -> None:
    status, headers, body = http("GET", f"{server.url}/")
    assert status == 200
    assert headers.get("content-type", "").startswith("text/html")
    html = body.decode("utf-8")
    assert "<title>ELECTRA replaced-token detection</title>" in html and 'id="result"' in html
    assert html == PAGE.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "options"),
    [
        (PLAIN_TEXT, {"level": "token"}),
        (UNICODE_TEXT, {"level": "token"}),
        (UNICODE_TEXT, {"level": "word", "threshold": 0.3}),
        (PLAIN_TEXT, {}),  # the page's default, words (the API's is tokens): the answer must be the same
    ],
    ids=["plain-token", "unicode-token", "unicode-word", "plain-default"],
)
def test_page_shows_the_detection_on_the_original_text(
    server: ServerProcess, tmp_path: Path, text: str, options: dict
) -> None:
    expected = detect(server, text, **{"level": "word", **options})["results"][0]
    dom = dump_dom(server, tmp_path / "profile", text=text, **options)
    assert dom.state == "done", f"page state {dom.state!r}, error shown: {dom.error_text!r}"

    tokens = expected["tokens"]
    assert tokens, "the server returned no tokens"
    assert [(s.start, s.end) for s in dom.spans] == [(t["start"], t["end"]) for t in tokens]
    assert [s.replaced for s in dom.spans] == [t["replaced"] for t in tokens]
    assert [s.score for s in dom.spans] == pytest.approx([t["score"] for t in tokens], abs=1e-6)
    # The page shows exactly the string, whitespace and all, with every token's span holding its text.
    assert dom.result_text == text
    for span, token in zip(dom.spans, tokens, strict=True):
        if span.text:  # empty only for a token overlapping the one before (several tokens, one character)
            assert span.text == text[span.start : span.end] == token["text"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "aggregation"),
    [(PLAIN_TEXT, "simple"), (UNICODE_TEXT, "simple"), (UNICODE_TEXT, "none"), (PLAIN_TEXT, "max")],
    ids=["plain-simple", "unicode-simple", "unicode-none", "plain-max"],
)
def test_page_shows_a_taggers_entities_on_the_original_text(
    server: ServerProcess, tmp_path: Path, text: str, aggregation: str
) -> None:
    expected = post(server, "/tag", {"text": text, "model": "tagger", "aggregation_strategy": aggregation})
    entities = expected["results"][0]["entities"]
    assert entities, "the tagger found no entities"
    dom = dump_dom(server, tmp_path / "profile", text=text, model="tagger", aggregation=aggregation)
    assert dom.state == "done", f"page state {dom.state!r}, error shown: {dom.error_text!r}"
    assert dom.kind == "tagger" and not dom.spans
    assert [(s.start, s.end) for s in dom.entities] == [(e["start"], e["end"]) for e in entities]
    assert [s.label for s in dom.entities] == [e["label"] for e in entities]
    assert [s.score for s in dom.entities] == pytest.approx([e["score"] for e in entities], abs=1e-6)
    # The label badges are drawn by CSS: the result is still exactly the string, each entity its own text.
    assert dom.result_text == text
    for span, entity in zip(dom.entities, entities, strict=True):
        if span.text:  # empty only for a token overlapping the one before (several tokens, one character)
            assert span.text == text[span.start : span.end] == entity["text"]


@pytest.mark.slow
def test_page_detects_with_the_detector_beside_a_tagger(server: ServerProcess, tmp_path: Path) -> None:
    dom = dump_dom(server, tmp_path / "profile", text="the cat sat", model="detector")
    assert dom.state == "done" and dom.kind == "discriminator", dom.error_text
    assert [s.start for s in dom.spans] == [0, 4, 8] and not dom.entities


@pytest.mark.slow
def test_page_reports_errors_from_the_server(server: ServerProcess, tmp_path: Path) -> None:
    dom = dump_dom(server, tmp_path / "profile", text="the cat", model="no-such-model")
    assert dom.state == "error"
    assert "HTTP 4" in dom.error_text, dom.error_text


@pytest.mark.slow
def test_page_screenshot(server: ServerProcess, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    url = page_url(server, text=PLAIN_TEXT + "\n" + UNICODE_TEXT)
    run_chromium([f"--screenshot={shot}", "--window-size=1200,800", url], tmp_path / "profile")
    assert shot.exists(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])  # IHDR: the first chunk after the magic
    assert (width, height) == (1200, 800)
    # A blank or error page compresses to a few KB; the rendered page with its highlights is far larger.
    assert len(data) > 15_000, f"screenshot only {len(data)} bytes"
    # The committed figure is refreshed on request only, so a test run leaves the working tree clean.
    if os.environ.get("ELECTRA_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


@pytest.mark.slow
def test_page_is_prefilled_with_the_server_example(example_server: ServerProcess, tmp_path: Path) -> None:
    # The first paint shows the example's answer, not an empty result waiting for a click.
    dom = dump_dom(example_server, tmp_path / "profile")
    assert dom.state == "done", f"page state {dom.state!r}, error shown: {dom.error_text!r}"
    assert dom.textarea == EXAMPLE and dom.result_text == EXAMPLE
    expected = detect(example_server, EXAMPLE, level="word")["results"][0]["tokens"]
    assert [(s.start, s.end) for s in dom.spans] == [(t["start"], t["end"]) for t in expected]
    # A link's ?text= wins over the example: that text is what gets detected.
    dom = dump_dom(example_server, tmp_path / "profile2", text="the cat sat")
    assert dom.state == "done", dom.error_text
    assert dom.result_text == "the cat sat"


@pytest.mark.slow
def test_page_box_is_empty_without_an_example(server: ServerProcess, tmp_path: Path) -> None:
    dom = dump_dom(server, tmp_path / "profile")
    assert dom.textarea == ""


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/schema", "/schema/swagger"])
def test_api_docs_render_without_internet(example_server: ServerProcess, tmp_path: Path, path: str) -> None:
    """Swagger UI from the server's own assets, with every other host unresolvable: the operations show."""
    out = run_chromium(["--dump-dom", f"{example_server.url}{path}"], tmp_path / "profile").stdout.decode()
    assert 'class="swagger-ui' in out, out[:3000]
    for route in ("/detect", "/classify", "/tag", "/models", "/health/ready"):
        assert f'data-path="{route}"' in out, route
    assert "Failed to load API definition" not in out and "Unable to render" not in out
