"""Pre-training throughput: the trainer's step, each way it runs, against a naive `transformers` baseline.

Ours is the step `electra pretrain` runs (electra.training.pretrain.step.StepRunner over the trainer's model,
optimizer groups, device learning rates and schedule), in up to four variants:

    eager             launch by launch
    compiled          forward and backward compiled whole (torch.compile, fullgraph=True)
    graphs            eager kernels, the whole step replayed as one CUDA graph (CUDA only)
    compiled_graphs   both: what `electra pretrain --compile` runs on CUDA

The baseline (`naive_hf`) is what a user would write with Hugging Face pieces: `ElectraForMaskedLM`
(generator) and `ElectraForPreTraining` (discriminator) sharing embeddings, masked-LM logits over the full
vocabulary at every position, replacements sampled with `torch.multinomial`, a plain eager loop with
`torch.optim.AdamW`. Same sizes, batch, sequence length and precision. Batches are synthetic full rows (so
attention runs unmasked, SDPA's flash kernel on GPUs) unless --padding shortens rows as prepared data does.

Per size and batch size: each variant's first call (compilation, capture) is timed apart from its steps
(`first_call_s`, `warmup_s`); then the variants alternate in rounds (order rotated per round), and speed-ups
are the median of per-round ratios to the baseline; MFU from the FLOPs of a step and the device's bf16 peak;
a torch.profiler table of one step's top ten kernels per variant (a graphed variant is profiled uncaptured: a
replay shows as one launch). The results file is rewritten after every batch size, so a run stopped by a time
limit keeps what it measured.

    python -m bench.pretrain_throughput                                            # CPU: tiny and small
    python -m bench.pretrain_throughput --device cuda --sizes small,base --batch-sizes 128,256,512
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.benchlib import ROOT, int_list, result_header, round_order, summarize_ratio, write_result
from electra.config import ElectraConfig, generator_config
from electra.training.device import autocast as autocast_for
from electra.training.device import enable_tf32, resolve_precision
from electra.training.optim import adam, build_scheduler, device_learning_rates
from electra.training.pretrain.diagnostics.flops import electra_step_flops, peak_flops
from electra.training.pretrain.diagnostics.meter import TrainMeter
from electra.training.pretrain.models import ElectraPretrainer, optimizer_groups
from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens, max_predictions
from electra.training.pretrain.state.distributed import Dist
from electra.training.pretrain.step import WARMUP_STEPS, StepPlan, StepRunner, StepShape

SPECIALS = SpecialTokens(pad=0, cls=101, sep=102, mask=103)
VOCAB = 30522
OURS = ("eager", "compiled", "graphs", "compiled_graphs")
VARIANTS = (*OURS, "naive_hf")
BASELINE = "naive_hf"
# Prepared data shortens this share of examples to a random length (training/data/packing.py).
SHORT_ROW_PROB = 0.05
TARGETS = {"cpu_speedup": 1.5, "cuda_speedup": 3.0, "cuda_small_tokens_per_s": 1e6, "cuda_base_mfu": 0.4}


def synthetic_batch(
    batch: int, seq: int, device: torch.device, seed: int, padding: bool
) -> dict[str, torch.Tensor]:
    """[CLS] random ids [SEP]: full rows, or with --padding a share of rows cut short and padded."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.full((batch,), seq)
    if padding:
        short = torch.rand(batch, generator=g) < SHORT_ROW_PROB
        lengths = torch.where(short, torch.randint(5, seq, (batch,), generator=g), lengths)
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids = torch.randint(1000, VOCAB, (batch, seq), generator=g)
    ids[:, 0] = SPECIALS.cls
    ids[torch.arange(batch), lengths - 1] = SPECIALS.sep
    ids = torch.where(mask.bool(), ids, SPECIALS.pad)
    return {
        "input_ids": ids.to(device),
        "token_type_ids": torch.zeros_like(ids).to(device),
        "attention_mask": mask.to(device),
    }


class Ours:
    """The trainer's step for one variant: the model, optimizer groups, schedule and meter it builds."""

    def __init__(
        self,
        size: str,
        batch: int,
        seq: int,
        device: torch.device,
        precision: str,
        variant: str,
        backend: str,
    ) -> None:
        disc = ElectraConfig.from_size(size, vocab_size=VOCAB)
        objective = ObjectiveConfig()
        self.model = ElectraPretrainer(disc, generator_config(disc), SPECIALS, objective).to(device)
        graphs = variant.endswith("graphs")
        groups = optimizer_groups(self.model, 5e-4, 0.01, 1.0)
        self.optimizer = adam(groups, 5e-4, "torch", eps=1e-6, capturable=graphs)
        self.scheduler = build_scheduler(self.optimizer, 10, 1_000_000)
        device_learning_rates(self.optimizer)
        self.runner = StepRunner(
            model=self.model,
            step_module=self.model,
            optimizer=self.optimizer,
            scaler=None,
            meter=TrainMeter(Dist(device=device), None),
            plan=StepPlan(compile=variant.startswith("compiled"), graphs=graphs, line=variant),
            shape=StepShape(1, batch, seq, VOCAB, objective, True),
            device=device,
            precision=precision,
            world=1,
            max_grad_norm=1.0,
            compile_backend=backend,
            log=lambda _: None,
        )
        self.seed = 0

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        n_tokens = int(batch["n_tokens"])
        self.runner.run([batch["tensors"]], [self.seed], batch["n_masked"], n_tokens, batch["padding"])
        self.scheduler.step()
        self.seed += 1


