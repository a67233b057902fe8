"""Every link in the project's documentation leads somewhere: a file of the repository that exists and,
where the link names a section (#anchor), a heading of that file with GitHub's anchor for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    p
    for p in [
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "bench").glob("*.md"),
        *(ROOT / "experiments").glob("*.md"),
        *(ROOT / "loadtests").glob("*.md"),
        *(ROOT / "helm").glob("*.md"),
    ]
    if p.is_file()
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped (hyphens and
    underscores kept), spaces to hyphens; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6} (.*)$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", path.read_text(encoding="utf-8")))]


def test_the_anchor_rule_is_githubs() -> None:
    assert "does-pre-training-help-the-papers-experiment-in-miniature" in anchors(
        ROOT / "experiments" / "README.md"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"^(https?:|mailto:)", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}:\n" + "\n".join(broken)


# A section named in words ("the README's reliability section") instead of linked: nothing checks that it is
# still there, so the documentation links to sections instead.
SECTION_IN_WORDS = re.compile(r"\b(?:the )?[\w./-]+'s [\w -]{1,40}? section\b", re.IGNORECASE)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_sections_are_linked_not_named(doc: Path) -> None:
    named = SECTION_IN_WORDS.findall(FENCE.sub("", doc.read_text(encoding="utf-8")))
    assert not named, f"{doc.relative_to(ROOT)} names sections instead of linking them: {named}"
