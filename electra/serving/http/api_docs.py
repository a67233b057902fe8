"""/schema: the OpenAPI schema as JSON (and YAML when PyYAML is installed) and Swagger UI, served with its own
assets rather than from a CDN, so the docs work on a host without internet."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from litestar import Request, Response, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import NotFoundException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)

from electra import __version__

SCHEMA_PATH = "/schema"


def openapi_config() -> OpenAPIConfig:
    """The app's OpenAPI settings: title, version, and the pages /schema renders."""
    plugins: list[OpenAPIRenderPlugin] = [LocalSwaggerUI(_swagger_ui_dir()), JsonRenderPlugin()]
    if importlib.util.find_spec("yaml") is not None:
        plugins.append(YamlRenderPlugin())
    return OpenAPIConfig(
        title="electra",
        version=__version__,
        description="Replaced-token detection, classification and token classification (tagging) with "
        "ELECTRA models (ONNX Runtime).",
        path=SCHEMA_PATH,
        render_plugins=plugins,
    )


# Swagger UI's files the docs page loads, served at /schema/assets/NAME from the swagger-ui-py package (its
# static/ folder is Swagger UI's dist build; 25.7 ships Swagger UI 5.24, which renders OpenAPI 3.1, what
# Litestar writes: pyproject.toml asks for that version or newer).
SWAGGER_ASSETS = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "favicon-32x32.png": "image/png",
}
SWAGGER_PACKAGE = "swagger-ui-py"


def _swagger_ui_dir() -> Path | None:
    """Swagger UI's dist folder from the installed swagger-ui-py (module swagger_ui); None when missing.

    Found without importing the module: its __init__ wires Swagger UI into other web frameworks, which the
    server does not need."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "static"
    if not all((path / name).is_file() for name in SWAGGER_ASSETS):
        return None
    return path


@functools.cache
def _asset(path: Path) -> bytes:
    return path.read_bytes()


class LocalSwaggerUI(SwaggerRenderPlugin):
    """Litestar's Swagger UI page at /schema and /schema/swagger, its <script>/<link> URLs pointing at this
    server (/schema/assets/...) rather than a CDN, so the docs render on a host without internet."""

    def __init__(self, assets: Path | None) -> None:
        base = f"{SCHEMA_PATH}/assets"
        super().__init__(
            js_url=f"{base}/swagger-ui-bundle.js",
            css_url=f"{base}/swagger-ui.css",
            standalone_preset_js_url=f"{base}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{base}/favicon-32x32.png'>",
            path=["/", "/swagger"],
        )
        self.assets = assets

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self.assets is None:
            return (
                "<!doctype html><html><head><meta charset='utf-8'><title>electra API</title></head><body>"
                f"<p>The API docs page needs Swagger UI 5, from the {SWAGGER_PACKAGE} package, which is not "
                f"installed: <code>pip install {SWAGGER_PACKAGE}</code> (part of the serve extra).</p>"
                f"<p>The schema itself: <a href='{SCHEMA_PATH}/openapi.json'>openapi.json</a>.</p>"
                "</body></html>"
            ).encode()
        return super().render(request, openapi_schema)

    def receive_router(self, router: Router) -> None:
        super().receive_router(router)
        assets = self.assets

        @get(
            [f"/assets/{name}" for name in SWAGGER_ASSETS],  # these files only (anything else: 404)
            include_in_schema=False,
            sync_to_thread=False,
            cache_control=CacheControlHeader(public=True, max_age=86400),
        )
        def swagger_asset(request: Request[Any, Any, Any]) -> Response[bytes]:
            name = request.url.path.rpartition("/")[2]
            if assets is None:
                raise NotFoundException(detail=f"Swagger UI is not installed (pip install {SWAGGER_PACKAGE})")
            return Response(_asset(assets / name), media_type=SWAGGER_ASSETS[name])

        router.register(swagger_asset)
