"""`electra serve`: exported bundles behind the HTTP API (every option also from ELECTRA_* variables).

The options are ServeSettings' fields (electra.serving.settings): their names, defaults and help come from
there, so the flags, the environment variables and the dataclass cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from electra.errors import InputError
from electra.serving.settings import (
    LOG_LEVELS,
    ServeSettings,
    parse_model_list,
    parse_model_spec,
)


@dataclass(frozen=True)
class Option:
    """One ServeSettings field as `electra serve` exposes it: --FLAG and its environment variable."""

    field: str  # the ServeSettings field
    parse: Callable[[str], Any]
    default: Any
    help: str


def env_name(option: str) -> str:
    return "ELECTRA_" + option.upper().replace("-", "_")


def parse_bool(text: str) -> bool:
    """true/false (also 1/0, yes/no, on/off, any case), as a flag or an environment variable gives it."""
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(text)


def _parser_of(annotation: Any) -> Callable[[str], Any]:
    """str, int, float, bool or Path from a field's type (Path | None: Path)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = args[0] if args else annotation
    return parse_bool if kind is bool else kind


def _options() -> dict[str, Option]:
    hints = typing.get_type_hints(ServeSettings)
    options = {}
    for f in dataclasses.fields(ServeSettings):
        if "help" not in f.metadata:  # models (--model, ELECTRA_MODELS) and api_keys (from api_key_file)
            continue
        flag = f.metadata["flag"] or f.name.replace("_", "-")
        options[flag] = Option(f.name, _parser_of(hints[f.name]), f.default, f.metadata["help"])
    return options


_KINDS: dict[Any, str] = {int: "a whole number", float: "a number", parse_bool: "true or false"}

# option (the flag without '--') -> Option; the environment variable is env_name(option).
OPTIONS: dict[str, Option] = _options()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve exported bundles over HTTP (/detect, /classify, /tag, /metrics, the page at /)",
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
    for option, o in OPTIONS.items():
        # default None: "not given", so the environment can fill it in; the real default is in the help.
        # A switch alone means true (--auto-truncate, as text-embeddings-inference's), or takes true/false.
        switch = {"nargs": "?", "const": "true", "metavar": "true|false"} if o.parse is parse_bool else {}
        shown = str(o.default).lower() if o.parse is parse_bool else o.default
        # No default (None): the help says what applies when it is not given.
        default = "" if o.default is None else f"default {shown}; "
        help = f"{o.help} ({default}env {env_name(option)})"
        p.add_argument(f"--{option}", default=None, help=help, **switch)
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="log every request (costs throughput; env ELECTRA_ACCESS_LOG=1)",
    )
    p.set_defaults(handler=run_serve)


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServeSettings:
    """Settings from the command line over ELECTRA_* variables over the defaults; InputError on bad values."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option, o in OPTIONS.items():
        raw = getattr(args, option.replace("-", "_"))
        source = f"--{option}"
        if raw is None and env.get(env_name(option), "") != "":
            raw, source = env[env_name(option)], env_name(option)
        if raw is None:
            continue  # the field's default
        try:
            values[o.field] = o.parse(raw)
        except ValueError:
            kind = _KINDS.get(o.parse, o.parse.__name__)
            raise InputError(f"{source}: {raw!r} is not {kind} (see `electra serve --help`)") from None
    if args.model:
        models = [parse_model_spec(m) for m in args.model]
    else:
        models = parse_model_list(env.get("ELECTRA_MODELS", ""))
    log_level = values.get("log_level", OPTIONS["log-level"].default)
    if log_level not in LOG_LEVELS:
        raise InputError(f"log level must be critical, error, warning, info or debug, not {log_level!r}")
    return ServeSettings(models=tuple(models), **values)


def run_serve(args: argparse.Namespace) -> int:
    try:
        from electra.serving.http.server import serve
    except ImportError as e:
        raise InputError(
            f"serving needs the serve extra ({e.name} is missing): pip install -e '.[serve]'"
        ) from None
    access_log = args.access_log
    if access_log is None:
        access_log = os.environ.get("ELECTRA_ACCESS_LOG", "").lower() in ("1", "true", "yes", "on")
    serve(settings_from(args), access_log=access_log)
    return 0