class NaiveHF:
    def __init__(self, size: str, device: torch.device, autocast: Any) -> None:
        import transformers

        disc = ElectraConfig.from_size(size, vocab_size=VOCAB)
        hf_disc = transformers.ElectraConfig(**disc.to_hf_dict("ElectraForPreTraining"))
        hf_gen = transformers.ElectraConfig(**generator_config(disc).to_hf_dict("ElectraForMaskedLM"))
        self.disc = transformers.ElectraForPreTraining(hf_disc).to(device)
        self.gen = transformers.ElectraForMaskedLM(hf_gen).to(device)
        self.gen.electra.embeddings = self.disc.electra.embeddings  # share, as the paper does
        self.gen.tie_weights()
        params = {id(p): p for p in [*self.disc.parameters(), *self.gen.parameters()]}
        self.opt = torch.optim.AdamW(params.values(), lr=5e-4, eps=1e-6, weight_decay=0.01)
        self.autocast = autocast

    def step(self, batch: dict[str, Any]) -> None:
        t = batch["tensors"]
        ids, mask = t["input_ids"], t["attention_mask"]
        special = (ids == SPECIALS.cls) | (ids == SPECIALS.sep) | (mask == 0)
        masked = (torch.rand(ids.shape, device=ids.device) < 0.15) & ~special
        gen_in = torch.where(masked, torch.full_like(ids, SPECIALS.mask), ids)
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        with self.autocast:
            gen_out = self.gen(
                input_ids=gen_in, attention_mask=mask, token_type_ids=t["token_type_ids"], labels=labels
            )
            probs = torch.softmax(gen_out.logits.detach().float(), dim=-1)
            sampled = torch.multinomial(probs.view(-1, probs.shape[-1]), 1).view(ids.shape)
            corrupted = torch.where(masked, sampled, ids)
            disc_out = self.disc(
                input_ids=corrupted,
                attention_mask=mask,
                token_type_ids=t["token_type_ids"],
                labels=(corrupted != ids).long(),
            )
            loss = gen_out.loss + 50.0 * disc_out.loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in self.opt.param_groups for p in g["params"]], 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[Any], None], batches: list, steps: int, device: torch.device) -> float:
    synchronize(device)
    t = time.perf_counter()
    for i in range(steps):
        step(batches[i % len(batches)])
    synchronize(device)
    return time.perf_counter() - t


def warm_up(trainer: Any, batches: list, device: torch.device) -> dict[str, float]:
    """The first call (compilation happens there) timed alone, then the rest of the warm-up: up to the
    capture and two replays for a graphed variant, one more step for the others."""
    graphs = isinstance(trainer, Ours) and trainer.runner.plan.graphs
    first = timed(trainer.step, batches, 1, device)
    rest = timed(trainer.step, batches, WARMUP_STEPS + 2 if graphs else 1, device)
    return {"first_call_s": first, "warmup_s": first + rest}


