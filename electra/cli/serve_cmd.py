"""`electra serve`: exported bundles behind the HTTP API (every option also from ELECTRA_* variables)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from electra.errors import InputError

# option -> (type, default); the environment variable is ELECTRA_<OPTION upper-cased, '-' -> '_'>.
OPTIONS: dict[str, tuple[Callable[[str], Any], Any, str]] = {
    "host": (str, "127.0.0.1", "address to listen on (0.0.0.0 in a container)"),
    "port": (int, 8000, "TCP port"),
    "device": (str, "cpu", "cpu or cuda (ONNX Runtime's CUDA provider with IO binding)"),
    "max-batch-tokens": (int, 8192, "padded tokens (rows x longest row) per model call"),
    "max-batch-size": (int, 32, "inputs per model call (1 turns batching off)"),
    "max-wait-ms": (float, 2.0, "how long a batch that is not full waits for more inputs"),
    "max-queue": (int, 1024, "inputs waiting per model before requests get 503 + Retry-After"),
    "max-body-bytes": (int, 2_000_000, "largest request body"),
    "max-texts": (int, 128, "inputs per request"),
    "max-chars": (int, 50_000, "characters per text"),
    "api-key-file": (
        Path,
        None,
        "file of API keys, one per line: /detect, /classify and /models then "
        "need 'Authorization: Bearer KEY' (health, metrics and the page stay open)",
    ),
    "threads": (int, 0, "ONNX Runtime threads per model (0: all cores)"),
    "graceful-timeout": (float, 30.0, "seconds SIGTERM waits for in-flight requests"),
    "log-level": (str, "info", "critical, error, warning, info or debug"),
}


def env_name(option: str) -> str:
    return "ELECTRA_" + option.upper().replace("-", "_")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve exported bundles over HTTP (/detect, /classify, /metrics, the page at /)",
        description="Serves bundles written by `electra export` with ONNX Runtime: dynamic batching per "
        "model, Prometheus metrics, health probes, OpenAPI at /schema. Every option can also be set with "
        "an environment variable (ELECTRA_MODELS='name=dir,name2=dir2', ELECTRA_PORT, ...); the command "
        "line wins. SIGTERM finishes in-flight requests, then exits.",
    )
    p.add_argument(
        "--model",
        action="append",
        metavar="NAME=BUNDLE",
        help="a bundle to serve under NAME (repeat for several; env ELECTRA_MODELS, comma-separated)",
    )
    for option, (_, default, text) in OPTIONS.items():
        p.add_argument(
            f"--{option}", default=None, help=f"{text} (default {default}; env {env_name(option)})"
        )
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="log every request (costs throughput; env ELECTRA_ACCESS_LOG=1)",
    )
    p.set_defaults(handler=run_serve)


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None):  # -> ServeSettings
    """Settings from the command line over ELECTRA_* variables over the defaults; InputError on bad values."""
    from electra.serving.settings import ServeSettings, parse_model_list, parse_model_spec

    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option, (kind, default, _) in OPTIONS.items():
        raw = getattr(args, option.replace("-", "_"))
        source = f"--{option}"
        if raw is None and env.get(env_name(option), "") != "":
            raw, source = env[env_name(option)], env_name(option)
        if raw is None:
            values[option] = default
            continue
        try:
            values[option] = kind(raw)
        except ValueError:
            raise InputError(f"{source}: {raw!r} is not a valid {kind.__name__}") from None
    if args.model:
        models = [parse_model_spec(m) for m in args.model]
    else:
        models = parse_model_list(env.get("ELECTRA_MODELS", ""))
    if values["log-level"] not in ("critical", "error", "warning", "info", "debug"):
        raise InputError(
            f"log level must be critical, error, warning, info or debug, not {values['log-level']!r}"
        )
    return ServeSettings(
        models=tuple(models),
        host=values["host"],
        port=values["port"],
        device=values["device"],
        max_batch_tokens=values["max-batch-tokens"],
        max_batch_size=values["max-batch-size"],
        max_wait_ms=values["max-wait-ms"],
        max_queue=values["max-queue"],
        max_body_bytes=values["max-body-bytes"],
        max_texts=values["max-texts"],
        max_chars=values["max-chars"],
        api_key_file=values["api-key-file"],
        threads=values["threads"],
        graceful_timeout_s=values["graceful-timeout"],
        log_level=values["log-level"],
    )


def run_serve(args: argparse.Namespace) -> int:
    try:
        from electra.serving.server import serve
    except ImportError as e:
        raise InputError(
            f"serving needs the serve extra ({e.name} is missing): pip install -e '.[serve]'"
        ) from None
    access_log = args.access_log
    if access_log is None:
        access_log = os.environ.get("ELECTRA_ACCESS_LOG", "").lower() in ("1", "true", "yes", "on")
    serve(settings_from(args), access_log=access_log)
    return 0
