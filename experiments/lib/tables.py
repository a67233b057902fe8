"""Markdown tables for the write-ups (experiments/README.md quotes them verbatim: the tests compare)."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
