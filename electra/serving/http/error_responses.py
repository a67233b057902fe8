"""Every 4xx/5xx answer of the server, made in one place: the app's one exception handler.

The engine (electra.serving.engine.errors) and the protocols' parsers raise exceptions that know nothing of
status codes; they are mapped here, so a route never builds an error answer itself and the same failure
answers the same way on every route.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import ClientException, HTTPException, SerializationException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from electra.serving.engine.errors import (
    EmptyInput,
    EngineError,
    InvalidRequest,
    ModelNotFound,
    QueueFull,
    TooLarge,
    Unavailable,
)
from electra.serving.http.json_body import NOT_JSON, MalformedBody
from electra.serving.http.middleware.content_encoding import SCOPE_KEY, BadEncoding
from electra.serving.http.open_inference import ProtocolError
from electra.serving.http.protocols import uses_protocol_errors
from electra.serving.http.tei import TEI_PATHS

log = logging.getLogger("electra.serving")


def error_response(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """The app's one exception handler: `{"status_code", "detail"}` (and "extra" for validation details);
    on the standard protocols' routes (/v2, /hf) their `{"error": message}` with the same status, on TEI's
    (/rerank, /predict) its `{"error", "error_type"}`.

    A body over --max-body-bytes answers 413 naming the limit (whether Content-Length declared it or a chunked
    body outgrew it); a body that is not JSON answers 400 starting with NOT_JSON, whatever broke it.
    HTTPException (invalid bodies, API keys) answers its own status; the engine's errors and the parsers'
    are mapped by _status_of; anything else is a bug, logged with its traceback and answered 500 without
    internals.
    """
    response = _error_body(request, exc)
    if request.url.path in TEI_PATHS:
        body = response.content
        message = body["detail"]
        if body.get("extra"):
            message = f"{message}: {_validation_details(body['extra'])}"
        kind = _tei_error_type(exc, response.status_code)
        return Response(
            {"error": message, "error_type": kind}, status_code=response.status_code, headers=response.headers
        )
    if uses_protocol_errors(request.url.path):
        body = response.content
        message = body["detail"]
        if body.get("extra"):
            message = f"{message}: {_validation_details(body['extra'])}"
        return Response({"error": message}, status_code=response.status_code, headers=response.headers)
    return response


def _tei_error_type(exc: Exception, status: int) -> str:
    """TEI's ErrorType for an answer (router/src/http/server.rs): Empty, Validation, Overloaded, Unhealthy,
    Backend; the status stays ours (413 for a size limit, where TEI answers 422)."""
    if status >= 500 and status != 503:
        return "Backend"
    if status == 503:
        return "Overloaded" if isinstance(exc, QueueFull) else "Unhealthy"
    return "Empty" if isinstance(exc, EmptyInput) else "Validation"


# The engine's refusals (electra.serving.engine.errors), by kind.
_ENGINE_STATUS: dict[type[EngineError], int] = {
    InvalidRequest: 400,
    ModelNotFound: 404,
    TooLarge: 413,
    Unavailable: 503,
}


def _status_of(exc: Exception) -> tuple[int, dict[str, str] | None] | None:
    """Status and headers for the exceptions of the layers below HTTP; None: not a known one (a bug)."""
    if isinstance(exc, EngineError):
        for kind, status in _ENGINE_STATUS.items():
            if isinstance(exc, kind):
                headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, Unavailable) else None
                return status, headers
        return None
    if isinstance(exc, MalformedBody | ProtocolError | BadEncoding):
        return 400, None
    return None


def _validation_details(extra: Any) -> str:
    items = extra if isinstance(extra, list) else [extra]
    return "; ".join(
        f"{item.get('key')}: {item.get('message')}"
        if isinstance(item, dict) and item.get("key")
        else str(item)
        for item in items
    )


def _error_body(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    if isinstance(exc, RequestEntityTooLarge):  # Litestar's, raised while the body is read
        return _error(413, _too_large(request))
    if isinstance(exc, ClientException) and isinstance(exc.__cause__, SerializationException):
        # A body Litestar decoded itself (a route without read_json_body): the same wording.
        exc = MalformedBody(str(exc.__cause__).removeprefix("JSON is malformed: "))
    if isinstance(exc, MalformedBody):
        return _error(400, f"{NOT_JSON}: {exc}{_content_type_hint(request)}")
    if isinstance(exc, HTTPException):
        body: dict[str, Any] = {"status_code": exc.status_code, "detail": exc.detail}
        if exc.extra:
            body["extra"] = exc.extra
        return Response(body, status_code=exc.status_code, headers=exc.headers)
    mapped = _status_of(exc)
    if mapped is None:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return Response({"status_code": 500, "detail": "internal server error (logged)"}, status_code=500)
    status, headers = mapped
    return _error(status, str(exc), headers)


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    return Response({"status_code": status, "detail": detail}, status_code=status, headers=headers)


def _too_large(request: Request[Any, Any, Any]) -> str:
    try:
        limit = request.route_handler.resolve_request_max_body_size()
    except Exception:  # no route (cannot happen for a body being read): say it without the number
        limit = None
    size = ""
    declared = request.headers.get("content-length", "")
    coding = request.scope.get(SCOPE_KEY)  # type: ignore[call-overload]
    if declared.isdigit() and (limit is None or int(declared) > limit):  # refused on its Content-Length
        size = f" ({int(declared):,} bytes{f', {coding}-compressed' if coding else ''})"
    elif coding is not None:  # the limit is on the decoded body too (middleware.content_encoding)
        size = f", {coding}-decoded,"
    if limit is None:
        return f"the request body{size} is larger than the server's limit (--max-body-bytes)"
    return f"the request body{size} is larger than the limit of {limit:,} bytes (--max-body-bytes)"


def _content_type_hint(request: Request[Any, Any, Any]) -> str:
    """For a body sent as a form or as text: what to send instead (JSON is accepted whatever the type)."""
    content_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if not content_type or content_type == "application/json" or content_type.endswith("+json"):
        return ""
    return f'; it was sent as {content_type}: send a JSON object such as {{"text": "..."}}'
