"""Checkpoints: exact round trips, pruning, corruption fallback, full disks and kill -9 mid-save."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

from electra.errors import ElectraError, InputError
from electra.files import MODEL_SAFETENSORS
from electra.training.optim import build_scheduler
from electra.training.pretrain.state.checkpoint import (
    COMPLETE_FILE,
    OPTIMIZER_FILE,
    RNG_FILE,
    TRAINER_STATE_FILE,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from electra.training.pretrain.state.checkpoint_manager import CheckpointManager, Progress, TrainState
from electra.training.pretrain.state.loader import GlobalBatchOrder
from electra.training.pretrain.state.rng import capture_rng_state, restore_rng_state

ROOT = Path(__file__).resolve().parents[1]


class Tied(nn.Module):
    """Input embedding and output projection share one weight, as ELECTRA's generator and discriminator do."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 20)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids))


def _train_step(model: Tied, opt: torch.optim.Optimizer, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 20, (4, 6), generator=g)
    loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()


def _small(step: int) -> dict[str, torch.Tensor]:
    return {"w": torch.full((16, 16), float(step)), "b": torch.arange(4)}


def _save(run: Path, step: int, keep_last: int = 3, **state: object) -> Path:
    optimizer = {"state": {}, "param_groups": []}
    trainer_state = {"step": step, **state}
    return save_checkpoint(run, step, _small(step), optimizer, trainer_state, capture_rng_state(), keep_last)


def _hidden(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("."))


