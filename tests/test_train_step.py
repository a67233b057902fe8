"""The training step (electra.training.pretrain.step): compiled whole, equal to the eager step, reading
nothing back from the device between records, and weighting the discriminator's loss by --disc-weight."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from electra.config import ElectraConfig, generator_config
from electra.training.optim import adam, build_scheduler, device_learning_rates
from electra.training.pretrain.config import PretrainConfig
from electra.training.pretrain.diagnostics.meter import TrainMeter
from electra.training.pretrain.models import ElectraPretrainer, optimizer_groups
from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens, draw_noise
from electra.training.pretrain.state.distributed import Dist
from electra.training.pretrain.state.loader import batch_counts
from electra.training.pretrain.step import StepPlan, StepRunner, StepShape, plan_step
from electra.training.pretrain.trainer import PretrainTrainer, masking_seed

from .conftest import prepare_tiny_data

SPECIALS = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
VOCAB, ROWS, SEQ = 60, 4, 24


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_tiny_data(tmp_path_factory.mktemp("step-data"), n_docs=40)


def synthetic_batch(seed: int, padded: bool) -> dict[str, torch.Tensor]:
    """[CLS] words [SEP], every row full, or rows of random lengths with padding after them."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (ROWS, SEQ), generator=g)
    lengths = torch.randint(6, SEQ, (ROWS,), generator=g) if padded else torch.full((ROWS,), SEQ)
    mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
    ids[:, 0] = SPECIALS.cls
    ids[torch.arange(ROWS), lengths - 1] = SPECIALS.sep
    ids = torch.where(mask.bool(), ids, SPECIALS.pad)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


def make_runner(
    compile_: bool, backend: Any = "aot_eager", log: Callable[[str], None] = lambda _: None
) -> tuple[StepRunner, torch.optim.lr_scheduler.LRScheduler]:
    """The step of a tiny ELECTRA as the trainer builds it (dropout on), the same weights every call."""
    torch.manual_seed(0)
    disc = ElectraConfig.from_size("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    model = ElectraPretrainer(disc, generator_config(disc), SPECIALS, ObjectiveConfig())
    optimizer = adam(optimizer_groups(model, 1e-3, 0.01, 1.0), 1e-3, "torch", eps=1e-6)
    scheduler = build_scheduler(optimizer, 2, 10)
    device_learning_rates(optimizer)
    device = torch.device("cpu")
    runner = StepRunner(
        model=model,
        step_module=model,
        optimizer=optimizer,
        scaler=None,
        meter=TrainMeter(Dist(device=device), None),
        plan=StepPlan(compile=compile_, graphs=False, line="test"),
        shape=StepShape(1, ROWS, SEQ, VOCAB, model.objective, True),
        device=device,
        precision="fp32",
        world=1,
        max_grad_norm=1.0,
        compile_backend=backend,
        log=log,
    )
    return runner, scheduler


def run_steps(runner: StepRunner, scheduler, steps: list[bool]) -> list[dict]:
    """One step per entry (True: a batch with padding), a record after each."""
    records = []
    for i, padded in enumerate(steps):
        batch = synthetic_batch(i, padded)
        n_tokens, n_masked = int(batch["attention_mask"].sum()), ROWS * 4  # any counts: the same for both
        runner.run([batch], [masking_seed(0, i, 0)], n_masked, n_tokens, padded)
        scheduler.step()
        runner.meter.add_step(n_tokens, 0.0)
        records.append(runner.meter.record(i + 1, 0, float(scheduler.get_last_lr()[0])))
    return records


@pytest.mark.parametrize("padded", [True, False])
def test_the_step_traces_as_one_graph_without_a_break(padded: bool) -> None:
    """Both kinds of batch: with padding (a boolean attention mask) and without (no mask at all)."""
    runner, _ = make_runner(compile_=False)
    inputs = runner.load([synthetic_batch(0, padded)], [1], 10, 80, padded)
    report = torch._dynamo.explain(runner.forward_loss)(inputs.batches[0], inputs.noises[0], padded)
    assert report.graph_break_count == 0, report.break_reasons
    assert report.graph_count == 1


def test_the_compiled_steps_losses_equal_the_eager_steps() -> None:
    """Compiled with fullgraph=True (a break would raise, and the runner would fall back to eager), over
    batches with and without padding: the same losses, accuracies and gradient norms, step by step."""
    kinds = [True, True, False, True, False]
    eager = run_steps(*make_runner(compile_=False), kinds)
    runner, scheduler = make_runner(compile_=True)
    compiled = run_steps(runner, scheduler, kinds)
    assert runner._forward != runner.forward_loss  # still the compiled function: nothing fell back
    for a, b in zip(eager, compiled, strict=True):
        for key in ("mlm_loss", "disc_loss", "mlm_accuracy", "disc_accuracy", "grad_norm", "lr"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["step"], key)
    # The steps moved the weights: equal records are not those of a step that does nothing.
    assert eager[0]["disc_loss"] != eager[-1]["disc_loss"]


class DeviceRead(AssertionError):
    pass


def forbid_device_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way Python reads a tensor's value to the host raises (on a GPU each one waits for the device)."""

    def refuse(*_args, **_kwargs):
        raise DeviceRead("a tensor's value was read on the host between two records")

    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, refuse)


