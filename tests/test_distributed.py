"""The process group a pre-training run joins is left before the process exits."""

from __future__ import annotations

import torch.distributed as dist

from electra.training.pretrain.state.distributed import init_distributed, leave_distributed


def test_single_process_joins_no_group(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    d = init_distributed("cpu")
    assert (d.rank, d.world, d.main) == (0, 1, True)
    assert not dist.is_initialized()
    leave_distributed()  # nothing to leave: no error


def test_leave_destroys_the_group() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.is_initialized()
        leave_distributed()
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