def test_round_trip_restores_tensors_aliases_optimizer_trainer_state_and_rng(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Tied()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _train_step(model, opt, seed=1)
    tensors = {f"discriminator.{k}": v for k, v in model.state_dict().items()}
    tensors["generator.emb.weight"] = model.emb.weight  # shared across models, not only within one
    tensors["empty"] = torch.empty(0)
    trainer_state = {"step": 7, "tokens_seen": 123_456, "data_position": [3, 17], "config": {"lr": 1e-2}}

    rng = capture_rng_state()
    expected_draws = (random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist())
    path = save_checkpoint(tmp_path, 7, tensors, opt.state_dict(), trainer_state, rng)
    assert path == tmp_path / "checkpoints" / "step-00000007"
    saved = {k: v.detach().clone() for k, v in tensors.items()}

    ckpt = load_checkpoint(path)
    assert ckpt.step == 7 and ckpt.path == path and ckpt.trainer_state == trainer_state
    assert set(ckpt.tensors) == set(tensors)
    for name, value in saved.items():
        assert torch.equal(ckpt.tensors[name], value), name
    shared = ["discriminator.emb.weight", "discriminator.head.weight", "generator.emb.weight"]
    assert all(ckpt.tensors[name] is ckpt.tensors[shared[0]] for name in shared)
    # Stored once on disk: plain safetensors readers see a single copy.
    assert "discriminator.head.weight" not in safetensors.torch.load_file(path / MODEL_SAFETENSORS)
    manifest = json.loads((path / COMPLETE_FILE).read_text())
    assert set(manifest["files"]) == {MODEL_SAFETENSORS, OPTIMIZER_FILE, RNG_FILE, TRAINER_STATE_FILE}

    # A resumed optimizer makes exactly the update the uninterrupted one makes.
    resumed = Tied()
    resumed.load_state_dict({k.removeprefix("discriminator."): ckpt.tensors[k] for k in saved if "disc" in k})
    assert resumed.head.weight is resumed.emb.weight
    resumed_opt = torch.optim.AdamW(resumed.parameters(), lr=1e-2)
    resumed_opt.load_state_dict(ckpt.optimizer)
    _train_step(model, opt, seed=2)
    _train_step(resumed, resumed_opt, seed=2)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name

    random.random(), np.random.rand(5), torch.rand(5)
    restore_rng_state(ckpt.rng)
    assert (random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist()) == expected_draws


def test_optimizer_and_rng_are_optional(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 0, _small(0), None, {"step": 0}, None)
    assert sorted(p.name for p in path.iterdir()) == [COMPLETE_FILE, MODEL_SAFETENSORS, TRAINER_STATE_FILE]
    ckpt = load_checkpoint(path)
    assert ckpt.optimizer is None and ckpt.rng is None and ckpt.step == 0


def test_state_torch_load_cannot_read_back_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    _save(tmp_path, 1, keep_last=1)
    with pytest.raises(TypeError, match="weights_only"):
        save_checkpoint(tmp_path, 2, _small(2), {"state": {0: {"m": np.zeros(3)}}}, {}, None, keep_last=1)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000001"]
    assert _hidden(tmp_path) == []


def test_malformed_rng_state_is_an_input_error_and_changes_nothing() -> None:
    state = capture_rng_state()
    state["numpy"]["key"] = state["numpy"]["key"][:10]
    before = random.getstate()
    with pytest.raises(InputError, match="RNG state is malformed"):
        restore_rng_state(state)
    assert random.getstate() == before


def test_keep_last_prunes_the_oldest_only_after_a_successful_save(tmp_path: Path) -> None:
    for step in range(1, 6):
        _save(tmp_path, step * 10, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000040", "step-00000050"]
    assert _hidden(tmp_path) == []
    # keep_last=0 keeps everything; the one just written survives even when it is not the newest step.
    _save(tmp_path, 60, keep_last=0)
    _save(tmp_path, 5, keep_last=1)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000005"]


def _truncate(path: Path) -> str:
    model = path / MODEL_SAFETENSORS
    model.write_bytes(model.read_bytes()[:100])
    return "model.safetensors: 100 bytes"


def _delete_manifest(path: Path) -> str:
    (path / COMPLETE_FILE).unlink()
    return "missing COMPLETE.json"


def _flip_byte(path: Path) -> str:
    data = bytearray((path / OPTIMIZER_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / OPTIMIZER_FILE).write_bytes(bytes(data))
    return "optimizer.pt: sha256 mismatch"


@pytest.mark.parametrize("corrupt", [_truncate, _delete_manifest, _flip_byte])
def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path: Path, corrupt) -> None:
    good = _save(tmp_path, 100)
    bad = _save(tmp_path, 200)
    reason = corrupt(bad)
    assert reason in verify_checkpoint(bad)
    logged: list[str] = []
    assert latest_checkpoint(tmp_path, log=logged.append) == good
    assert logged == [
        f"checkpoint {bad} is incomplete or corrupt ({verify_checkpoint(bad)}); falling back to step-00000100"
    ]
    with pytest.raises(InputError, match="incomplete or corrupt") as err:
        load_checkpoint(bad)
    assert reason in str(err.value) and "\n" not in str(err.value)
    assert load_checkpoint(good).trainer_state["step"] == 100


def test_no_valid_checkpoint_gives_none(tmp_path: Path) -> None:
    logged: list[str] = []
    assert latest_checkpoint(tmp_path, log=logged.append) is None and logged == []
    _delete_manifest(_save(tmp_path, 1))
    assert latest_checkpoint(tmp_path, log=logged.append) is None
    assert len(logged) == 1 and "no earlier valid checkpoint" in logged[0]


def test_same_step_saved_twice_is_replaced_and_valid(tmp_path: Path) -> None:
    _save(tmp_path, 3, version=1)
    path = _save(tmp_path, 3, version=2)
    assert list_checkpoints(tmp_path) == [path]
    assert verify_checkpoint(path) is None
    assert load_checkpoint(path).trainer_state["version"] == 2
    assert _hidden(tmp_path) == []


def _enospc() -> OSError:
    return OSError(28, "No space left on device")


def _fail_model_write(monkeypatch: pytest.MonkeyPatch) -> None:
    def partial(tensors, filename, metadata=None) -> None:
        Path(filename).write_bytes(b"\0" * 1000)
        raise _enospc()

    monkeypatch.setattr(safetensors.torch, "save_file", partial)


def _fail_optimizer_write(monkeypatch: pytest.MonkeyPatch) -> None:
    def partial(obj, f) -> None:
        f.write(b"PK" * 100)
        raise _enospc()

    monkeypatch.setattr(torch, "save", partial)


def _fail_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # Delayed allocation: the write "succeeds" and the disk-full error only comes back from fsync.
    def fsync(fd: int) -> None:
        raise _enospc()

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("fail", [_fail_model_write, _fail_optimizer_write, _fail_fsync])
def test_disk_full_raises_and_leaves_previous_checkpoints_intact(tmp_path: Path, monkeypatch, fail) -> None:
    before = [_save(tmp_path, 1, keep_last=2), _save(tmp_path, 2, keep_last=2)]
    fail(monkeypatch)
    with pytest.raises(ElectraError) as err:
        _save(tmp_path, 3, keep_last=2)
    monkeypatch.undo()
    message = str(err.value)
    assert type(err.value) is ElectraError
    assert message.startswith(f"could not write checkpoint {tmp_path / 'checkpoints' / 'step-00000003'}")
    assert f"(No space left on device); the previous checkpoint {before[-1]} is intact" in message
    assert list_checkpoints(tmp_path) == before  # nothing pruned, nothing half-written
    assert all(verify_checkpoint(p) is None for p in before)
    assert _hidden(tmp_path) == []


def test_failed_replacement_of_the_same_step_keeps_the_old_one(tmp_path: Path, monkeypatch) -> None:
    path = _save(tmp_path, 5, version=1)
    real_rename = os.rename

    def rename(src, dst) -> None:
        if ".tmp-" in str(src):
            raise _enospc()
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(ElectraError, match=f"the previous checkpoint {path} is intact"):
        _save(tmp_path, 5, version=2)
    monkeypatch.undo()
    assert verify_checkpoint(path) is None
    assert load_checkpoint(path).trainer_state["version"] == 1
    assert _hidden(tmp_path) == []


SAVE_FOREVER = """
import sys, torch
from electra.training.pretrain.state.checkpoint import save_checkpoint
tensors = {"w": torch.randn(512, 1024)}
optimizer = {"state": {0: {"exp_avg": torch.randn(512, 1024)}}, "param_groups": []}
step = 0
while True:
    step += 1
    save_checkpoint(sys.argv[1], step, tensors, optimizer, {"step": step}, None, keep_last=2)
"""


def test_kill_9_mid_save_leaves_only_valid_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", SAVE_FOREVER, str(run)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the saving subprocess never got going"
            names = os.listdir(run / "checkpoints") if (run / "checkpoints").is_dir() else []
            # Kill once a checkpoint exists and the next one is being built (or replaced).
            if any(n.startswith("step-") for n in names) and any(".tmp-" in n for n in names):
                break
            time.sleep(0.0005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()

    remaining = list_checkpoints(run)
    assert remaining
    assert all(verify_checkpoint(p) is None for p in remaining), [verify_checkpoint(p) for p in remaining]
    assert latest_checkpoint(run, log=pytest.fail) == remaining[-1]
    # The next save clears what the killed one left behind.
    save_checkpoint(run, 10_000, _small(0), None, {}, None, keep_last=2)
    assert _hidden(run) == []


# ------------------------------------------------------------------------------------- CheckpointManager

RUN = {"size": "tiny", "objective": "electra", "batch_size": 8, "seq_len": 32, "vocab_size": 20}


def _train_state(seed: int) -> TrainState:
    torch.manual_seed(seed)
    model = Tied()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu")
    data = GlobalBatchOrder(100, 8, seed=3)
    return TrainState(model, opt, build_scheduler(opt, 2, 10), scaler, data, Progress())


def _advance(state: TrainState, steps: int) -> None:
    for i in range(steps):
        state.data.next_global_batch()
        _train_step(state.model, state.optimizer, seed=i)
        state.scheduler.step()
        state.progress.step += 1
        state.progress.tokens += 48
    state.scaler.scale(torch.ones(()))  # the scale exists only once something was scaled
    state.scaler.update(new_scale=float(2**steps))


def _manager(run_dir: Path, logged: list[str] | None = None, **run: object) -> CheckpointManager:
    log = logged.append if logged is not None else pytest.fail
    return CheckpointManager(run_dir, {**RUN, **run}, {"lr": 1e-2}, keep_last=2, log=log)


def test_manager_round_trips_every_stateful_part(tmp_path: Path) -> None:
    state = _train_state(seed=0)
    _advance(state, 3)
    path = _manager(tmp_path).save(3, state)
    assert path == tmp_path / "checkpoints" / "step-00000003"
    # The layout of checkpoints written before the manager existed, so those still resume.
    assert {p.name for p in path.iterdir()} == {
        COMPLETE_FILE,
        MODEL_SAFETENSORS,
        OPTIMIZER_FILE,
        RNG_FILE,
        TRAINER_STATE_FILE,
    }
    saved = json.loads((path / TRAINER_STATE_FILE).read_text())
    assert set(saved) == {
        "step",
        "tokens",
        "data_position",
        "scheduler",
        "scaler",
        "collapse_watch",
        "run",
        "config",
    }
    assert saved["run"] == RUN and saved["config"] == {"lr": 1e-2}
    assert (saved["step"], saved["tokens"], saved["data_position"]) == (3, 144, {"epoch": 0, "offset": 24})

    # What the uninterrupted run does next: the data, the RNG draws, the update, the schedule, the scale.
    weights = {k: v.clone() for k, v in state.model.state_dict().items()}
    expected = (
        state.data.next_global_batch().tolist(),
        random.random(),
        np.random.rand(2).tolist(),
        torch.rand(2).tolist(),
    )
    _train_step(state.model, state.optimizer, seed=9)
    state.scheduler.step()

    resumed = _train_state(seed=1)
    logged: list[str] = []
    assert _manager(tmp_path, logged).restore(resumed) == path
    assert logged == [f"resumed from {path} at step 3"]
    assert resumed.model.head.weight is resumed.model.emb.weight
    for name, value in weights.items():
        assert torch.equal(resumed.model.state_dict()[name], value), name
    assert (resumed.progress.step, resumed.progress.tokens) == (3, 144)
    assert resumed.scaler.get_scale() == 8.0
    assert resumed.scheduler.last_epoch == 3
    got = (
        resumed.data.next_global_batch().tolist(),
        random.random(),
        np.random.rand(2).tolist(),
        torch.rand(2).tolist(),
    )
    assert got == expected
    _train_step(resumed.model, resumed.optimizer, seed=9)
    resumed.scheduler.step()
    assert resumed.scheduler.get_last_lr() == state.scheduler.get_last_lr()
    after = resumed.model.state_dict()
    for name, value in state.model.state_dict().items():
        assert torch.equal(after[name], value), name


def test_manager_restore_falls_back_from_a_corrupt_newest_and_reports_an_empty_run(tmp_path: Path) -> None:
    logged: list[str] = []
    fresh = _train_state(seed=0)
    assert _manager(tmp_path, logged).restore(fresh) is None
    assert logged == [f"no checkpoint in {tmp_path / 'checkpoints'}; starting from scratch"]
    assert fresh.progress.step == 0

    state = _train_state(seed=0)
    manager = _manager(tmp_path)
    _advance(state, 1)
    good = manager.save(1, state)
    _advance(state, 1)
    reason = _truncate(manager.save(2, state))
    logged.clear()
    assert _manager(tmp_path, logged).restore(fresh) == good
    assert "step-00000002 is incomplete or corrupt" in logged[0] and reason in logged[0]
    assert "falling back to step-00000001" in logged[0]
    assert logged[1] == f"resumed from {good} at step 1" and fresh.progress.step == 1


def test_manager_refuses_a_checkpoint_of_another_run(tmp_path: Path) -> None:
    state = _train_state(seed=0)
    _manager(tmp_path).save(0, state)
    before = {k: v.clone() for k, v in state.model.state_dict().items()}
    with pytest.raises(InputError, match="it was trained with batch_size=8, now 16; use the original"):
        _manager(tmp_path, batch_size=16).restore(state)
    assert all(torch.equal(v, before[k]) for k, v in state.model.state_dict().items())
