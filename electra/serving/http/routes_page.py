"""The page at `/` (static/index.html): try the models from a browser; open even when the server has API
keys, since the page itself holds nothing (its requests to the API carry the key the user types)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from litestar import MediaType, get


def page_routes(example: str | None) -> list[Any]:
    page = _page(example)

    @get("/", media_type=MediaType.HTML, include_in_schema=False)
    async def index() -> str:
        return page

    return [index]


def _page(example: str | None = None) -> str:
    """The page at `/`, with `example` (the text its box starts with) when there is one."""
    try:
        static = resources.files("electra.serving.http").joinpath("static")
        page = static.joinpath("index.html").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return "<!doctype html><title>electra</title><p>The page is missing from this install; see /schema."
    if example is None:
        return page
    # JSON inside a <script> element that the browser never runs: '<', '>' and '&' as \u escapes cannot end
    # the element or start markup, whatever the text holds (ensure_ascii also escapes U+2028/U+2029).
    data = json.dumps(example, ensure_ascii=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    tag = f'<script type="application/json" id="server-example">{data}</script>\n'
    return page.replace("</head>", tag + "</head>", 1)
