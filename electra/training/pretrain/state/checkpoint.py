"""Pre-training checkpoints that survive crashes, full disks and bit rot.

Layout of a run directory::

    RUN/checkpoints/step-00000100/
        model.safetensors    every tensor once; names that alias another tensor are listed in its metadata
        optimizer.pt         torch.save of the optimizer state_dict (absent when none was given)
        rng.pt               rng.capture_rng_state(): python, numpy, torch, CUDA generators (absent if none)
        trainer_state.json   whatever JSON the trainer hands over: step, tokens seen, data position, ...

This module is the storage format; checkpoint_manager.CheckpointManager decides what a training run puts in
it and restores it.
        COMPLETE.json        written last: size and sha256 of every other file

A checkpoint is built in a hidden temporary directory next to its destination and renamed into place only
once every file is written and fsynced, so a kill at any moment leaves either no `step-*` directory or a
complete one. COMPLETE.json additionally catches what renaming cannot: truncation or corruption after the
fact (a bad disk, a half-finished rsync of the run directory). Old checkpoints are pruned only after the new
one is in place, so there is always at least one valid checkpoint once the first save has succeeded.

One process writes to a run directory at a time (rank 0 in distributed training): the hidden temporary
directories a killed writer leaves behind are removed by the next save.

Every pickle file here is read back with torch.load(weights_only=True), which refuses anything but tensors
and plain containers; save_checkpoint checks that up front, so a checkpoint that could not be loaded is
never written (and never causes a good one to be pruned).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from safetensors import SafetensorError, safe_open

from electra import __version__
from electra.atomic import file_mode, fsync_dir, make_temp_dir
from electra.digest import file_sha256
from electra.errors import ElectraError, InputError
from electra.files import CHECKPOINTS_DIR, MODEL_SAFETENSORS

OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.pt"
TRAINER_STATE_FILE = "trainer_state.json"
COMPLETE_FILE = "COMPLETE.json"
FORMAT = "electra-checkpoint"
FORMAT_VERSION = 1
# safetensors metadata key holding {alias name: name of the stored tensor it shares memory with}.
ALIASES_KEY = "electra.aliases"

_REQUIRED_FILES = (MODEL_SAFETENSORS, TRAINER_STATE_FILE)
_KNOWN_FILES = frozenset((MODEL_SAFETENSORS, OPTIMIZER_FILE, RNG_FILE, TRAINER_STATE_FILE))
_STEP_DIR = re.compile(r"step-(\d+)")
# Hidden leftovers of an interrupted save: `.step-N.tmp-*` (being built) and `.step-N.old-*` (being replaced).
_STALE_DIR = re.compile(r"\.step-\d+\.(?:tmp|old)-.+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Exactly what torch.load(weights_only=True) reads back. Types, not isinstance: numpy.float64 subclasses
# float yet pickles as a numpy object that weights_only refuses.
_PLAIN_TYPES = frozenset(
    (str, bytes, int, float, bool, complex, type(None), torch.dtype, torch.device, torch.Size)
)
_CONTAINER_TYPES = frozenset((dict, OrderedDict, list, tuple, set))
_TENSOR_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))

log = logging.getLogger("electra.pretrain")


@dataclass
class Checkpoint:
    path: Path
    step: int
    tensors: dict[str, torch.Tensor]
    optimizer: dict | None
    trainer_state: dict
    rng: dict | None


def log_message(message: str) -> None:
    """The default `log` of the functions here: an INFO line of the `electra.pretrain` logger."""
    log.info("%s", message)


def checkpoint_dir_name(step: int) -> str:
    return f"step-{step:08d}"


# --------------------------------------------------------------------------------------------------- saving


def save_checkpoint(
    run_dir: Path,
    step: int,
    tensors: dict[str, torch.Tensor],
    optimizer_state: dict | None,
    trainer_state: dict,
    rng_state: dict | None,
    keep_last: int = 3,
) -> Path:
    """Write RUN/checkpoints/step-%08d atomically and return its path; then keep only the newest `keep_last`.

    Retention ranks by step number: the one just written always stays, plus the `keep_last - 1` highest
    other steps, valid or not (so after an explicit resume from an older checkpoint, later ones of the
    abandoned run outrank the new ones until it passes them). `keep_last=0` keeps every checkpoint.
    An existing checkpoint for the same step is replaced. Any failure to write (full disk, I/O error)
    raises ElectraError and leaves the checkpoints directory as it was: nothing pruned, no temporary
    directory left.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int, got {step!r}")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
        raise ValueError(f"keep_last must be a non-negative int (0 keeps all), got {keep_last!r}")

    # Everything that can fail for a reason other than the disk fails here, before a byte is written.
    stored, aliases = _dedupe_tensors(tensors)
    trainer_text = json.dumps(trainer_state, indent=2) + "\n"
    if optimizer_state is not None:
        _check_weights_only_loadable(optimizer_state, "optimizer_state")
    if rng_state is not None:
        _check_weights_only_loadable(rng_state, "rng_state")

    root = Path(run_dir) / CHECKPOINTS_DIR
    final = root / checkpoint_dir_name(step)
    tmp: Path | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale_dirs(root)
        tmp = make_temp_dir(f".{final.name}.tmp-", root)
        _write_files(tmp, step, stored, aliases, optimizer_state, trainer_text, rng_state)
        _move_into_place(tmp, final)
        tmp = None
    except (OSError, SafetensorError) as e:
        raise ElectraError(
            f"could not write checkpoint {final} ({_reason(e)}); {_previous_note(Path(run_dir))}"
        ) from e
    finally:
        # Also on KeyboardInterrupt: a half-built checkpoint is garbage, and on a full disk it holds space.
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    _prune(Path(run_dir), keep=final, keep_last=keep_last)
    return final


