"""electra.atomic: outputs appear whole, with the permissions the umask gives (not tempfile's 0700/0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from electra import atomic
from electra.atomic import atomic_dir, atomic_write_bytes, atomic_write_text, current_umask


@pytest.fixture
def umask() -> Iterator[object]:
    """Set the process umask for one test (it is process-global), restored afterwards."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_(mask: int) -> None:
        os.umask(mask)

    try:
        yield set_
    finally:
        os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "dir_mode", "file_mode"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_directories_and_files_follow_the_umask(
    tmp_path: Path, umask, mask: int, dir_mode: int, file_mode: int
) -> None:
    umask(mask)
    assert current_umask() == mask
    bundle = tmp_path / "bundle"
    with atomic_dir(bundle) as tmp:
        (tmp / "bundle.json").write_text("{}")
        (tmp / "sub").mkdir()
    assert mode(bundle) == dir_mode
    assert mode(bundle / "bundle.json") == file_mode and mode(bundle / "sub") == dir_mode

    with atomic_dir(bundle, overwrite=True) as tmp:  # a replaced directory too
        (tmp / "bundle.json").write_text("{}")
    assert mode(bundle) == dir_mode

    with atomic_dir(tmp_path / "model") as tmp:  # what safetensors' save_file writes owner-only
        (tmp / "model.safetensors").write_bytes(b"weights")
        os.chmod(tmp / "model.safetensors", 0o600)
        (tmp / "run.sh").write_text("#!/bin/sh\n")
        os.chmod(tmp / "run.sh", 0o750)
    assert mode(tmp_path / "model" / "model.safetensors") == file_mode
    assert mode(tmp_path / "model" / "run.sh") == 0o750  # a mode chosen on purpose stays

    atomic_write_bytes(tmp_path / "file.bin", b"data")
    atomic_write_text(tmp_path / "file.bin", "replaced")
    assert mode(tmp_path / "file.bin") == file_mode
    assert (tmp_path / "file.bin").read_text() == "replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "file.bin", "model"]  # no temporary left


def test_the_umask_without_proc(monkeypatch: pytest.MonkeyPatch, umask) -> None:
    umask(0o027)
    assert atomic._umask_from_proc() == 0o027  # Linux
    monkeypatch.setattr(atomic, "_umask_from_proc", lambda: None)
    assert current_umask() == 0o027
    assert current_umask() == 0o027  # reading it left it as it was


def test_a_checkpoint_directory_follows_the_umask(tmp_path: Path, umask) -> None:
    import torch

    from electra.training.pretrain.state.checkpoint import save_checkpoint, verify_checkpoint

    tensors = {"w": torch.zeros(2, 3)}
    umask(0o022)
    path = save_checkpoint(tmp_path / "run", 1, tensors, None, {"step": 1}, None)
    assert mode(path) == 0o755 and verify_checkpoint(path) is None
    assert {mode(f) for f in path.iterdir()} == {0o644}
    umask(0o077)
    path = save_checkpoint(tmp_path / "run", 2, tensors, None, {"step": 2}, None)
    assert mode(path) == 0o700
    assert {mode(f) for f in path.iterdir()} == {0o600}
