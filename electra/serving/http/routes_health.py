"""The health probes Kubernetes polls: /health/live and /health/ready, open even when the server has API
keys (a probe sends none)."""

from __future__ import annotations

from litestar import Response, get
from litestar.openapi import ResponseSpec

from electra.serving.http.schemas import Status
from electra.serving.http.state import Server, ServerState


@get("/health/live", tags=["health"])
async def live() -> Status:
    """200 while the process serves HTTP."""
    return Status(status="live")


@get(
    "/health/ready",
    tags=["health"],
    responses={503: ResponseSpec(data_container=Status, description="not ready", generate_examples=False)},
)
async def ready(server: Server) -> Response[Status]:
    """200 once every model is loaded and warmed up; 503 before (and during shutdown)."""
    return _readiness(server)


# Open even when the server has API keys: a probe sends none.
OPEN_ROUTES = [live, ready]


def _readiness(state: ServerState) -> Response[Status]:
    if state.ready:
        return Response(Status(status="ready"))
    if state.failure:
        return Response(Status(status="failed", detail=state.failure), status_code=503)
    return Response(
        Status(status="loading", detail=state.loading()), status_code=503, headers={"Retry-After": "1"}
    )
