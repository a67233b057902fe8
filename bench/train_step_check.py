"""The training step's ways of running, checked against each other on this machine (a check, not a timing).

    losses      the compiled, graphed and compiled-and-graphed steps against the eager one, step by step,
                over the same batches, masking seeds and initial weights; batches with padding and without
                interleaved (each kind warms up, is captured and replayed, then the two graphs alternate).
                Dropout off: torch.compile draws dropout masks from a generator of its own.
    dropout     the graphed step against the eager one with dropout on: a replay must draw the same dropout
                masks as the launches it recorded.
    sync_free   the steps between two records never wait for the device: on CUDA under
                torch.cuda.set_sync_debug_mode("error") (any synchronising call raises), everywhere with
                every Python read of a tensor's value (item, tolist, bool, float, int) made to raise.
                Batches come from pinned host memory with non-blocking copies, as the trainer's loader
                sends them.

Writes one JSON file; exits 1 when a check fails (each failure is also in the file).

    python -m bench.train_step_check --device cuda --out bench/results/train_step_check_cuda.json
    python -m bench.train_step_check --device cpu --compile-backend aot_eager --out /tmp/check.json
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from bench.benchlib import ROOT, result_header, write_result
from electra.config import ElectraConfig, generator_config
from electra.training.device import enable_tf32, resolve_precision
from electra.training.optim import adam, build_scheduler, device_learning_rates
from electra.training.pretrain.diagnostics.meter import TrainMeter
from electra.training.pretrain.models import ElectraPretrainer, optimizer_groups
from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens, max_predictions
from electra.training.pretrain.state.distributed import Dist
from electra.training.pretrain.step import WARMUP_STEPS, StepPlan, StepRunner, StepShape

SPECIALS = SpecialTokens(pad=0, cls=101, sep=102, mask=103)
# Padded (True) and full (False) batches: each kind warms up and is captured, then they alternate.
KINDS = [True] * (WARMUP_STEPS + 2) + [False] * (WARMUP_STEPS + 2) + [True, False] * 3
READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__")


def host_batch(rows: int, seq: int, vocab: int, seed: int, padded: bool) -> dict[str, torch.Tensor]:
    """[CLS] random ids [SEP] on the host; with padding, every other row cut short."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.full((rows,), seq)
    if padded:
        lengths[::2] = torch.randint(5, seq, (len(lengths[::2]),), generator=g)
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids = torch.randint(SPECIALS.mask + 1, vocab, (rows, seq), generator=g)
    ids[:, 0] = SPECIALS.cls
    ids[torch.arange(rows), lengths - 1] = SPECIALS.sep
    ids = torch.where(mask.bool(), ids, SPECIALS.pad)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """As the trainer's loader sends a batch: pinned, non-blocking."""
    if device.type != "cuda":
        return batch
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}


