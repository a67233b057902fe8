"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.sizes import SIZES

DEFAULT_CACHE = Path(os.environ.get("ELECTRA_CACHE", Path.home() / ".cache" / "electra"))


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {n}")
    return n


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (a bar on a terminal; otherwise a line every 30 s, ELECTRA_PROGRESS_INTERVAL)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Whether to show progress: always unless --quiet. electra.progress picks a bar on a terminal and a
    periodic plain line elsewhere (a log file, nohup, a container)."""
    return not args.quiet


def model_path(ref: str, revision: str | None, option: str = "--model") -> Path:
    """A model option as a local directory: a Hub id is fetched into (or found in) the Hugging Face cache;
    InputError naming both kinds when `ref` is neither an existing directory nor a Hub id."""
    from electra.hub import EXAMPLE_ID, resolve

    path = resolve(ref, revision, what="model")
    if not path.is_dir():
        what = "not a directory" if path.exists() else "no such directory"
        raise InputError(
            f"{option} {ref}: {what} (pass a model directory, with config.json and its weights, or a "
            f"Hugging Face Hub id such as {EXAMPLE_ID})"
        )
    return path


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def demo_corpus(progress: bool = False) -> Path:
    """The embedded demo corpus, built once per version of its pinned source and cached in DEFAULT_CACHE."""
    from electra.training.data.demo_corpus import cached_demo_corpus

    return cached_demo_corpus(DEFAULT_CACHE, progress=progress)


def format_number(value: float) -> str:
    """A default as --help shows it: 1,000,000 steps, lr 5e-4, 0.15."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.0e}".replace("e-0", "e-") if 0 < value < 0.01 else f"{value:g}"


def per_size(
    attr: str, names: Sequence[str] | None = None, shown: Callable[[Any], str] = format_number
) -> str:
    """A recipe value (an electra.sizes.ModelSize field) for each size, e.g. "small 5e-4, base 2e-4"."""
    return ", ".join(f"{name} {shown(getattr(SIZES[name], attr))}" for name in names or SIZES)
