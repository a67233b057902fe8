"""A new user's first hour with the server: what the answers to common mistakes say, the API docs page
without internet, and the page's pre-filled example.

Most tests run the app in-process with no model loaded (`runners={}`): bodies are read and decoded before a
route looks for a model, so a body that gets past decoding answers 404 "no discriminator model". One test
runs a real bundle to show that well-formed requests still reach the model.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from electra.errors import InputError
from electra.serving.http import api_docs
from electra.serving.http.api_docs import SWAGGER_ASSETS
from electra.serving.http.app import create_app
from electra.serving.http.json_body import NOT_JSON
from electra.serving.settings import ModelSpec, ServeSettings

PAGE = Path(__file__).resolve().parents[1] / "electra" / "serving" / "http" / "static" / "index.html"
LIMIT = 1000
KEY = "friction-test-key-0123456789"


def settings(**overrides: Any) -> ServeSettings:
    return ServeSettings(models=(ModelSpec("detector", Path("/not/loaded")),), **overrides)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(settings(max_body_bytes=LIMIT), runners={})) as c:
        yield c


def error(response: Any, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["status_code"] == status, body
    assert response.headers["content-type"].startswith("application/json")
    return body["detail"]


# ----------------------------------------------------------------------------------------------------------
# 1. A body over --max-body-bytes: 413 naming the limit
# ----------------------------------------------------------------------------------------------------------


def test_declared_body_over_the_limit_names_the_limit(client: TestClient) -> None:
    body = json.dumps({"text": "x" * LIMIT}).encode()
    r = client.post("/detect", content=body, headers={"content-type": "application/json"})
    detail = error(r, 413)
    assert "larger than the limit of 1,000 bytes (--max-body-bytes)" in detail, detail
    assert f"{len(body):,} bytes" in detail, detail  # the size it declared


@pytest.mark.parametrize("route", ["/detect", "/classify"])
def test_chunked_body_over_the_limit_names_the_limit(client: TestClient, route: str) -> None:
    """No Content-Length: the limit is enforced while the body streams in, with the same message."""
    chunks = iter([b'{"text": "', b"x" * 600, b"y" * 600, b'"}'])
    r = client.post(route, content=chunks, headers={"content-type": "application/json"})
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in r.request.headers
    detail = error(r, 413)
    assert detail == "the request body is larger than the limit of 1,000 bytes (--max-body-bytes)"


def test_body_at_the_limit_is_accepted(client: TestClient) -> None:
    body = b'{"text": "' + b"x" * (LIMIT - 12) + b'"}'
    assert len(body) == LIMIT
    r = client.post("/detect", content=body, headers={"content-type": "application/json"})
    assert "no discriminator model" in error(r, 404)  # decoded, then found no model: not a 413


def test_the_limit_in_the_message_follows_the_setting() -> None:
    with TestClient(create_app(settings(max_body_bytes=2_000_000), runners={})) as c:
        r = c.post("/detect", content=b"x" * 2_000_001, headers={"content-type": "application/json"})
        assert "the limit of 2,000,000 bytes (--max-body-bytes)" in error(r, 413)


# ----------------------------------------------------------------------------------------------------------
# 2. Every body that is not JSON: one wording, with where it breaks
# ----------------------------------------------------------------------------------------------------------

# body, Content-Type, what the detail says after the common start (a regular expression). msgspec gives the
# byte offset where it noticed the problem, which may be just past it.
MALFORMED = {
    "truncated": (
        b'{"text": "the cat',
        "application/json",
        r"it ends before the JSON value is complete \(byte 17\)",
    ),
    "truncated-object": (b'{"text": "a"', "application/json", r"complete \(byte 12\)"),
    "trailing-garbage": (b'{"text": "a"} x', "application/json", r"trailing characters \(byte 1[45]\)"),
    "not-json": (b"{bad", "application/json", r"\(byte 1\)"),
    "invalid-utf8": (b"\xff\xfe", "application/json", r"it is not UTF-8 text \(byte 0\)"),
    "invalid-utf8-in-string": (b'{"text": "caf\xc3"}', "application/json", r"not UTF-8 text \(byte 13\)"),
    "empty": (b"", "application/json", r"it is empty$"),
    "whitespace": (b" \n ", "application/json", r"it is empty$"),
    "lone-surrogate": (b'{"text": "\\ud800"}', "application/json", r"surrogate"),
    "bad-escape": (
        b'{"text": "\\x"}',
        "application/json",
        r"invalid escape character in string \(byte 1[12]\)",
    ),
    "form-encoded": (b"text=the+cat", "application/x-www-form-urlencoded", r"sent as application/x-www-form"),
    "plain-text": (b"the cat sat", "text/plain", r"\(byte \d+\); it was sent as text/plain"),
    "no-content-type": (b"hello there", "", r"invalid character \(byte 0\)$"),
}


@pytest.mark.parametrize("route", ["/detect", "/classify"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_body_gets_one_wording(client: TestClient, route: str, case: str) -> None:
    raw, content_type, where = MALFORMED[case]
    headers = {"content-type": content_type} if content_type else {}
    detail = error(client.post(route, content=raw, headers=headers), 400)
    assert detail.startswith(f"{NOT_JSON}: "), detail
    assert re.search(where, detail.removeprefix(f"{NOT_JSON}: ")), detail


def test_json_of_the_wrong_shape_is_a_validation_error_not_malformed(client: TestClient) -> None:
    r = client.post("/detect", content=b"[]", headers={"content-type": "application/json"})
    r2 = client.post("/detect", json={"text": 3})
    for response in (r, r2):
        detail = error(response, 400)
        assert detail.startswith("Validation failed"), detail


def test_valid_json_is_accepted_whatever_its_content_type(client: TestClient) -> None:
    """curl -d sends application/x-www-form-urlencoded: a JSON body still works."""
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset=utf-8",
    ):
        r = client.post("/detect", content=b'{"text": "the cat"}', headers={"content-type": content_type})
        assert "no discriminator model" in error(r, 404), content_type


def test_well_formed_requests_still_reach_the_model(serving_bundles: dict[str, Path]) -> None:
    s = ServeSettings(models=(ModelSpec("detector", serving_bundles["detector"]),), max_body_bytes=LIMIT)
    with TestClient(create_app(s)) as c:
        deadline = time.monotonic() + 30
        while c.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.02)
        r = c.post("/detect", content=b'{"text": "the cat sat"}', headers={"content-type": "text/plain"})
        assert r.status_code == 200, r.text
        assert [t["text"] for t in r.json()["results"][0]["tokens"]] == ["the", "cat", "sat"]
        assert c.post("/detect", content=b'{"text": "the cat"', headers={}).status_code == 400


# ----------------------------------------------------------------------------------------------------------
# 3. /schema: the docs page and its assets come from this server
# ----------------------------------------------------------------------------------------------------------


class Refs(HTMLParser):
    """Every URL a page loads: <script src>, <link href>, <img src>."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for name in ("src", "href"):
            if tag in ("script", "link", "img") and a.get(name):
                self.urls.append(a[name] or "")


