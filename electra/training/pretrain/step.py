"""The training step: a global batch's micro-batches in, the weights updated, and no host synchronisation.

One piece of code, run one of three ways (StepPlan, decided once and logged in one line):

* eager: launch by launch, as a Python loop runs PyTorch;
* compiled (--compile): a micro-batch's forward pass, loss and statistics are one torch.compile graph,
  fullgraph=True (a graph break is an error, never a silent slowdown), whose backward AOTAutograd compiles
  with it. The optimizer is not compiled: torch runs its fused AdamW as a kernel of its own and will not
  trace into it, and clipping is two multi-tensor kernels;
* graphed (CUDA, the default there): the whole step, every micro-batch's forward and backward, clipping and
  the optimizer, captured once as a CUDA graph and replayed: the host launches one graph a step instead of
  thousands of kernels (on one H100, ELECTRA-Small's eager step took 82 ms of host time for 1.2 ms of FLOPs
  at the chip's peak). Compiled and graphed combine.

What makes the step capturable: static shapes (the micro-batch, and K = max_predictions slots per row); the
masking and sampling noise drawn beforehand into fixed buffers from each micro-batch's seeded generator
(StepNoise: the same draws as an eager step's); the global batch's counts in a device tensor; statistics and
gradient norms added into the meter's device vector; learning rates in device tensors
(optim.device_learning_rates) that the scheduler fills in place; AdamW fused and capturable; clipping without
a sync. The first steps of each kind of batch run uncaptured (warm-up: compilation, the allocator, the
optimizer's state), then the step is captured, and replayed from then on. A batch with padding and one without
(whose attention runs unmasked, so that SDPA may take its flash kernel) are two kinds, each with its graph.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from electra.training.device import autocast
from electra.training.pretrain.diagnostics.meter import TrainMeter
from electra.training.pretrain.objective import ObjectiveConfig, StepNoise

logger = logging.getLogger("electra.pretrain")

# Uncaptured steps of a kind of batch before its graph is captured: compilation, cuBLAS workspaces, the
# allocator's pools and AdamW's state all settle on the first calls (PyTorch's own examples warm up 3).
WARMUP_STEPS = 3


@dataclass(frozen=True)
class StepPlan:
    """How the step runs, and the log line that says so (with why anything asked for does not run)."""

    compile: bool
    graphs: bool
    line: str


def plan_step(device: torch.device, world: int, precision: str, compile_: bool, graphs: bool) -> StepPlan:
    """The plan for a run's options on this machine."""
    why_not: list[str] = []
    if graphs and device.type == "cuda":
        if world > 1:
            why_not.append(f"{world} ranks (DDP's gradient all-reduce runs between kernels, outside a graph)")
        if precision == "fp16":
            why_not.append("fp16's loss scaler reads a value on the host every step (bf16 needs no scaler)")
    use_graphs = graphs and device.type == "cuda" and not why_not
    # The optimizer stays out of the compiled graph (see the module): said, so --compile promises no more.
    compiled = "compiled (fullgraph; the optimizer uncompiled: fused/multi-tensor AdamW)"
    how = [compiled if compile_ else "eager"]
    if world > 1 and compile_:
        how = ["compiled module by module under DDP"]
    how.append("replayed as one CUDA graph" if use_graphs else "launched kernel by kernel")
    line = f"training step: {', '.join(how)} on {device.type}"
    if why_not:
        line += f"; no CUDA graph: {'; '.join(why_not)}"
    elif device.type == "cuda" and not graphs:
        line += " (--no-cuda-graphs)"
    return StepPlan(compile=compile_, graphs=use_graphs, line=line)


@dataclass
class _Inputs:
    """Fixed buffers of one kind of step: each micro-batch's tensors and noise (what a graph reads)."""

    batches: list[dict[str, Tensor]]
    noises: list[StepNoise]
    runs: int = 0  # steps run so far with these buffers
    graph: Any = None  # torch.cuda.CUDAGraph once captured


@dataclass
class StepShape:
    """What the buffers are made for: micro-batches of (rows, seq_len) over `vocab_size`, and the objective's
    draws (`samples`: whether replacements are sampled)."""

    micro_batches: int
    rows: int
    seq_len: int
    vocab_size: int
    objective: ObjectiveConfig
    samples: bool


