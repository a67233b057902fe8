"""Numbers a command takes that used to get past its checks: NaN or infinite rates, seeds past 64 bits,
ports past 65535, thread counts past any machine's; each an InputError naming the option, before any work,
not an internal error later (or, for NaN, a run of null losses)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from electra.errors import InputError


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("lr", math.nan, "--lr nan must be a positive number"),
        ("lr", math.inf, "--lr inf must be a positive number"),
        ("disc_weight", math.nan, "--disc-weight nan must be a number >= 0"),
        ("weight_decay", -0.1, "--weight-decay -0.1 must be a number >= 0"),
        ("max_grad_norm", math.inf, "--max-grad-norm inf"),
        ("warmup_steps", -1, "--warmup-steps -1 must be at least 0"),
        ("seed", 10**23, "must be in 0..2\\*\\*63-1"),
        ("seed", -1, "must be in 0..2\\*\\*63-1"),
    ],
)
def test_pretraining_numbers(tmp_path: Path, field: str, value: float, says: str) -> None:
    from electra.training.pretrain.config import PretrainConfig

    with pytest.raises(InputError, match=says):
        PretrainConfig(data=tmp_path, out=tmp_path / "run", **{field: value}).resolved()


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"lr": 0.0}, "--lr 0.0 must be a positive number"),  # was taken as "the recipe's", silently
        ({"lr": math.nan}, "--lr nan"),
        ({"lr": -1e-4}, "--lr -0.0001"),
        ({"seeds": [1, 2**64]}, "seed 18446744073709551616 must be in"),
    ],
)
def test_finetuning_numbers(tmp_path: Path, kw: dict[str, object], says: str) -> None:
    from electra.training.finetune.config import FinetuneConfig

    cfg = FinetuneConfig(task="sst2", model=tmp_path, out=tmp_path / "o", **kw)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=says):
        cfg.validate()


def test_serving_numbers() -> None:
    from electra.serving.http.server import check_can_serve
    from electra.serving.settings import ModelSpec, ServeSettings

    with pytest.raises(InputError, match=r"threads must be in 0\.\.4096"):
        ServeSettings(models=(ModelSpec("m", Path("m")),), threads=10**21).validate()
    with pytest.raises(InputError, match="--port 70000 is not a TCP port"):
        check_can_serve("127.0.0.1", 70_000)
    with pytest.raises(InputError, match=r"--host no-such-host\.invalid"):
        check_can_serve("no-such-host.invalid", 8000)


def test_inputs_are_cut_at_the_models_positions(caplog: pytest.LogCaptureFixture) -> None:
    """--max-seq-len past the position embeddings made every longer input fail inside the model (predict,
    evaluate, finetune): inputs are cut at the model's positions instead, with a warning."""
    from electra.training.finetune.encoding import max_len_for

    assert max_len_for(128, 512) == 128 and not caplog.records
    assert max_len_for(512, 128) == 128
    assert "inputs are cut at 128" in caplog.text
