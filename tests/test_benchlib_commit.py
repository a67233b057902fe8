"""Results record the project's own commit: never an enclosing repository's, ELECTRA_COMMIT without git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.benchlib import ROOT, git_commit


def git(cwd: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def repository(path: Path) -> str:
    """A repository at `path` with one commit; its short hash."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "file.txt").write_text("x\n")
    git(path, "add", "file.txt")
    git(path, "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "--short", "HEAD")


def test_a_copy_inside_another_repository_does_not_take_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outer = repository(tmp_path / "outer")
    copy = tmp_path / "outer" / "scratch" / "project"
    copy.mkdir(parents=True)
    monkeypatch.delenv("ELECTRA_COMMIT", raising=False)
    assert git_commit(copy) == "unknown"
    monkeypatch.setenv("ELECTRA_COMMIT", "73e5952")
    assert git_commit(copy) == "73e5952" != outer


def test_the_projects_own_repository_gives_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = repository(tmp_path / "project")
    monkeypatch.setenv("ELECTRA_COMMIT", "73e5952")  # a stale variable does not override real metadata
    assert git_commit(tmp_path / "project") == own


def test_this_checkout_records_its_head() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("this tree has no git metadata of its own")
    assert git_commit() == git(ROOT, "rev-parse", "--short", "HEAD")
