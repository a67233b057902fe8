"""The layering contracts of pyproject.toml ([tool.importlinter]) hold: `lint-imports` passes.

CI runs `lint-imports` too (.ci/run); this makes a plain `python -m pytest` enforce the same contracts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str | None:
    """The lint-imports executable of this interpreter's environment (else the PATH's), or None."""
    here = Path(sys.executable).parent / "lint-imports"
    return str(here) if here.is_file() else shutil.which("lint-imports")


def test_import_contracts_are_kept() -> None:
    exe = lint_imports()
    if exe is None:
        pytest.skip("lint-imports is not installed (import-linter, a dev extra)")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"lint-imports failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("package", ["bench", "experiments"])
def test_every_script_is_in_its_packages_layering(package: str) -> None:
    # A script left out of the contract could import a sibling unnoticed.
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named = {
        m.strip()
        for c in contracts
        if c["type"] == "layers"
        for layer in c["layers"]
        for m in layer.split("|")
        if m.strip().startswith(f"{package}.")
    }
    scripts = {f"{package}.{p.stem}" for p in (ROOT / package).glob("*.py") if p.stem != "__init__"}
    assert scripts <= named, f"not in a [tool.importlinter] layers contract: {sorted(scripts - named)}"
