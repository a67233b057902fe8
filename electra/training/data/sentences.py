"""A fast rule-based sentence splitter for paragraph-per-line corpora (Wikipedia dumps, for instance).

Packing builds examples from whole sentences and splits segments A/B at sentence boundaries; with a
paragraph per line that boundary would be a paragraph, and most of a long paragraph would be truncated away.
A regular expression is enough here: a missed split only makes a longer "sentence", and over-long ones are
cut by token count during packing, so no text is ever lost to a bad split.
"""

from __future__ import annotations

import re

# Fixed-width lookbehinds (the `re` module allows no other kind) keep common abbreviations and initials
# ("Mr. Smith", "J. R. R. Tolkien", "e.g. this") from ending a sentence.
_ABBREVIATIONS = (
    "Mr", "Ms", "Mrs", "Dr", "St", "Jr", "Sr", "vs", "No", "Mt", "Co", "Inc", "Ltd", "Prof", "Gen", "Col",
    "Lt", "Sgt", "Capt", "Rev", "Gov", "Sen", "Rep", "Fig", "fig", "Vol", "vol", "approx", "etc", "al",
    "e.g", "i.e", "cf", "ca",
)  # fmt: skip
_NOT_ABBREV = "".join(rf"(?<!\b{re.escape(a)}\.)" for a in _ABBREVIATIONS)
_SENTENCE_BREAK = re.compile(
    r"(?:(?<=[.!?])" + r"(?<!\b[A-Z]\.)" + _NOT_ABBREV + r"|(?<=[.!?][\"'”’)\]]))"
    r"\s+"
    r"(?=[\"'“‘(\[]?[A-Z0-9])"
)


def split_sentences(line: str) -> list[str]:
    """Split one line of text into sentences; a line without a sentence break is returned whole."""
    if len(line) < 40:  # too short to hold two sentences worth separating; skips the regex for most lines
        return [line]
    return [s for s in _SENTENCE_BREAK.split(line) if s]
