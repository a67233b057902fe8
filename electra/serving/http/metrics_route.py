"""GET /metrics: Litestar's Prometheus controller, with this process's waiting metric updates applied first
(electra.serving.engine.metric_buffer): under --workers the answer is read from every worker's files, which a
registry's own read (and its flush) never touches."""

from __future__ import annotations

from typing import Any

from litestar.plugins.prometheus import PrometheusController

from electra.serving.engine.metric_buffer import BUFFER


def _flush(_request: Any) -> None:
    BUFFER.flush()


class MetricsController(PrometheusController):
    before_request = _flush
