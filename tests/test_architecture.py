"""ARCHITECTURE.md's map of the code is true: its table names every module of electra/, bench/ and
experiments/ under the directory that holds it, and names no module that does not exist there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("electra", "bench", "experiments")


def table_rows() -> dict[Path, set[str]]:
    """{directory: the .py names its row of "Where things live" gives}."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    rows: dict[Path, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 3:
            continue
        m = re.fullmatch(r"\s*`([\w/]+/)`(?: \(root\))?\s*", cells[1])
        if m and m.group(1).split("/")[0] in PACKAGES:
            rows[ROOT / m.group(1)] = set(re.findall(r"`([\w/]+\.py)`", "|".join(cells[2:])))
    return rows


def test_every_module_is_on_the_map_under_its_directory() -> None:
    rows = table_rows()
    missing = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__init__.py" or "results" in path.parts:
                continue
            named = rows.get(path.parent, set())
            if path.name not in named:
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not in ARCHITECTURE.md's table, in its directory's row: {missing}"


def test_the_map_names_no_module_that_is_not_there() -> None:
    ghosts = [
        str((directory / name).relative_to(ROOT))
        for directory, names in table_rows().items()
        for name in names
        if not (directory / name).is_file()
    ]
    assert not ghosts, f"ARCHITECTURE.md names modules that do not exist: {ghosts}"


def test_every_package_directory_has_a_row() -> None:
    rows = table_rows()
    dirs = {
        p.parent for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "results" not in p.parts
    }
    assert dirs <= set(rows), (
        f"directories without a row: {sorted(str(d.relative_to(ROOT)) for d in dirs - set(rows))}"
    )
