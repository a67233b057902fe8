"""Progress of long commands: a tqdm bar on a terminal, a plain line every so often anywhere else.

A bar redrawn in place is useless in a log file, under nohup or in a container: there, `progress()` returns
an object with the same small interface (update, set_postfix_str, set_postfix, close, n, a context manager)
that writes one line every `interval` seconds (ELECTRA_PROGRESS_INTERVAL, default 30) and one at the end:

    pretrain: 1,200/10,000 steps (12%), 3.1 steps/s, ETA 47 min, mlm 7.120 disc 0.301 ...

The line goes through `logging` (logger `electra.progress`) once electra.logs is configured, so it has the
format of every other line; otherwise straight to stderr. `enabled=False` (`--quiet`) gives an object that
shows nothing. Standard library only (tqdm is imported on a terminal only): no stage, no torch.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

from electra import logs

INTERVAL_ENV = "ELECTRA_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0

log = logging.getLogger("electra.progress")


class Progress(Protocol):
    """What the stages use of a progress bar: tqdm's, or PlainProgress's / NullProgress's equivalent."""

    n: float
    total: float | None

    def update(self, n: float = 1) -> Any: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> Any: ...


def progress(
    total: float | None = None,
    desc: str = "",
    unit: str = "it",
    enabled: bool = True,
    *,
    initial: float = 0,
    unit_scale: bool = False,
    stream: IO[str] | None = None,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """A progress display on `stream` (default: stderr at the time of the call).

    A tqdm bar when the stream is a terminal; otherwise a PlainProgress writing a line every `interval`
    seconds (default: ELECTRA_PROGRESS_INTERVAL or 30) and one when closed; a NullProgress when not
    `enabled`. `unit_scale` shows SI-prefixed amounts (for bytes: unit "B").
    """
    if not enabled:
        return NullProgress(total, initial)
    out = stream if stream is not None else sys.stderr
    if _is_terminal(out):
        from tqdm import tqdm

        return tqdm(
            total=total,
            initial=initial,
            desc=desc,
            unit=unit,
            unit_scale=unit_scale,
            file=out,
            dynamic_ncols=True,
        )
    return PlainProgress(
        total,
        desc,
        unit,
        initial=initial,
        unit_scale=unit_scale,
        stream=stream,
        interval=default_interval() if interval is None else interval,
        clock=clock,
    )


def default_interval() -> float:
    """Seconds between two plain progress lines: ELECTRA_PROGRESS_INTERVAL, or 30."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value >= 0 else DEFAULT_INTERVAL_S


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


class _Base:
    def __init__(self, total: float | None, initial: float) -> None:
        self.total = total
        self.n = initial
        self.postfix = ""
        self.closed = False

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def set_postfix(
        self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kwargs: Any
    ) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.set_postfix_str(", ".join(f"{k}={v}" for k, v in items.items()), refresh)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # failing: the error says what happened, a last progress line would only come before it
            self.closed = True

    def close(self) -> None:
        self.closed = True


class NullProgress(_Base):
    """Counts, shows nothing (--quiet)."""

    def update(self, n: float = 1) -> None:
        self.n += n


class PlainProgress(_Base):
    """One plain line every `interval` seconds of `clock` (checked on update), and one at close.

    No thread: a line is due when `update` is called, so a step that takes longer than `interval` gives one
    line per step. The postfix is shown with the next line (the stages set it before they update).
    """

    def __init__(
        self,
        total: float | None,
        desc: str = "",
        unit: str = "it",
        *,
        initial: float = 0,
        unit_scale: bool = False,
        stream: IO[str] | None = None,
        interval: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(total, initial)
        self.desc = desc
        self.unit = unit
        self.unit_scale = unit_scale
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.initial = initial
        self.start = clock()
        self.last_line = self.start
        self.lines = 0

    def update(self, n: float = 1) -> None:
        self.n += n
        self._maybe_write()

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        self._write(self.clock(), final=True)

    def _maybe_write(self) -> None:
        if self.closed:
            return
        now = self.clock()
        if now - self.last_line >= self.interval:
            self._write(now)

    def _write(self, now: float, final: bool = False) -> None:
        self.last_line = now
        self.lines += 1
        line = self.line(now - self.start, final)
        if self.stream is None and logs.is_configured():
            log.info("%s", line)
            return
        out = self.stream if self.stream is not None else sys.stderr
        out.write(line + "\n")
        out.flush()

    def line(self, elapsed: float, final: bool = False) -> str:
        """`desc: n/total units (p%), rate units/s, ETA t, postfix` (at the end: `took t`)."""
        if self.unit_scale:  # 12.3 MB/100.0 MB, 4.5 MB/s
            amount = f"{_si(self.n)}{self.unit}" + (f"/{_si(self.total)}{self.unit}" if self.total else "")
            per_second = f"{self.unit}/s"
        else:  # 1,200/10,000 steps, 3.1 steps/s
            units = _plural(self.unit)
            amount = f"{self.n:,.0f}" + (f"/{self.total:,.0f}" if self.total else "") + f" {units}"
            per_second = f"{units}/s"
        if self.total:
            amount += f" ({100 * self.n / self.total:.0f}%)"
        parts = [amount]
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else None
        if rate is not None:
            shown = (
                _si(rate) if self.unit_scale else f"{rate:,.{2 if rate < 1 else 1 if rate < 100 else 0}f} "
            )
            parts.append(f"{shown}{per_second}")
        if final:
            parts.append(f"took {format_duration(elapsed)}")
        elif self.total and rate:
            parts.append(f"ETA {format_duration(max(self.total - self.n, 0) / rate)}")
        if self.postfix:
            parts.append(self.postfix)
        text = ", ".join(parts)
        return f"{self.desc}: {text}" if self.desc else text


def _plural(unit: str) -> str:
    """'step' -> 'steps'; 'B' and units already plural stay as they are."""
    if unit == "B" or unit.endswith("s") or not unit.isalpha() or len(unit) < 2:
        return unit
    return unit + "s"


def _si(x: float) -> str:
    """1234567 -> '1.2 M', 999 -> '999 ': an amount with an SI prefix, for the unit to follow."""
    if abs(x) < 999.5:
        return f"{x:.0f} "
    for prefix in ("k", "M", "G", "T", "P"):
        x /= 1000
        if abs(x) < 999.5:
            return f"{x:.1f} {prefix}"
    return f"{x / 1000:.1f} E"


def format_duration(seconds: float) -> str:
    """'42 s', '47 min', '3.2 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
