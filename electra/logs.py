"""One log format for every command, set once by the CLI: `electra --log-format {plain,json}` or
ELECTRA_LOG_FORMAT (default plain).

  plain 2026-11-23 10:00:00 INFO electra.pretrain: checkpoint runs/x/checkpoints/step-00001000 (periodic)
  json  {"time": "2026-11-23T10:00:00.123+01:00", "level": "INFO", "logger": "electra.pretrain",
         "message": "checkpoint runs/x/checkpoints/step-00001000 (periodic)"}    (on one line)

`configure()` puts one handler on the root logger, writing to stderr in that format; the trainer, fine-tuning,
the export, progress lines and the server (its uvicorn loggers included, through `uvicorn_log_config()`) all
log through it. The `electra` loggers get the requested level; other libraries stay at WARNING unless asked
(the ONNX Runtime optimizer, for one, is chatty at INFO). Results printed on stdout and the CLI's final
`electra: error: ...` line are not log lines and do not go through here. Standard library only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime
from typing import Any, Literal

from electra.errors import InputError

LogFormat = Literal["plain", "json"]
FORMATS: tuple[LogFormat, ...] = ("plain", "json")
FORMAT_ENV = "ELECTRA_LOG_FORMAT"
LEVELS = ("critical", "error", "warning", "info", "debug")
# The plain format, everywhere: "2026-11-23 10:00:00 INFO electra.pretrain: message".
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PLAIN_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
JSON_KEYS = ("time", "level", "logger", "message")

_configured: LogFormat | None = None


class PlainFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT, PLAIN_DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).rstrip("\n")  # a Python warning's message ends in one


class JsonFormatter(logging.Formatter):
    """One JSON object per line with exactly JSON_KEYS; a traceback goes into "message"."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().rstrip("\n")
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            message += "\n" + self.formatStack(record.stack_info)
        when = datetime.fromtimestamp(record.created).astimezone()
        return json.dumps(
            {
                "time": when.isoformat(timespec="milliseconds"),
                "level": record.levelname,
                "logger": record.name,
                "message": message,
            },
            ensure_ascii=False,
        )


def formatter(fmt: str = "plain") -> logging.Formatter:
    """The formatter of `fmt` (a factory logging.config can call: {"()": "electra.logs.formatter"})."""
    return JsonFormatter() if check_format(fmt) == "json" else PlainFormatter()


def _uvicorn_name(record: logging.LogRecord) -> bool:
    # uvicorn logs its start-up and shutdown lines as "uvicorn.error", which reads as a fault: "uvicorn".
    if record.name == "uvicorn.error":
        record.name = "uvicorn"
    return True


class StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (pytest's capture, contextlib.redirect_stderr)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.addFilter(_uvicorn_name)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ and setStream assign it; always stderr
        pass


def check_format(fmt: str, source: str = "--log-format") -> LogFormat:
    if fmt not in FORMATS:
        raise InputError(f"{source} is {fmt!r} (set it to plain or json)")
    return fmt  # type: ignore[return-value]


def format_from_env() -> LogFormat:
    """ELECTRA_LOG_FORMAT, or plain when unset or empty; InputError when it is something else."""
    raw = os.environ.get(FORMAT_ENV, "").strip().lower()
    return check_format(raw, FORMAT_ENV) if raw else "plain"


def current_format() -> LogFormat:
    """The format configure() set, or the one ELECTRA_LOG_FORMAT asks for."""
    return _configured if _configured is not None else format_from_env()


def is_configured() -> bool:
    """Whether configure() has put its handler on the root logger (and it is still there)."""
    return any(isinstance(h, StderrHandler) for h in logging.getLogger().handlers)


def say(logger: str, message: str, level: int = logging.INFO) -> None:
    """A status line for a person: through `logger` in the configured format once the CLI has configured
    logging, else the bare message on stderr (a library call or a test, where an INFO record would be
    dropped by logging's last-resort handler)."""
    if is_configured():
        logging.getLogger(logger).log(level, message)
    else:
        prefix = "warning: " if level == logging.WARNING else ""
        print(prefix + message, file=sys.stderr, flush=True)


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    if level.lower() not in LEVELS:
        raise InputError(f"log level must be {', '.join(LEVELS[:-1])} or {LEVELS[-1]}, not {level!r}")
    return logging.getLevelName(level.upper())


def configure(
    fmt: str | None = None, level: str | int = "info", others_level: str | int = "warning"
) -> LogFormat:
    """Log to stderr in `fmt` (default: ELECTRA_LOG_FORMAT, else plain); returns the format in use.

    `level` applies to the `electra` loggers, `others_level` to everything else. Calling it again replaces
    the handler it installed (handlers others added to the root logger are left alone). Python warnings
    are logged too, so they keep the format.
    """
    global _configured
    chosen = check_format(fmt) if fmt is not None else format_from_env()
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(h)
    handler = StderrHandler()
    handler.setFormatter(formatter(chosen))
    root.addHandler(handler)
    root.setLevel(_level(others_level))
    logging.getLogger("electra").setLevel(_level(level))
    logging.captureWarnings(True)
    _configured = chosen
    return chosen


def uvicorn_log_config(level: str = "info", others_level: str = "warning") -> dict[str, Any]:
    """uvicorn.Config(log_config=...): its loggers (default, error, access) propagate to our one handler.

    uvicorn applies it with logging.config.dictConfig, which replaces the root handler: this describes the
    same handler and format configure() installs, so nothing changes but uvicorn's own handlers are gone.
    """
    fmt = current_format()
    global _configured
    _configured = fmt
    propagate = {"handlers": [], "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"electra": {"()": "electra.logs.formatter", "fmt": fmt}},
        "handlers": {"stderr": {"()": "electra.logs.StderrHandler", "formatter": "electra"}},
        "root": {"handlers": ["stderr"], "level": logging.getLevelName(_level(others_level))},
        "loggers": {
            "electra": {"level": logging.getLevelName(_level(level))},
            "uvicorn": {**propagate, "level": logging.getLevelName(_level(level))},
            "uvicorn.error": propagate,
            "uvicorn.access": propagate,
        },
    }
