"""Run the app under an HTTP server (uvicorn or granian), with the graceful shutdown Kubernetes rolling
updates rely on.

On SIGTERM (or Ctrl-C) the server stops accepting connections, lets in-flight requests finish (up to
graceful_timeout_s), then runs the app's shutdown, which drains every batcher; the process exits 0.

uvicorn (the default) runs the ASGI app on uvloop with httptools' parser, through uvicorn_protocol.py's
header deadline, header size limit and connection cap. granian (--http-server granian, optional: pip install
granian) parses HTTP in Rust and runs the same app on the same kind of event loop, embedded in this process
(one granian worker: the models are loaded once, here), with the same limits in its own terms: hyper closes a
connection whose headers are late (no 408), answers 431 itself, and leaves connections beyond the cap
waiting in the listen backlog. Both log through electra.logs.

With --workers N (electra.serving.http.workers) this process supervises N such servers, each in a process of
its own with its own models (`run_worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from electra import logs
from electra.errors import InputError
from electra.serving.engine.backend import check_bundles, load_runners
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http.app import create_app
from electra.serving.http.siblings import Siblings
from electra.serving.http.workers import EXIT_INPUT, Supervisor, cpu_threads, watch_supervisor
from electra.serving.settings import ServeSettings

log = logging.getLogger("electra.serving")


def _check_port_free(host: str, port: int) -> None:
    # The HTTP servers report a taken port only in their log after start-up; say it before loading models.
    if not 0 < port < 65536:
        raise InputError(f"--port {port} is not a TCP port (use 1..65535)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except socket.gaierror as e:
            raise InputError(
                f"--host {host}: {e.strerror or e} (pass an address or a name that resolves)"
            ) from None
        except OSError as e:
            raise InputError(
                f"cannot listen on {host}:{port}: {e.strerror or e} (another process holds the port: "
                "stop it, or pick another with --port)"
            ) from None


def check_can_serve(host: str, port: int, http_server: str = "uvicorn") -> None:
    """What serving needs from the machine (the HTTP server installed, the port free), checked before a
    command spends minutes on anything else: InputError naming the fix."""
    _check_http_server(http_server)
    _check_port_free(host, port)


def _check_http_server(name: str) -> None:
    """InputError before any model loads when the chosen HTTP server is not installed."""
    try:
        if name == "granian":
            import granian  # noqa: F401
        else:
            import httptools  # noqa: F401  (the parser uvicorn_protocol.py builds on)
            import uvicorn  # noqa: F401
    except ImportError as e:
        extra = "pip install granian" if name == "granian" else "pip install -e '.[serve]'"
        raise InputError(f"--http-server {name}: {e.name or name} is not installed ({extra})") from None


# Files the server holds besides client connections: models, the listening socket, the event loop's and
# ONNX Runtime's descriptors, log files, with room to spare.
FILES_BESIDES_CONNECTIONS = 256


def _make_room_for_connections(max_connections: int) -> None:
    """Raise the soft limit on open files to fit max_connections sockets besides the process's own files.

    Many systems start processes with a soft limit of 1024 (Docker from 25 on, systemd, most shells) and
    a much higher hard limit; with the soft one the cap could never be reached: accept() would fail first,
    and uvicorn would stop accepting for a while. A hard limit too low for the cap gets a warning.
    """
    try:
        import resource
    except ImportError:  # not on this platform (Windows): nothing to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = max_connections + FILES_BESIDES_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):  # a sandbox that forbids it: the soft limit is what there is
            target = soft
    if target < needed:
        log.warning(
            "--max-connections %d: this process may open only %d files (its hard limit, ulimit -Hn), so "
            "connections beyond about %d fail to be accepted; lower --max-connections or raise the limit",
            max_connections,
            target,
            max(target - FILES_BESIDES_CONNECTIONS, 0),
        )


def serve(
    settings: ServeSettings, access_log: bool = False, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve until SIGTERM/SIGINT; on_ready runs once every model is warmed up (in every worker). With
    --workers above 1 this process supervises the workers (electra.serving.http.workers); ElectraError when
    it had to stop them for a failure."""
    settings = settings.with_keys()
    _check_http_server(settings.http_server)
    check_bundles(settings)  # a wrong path is reported first: the port is a question only once it is right
    # One format for our lines and the HTTP server's (startup, errors, access): the one `--log-format` set.
    if settings.worker_count > 1:
        if settings.http_server == "granian":  # each worker binds the port itself (SO_REUSEPORT)
            _check_port_free(settings.host, settings.port)
        logs.configure(logs.current_format(), level=settings.log_level, others_level=settings.log_level)
        Supervisor(settings, run_worker, access_log, on_ready).serve()
        return
    _check_port_free(settings.host, settings.port)
    logs.configure(logs.current_format(), level=settings.log_level, others_level=settings.log_level)
    _make_room_for_connections(settings.max_connections)
    app = create_app(settings, _load(settings), on_ready=on_ready)
    _run(app, settings, access_log)


