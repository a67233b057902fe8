"""Run the app under an HTTP server (uvicorn or granian), with the graceful shutdown Kubernetes rolling
updates rely on.

On SIGTERM (or Ctrl-C) the server stops accepting connections, lets in-flight requests finish (up to
graceful_timeout_s), then runs the app's shutdown, which drains every batcher; the process exits 0.

uvicorn (the default) runs the ASGI app on uvloop with httptools' parser. granian (--http-server granian,
optional: pip install granian) parses HTTP in Rust and runs the same app on the same kind of event loop,
embedded in this process (one worker: the models are loaded once, here). Both log through electra.logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from electra import logs
from electra.errors import InputError
from electra.serving.app import create_app
from electra.serving.settings import ServeSettings
from electra.serving.state import load_runners

log = logging.getLogger("electra.serving")


def _check_port_free(host: str, port: int) -> None:
    # The HTTP servers report a taken port only in their log after start-up; say it before loading models.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def _check_http_server(name: str) -> None:
    """InputError before any model loads when the chosen HTTP server is not installed."""
    try:
        if name == "granian":
            import granian  # noqa: F401
        else:
            import uvicorn  # noqa: F401
    except ImportError:
        extra = "pip install granian" if name == "granian" else "pip install -e '.[serve]'"
        raise InputError(f"--http-server {name}: {name} is not installed ({extra})") from None


def serve(
    settings: ServeSettings, access_log: bool = False, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve until SIGTERM/SIGINT; on_ready runs once every model is warmed up."""
    settings = settings.with_keys()
    _check_http_server(settings.http_server)
    _check_port_free(settings.host, settings.port)
    # One format for our lines and the HTTP server's (startup, errors, access): the one `--log-format` set.
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
    if settings.http_server == "granian":
        _run_granian(app, settings, access_log)
    else:
        _run_uvicorn(app, settings, access_log)


def _run_uvicorn(app: Any, settings: ServeSettings, access_log: bool) -> None:
    import uvicorn

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


# granian's own loggers: its messages ("_granian", the name its Rust side logs under) and access lines.
GRANIAN_LOGGERS = ("_granian", "granian.access")
# uvicorn's access line, in granian's access-log placeholders.
GRANIAN_ACCESS_FORMAT = '%(addr)s - "%(method)s %(path)s %(protocol)s" %(status)d'


def granian_log_config(level: str) -> dict[str, Any]:
    """granian's log_dictconfig: our one handler and format (electra.logs), its loggers propagating to it.

    granian applies the dict with logging.config.dictConfig after replacing its top-level keys with these,
    so this is uvicorn's config (the same root handler configure() installs) with granian's loggers added.
    """
    config = logs.uvicorn_log_config(level, others_level=level)
    propagate = {"handlers": [], "propagate": True}
    config["loggers"] = {
        **config["loggers"],
        "_granian": {**propagate, "level": level.upper()},
        "granian.access": {**propagate, "level": "INFO"},
    }
    return config


def _run_granian(app: Any, settings: ServeSettings, access_log: bool) -> None:
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels
    from granian.server.embed import Server

    server = Server(
        app,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,  # with the lifespan protocol: the batchers start and drain in it
        http=HTTPModes.http1,
        websockets=False,
        runtime_threads=1,
        backlog=1024,
        log_level=LogLevels(settings.log_level),
        log_dictconfig=granian_log_config(settings.log_level),
        log_access=access_log,
        log_access_format=GRANIAN_ACCESS_FORMAT,
    )
    # granian logs "experimental" for its embedded mode on every start: true, and no news to an operator.
    logging.getLogger("_granian").addFilter(lambda record: "experimental" not in record.getMessage())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.TimerHandle] = []

        def on_signal() -> None:
            if stopping:
                return
            # Stop accepting, let in-flight requests finish, then the lifespan shutdown drains the batchers;
            # past graceful_timeout_s whatever is left is cancelled.
            server.stop()
            stopping.append(loop.call_later(settings.graceful_timeout_s, cancel_all))

        def cancel_all() -> None:
            log.warning("shutdown took over %.0f s; cancelling what is left", settings.graceful_timeout_s)
            for worker in server.wrks:
                worker.kill()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        try:
            await server.serve()
        finally:
            for handle in stopping:
                handle.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        _event_loop_run(main())


def _event_loop_run(coro: Any) -> None:
    """asyncio.run on uvloop when it is installed (as uvicorn does), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)
