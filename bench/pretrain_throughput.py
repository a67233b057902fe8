"""Pre-training throughput: our trainer's step vs a naive baseline assembled from `transformers` parts.

The baseline is what a user would write with Hugging Face pieces: `ElectraForMaskedLM` (generator) and
`ElectraForPreTraining` (discriminator) sharing embeddings, masked-LM logits over the full vocabulary at every
position, replacements sampled with `torch.multinomial`, a plain eager loop with `torch.optim.AdamW`. Ours is
the step `electra pretrain` runs: gathered generator head, Gumbel sampling, fused AdamW on CUDA, optional
torch.compile. Same sizes, batch, sequence length and precision; the two alternate, several rounds, one run.

    python -m bench.pretrain_throughput                                  # CPU: tiny and small
    python -m bench.pretrain_throughput --device cuda --sizes small,base --batch-size 128 --compile
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.benchlib import ROOT, result_header, write_result
from electra.config import ElectraConfig, generator_config
from electra.training.device import autocast as autocast_for
from electra.training.device import enable_tf32, resolve_precision
from electra.training.optim import build_optimizer
from electra.training.pretrain.diagnostics.flops import electra_step_flops, peak_flops
from electra.training.pretrain.models import ElectraPretrainer
from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens, max_predictions

SPECIALS = SpecialTokens(pad=0, cls=101, sep=102, mask=103)
VOCAB = 30522


def synthetic_batch(batch: int, seq: int, device: torch.device, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, VOCAB, (batch, seq), generator=g)
    ids[:, 0], ids[:, -1] = SPECIALS.cls, SPECIALS.sep
    return {
        "input_ids": ids.to(device),
        "token_type_ids": torch.zeros_like(ids).to(device),
        "attention_mask": torch.ones_like(ids).to(device),
    }


class Ours:
    def __init__(self, size: str, device: torch.device, autocast, compile_: bool) -> None:
        disc = ElectraConfig.from_size(size, vocab_size=VOCAB)
        self.model = ElectraPretrainer(disc, generator_config(disc), SPECIALS, ObjectiveConfig()).to(device)
        self.step_fn = torch.compile(self.model) if compile_ else self.model
        self.opt = build_optimizer(self.model, 5e-4)
        self.autocast, self.device = autocast, device
        self.rng = torch.Generator(device=device).manual_seed(0)

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        with self.autocast:
            out = self.step_fn(batch, self.rng)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


class NaiveHF:
    def __init__(self, size: str, device: torch.device, autocast) -> None:
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

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        special = (ids == SPECIALS.cls) | (ids == SPECIALS.sep) | (mask == 0)
        masked = (torch.rand(ids.shape, device=ids.device) < 0.15) & ~special
        gen_in = torch.where(masked, torch.full_like(ids, SPECIALS.mask), ids)
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        with self.autocast:
            gen_out = self.gen(
                input_ids=gen_in, attention_mask=mask, token_type_ids=batch["token_type_ids"], labels=labels
            )
            probs = torch.softmax(gen_out.logits.detach().float(), dim=-1)
            sampled = torch.multinomial(probs.view(-1, probs.shape[-1]), 1).view(ids.shape)
            corrupted = torch.where(masked, sampled, ids)
            disc_out = self.disc(
                input_ids=corrupted,
                attention_mask=mask,
                token_type_ids=batch["token_type_ids"],
                labels=(corrupted != ids).long(),
            )
            loss = gen_out.loss + 50.0 * disc_out.loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in self.opt.param_groups for p in g["params"]], 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def timed(trainer, batches: list, steps: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(steps):
        trainer.step(batches[i % len(batches)])
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--batch-size", type=int, default=None, help="default 32 on CPU, 128 on CUDA")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=None, help="timed steps per round (default 3 CPU, 20 CUDA)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="also time ours with torch.compile")
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
    batch = args.batch_size or (128 if device.type == "cuda" else 32)
    steps = args.steps or (20 if device.type == "cuda" else 3)
    enable_tf32(device)
    autocast = autocast_for(device, resolve_precision(None, device))
    peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    results = []
    for size in args.sizes.split(","):
        torch.manual_seed(0)
        batches = [synthetic_batch(batch, args.seq_len, device, s) for s in range(4)]
        variants = {"ours": Ours(size, device, autocast, False)}
        if args.compile:
            variants["ours_compiled"] = Ours(size, device, autocast, True)
        logits_gb = batch * args.seq_len * VOCAB * 4 * 3 / 1e9
        if logits_gb <= args.skip_baseline_over_gb:
            variants["naive_hf"] = NaiveHF(size, device, autocast)
        for trainer in variants.values():  # warm-up: allocator, kernels, compilation
            timed(trainer, batches, 2, device)
        times: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(args.rounds):
            for name, trainer in variants.items():
                times[name].append(timed(trainer, batches, steps, device))
            line = ", ".join(
                f"{k} {batch * args.seq_len * steps / v[-1]:,.0f} tok/s" for k, v in times.items()
            )
            print(f"{size} round {r + 1}/{args.rounds}: {line}", flush=True)
        disc = ElectraConfig.from_size(size, vocab_size=VOCAB)
        tokens = batch * args.seq_len
        flops = electra_step_flops(
            disc, generator_config(disc), tokens, args.seq_len, batch * max_predictions(args.seq_len, 0.15)
        )
        entry = {
            "size": size,
            "batch_size": batch,
            "seq_len": args.seq_len,
            "steps_per_round": steps,
            "rounds": args.rounds,
            "flops_per_step": flops,
        }
        for name, ts in times.items():
            tok_s = [tokens * steps / t for t in ts]
            entry[name] = {
                "tokens_per_s": tok_s,
                "median_tokens_per_s": statistics.median(tok_s),
                "median_step_s": statistics.median(ts) / steps,
            }
            if peak:
                entry[name]["mfu"] = statistics.median(tok_s) / tokens * flops / peak
        if "naive_hf" in entry:
            for name in variants:
                if name != "naive_hf":
                    entry[f"speedup_{name}_vs_naive"] = (
                        entry[name]["median_tokens_per_s"] / entry["naive_hf"]["median_tokens_per_s"]
                    )
        results.append(entry)
        summary = ", ".join(f"{k} {v:.2f}x" for k, v in entry.items() if k.startswith("speedup_"))
        print(f"{size}: median ours {entry['ours']['median_tokens_per_s']:,.0f} tok/s; {summary}", flush=True)
        del variants
        if device.type == "cuda":
            torch.cuda.empty_cache()
    out = args.out or ROOT / "bench" / "results" / f"pretrain_throughput_{device.type}.json"
    record = {
        **result_header(
            "pretrain_throughput", torch.cuda.get_device_name(device) if device.type == "cuda" else None
        ),
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
        "targets": {
            "cpu_speedup": 1.5,
            "cuda_speedup": 3.0,
            "cuda_small_tokens_per_s": 1e6,
            "cuda_base_mfu": 0.4,
        },
        "results": results,
    }
    out = write_result(record, out, out.stem)
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