def page_refs(html: str) -> list[str]:
    refs = Refs()
    refs.feed(html)
    return refs.urls


@pytest.mark.parametrize("path", ["/schema", "/schema/", "/schema/swagger"])
def test_docs_page_loads_nothing_from_another_host(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    html = r.text
    urls = page_refs(html)
    assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls), urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert "fonts.googleapis" not in html and "cdn." not in html
    assert "SwaggerUIBundle(" in html and '"openapi":"3.1.0"' in html


def test_docs_assets_are_served_with_their_types(client: TestClient) -> None:
    kinds = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
    urls = page_refs(client.get("/schema").text)
    assert {u.rsplit("/", 1)[1] for u in urls} == set(SWAGGER_ASSETS)
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, url
        kind = kinds[Path(url).suffix]
        assert r.headers["content-type"] in (kind, f"{kind}; charset=utf-8"), (url, r.headers)
        assert len(r.content) > 500, url
        assert "max-age" in r.headers.get("cache-control", "")
    assert b"SwaggerUIBundle" in client.get("/schema/assets/swagger-ui-bundle.js").content


def test_docs_assets_outside_the_list_are_404(client: TestClient) -> None:
    for name in ("index.html", "..%2F..%2Fapp.py", "swagger-ui-bundle.js.map", "nope.js"):
        r = client.get(f"/schema/assets/{name}")
        assert r.status_code == 404, name
        assert r.json()["status_code"] == 404


def test_docs_page_without_the_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_docs, "_swagger_ui_dir", lambda: None)
    with TestClient(create_app(settings(), runners={})) as c:
        r = c.get("/schema")
        assert r.status_code == 200 and "pip install swagger-ui-py" in r.text
        assert not [u for u in page_refs(r.text) if "//" in u]
        assert c.get("/schema/openapi.json").status_code == 200
        assert c.get("/schema/assets/swagger-ui.css").status_code == 404


def test_docs_stay_open_with_api_keys(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n", encoding="utf-8")
    with TestClient(create_app(settings(api_key_file=keys), runners={})) as c:
        assert c.get("/models").status_code == 401
        for path in ("/schema", "/schema/swagger", "/schema/openapi.json", *page_refs(c.get("/schema").text)):
            assert c.get(path).status_code == 200, path


# ----------------------------------------------------------------------------------------------------------
# 4. --example: the page's text box starts with it
# ----------------------------------------------------------------------------------------------------------

NASTY = "</script><b>bold</b> \"double\" 'single' & &amp; <!-- c --> \u2028 line\nsecond\tline 🙂 \\u003c"


class ExampleScript(HTMLParser):
    """The server-example JSON element and every <b> element (there must be none from the example)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.example: str | None = None
        self.bold = 0
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.bold += tag == "b"
        self._in = tag == "script" and dict(attrs).get("id") == "server-example"
        if self._in:
            self.example = ""

    def handle_endtag(self, tag: str) -> None:
        self._in = False

    def handle_data(self, data: str) -> None:
        if self._in:
            self.example = (self.example or "") + data


def test_page_carries_the_example_escaped() -> None:
    with TestClient(create_app(settings(example=NASTY), runners={})) as c:
        r = c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    parsed = ExampleScript()
    parsed.feed(html)
    assert parsed.example is not None, "no <script id=server-example>"
    assert json.loads(parsed.example) == NASTY
    page = PAGE.read_text(encoding="utf-8")
    in_file = ExampleScript()
    in_file.feed(page)
    assert parsed.bold == in_file.bold  # the example's <b> stayed text
    # Only one element was added; the example cannot close it or open another one.
    assert html.count("</script>") == page.count("</script>") + 1
    assert html.count("<") == page.count("<") + 2
    assert (
        html.replace(html[html.index('<script type="application/json"') : html.index("</head>")], "") == page
    )


def test_page_without_an_example_is_the_file(client: TestClient) -> None:
    assert client.get("/").text == PAGE.read_text(encoding="utf-8")
    assert 'type="application/json"' not in client.get("/").text
    assert "server-example" in PAGE.read_text(encoding="utf-8")  # the page looks for it


def test_example_longer_than_max_chars_is_refused() -> None:
    with pytest.raises(InputError, match="example has 11 characters; the limit is max_chars"):
        settings(example="x" * 11, max_chars=10)