class Run:
    """One way of running the trainer's step, from seeded weights."""

    def __init__(self, args: argparse.Namespace, device: torch.device, variant: str, dropout: float) -> None:
        torch.manual_seed(0)
        disc = ElectraConfig.from_size(
            args.size,
            vocab_size=args.vocab_size,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
        objective = ObjectiveConfig()
        self.model = ElectraPretrainer(disc, generator_config(disc), SPECIALS, objective).to(device)
        graphs = variant.endswith("graphs")
        optimizer = adam(
            optimizer_groups(self.model, 1e-3, 0.01, 1.0), 1e-3, "torch", eps=1e-6, capturable=graphs
        )
        self.scheduler = build_scheduler(optimizer, 3, 1000)
        device_learning_rates(optimizer)
        self.meter = TrainMeter(Dist(device=device), None)
        self.runner = StepRunner(
            model=self.model,
            step_module=self.model,
            optimizer=optimizer,
            scaler=None,
            meter=self.meter,
            plan=StepPlan(compile=variant.startswith("compiled"), graphs=graphs, line=""),
            shape=StepShape(1, args.batch_size, args.seq_len, args.vocab_size, objective, True),
            device=device,
            precision=resolve_precision(None, device),
            world=1,
            max_grad_norm=1.0,
            compile_backend=args.compile_backend,
            log=lambda line: print(f"  {variant}: {line}", flush=True) if line else None,
        )
        self.args, self.device, self.step_index = args, device, 0

    def host_batch(self, padded: bool) -> tuple[dict[str, torch.Tensor], int]:
        """The next step's batch on the host, and its token count (through numpy: a host value, as the
        trainer's is, read from the data's lengths)."""
        a = self.args
        batch = host_batch(a.batch_size, a.seq_len, a.vocab_size, self.step_index, padded)
        return batch, int(batch["attention_mask"].numpy().sum())

    def step(self, padded: bool, host: tuple[dict[str, torch.Tensor], int] | None = None) -> None:
        batch, n_tokens = host or self.host_batch(padded)
        n_masked = self.args.batch_size * max_predictions(self.args.seq_len, 0.15)
        self.runner.run([to_device(batch, self.device)], [1000 + self.step_index], n_masked, n_tokens, padded)
        self.scheduler.step()
        self.meter.add_step(n_tokens, 0.0)
        self.step_index += 1

    def record(self) -> dict[str, Any]:
        return self.meter.record(self.step_index, 0, float(self.scheduler.get_last_lr()[0]))


def losses(run: Run) -> list[dict]:
    """A record after every step of KINDS."""
    out = []
    for padded in KINDS:
        run.step(padded)
        out.append(run.record())
    return out


def compare(reference: list[dict], other: list[dict], tolerance: float) -> dict[str, Any]:
    """The largest relative difference of each loss over the steps, and whether it is within tolerance."""
    worst: dict[str, float] = {}
    for key in ("mlm_loss", "disc_loss"):
        worst[key] = max(
            abs(a[key] - b[key]) / max(abs(a[key]), 1e-12) for a, b in zip(reference, other, strict=True)
        )
    return {
        "max_relative_difference": worst,
        "passed": all(v <= tolerance for v in worst.values()),
        "per_step": [
            {k: (a[k], b[k]) for k in ("mlm_loss", "disc_loss")}
            for a, b in zip(reference, other, strict=True)
        ],
    }


@contextlib.contextmanager
def no_device_reads(device: torch.device) -> Iterator[None]:
    """Every host read of a tensor raises inside; on CUDA every synchronising call as well."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a tensor's value was read on the host")

    saved = {name: getattr(torch.Tensor, name) for name in READS}
    for name in READS:
        setattr(torch.Tensor, name, refuse)
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode(0)
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def sync_free(run: Run) -> dict[str, Any]:
    """After losses() (both kinds warmed up and captured): 6 steps of both kinds under no_device_reads."""
    device = run.device
    try:
        for padded in (True, False, True, False, True, False):
            host = run.host_batch(padded)
            with no_device_reads(device):
                run.step(padded, host)
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        where = next(
            (f"{f.filename}:{f.lineno} {f.line}" for f in reversed(frames) if "electra" in f.filename), ""
        )
        return {"passed": False, "error": f"{type(e).__name__}: {e}", "where": where}
    return {"passed": True, "record_after": run.record()["mlm_loss"] > 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--size", default="tiny", help="model size (default tiny: the checks are about the step)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--vocab-size", type=int, default=30522, help="random ids over this vocabulary")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--tolerance", type=float, default=None, help="relative; default 1e-2 bf16, 1e-4 fp32")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device", file=sys.stderr)
        return 2
    enable_tf32(device)
    cuda = device.type == "cuda"
    tolerance = args.tolerance or (1e-2 if cuda else 1e-4)
    variants = ["compiled", "graphs", "compiled_graphs"] if cuda else ["compiled"]
    record: dict[str, Any] = {
        **result_header("train_step_check", torch.cuda.get_device_name(device) if cuda else None),
        "torch": torch.__version__,
        "size": args.size,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "vocab_size": args.vocab_size,
        "compile_backend": args.compile_backend,
        "tolerance": tolerance,
        "kinds": ["padded" if k else "full" for k in KINDS],
        "command": " ".join(["python -m bench.train_step_check", *sys.argv[1:]]),
    }
    runs = {v: Run(args, device, v, dropout=0.0) for v in ["eager", *variants]}
    reference = losses(runs["eager"])
    record["losses"] = {v: compare(reference, losses(runs[v]), tolerance) for v in variants}
    record["sync_free"] = {v: sync_free(run) for v, run in runs.items()}
    del runs
    if cuda:
        eager = losses(Run(args, device, "eager", dropout=0.1))
        record["dropout"] = {"graphs": compare(eager, losses(Run(args, device, "graphs", 0.1)), tolerance)}
    checks = [*record["losses"].values(), *record.get("dropout", {}).values(), *record["sync_free"].values()]
    record["passed"] = all(c["passed"] for c in checks)
    out = args.out or ROOT / "bench" / "results" / f"train_step_check_{device.type}.json"
    write_result(record, out, out.stem)
    for group in ("losses", "dropout", "sync_free"):
        for variant, result in record.get(group, {}).items():
            detail = result.get("max_relative_difference") or result.get("error", "")
            print(f"{group} {variant}: {'passed' if result['passed'] else 'FAILED'} {detail}", flush=True)
    print(f"-> {out}")
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
