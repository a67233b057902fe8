"""The server makes room for --max-connections among its open files (electra.serving.http.server): the soft
limit is raised as far as the hard one allows, with a warning when that is not enough. In a subprocess, whose
limits the test may lower without touching pytest's own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

resource = pytest.importorskip("resource", reason="no open-file limits on this platform")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

CODE = textwrap.dedent(
    """
    import logging, resource, sys
    from electra.serving.http.server import FILES_BESIDES_CONNECTIONS, _make_room_for_connections
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, 2000))
    _make_room_for_connections(int(sys.argv[1]))
    print("soft", resource.getrlimit(resource.RLIMIT_NOFILE)[0], "besides", FILES_BESIDES_CONNECTIONS)
    """
)


def run(max_connections: int) -> str:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2000:
        pytest.skip(f"the hard open-file limit here ({hard}) is below the 2000 this test sets")
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(max_connections)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_soft_limit_is_raised_to_fit_the_connections() -> None:
    out = run(1024)
    besides = int(out.split()[-1])
    assert f"soft {1024 + besides} " in out and "may open only" not in out


def test_a_hard_limit_too_low_is_raised_to_and_warned_about() -> None:
    out = run(4000)
    assert "soft 2000 " in out
    assert "--max-connections 4000: this process may open only 2000 files" in out
