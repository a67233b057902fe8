"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from electra.errors import InputError

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
        "--quiet", action="store_true", help="no progress bar (also when stderr is not a terminal)"
    )


def show_progress(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def demo_corpus(cache: Path = DEFAULT_CACHE, progress: bool = False, max_bytes: int = 20_000_000) -> Path:
    """The embedded demo corpus, built once per Python installation and size, and cached."""
    from electra.training.data.demo_corpus import DEMO_CORPUS_LABEL, build_demo_corpus

    size = f"-{max_bytes // 1_000_000}mb" if max_bytes != 20_000_000 else ""
    path = cache / f"demo-corpus-py{sys.version_info.major}{sys.version_info.minor}{size}.txt"
    print(f"using the {DEMO_CORPUS_LABEL}", file=sys.stderr)
    if not path.is_file():
        try:
            stats = build_demo_corpus(path, max_bytes=max_bytes, progress=progress)
        except OSError as e:
            raise InputError(
                f"cannot write the demo corpus to {path} ({e}); set ELECTRA_CACHE to a writable dir"
            ) from e
        print(
            f"built the demo corpus {path}: {stats.documents:,} documents, {stats.bytes / 1e6:.1f} MB "
            f"in {stats.seconds:.0f} s",
            file=sys.stderr,
        )
    return path
