"""The virtual environment of the standard clients that cannot share the project's (tests/clients/): KServe's
SDK pins protobuf below 7 and brings a web stack of its own.

Made on first use at .venv-clients (git-ignored) with pip from the package index, and reused while
tests/clients/requirements.txt and the Python version stay the same. Where it cannot be made, the tests that
need it skip with the reason, unless ELECTRA_REQUIRE_CLIENTS=1 (CI) turns the skip into a failure.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "tests" / "clients"
REQUIREMENTS = CLIENTS / "requirements.txt"
VENV = ROOT / ".venv-clients"


def _fingerprint() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()


def clients_python() -> Path:
    """The clients environment's python, made or refreshed first when needed (skip or fail without it)."""
    python = VENV / "bin" / "python"
    marker = VENV / "requirements.sha256"
    want = _fingerprint()
    if python.is_file() and marker.is_file() and marker.read_text() == want:
        return python
    try:
        venv.create(VENV, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        _missing(
            f"could not make {VENV.name} from {REQUIREMENTS.relative_to(ROOT)}: {detail.strip()[-2000:]}"
        )
    marker.write_text(want)
    return python


def run_client(script: str, *args: str, stdin: str | None = None) -> str:
    """stdout of tests/clients/`script` run by the clients environment's python (fails on its error)."""
    r = subprocess.run(
        [str(clients_python()), str(CLIENTS / script), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, (
        f"{script} failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    )
    return r.stdout


def _missing(reason: str) -> None:
    if os.environ.get("ELECTRA_REQUIRE_CLIENTS", "") not in ("", "0"):
        pytest.fail(f"{reason} (ELECTRA_REQUIRE_CLIENTS is set, so this fails instead of skipping)")
    pytest.skip(reason)
