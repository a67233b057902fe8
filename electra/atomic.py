"""Atomic outputs: a killed or failed run never leaves a half-written file or directory behind.

Everything is built next to its destination (same filesystem, so the final rename is atomic) and moved into
place only when complete. What lands there gets the permissions the umask gives any new file or directory
(0755/0644 under the usual 022), not the owner-only 0700/0600 of `tempfile`'s temporary names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from electra.errors import InputError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells (/proc/self/status, since 4.7).

    Elsewhere os.umask is the only way, and it sets while it reads: the umask is process-global, so for
    that instant another thread's new file would get the temporary one. 0o077 is used for that instant,
    which can only make such a file more private, never less.
    """
    mask = _umask_from_proc()
    if mask is not None:
        return mask
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def _umask_from_proc() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def dir_mode() -> int:
    """The mode mkdir gives a new directory: 0o777 & ~umask (0o755 under the usual 022)."""
    return 0o777 & ~current_umask()


def file_mode() -> int:
    """The mode open() gives a new file: 0o666 & ~umask (0o644 under the usual 022)."""
    return 0o666 & ~current_umask()


def make_temp_dir(prefix: str, parent: Path) -> Path:
    """tempfile.mkdtemp in `parent`, with the mode a plain mkdir would give (dir_mode()), not 0o700."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        os.chmod(tmp, dir_mode())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def open_up_private_files(root: Path) -> None:
    """Give the files under `root` that a library created owner-only (0o600: safetensors' save_file, a
    tempfile) the mode open() would have given them; other modes are left as their writer chose."""
    mode = file_mode()
    if mode == 0o600:
        return
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if stat.S_IMODE(os.lstat(path).st_mode) == 0o600 and not os.path.islink(path):
                    os.chmod(path, mode)


def check_output_dir(out: Path, overwrite: bool, inputs: Sequence[Path | str] = ()) -> None:
    """Refuse an existing output unless overwriting was asked for, and an output that is one of `inputs` or
    holds one (replacing it would delete the input); done before any long work starts."""
    for given in inputs:
        if Path(given).exists() and inside(Path(given), out):
            raise InputError(
                f"--out {out} is or holds the input {given}, which replacing it would delete; choose another "
                "--out"
            )
    if out.exists() and not overwrite:
        raise InputError(f"{out} already exists; choose another --out or pass --overwrite to replace it")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory; remove it or choose another --out")
    # The nearest folder above that exists: a file there means --out can never be made (found before the
    # work, not at its end).
    above = next((p for p in out.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(f"--out {out}: {above} is a file, not a folder; choose another --out")


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies under it (symbolic links resolved)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            with contextlib.suppress(OSError), open(os.path.join(dirpath, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(Path(dirpath))


@contextlib.contextmanager
def atomic_dir(out: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes `out` only if the block finishes without an exception.

    With `overwrite`, an existing `out` is replaced only after the new one is complete; until the final
    rename the old directory is untouched, so a crash at any point leaves either the old or the new one.
    """
    out = Path(out)
    check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(f".{out.name}.tmp-", out.parent)
    try:
        yield tmp
        open_up_private_files(tmp)
        _fsync_tree(tmp)
        if out.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.rename(out, trash / out.name)
            os.rename(tmp, out)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, out)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so readers see either the old content or the new, never a prefix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), file_mode())  # not mkstemp's 0o600: what open() would give
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