def profile_step(trainer: Any, batch: dict, device: torch.device, rows: int = 10) -> list[dict[str, Any]]:
    """The top `rows` kernels (CUDA) or operators (CPU) of one step by their own time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    runner = getattr(trainer, "runner", None)
    graphs = runner is not None and runner.plan.graphs
    if graphs:  # a replay shows as one launch: profile the same step uncaptured
        runner.plan = StepPlan(runner.plan.compile, False, runner.plan.line)
    synchronize(device)
    with profile(activities=activities) as prof:
        trainer.step(batch)
        synchronize(device)
    if graphs:
        runner.plan = StepPlan(runner.plan.compile, True, runner.plan.line)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, attr, 0) > 0]
    total = sum(getattr(e, attr) for e in events) or 1.0
    events.sort(key=lambda e: getattr(e, attr), reverse=True)
    return [
        {
            "name": e.key,
            "calls": e.count,
            "self_ms": getattr(e, attr) / 1e3,
            "share": getattr(e, attr) / total,
        }
        for e in events[:rows]
    ]


def build(
    variant: str, size: str, batch: int, args: argparse.Namespace, device: torch.device, precision: str
):
    if variant == BASELINE:
        return NaiveHF(size, device, autocast_for(device, precision))
    return Ours(size, batch, args.seq_len, device, precision, variant, args.compile_backend)


def measure(size: str, batch: int, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Every variant at one size and batch size: warm-up, alternating rounds, ratios, profiles."""
    precision = resolve_precision(None, device)
    peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    data = []
    for s in range(4):
        tensors = synthetic_batch(batch, args.seq_len, device, s, args.padding)
        n_tokens = int(tensors["attention_mask"].sum())
        data.append(
            {
                "tensors": tensors,
                "n_tokens": n_tokens,
                "n_masked": batch * max_predictions(args.seq_len, 0.15),
                "padding": n_tokens < batch * args.seq_len,
            }
        )
    disc = ElectraConfig.from_size(size, vocab_size=VOCAB)
    tokens = batch * args.seq_len
    flops = electra_step_flops(disc, generator_config(disc), tokens, args.seq_len, data[0]["n_masked"])
    entry: dict[str, Any] = {
        "size": size,
        "batch_size": batch,
        "seq_len": args.seq_len,
        "padding": args.padding,
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "flops_per_step": flops,
    }
    trainers, failed = {}, {}
    for variant in args.variants:
        if variant == BASELINE and batch * args.seq_len * VOCAB * 4 * 3 / 1e9 > args.skip_baseline_over_gb:
            failed[variant] = f"not measured: its full logits would exceed {args.skip_baseline_over_gb} GB"
            continue
        torch.manual_seed(0)
        try:
            trainers[variant] = build(variant, size, batch, args, device, precision)
            entry[variant] = warm_up(trainers[variant], data, device)
        except Exception as e:  # a variant that cannot run here (memory, compiler) is recorded, not fatal
            trainers.pop(variant, None)
            failed[variant] = f"failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            if device.type == "cuda":
                torch.cuda.empty_cache()
    times: dict[str, list[float]] = {v: [] for v in trainers}
    for r in range(args.rounds):
        for variant in round_order(list(trainers), r):
            times[variant].append(timed(trainers[variant].step, data, args.steps, device))
        line = ", ".join(f"{v} {tokens * args.steps / ts[-1]:,.0f} tok/s" for v, ts in times.items())
        print(f"{size} batch {batch} round {r + 1}/{args.rounds}: {line}", flush=True)
    for variant, ts in times.items():
        tok_s = [tokens * args.steps / t for t in ts]
        entry[variant].update(
            tokens_per_s=tok_s,
            median_tokens_per_s=statistics.median(tok_s),
            median_step_s=statistics.median(ts) / args.steps,
        )
        if peak:
            entry[variant]["mfu"] = statistics.median(tok_s) / tokens * flops / peak
        if args.profile:
            entry[variant]["top_kernels"] = profile_step(trainers[variant], data[0], device)
    for variant, why in failed.items():
        entry[variant] = {"status": why}
    if BASELINE in times:
        for variant in times:
            if variant != BASELINE:
                per_round = [b / a for a, b in zip(times[variant], times[BASELINE], strict=True)]
                entry[f"speedup_{variant}_vs_naive"] = summarize_ratio(per_round)
    del trainers
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return entry


def variant_list(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"variants are {', '.join(VARIANTS)}; got {text!r}")
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--batch-sizes", type=int_list, default=None, help="default 32 on CPU, 128 on CUDA")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--variants", type=variant_list, default=None, help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per round (default 3 CPU, 20 CUDA)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--padding", action="store_true", help="cut 5%% of rows short, as prepared data does")
    ap.add_argument("--no-profile", dest="profile", action="store_false", help="skip the profiler tables")
    ap.add_argument(
        "--compile-backend",
        default="inductor",
        help="torch.compile backend of the compiled variants (aot_eager: the same graph, no kernels built)",
    )
    ap.add_argument(
        "--skip-baseline-over-gb",
        type=float,
        default=60.0,
        help="skip the baseline when its full logits would exceed this many GB (OOM guard)",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    args.variants = args.variants or (list(VARIANTS) if cuda else ["eager", BASELINE])
    if not cuda and any(v.endswith("graphs") for v in args.variants):
        print("error: the graphs variants need --device cuda (CUDA graphs)", file=sys.stderr)
        return 2
    args.steps = args.steps or (20 if cuda else 3)
    enable_tf32(device)
    out = args.out or ROOT / "bench" / "results" / f"pretrain_throughput_{device.type}.json"
    record = {
        **result_header("pretrain_throughput", torch.cuda.get_device_name(device) if cuda else None),
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "precision": "bf16 autocast" if cuda else "fp32",
        "compile_backend": args.compile_backend,
        "command": " ".join(["python -m bench.pretrain_throughput", *sys.argv[1:]]),
        "targets": TARGETS,
        "results": [],
    }
    for size in args.sizes.split(","):
        for batch in args.batch_sizes or [128 if cuda else 32]:
            entry = measure(size, batch, args, device)
            record["results"].append(entry)
            summary = ", ".join(
                f"{k} {v['median']:.2f}x"
                for k, v in entry.items()
                if k.startswith("speedup_") and v["median"]
            )
            print(f"{size} batch {batch}: {summary or 'no baseline'}", flush=True)
            write_result(record, out, out.stem)
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