def test_steps_between_records_read_nothing_from_the_device(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = PretrainConfig(
        data=data_dir, out=tmp_path / "run", size="tiny", batch_size=8, grad_accum=2, steps=4, progress=False
    )
    trainer = PretrainTrainer(cfg)
    with monkeypatch.context() as m:
        forbid_device_reads(m)
        for _ in range(3):
            trainer.train_step()
        with pytest.raises(DeviceRead):  # the guard is live: a record reads the sums
            trainer.meter.record(3, trainer.progress.tokens, 0.0)
    record = trainer.meter.record(3, trainer.progress.tokens, 0.0)
    assert record["mlm_loss"] > 0 and record["disc_loss"] > 0 and record["grad_norm"] > 0


def test_compiled_steps_between_records_read_nothing_from_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled step, once each kind of batch has compiled, runs steps of both kinds without a read."""
    runner, scheduler = make_runner(compile_=True)
    kinds = [True, False, True, False, False, True]
    hosts = [(synthetic_batch(i, padded), padded) for i, padded in enumerate(kinds)]
    counts = [int(batch["attention_mask"].sum()) for batch, _ in hosts]  # host values, as the trainer's
    for i, (batch, padded) in enumerate(hosts[:2]):  # the first call of each kind compiles
        runner.run([batch], [masking_seed(0, i, 0)], ROWS * 4, counts[i], padded)
    with monkeypatch.context() as m:
        forbid_device_reads(m)
        for i, (batch, padded) in enumerate(hosts[2:], start=2):
            runner.run([batch], [masking_seed(0, i, 0)], ROWS * 4, counts[i], padded)
            scheduler.step()
            runner.meter.add_step(counts[i], 0.0)
    assert runner._forward != runner.forward_loss  # compiled throughout: no fallback hid a read
    assert runner.meter.record(len(kinds), sum(counts), 0.0)["disc_loss"] > 0


def test_a_step_that_cannot_compile_says_so_in_one_line_and_runs_eagerly() -> None:
    def cannot_compile(graph: torch.fx.GraphModule, example_inputs: list) -> Callable:
        raise RuntimeError("no compiler on this machine")

    lines: list[str] = []
    kinds = [True, False, True]
    runner, scheduler = make_runner(compile_=True, backend=cannot_compile, log=lines.append)
    failed = run_steps(runner, scheduler, kinds)
    assert runner._forward == runner.forward_loss
    said = [line for line in lines if "compil" in line]
    assert len(said) == 1 and "\n" not in said[0], lines
    assert "compiling failed" in said[0] and "no compiler on this machine" in said[0]
    assert said[0].endswith("running it eagerly")
    for a, b in zip(run_steps(*make_runner(compile_=False), kinds), failed, strict=True):
        assert a["disc_loss"] == pytest.approx(b["disc_loss"], rel=1e-5), a["step"]


def test_the_plan_says_in_one_line_how_the_step_runs_and_why_not_as_asked() -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    graphed = plan_step(cuda, 1, "bf16", compile_=True, graphs=True)
    assert graphed.graphs and graphed.compile
    assert graphed.line == (
        "training step: compiled (fullgraph; the optimizer uncompiled: fused/multi-tensor AdamW), "
        "replayed as one CUDA graph on cuda"
    )
    ddp = plan_step(cuda, 2, "bf16", compile_=True, graphs=True)
    assert not ddp.graphs and "no CUDA graph: 2 ranks" in ddp.line and "compiled module by module" in ddp.line
    fp16 = plan_step(cuda, 1, "fp16", compile_=False, graphs=True)
    assert not fp16.graphs and "no CUDA graph" in fp16.line and "loss scaler" in fp16.line
    assert "launched kernel by kernel" in fp16.line
    off = plan_step(cuda, 1, "bf16", compile_=False, graphs=False)
    assert not off.graphs and off.line.endswith("(--no-cuda-graphs)")
    # On a CPU there are no CUDA graphs to give up: nothing to explain.
    on_cpu = plan_step(cpu, 1, "fp32", compile_=False, graphs=True)
    assert not on_cpu.graphs and on_cpu.line == "training step: eager, launched kernel by kernel on cpu"
    for plan in (graphed, ddp, fp16, off, on_cpu):
        assert "\n" not in plan.line


# The patched update never steps the optimizer, which the scheduler notices.
@pytest.mark.filterwarnings(r"ignore:Detected call of `lr_scheduler.step\(\)` before")
@pytest.mark.parametrize("disc_weight", [7.0, 0.5])
def test_the_trainer_weights_the_discriminator_loss_by_disc_weight(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disc_weight: float
) -> None:
    """The gradient the trainer applies is that of mlm_sum / predictions + disc_weight * disc_sum / tokens
    over the global batch (two micro-batches here, each normalised by the global counts, not its own)."""
    cfg = PretrainConfig(
        data=data_dir,
        out=tmp_path / "run",
        size="tiny",
        batch_size=8,
        grad_accum=2,
        steps=1,
        dropout=0.0,
        disc_weight=disc_weight,
        progress=False,
    )
    trainer = PretrainTrainer(cfg)
    model = trainer.model
    applied: dict[str, torch.Tensor] = {}

    def keep_gradients() -> None:
        applied.update({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        trainer.optimizer.zero_grad(set_to_none=True)

    monkeypatch.setattr(trainer.runner, "update", keep_gradients)
    global_idx = trainer.batches.next_global_batch()
    batches, seeds = trainer.micro_batches(global_idx)  # step 0's micro-batches and masking seeds
    n_tokens, n_masked = batch_counts(
        trainer.data.train, global_idx, trainer.special_ids, trainer.cfg.mask_prob
    )
    trainer.batches.load_state_dict({"epoch": 0, "offset": 0})  # train_step takes the same batch
    trainer.train_step()

    reference = torch.zeros(())
    for batch, seed in zip(batches, seeds, strict=True):
        rng = torch.Generator().manual_seed(seed)
        noise = draw_noise(rng, batch["input_ids"].shape, trainer.vocab_size, model.objective, True, "cpu")
        out = model(batch, noise=noise, padding=True)
        reference = reference + out.mlm_loss_sum / n_masked + disc_weight * out.disc_loss_sum / n_tokens
    reference.backward()
    assert applied
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(applied[name], p.grad, rtol=1e-5, atol=1e-8, msg=name)
    # The discriminator's own weights learn from its loss only: its weight scales their gradient.
    head = "discriminator.discriminator_predictions.dense_prediction.weight"
    assert applied[head].abs().sum() > 0