def _dedupe_tensors(tensors: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors to store (CPU, contiguous, no shared memory) and {alias: stored name}.

    safetensors refuses tensors that share memory. Names for the very same view (tied embeddings, a module
    registered under two parents) become aliases of the first name, so loading hands back one tensor under
    every name and tying survives a resume. Distinct views that merely overlap are stored as copies.
    """
    stored: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    first_name: dict[tuple, str] = {}
    for name, t in tensors.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise TypeError(
                f"tensors must map str to torch.Tensor, got {type(name).__name__} -> {type(t).__name__}"
            )
        # Empty tensors all report data_ptr 0; they share nothing.
        if t.numel() > 0:
            view = (
                t.device,
                t.untyped_storage().data_ptr(),
                t.storage_offset(),
                tuple(t.shape),
                t.stride(),
                t.dtype,
            )
            if view in first_name:
                aliases[name] = first_name[view]
                continue
            first_name[view] = name
        stored[name] = t

    def storage(t: torch.Tensor) -> tuple:
        return (t.device, t.untyped_storage().data_ptr())

    users = Counter(storage(t) for t in stored.values() if t.numel() > 0)
    out = {}
    for name, t in stored.items():
        t = t.detach()
        if t.numel() > 0 and users[storage(t)] > 1:
            t = t.clone()
        out[name] = t.to("cpu").contiguous()
    return out, aliases


def _check_weights_only_loadable(obj: Any, where: str) -> None:
    kind = type(obj)
    if kind in _TENSOR_TYPES or kind in _PLAIN_TYPES:
        return
    if kind in _CONTAINER_TYPES:
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in items:
            if isinstance(obj, dict):
                _check_weights_only_loadable(key, f"{where} key")
            _check_weights_only_loadable(value, f"{where}[{key!r}]")
        return
    raise TypeError(
        f"{where} is a {kind.__module__}.{kind.__qualname__}, which torch.load(weights_only=True) cannot "
        "read back; convert it to tensors, numbers, strings, lists or dicts"
    )


def _write_files(
    tmp: Path,
    step: int,
    stored: dict[str, torch.Tensor],
    aliases: dict[str, str],
    optimizer_state: dict | None,
    trainer_text: str,
    rng_state: dict | None,
) -> None:
    # "format": "pt" is what transformers and other safetensors readers expect from torch checkpoints.
    metadata = {"format": "pt", ALIASES_KEY: json.dumps(aliases, sort_keys=True)}
    safetensors.torch.save_file(stored, tmp / MODEL_SAFETENSORS, metadata=metadata)
    os.chmod(tmp / MODEL_SAFETENSORS, file_mode())  # save_file makes it owner-only; the umask decides
    _fsync_file(tmp / MODEL_SAFETENSORS)
    written = [MODEL_SAFETENSORS]
    if optimizer_state is not None:
        _torch_save(optimizer_state, tmp / OPTIMIZER_FILE)
        written.append(OPTIMIZER_FILE)
    if rng_state is not None:
        _torch_save(rng_state, tmp / RNG_FILE)
        written.append(RNG_FILE)
    _write_bytes(tmp / TRAINER_STATE_FILE, trainer_text.encode("utf-8"))
    written.append(TRAINER_STATE_FILE)

    # Hashed after fsync, from the page cache: this is what the disk will hold, whatever the writer buffered.
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "electra_version": __version__,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": {
            name: {"size": (tmp / name).stat().st_size, "sha256": file_sha256(tmp / name)} for name in written
        },
    }
    _write_bytes(tmp / COMPLETE_FILE, (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
    fsync_dir(tmp)


def _torch_save(obj: Any, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_file(path: Path) -> None:
    # Not atomic._fsync_tree: it swallows errors, and with delayed allocation ENOSPC may only surface here.
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _move_into_place(tmp: Path, final: Path) -> None:
    if not final.exists():
        os.rename(tmp, final)
        fsync_dir(final.parent)
        return
    # Same step saved again. Linux cannot atomically replace a non-empty directory, so: old away, new in,
    # old deleted. A kill between the two renames loses this step but no other; the old copy is then a
    # hidden leftover that the next save removes.
    old = final.parent / f".{final.name}.old-{secrets.token_hex(4)}"
    os.rename(final, old)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(old, final)
        raise
    fsync_dir(final.parent)
    shutil.rmtree(old, ignore_errors=True)


def _remove_stale_dirs(root: Path) -> None:
    for entry in root.iterdir():
        if _STALE_DIR.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _prune(run_dir: Path, keep: Path, keep_last: int) -> None:
    if keep_last == 0:
        return
    others = [p for p in list_checkpoints(run_dir) if p != keep]
    doomed = others[: max(0, len(others) - (keep_last - 1))]
    for path in doomed:
        # Renamed first so a pruning interrupted halfway never leaves a gutted `step-*` directory around.
        trash = path.parent / f".{path.name}.old-{secrets.token_hex(4)}"
        try:
            os.rename(path, trash)
            shutil.rmtree(trash)
        except OSError as e:
            # The new checkpoint is safely written; a failed clean-up must not turn that into an error.
            log.warning("could not remove old checkpoint %s (%s); remove it by hand", path, _reason(e))


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _previous_note(run_dir: Path) -> str:
    with contextlib.suppress(OSError):
        existing = list_checkpoints(run_dir)
        if existing:
            return f"the previous checkpoint {existing[-1]} is intact"
        return "no earlier checkpoint exists"
    return "earlier checkpoints were not touched"


# ------------------------------------------------------------------------------------- finding, verifying


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Every RUN/checkpoints/step-N directory in step order, complete or not."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    try:
        entries = list(root.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        m = _STEP_DIR.fullmatch(entry.name)
        if m and entry.is_dir():
            found.append((int(m.group(1)), entry.name, entry))
    return [path for _, _, path in sorted(found)]


def verify_checkpoint(path: Path) -> str | None:
    """None if the checkpoint is complete and every file matches COMPLETE.json, else a one-line reason."""
    path = Path(path)
    if not path.is_dir():
        return "not a directory" if path.exists() else "does not exist"
    manifest, problem = _read_manifest(path)
    if problem is not None:
        return problem
    assert manifest is not None
    files: dict[str, dict] = manifest["files"]
    # Sizes first: a truncated file is the common case and costs a stat, not a hash.
    for name, entry in files.items():
        try:
            size = (path / name).stat().st_size
        except FileNotFoundError:
            return f"{name}: missing"
        except OSError as e:
            return f"{name}: unreadable ({_reason(e)})"
        if size != entry["size"]:
            return f"{name}: {size} bytes, {COMPLETE_FILE} records {entry['size']}"
    for name, entry in files.items():
        try:
            digest = file_sha256(path / name)
        except OSError as e:
            return f"{name}: unreadable ({_reason(e)})"
        if digest != entry["sha256"]:
            return f"{name}: sha256 mismatch"
    return None


def _read_manifest(path: Path) -> tuple[dict | None, str | None]:
    try:
        raw = (path / COMPLETE_FILE).read_bytes()
    except FileNotFoundError:
        return None, f"missing {COMPLETE_FILE}"
    except OSError as e:
        return None, f"{COMPLETE_FILE}: unreadable ({_reason(e)})"
    try:
        manifest = json.loads(raw)
    except ValueError:
        return None, f"{COMPLETE_FILE}: not valid JSON"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, f"{COMPLETE_FILE}: not an {FORMAT} manifest"
    version = manifest.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        return None, f"{COMPLETE_FILE}: bad format version {version!r}"
    if version > FORMAT_VERSION:
        return None, f"{COMPLETE_FILE}: format version {version} is newer than this electra reads; upgrade it"
    step = manifest.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return None, f"{COMPLETE_FILE}: bad step {step!r}"
    # A checkpoint copied under another name (say `best/`) is fine; a step-N directory must hold step N.
    m = _STEP_DIR.fullmatch(path.name)
    if m and int(m.group(1)) != step:
        return None, f"{COMPLETE_FILE}: records step {step}, directory is {path.name}"
    files = manifest.get("files")
    if not isinstance(files, dict):
        return None, f"{COMPLETE_FILE}: no file list"
    for name in _REQUIRED_FILES:
        if name not in files:
            return None, f"{COMPLETE_FILE}: does not list {name}"
    for name, entry in files.items():
        # Only our own file names: a manifest must never make us read outside the directory.
        if name not in _KNOWN_FILES:
            return None, f"{COMPLETE_FILE}: unexpected file {name!r}"
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("size"), int)
            and isinstance(entry.get("sha256"), str)
            and _SHA256.fullmatch(entry["sha256"])
        ):
            return None, f"{COMPLETE_FILE}: bad entry for {name}"
    return manifest, None


def latest_checkpoint(run_dir: Path, log: Callable[[str], None] = log_message) -> Path | None:
    """The newest valid checkpoint of the run, or None; every newer invalid one is logged with its reason."""
    skipped: list[tuple[Path, str]] = []
    for path in reversed(list_checkpoints(run_dir)):
        reason = verify_checkpoint(path)
        if reason is None:
            for bad, why in skipped:
                log(f"checkpoint {bad} is incomplete or corrupt ({why}); falling back to {path.name}")
            return path
        skipped.append((path, reason))
    for bad, why in skipped:
        log(f"checkpoint {bad} is incomplete or corrupt ({why}); no earlier valid checkpoint exists")
    return None


# --------------------------------------------------------------------------------------------------- loading


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Verify, then load. Tensors go to `map_location`; RNG states stay on the CPU, where they live."""
    path = Path(path)
    reason = verify_checkpoint(path)
    if reason is not None:
        raise InputError(
            f"checkpoint {path} is incomplete or corrupt ({reason}); resume from an earlier checkpoint "
            "(latest_checkpoint picks the newest valid one) or delete this one"
        )
    manifest, _ = _read_manifest(path)
    assert manifest is not None
    files = manifest["files"]
    try:
        tensors = _load_tensors(path / MODEL_SAFETENSORS, map_location)
        optimizer = None
        if OPTIMIZER_FILE in files:
            optimizer = torch.load(path / OPTIMIZER_FILE, map_location=map_location, weights_only=True)
        rng = None
        if RNG_FILE in files:
            rng = torch.load(path / RNG_FILE, map_location="cpu", weights_only=True)
        trainer_state = json.loads((path / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
    except Exception as e:
        # Checksums matched, so the bytes are what was written: whatever fails here is a format problem.
        raise InputError(
            f"checkpoint {path} could not be read ({type(e).__name__}: {_reason(e)}); it was not written by "
            "this version of electra, resume from another checkpoint"
        ) from e
    return Checkpoint(
        path=path,
        step=manifest["step"],
        tensors=tensors,
        optimizer=optimizer,
        trainer_state=trainer_state,
        rng=rng,
    )


def _load_tensors(file: Path, map_location: str | torch.device) -> dict[str, torch.Tensor]:
    with safe_open(file, framework="pt", device=str(map_location)) as f:
        metadata = f.metadata() or {}
        tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - safe_open is not iterable
    aliases = json.loads(metadata.get(ALIASES_KEY, "{}"))
    for alias, target in aliases.items():
        if target not in tensors:
            raise ValueError(f"alias {alias!r} points at {target!r}, which is not stored")
        tensors[alias] = tensors[target]
    return tensors