def run_worker(
    settings: ServeSettings,
    sock: socket.socket | None,
    index: int,
    flags: Any,
    log_format: str,
    access_log: bool,
    supervisor: int,
) -> None:
    """One worker of a server with --workers, in a process of its own: its models loaded, served on the
    supervisor's socket (`sock`; granian: the port, bound again with SO_REUSEPORT) until SIGTERM. A failure
    is one line and an exit status, as the CLI's: 2 for bad input (EXIT_INPUT), 1 for anything else."""
    # Its own process group: a Ctrl-C on the terminal reaches only the supervisor, which stops the workers
    # with one SIGTERM each (a second signal would cut uvicorn's drain short).
    os.setpgrp()
    logs.configure(log_format, level=settings.log_level, others_level=settings.log_level)
    watch_supervisor(supervisor)
    try:
        settings = dataclasses.replace(settings, threads=cpu_threads(settings))
        _make_room_for_connections(settings.max_connections)
        app = create_app(settings, _load(settings, f"worker {index}: "), siblings=Siblings(flags, index))
        _run(app, settings, access_log, sock)
    except InputError as e:
        log.error("worker %d: %s", index, e)
        sys.exit(EXIT_INPUT)
    except Exception as e:  # a bug: one line here, the traceback with --log-level debug
        log.error("worker %d: internal error: %s: %s", index, e.__class__.__name__, e)
        log.debug("worker %d failed", index, exc_info=True)
        sys.exit(1)


def _load(settings: ServeSettings, who: str = "") -> dict[str, ModelRunner]:
    runners = load_runners(settings)
    for name, runner in runners.items():
        log.info(
            "%sloaded %s: %s (%s, %s) on %s",
            who,
            name,
            runner.path,
            runner.kind,
            runner.bundle.precision,
            ", ".join(runner.session.get_providers()),
        )
    return runners


def _run(app: Any, settings: ServeSettings, access_log: bool, sock: socket.socket | None = None) -> None:
    if settings.http_server == "granian":
        _run_granian(app, settings, access_log)
    else:
        _run_uvicorn(app, settings, access_log, sock)


def _run_uvicorn(app: Any, settings: ServeSettings, access_log: bool, sock: socket.socket | None) -> None:
    import uvicorn

    from electra.serving.http.uvicorn_protocol import Limits, guarded_protocol

    limits = Limits(settings.header_timeout_s, settings.max_header_bytes, settings.max_connections)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=guarded_protocol(limits),
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
    uvicorn.Server(config).run(sockets=None if sock is None else [sock])


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
    from granian.http import HTTP1Settings
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
        # granian's "backpressure" is a semaphore taken before each accept: the connection cap, with the
        # connections beyond it waiting in the backlog rather than answered 503.
        backpressure=settings.max_connections,
        # hyper's own limits: a head not in within the timeout closes the connection (it also bounds a
        # kept-alive connection's idle time), a head larger than its read buffer answers 431.
        http1_settings=HTTP1Settings(
            header_read_timeout=max(1, round(settings.header_timeout_s * 1000)),
            max_buffer_size=settings.max_header_bytes,
        ),
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