@dataclass(eq=False, repr=False)
class StepRunner:
    """Runs the training step of `model` as `plan` says. `step_module` is what the forward pass calls (the
    model, or DDP around it); the optimizer must have its learning rates on the device."""

    model: nn.Module
    step_module: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    meter: TrainMeter
    plan: StepPlan
    shape: StepShape
    device: torch.device
    precision: str
    world: int
    max_grad_norm: float
    # torch.compile's backend: inductor generates the kernels; the CPU tests trace with "aot_eager" (the same
    # graph, no C++ to build).
    compile_backend: str = "inductor"
    log: Callable[[str], None] = logger.info
    _inputs: dict[bool, _Inputs] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        # The global batch's (predictions, tokens), the loss's denominators, in place for a graph to read.
        self.counts = torch.zeros(2, device=self.device)
        self.rng = torch.Generator(device=self.device)
        self._forward: Callable[..., Tensor] = self.forward_loss
        if self.plan.compile and self.world == 1:
            self._forward = torch.compile(self.forward_loss, fullgraph=True, backend=self.compile_backend)
        self.log(self.plan.line)

    # ------------------------------------------------------------------------------------------- one step

    def run(
        self,
        batches: Sequence[dict[str, Tensor]],
        seeds: Sequence[int],
        n_masked: int,
        n_tokens: int,
        padding: bool,
    ) -> None:
        """One optimizer step over these micro-batches (this rank's, in order) with their masking seeds.

        n_masked and n_tokens count the global batch (every rank's micro-batches); `padding` False promises no
        micro-batch of the step holds padding."""
        inputs = self.load(batches, seeds, n_masked, n_tokens, padding)
        if not self.plan.graphs:
            self.step(inputs, padding)
        elif inputs.graph is not None:
            inputs.graph.replay()
        elif inputs.runs >= WARMUP_STEPS:
            self._capture(inputs, padding)
        else:
            self._warm_up(inputs, padding)
        inputs.runs += 1

    def load(
        self,
        batches: Sequence[dict[str, Tensor]],
        seeds: Sequence[int],
        n_masked: int,
        n_tokens: int,
        padding: bool,
    ) -> _Inputs:
        """Copy the micro-batches into this kind's buffers and draw their noise; no step runs yet."""
        inputs = self._inputs.get(padding) or self._new_inputs(padding)
        for buffer, noise, batch, seed in zip(inputs.batches, inputs.noises, batches, seeds, strict=True):
            for key, value in batch.items():
                buffer[key].copy_(value, non_blocking=True)
            noise.draw_(self.rng.manual_seed(seed))
        counts = torch.tensor([n_masked, n_tokens], dtype=torch.float32)
        self.counts.copy_(counts.pin_memory() if self.device.type == "cuda" else counts, non_blocking=True)
        return inputs

    def step(self, inputs: _Inputs, padding: bool, capturing: bool = False) -> None:
        """Forward and backward over every micro-batch, then the update: what a graph captures."""
        if not capturing:
            # From no gradients (set to None, not zeroed: nothing to launch). A captured step needs no
            # zeroing: its first backward overwrites the gradients it allocated at capture.
            self.optimizer.zero_grad(set_to_none=True)
        last = len(inputs.batches) - 1
        for i, (batch, noise) in enumerate(zip(inputs.batches, inputs.noises, strict=True)):
            # DDP all-reduces gradients on every backward unless told not to; only the last one needs it.
            with nullcontext() if self.world == 1 or i == last else self.step_module.no_sync():
                loss = self._forward_once(batch, noise, padding)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        self.update()

    def forward_loss(self, batch: dict[str, Tensor], noise: StepNoise, padding: bool) -> Tensor:
        """One micro-batch's forward pass; its statistics go into the meter; returns the loss to
        back-propagate (divided by the global batch's counts; DDP averages gradients over ranks, hence x
        world)."""
        with autocast(self.device, self.precision, cache=not self.plan.graphs):
            out = self.step_module(batch, noise=noise, padding=padding)
        self.meter.add_stats(out.stats)
        return out.loss(self.counts[0], self.counts[1]) * self.world

    def update(self) -> None:
        """Clip, then step the optimizer; the gradient norm before clipping goes into the meter."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.meter.add_grad_norm(grad_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    # ------------------------------------------------------------------------------------------- internals

    def _forward_once(self, batch: dict[str, Tensor], noise: StepNoise, padding: bool) -> Tensor:
        # == (not is): each attribute access makes a new bound method.
        if self._forward == self.forward_loss:
            return self._forward(batch, noise, padding)
        try:
            return self._forward(batch, noise, padding)
        except Exception as e:  # any failure to compile: said once, then the step runs eagerly
            if not _compile_failure(e):
                raise
            self.log(f"training step: compiling failed ({_first_line(e)}); running it eagerly")
            self._forward = self.forward_loss
            return self._forward(batch, noise, padding)

    def _new_inputs(self, padding: bool) -> _Inputs:
        s = self.shape
        batches = [
            {
                key: torch.zeros(s.rows, s.seq_len, dtype=torch.long, device=self.device)
                for key in ("input_ids", "token_type_ids", "attention_mask")
            }
            for _ in range(s.micro_batches)
        ]
        noises = [
            StepNoise.empty((s.rows, s.seq_len), s.vocab_size, s.objective, s.samples, self.device)
            for _ in range(s.micro_batches)
        ]
        self._inputs[padding] = _Inputs(batches, noises)
        return self._inputs[padding]

    def _warm_up(self, inputs: _Inputs, padding: bool) -> None:
        # On a side stream, as CUDA graphs want their warm-up: what it allocates does not tie the capture.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.step(inputs, padding)
        torch.cuda.current_stream(self.device).wait_stream(side)

    def _capture(self, inputs: _Inputs, padding: bool) -> None:
        """Capture this step (its kernels are recorded, not run), then replay it once to run it."""
        # Gradients None: the captured backward allocates them in the graph's pool and overwrites them on
        # every replay, so nothing zeroes them in between.
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.step(inputs, padding, capturing=True)
        except Exception as e:  # any failure to capture: said once, then the step runs without graphs
            torch.cuda.synchronize(self.device)
            self.plan = StepPlan(self.plan.compile, False, self.plan.line)
            self.log(f"training step: capturing a CUDA graph failed ({_first_line(e)}); running without")
            self.step(inputs, padding)
            return
        inputs.graph = graph
        graph.replay()


def _compile_failure(e: Exception) -> bool:
    """Whether `e` is torch.compile failing (a graph break under fullgraph, a backend that cannot build)."""
    module = type(e).__module__
    return module.startswith(("torch._dynamo", "torch._inductor")) or "InductorError" in type(e).__name__


def _first_line(e: Exception) -> str:
    """The exception in one line: its first, and the next one too where the first only introduces it
    (torch.compile's "backend='inductor' raised:" puts the reason on the line after)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines or [""])[0]
    return f"{type(e).__name__}: {text}"
