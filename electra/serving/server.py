"""Run the app under uvicorn, with the graceful shutdown Kubernetes rolling updates rely on.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections, lets in-flight requests finish (up to
graceful_timeout_s), then runs the app's shutdown, which drains every batcher; the process exits 0.
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Callable

from electra import logs
from electra.errors import InputError
from electra.serving.app import create_app, load_runners
from electra.serving.settings import ServeSettings

log = logging.getLogger("electra.serving")


def _check_port_free(host: str, port: int) -> None:
    # uvicorn reports a taken port only in its log after start-up; say it before loading models.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def serve(
    settings: ServeSettings, access_log: bool = False, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve until SIGTERM/SIGINT; on_ready runs once every model is warmed up."""
    import uvicorn

    settings = settings.with_keys()
    _check_port_free(settings.host, settings.port)
    # One format for our lines and uvicorn's (startup, errors, access): the one `electra --log-format` set.
    logs.configure(logs.current_format(), level=settings.log_level, others_level=settings.log_level)
    runners = load_runners(settings)
    for name, runner in runners.items():
        log.info(
            "loaded %s: %s (%s, %s) on %s",
            name,
            runner.path,
            runner.kind,
            runner.bundle.precision,
            ", ".join(runner.session.get_providers()),
        )
    app = create_app(settings, runners, on_ready=on_ready)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=logs.uvicorn_log_config(settings.log_level, others_level=settings.log_level),
        access_log=access_log,
        timeout_graceful_shutdown=settings.graceful_timeout_s,
        lifespan="on",
        server_header=False,
    )
    # uvicorn re-raises the signal that stopped it once shutdown is done, which would make a clean,
    # drained SIGTERM exit 143; with this handler installed first, that re-raise is a no-op and we exit 0.
    signal.signal(signal.SIGTERM, lambda *_: None)
    uvicorn.Server(config).run()
