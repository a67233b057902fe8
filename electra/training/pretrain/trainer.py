"""`electra pretrain`: joint generator + discriminator pre-training (or the masked-LM baseline).

One readable loop, nanoGPT style. Multi-GPU and multi-node through torchrun (DistributedDataParallel): every
rank reads its own slice of each global batch from the memory-mapped data, rank 0 logs and checkpoints.

Losses are normalised by the token and prediction counts of the *global* batch (known before the forward pass:
they depend on the data only), so the gradient of a step is the same for any split into ranks and micro-steps.
The masking randomness of each micro-batch is seeded from (seed, step, slice), so a run is reproducible, and
a resumed run continues exactly where it stopped: checkpoints carry weights, optimizer, scheduler, the RNG
states (dropout) and the data position.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from electra.config import ElectraConfig, generator_config
from electra.errors import InputError
from electra.training.data.dataset import PretrainingData
from electra.training.optim import build_optimizer, build_scheduler
from electra.training.pretrain import checkpoint as ckpt
from electra.training.pretrain.detection_auc import BINS, auc_from_histograms, logit_histograms
from electra.training.pretrain.flops import electra_step_flops, peak_flops
from electra.training.pretrain.loader import BatchSampler, DataPosition, load_rows, micro_slice
from electra.training.pretrain.objective import (
    MLM_BASELINE,
    STAT_KEYS,
    ObjectiveConfig,
    SpecialTokens,
    StepOutput,
    electra_step,
    mlm_step,
    ratios,
)

# The paper's per-size recipe (Clark et al. 2020, Table 6 and Section 3.1).
SIZE_DEFAULTS: dict[str, dict[str, Any]] = {
    "tiny": {"lr": 1e-3, "batch_size": 32, "steps": 10_000, "mask_prob": 0.15},
    "small": {"lr": 5e-4, "batch_size": 128, "steps": 1_000_000, "mask_prob": 0.15},
    "base": {"lr": 2e-4, "batch_size": 256, "steps": 766_000, "mask_prob": 0.15},
    "large": {"lr": 2e-4, "batch_size": 2048, "steps": 400_000, "mask_prob": 0.25},
}
OBJECTIVES = ("electra", "mlm")
PRECISIONS = ("bf16", "fp16", "fp32")


@dataclass
class PretrainConfig:
    data: Path
    out: Path
    size: str = "small"
    objective: str = "electra"
    steps: int | None = None
    batch_size: int | None = None
    grad_accum: int = 1
    lr: float | None = None
    warmup_steps: int | None = None
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    generator_size: float | None = None
    mask_prob: float | None = None
    disc_weight: float = 50.0
    dropout: float | None = None
    stop_at: int | None = None
    precision: str | None = None
    compile: bool = False
    seed: int = 0
    resume: bool = False
    overwrite: bool = False
    init: Path | None = None
    device: str | None = None
    log_every: int = 10
    eval_every: int = 500
    eval_batches: int = 10
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved(self) -> PretrainConfig:
        """Fill paper defaults for the size; validate."""
        if self.size not in SIZE_DEFAULTS:
            raise InputError(f"--size {self.size!r} is not one of {', '.join(SIZE_DEFAULTS)}")
        if self.objective not in OBJECTIVES:
            raise InputError(f"--objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        d = SIZE_DEFAULTS[self.size]
        c = PretrainConfig(**{**asdict(self)})
        c.data, c.out = Path(self.data), Path(self.out)
        c.init = Path(self.init) if self.init else None
        c.steps = self.steps if self.steps is not None else d["steps"]
        c.batch_size = self.batch_size if self.batch_size is not None else d["batch_size"]
        c.lr = self.lr if self.lr is not None else d["lr"]
        c.mask_prob = self.mask_prob if self.mask_prob is not None else d["mask_prob"]
        # The paper warms up for 10k of 1M steps; short runs warm up for their first 10%.
        c.warmup_steps = (
            self.warmup_steps if self.warmup_steps is not None else min(10_000, max(1, c.steps // 10))
        )
        for name in (
            "steps",
            "batch_size",
            "grad_accum",
            "log_every",
            "eval_every",
            "checkpoint_every",
            "keep_checkpoints",
        ):
            if getattr(c, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        if not 0 < c.mask_prob < 1:
            raise InputError(f"--mask-prob {c.mask_prob} must be in (0, 1)")
        if c.dropout is not None and not 0 <= c.dropout < 1:
            raise InputError(f"--dropout {c.dropout} must be in [0, 1)")
        if c.lr <= 0:
            raise InputError(f"--lr {c.lr} must be positive")
        if c.precision is not None and c.precision not in PRECISIONS:
            raise InputError(f"--precision {c.precision!r} is not one of {', '.join(PRECISIONS)}")
        return c


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str | None) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    want_cuda = torch.cuda.is_available() and device != "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    if world > 1:
        rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
        if want_cuda:
            torch.cuda.set_device(local_rank)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if want_cuda else "gloo")
        dev = torch.device(f"cuda:{local_rank}") if want_cuda else torch.device("cpu")
        return Dist(rank, world, local_rank, dev)
    return Dist(device=torch.device("cuda") if want_cuda else torch.device("cpu"))


class ElectraPretrainer(nn.Module):
    """Generator + discriminator sharing one embedding block; forward runs the replaced-token objective."""

    def __init__(
        self,
        disc_cfg: ElectraConfig,
        gen_cfg: ElectraConfig,
        specials: SpecialTokens,
        objective: ObjectiveConfig,
    ) -> None:
        from electra.model import ElectraDiscriminator, ElectraGenerator

        super().__init__()
        self.discriminator = ElectraDiscriminator(disc_cfg)
        self.generator = ElectraGenerator(gen_cfg, embeddings=self.discriminator.electra.embeddings)
        self.specials, self.objective = specials, objective
        # Start the discriminator at the class prior (about mask_prob of the tokens are replaced). From a zero
        # bias the quickest way to the prior is to collapse the top layers onto one vector: ELECTRA-Small on
        # Wikipedia sat at the all-original baseline for 750+ steps with its last layer's token states at
        # cosine 0.94 to each other. (--init overwrites this with the loaded model's bias.)
        p = min(max(objective.mask_prob, 1e-3), 1 - 1e-3)
        with torch.no_grad():
            self.discriminator.discriminator_predictions.dense_prediction.bias.fill_(math.log(p / (1 - p)))

    def forward(self, batch: dict[str, torch.Tensor], rng: torch.Generator) -> StepOutput:
        return electra_step(self.generator, self.discriminator, batch, self.specials, self.objective, rng)


class MlmPretrainer(nn.Module):
    """The BERT-style baseline: the discriminator-sized encoder with a masked-LM head."""

    def __init__(self, cfg: ElectraConfig, specials: SpecialTokens, objective: ObjectiveConfig) -> None:
        from electra.model import ElectraGenerator

        super().__init__()
        self.mlm = ElectraGenerator(cfg)
        self.specials, self.objective = specials, objective

    def forward(self, batch: dict[str, torch.Tensor], rng: torch.Generator) -> StepOutput:
        return mlm_step(self.mlm, batch, self.specials, self.objective, rng, self.mlm.config.vocab_size)


def global_counts(
    input_ids: np.ndarray, lengths: np.ndarray, special_ids: tuple[int, ...], p: float
) -> tuple[int, int]:
    """(real tokens, masked predictions) of a global batch, by the objective's own counting rule."""
    from electra.training.pretrain.objective import num_predictions

    valid = np.arange(input_ids.shape[1])[None, :] < lengths[:, None]
    candidates = (valid & ~np.isin(input_ids, special_ids)).sum(axis=1)
    return int(lengths.sum()), int(num_predictions(torch.from_numpy(candidates), p).sum())


def _seed_for(seed: int, step: int, slice_index: int) -> int:
    return (seed * 1_000_003 + step) * 10_007 + slice_index


class _StopSignal:
    """SIGTERM / Ctrl-C ask the loop to checkpoint and exit cleanly at the end of the current step."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignal:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C means now
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _prepare_out_dir(cfg: PretrainConfig) -> None:
    out = cfg.out
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    has_run = (out / "checkpoints").exists() or (out / "metrics.jsonl").exists()
    if cfg.resume:
        return
    if has_run and not cfg.overwrite:
        raise InputError(
            f"{out} already holds a run; pass --resume to continue it or --overwrite to start over"
        )
    if cfg.overwrite:
        import shutil

        for name in ("checkpoints", "metrics.jsonl", "discriminator", "generator", "mlm", "run_config.json"):
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()


def _check_tokenizer(data: PretrainingData) -> tuple[Any, SpecialTokens]:
    from electra.tokenizer import load_tokenizer, special_ids, tokenizer_fingerprint

    tok = load_tokenizer(data.tokenizer_dir)
    if tokenizer_fingerprint(tok) != data.manifest["tokenizer"]["fingerprint"]:
        raise InputError(
            f"{data.tokenizer_dir} does not match the tokenizer recorded in "
            f"{data.directory / 'manifest.json'}; "
            "re-run `electra data prepare`"
        )
    s = special_ids(tok)
    return tok, SpecialTokens(pad=s.pad, cls=s.cls, sep=s.sep, mask=s.mask)


def _load_init(model: nn.Module, init: Path, vocab_size: int, data: PretrainingData, log) -> None:
    """Start from a Hugging Face ELECTRA discriminator (and its generator when `init/generator` exists)."""
    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer, tokenizer_fingerprint

    disc_dir = init / "discriminator" if (init / "discriminator" / "config.json").is_file() else init
    src = load_hf_dir(disc_dir, kind="discriminator")
    if src.config.vocab_size != vocab_size:
        raise InputError(
            f"--init {disc_dir} has a vocabulary of {src.config.vocab_size} but the data was prepared with "
            f"{vocab_size}; prepare the data with that model's tokenizer (--tokenizer {disc_dir})"
        )
    try:
        tok = load_tokenizer(disc_dir)
    except InputError:
        tok = None
    if tok is not None and tokenizer_fingerprint(tok) != data.manifest["tokenizer"]["fingerprint"]:
        raise InputError(
            f"--init {disc_dir} uses a different tokenizer than the data in {data.directory}; prepare the "
            "data "
            f"with --tokenizer {disc_dir}"
        )
    target = model.discriminator if isinstance(model, ElectraPretrainer) else model.mlm
    missing, _ = target.load_state_dict(src.state_dict(), strict=False)
    if any(not k.startswith(("discriminator_predictions", "generator_")) for k in missing):
        raise InputError(f"--init {disc_dir} does not match --size (missing weights: {missing[:3]})")
    log(f"initialised the discriminator from {disc_dir}")
    gen_dir = init / "generator"
    if isinstance(model, ElectraPretrainer) and (gen_dir / "config.json").is_file():
        gen = load_hf_dir(gen_dir, kind="generator")
        own = {k: v for k, v in gen.state_dict().items() if not k.startswith("electra.embeddings.")}
        model.generator.load_state_dict(own, strict=False)
        log(f"initialised the generator from {gen_dir}")


def pretrain(cfg: PretrainConfig) -> dict[str, Any]:
    cfg = cfg.resolved()
    d = init_distributed(cfg.device)

    def log(msg: str) -> None:
        if d.main:
            print(msg, file=sys.stderr, flush=True)

    data = PretrainingData.open(cfg.data)
    tok, specials = _check_tokenizer(data)
    vocab_size = tok.get_vocab_size()
    seq_len = data.max_seq_len
    micro_batch, rem = divmod(cfg.batch_size, d.world * cfg.grad_accum)
    if rem or micro_batch == 0:
        raise InputError(
            f"--batch-size {cfg.batch_size} is not divisible by world size {d.world} x --grad-accum "
            f"{cfg.grad_accum}; choose a multiple of {d.world * cfg.grad_accum}"
        )
    if len(data.train) < cfg.batch_size:
        raise InputError(
            f"{cfg.data} holds {len(data.train)} training examples, fewer than one batch of "
            f"{cfg.batch_size}; "
            "lower --batch-size or prepare more data"
        )
    if d.main:
        _prepare_out_dir(cfg)
        cfg.out.mkdir(parents=True, exist_ok=True)
    if d.world > 1:
        dist.barrier()

    precision = cfg.precision or ("bf16" if d.device.type == "cuda" else "fp32")
    if d.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    autocast = (
        torch.autocast(d.device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
        if precision != "fp32"
        else nullcontext()
    )
    scaler = torch.amp.GradScaler(d.device.type) if precision == "fp16" else None

    torch.manual_seed(cfg.seed)
    dropout = (
        {}
        if cfg.dropout is None
        else {"hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout}
    )
    disc_cfg = ElectraConfig.from_size(
        cfg.size,
        vocab_size=vocab_size,
        max_position_embeddings=max(512, seq_len),
        pad_token_id=specials.pad,
        **dropout,
    )
    gen_cfg = generator_config(disc_cfg, cfg.generator_size)
    if cfg.objective == "electra":
        objective = ObjectiveConfig(mask_prob=cfg.mask_prob, disc_weight=cfg.disc_weight)
        model: nn.Module = ElectraPretrainer(disc_cfg, gen_cfg, specials, objective)
    else:
        objective = ObjectiveConfig(**{**asdict(MLM_BASELINE), "mask_prob": cfg.mask_prob})
        model = MlmPretrainer(disc_cfg, specials, objective)
    if cfg.init:
        _load_init(model, cfg.init, vocab_size, data, log)
    model.to(d.device)
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.steps)

    step = 0
    tokens_seen = 0
    position = DataPosition()
    if cfg.resume:
        path = ckpt.latest_checkpoint(cfg.out, log=log)
        if path is None:
            log(f"no checkpoint in {cfg.out / 'checkpoints'}; starting from scratch")
        else:
            state = ckpt.load_checkpoint(path)
            saved = state.trainer_state
            for key in ("size", "objective", "batch_size", "seq_len", "vocab_size"):
                mine = {
                    "size": cfg.size,
                    "objective": cfg.objective,
                    "batch_size": cfg.batch_size,
                    "seq_len": seq_len,
                    "vocab_size": vocab_size,
                }[key]
                if saved["run"][key] != mine:
                    raise InputError(
                        f"cannot resume {path}: it was trained with {key}={saved['run'][key]}, now {mine}; "
                        "use the original settings or another --out"
                    )
            model.load_state_dict(state.tensors, strict=True)
            optimizer.load_state_dict(state.optimizer)
            scheduler.load_state_dict(saved["scheduler"])
            if scaler is not None and saved.get("scaler"):
                scaler.load_state_dict(saved["scaler"])
            step, tokens_seen = int(saved["step"]), int(saved["tokens"])
            position = DataPosition.from_dict(saved["data_position"])
            if state.rng is not None:
                ckpt.restore_rng_state(state.rng)
            log(f"resumed from {path} at step {step}")

    run_info = {
        "size": cfg.size,
        "objective": cfg.objective,
        "batch_size": cfg.batch_size,
        "seq_len": seq_len,
        "vocab_size": vocab_size,
    }
    if d.main:
        (cfg.out / "run_config.json").write_text(
            json.dumps(
                {
                    **json.loads(json.dumps(asdict(cfg), default=str)),
                    "run": run_info,
                    "discriminator": asdict(disc_cfg),
                    "generator": asdict(gen_cfg),
                },
                indent=2,
            )
            + "\n"
        )
    step_module: nn.Module = model
    if cfg.compile:
        step_module = torch.compile(model)
    if d.world > 1:
        step_module = nn.parallel.DistributedDataParallel(
            step_module, device_ids=[d.local_rank] if d.device.type == "cuda" else None
        )

    sampler = BatchSampler(len(data.train), cfg.batch_size, cfg.seed, position)
    special_tuple = (specials.pad, specials.cls, specials.sep)
    peak = peak_flops(torch.cuda.get_device_name(d.device)) if d.device.type == "cuda" else None
    metrics_path = cfg.out / "metrics.jsonl"
    if d.main:
        _truncate_metrics(metrics_path, step)

    def save(reason: str) -> None:
        if d.main:
            state = {
                "step": step,
                "tokens": tokens_seen,
                "data_position": sampler.position.to_dict(),
                "scheduler": scheduler.state_dict(),
                "run": run_info,
                "scaler": scaler.state_dict() if scaler is not None else None,
                "config": json.loads(json.dumps(asdict(cfg), default=str)),
            }
            path = ckpt.save_checkpoint(
                cfg.out,
                step,
                dict(model.state_dict()),
                optimizer.state_dict(),
                state,
                ckpt.capture_rng_state(),
                keep_last=cfg.keep_checkpoints,
            )
            log(f"checkpoint {path} ({reason})")
        if d.world > 1:
            dist.barrier()

    bar = None
    if d.main and cfg.progress:
        from tqdm import tqdm

        bar = tqdm(
            total=cfg.steps, initial=step, desc="pretrain", unit="step", file=sys.stderr, dynamic_ncols=True
        )
    acc: dict[str, torch.Tensor] = {}
    window_start, window_tokens, window_flops = time.perf_counter(), 0, 0.0
    last_record: dict[str, Any] = {}
    stopped = False
    model.train()
    with _StopSignal() as stop:
        while step < cfg.steps:
            global_idx = sampler.next_global_batch()
            rows = np.sort(global_idx)  # ascending indices read the memmap sequentially
            n_tokens, n_masked = global_counts(
                np.asarray(data.train.input_ids[rows]),
                np.asarray(data.train.lengths[rows], dtype=np.int64),
                special_tuple,
                cfg.mask_prob,
            )
            for micro in range(cfg.grad_accum):
                slice_index = micro * d.world + d.rank
                batch = load_rows(
                    data.train, micro_slice(global_idx, micro, d.rank, d.world, micro_batch), d.device
                )
                rng = torch.Generator(device=d.device).manual_seed(_seed_for(cfg.seed, step, slice_index))
                sync = (
                    nullcontext() if (d.world == 1 or micro == cfg.grad_accum - 1) else step_module.no_sync()
                )
                with sync:
                    with autocast:
                        out = step_module(batch, rng)
                    # Token-weighted global means, summed over micro-batches and ranks (DDP averages, so x W).
                    loss = out.mlm_loss * out.stats["mlm_count"] / max(n_masked, 1)
                    if cfg.objective == "electra":
                        loss = loss + cfg.disc_weight * out.disc_loss * out.stats["disc_count"] / max(
                            n_tokens, 1
                        )
                    loss = loss * d.world
                    (scaler.scale(loss) if scaler is not None else loss).backward()
                for k, v in out.stats.items():
                    acc[k] = acc.get(k, 0) + v.detach().float()
            if scaler is not None:
                scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            tokens_seen += n_tokens
            window_tokens += n_tokens
            window_flops += electra_step_flops(
                disc_cfg, gen_cfg if cfg.objective == "electra" else None, n_tokens, seq_len, n_masked
            )
            acc["grad_norm_sum"] = acc.get("grad_norm_sum", 0) + grad_norm.detach().float()
            acc["steps"] = acc.get("steps", 0) + torch.tensor(1.0, device=d.device)

            if step % cfg.log_every == 0 or step == cfg.steps:
                elapsed = time.perf_counter() - window_start
                record = _summarise(acc, d, step, tokens_seen, scheduler.get_last_lr()[0])
                record["tokens_per_s"] = window_tokens / elapsed
                record["peak_memory_bytes"] = _peak_memory_bytes(d.device)
                if peak is not None:
                    record["mfu"] = window_flops / elapsed / (peak * d.world)
                acc = {}
                window_start, window_tokens, window_flops = time.perf_counter(), 0, 0.0
                last_record = record
                if d.main:
                    _append_jsonl(metrics_path, record)
                    if bar is not None:
                        bar.set_postfix_str(_postfix(record), refresh=False)
            if d.main and bar is not None:
                bar.update(1)
            if len(data.val) and (step % cfg.eval_every == 0 or step == cfg.steps):
                record = evaluate(model, data, cfg, d, specials, autocast, step, micro_batch)
                if d.main and record:
                    _append_jsonl(metrics_path, record)
            if d.world > 1:
                flag = torch.tensor(float(stop.requested), device=d.device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                stop.requested = bool(flag.item())
            if cfg.stop_at is not None and step >= cfg.stop_at and step < cfg.steps:
                stop.requested = True
            if stop.requested:
                save(
                    "stopped by signal"
                    if cfg.stop_at is None or step < cfg.stop_at
                    else f"--stop-at {cfg.stop_at}"
                )
                stopped = True
                break
            if step % cfg.checkpoint_every == 0 and step < cfg.steps:
                save("periodic")
    if bar is not None:
        bar.close()
    if not stopped:
        save("end of training")
        if d.main:
            export_hf(model, tok, cfg.out)
    if d.world > 1:
        dist.barrier()
    return {"step": step, "stopped": stopped, "last": last_record, "out": str(cfg.out)}


def _summarise(acc: dict[str, torch.Tensor], d: Dist, step: int, tokens: int, lr: float) -> dict[str, Any]:
    s = _reduce_sums(acc, d)
    steps = max(s.pop("steps", 1.0) / d.world, 1.0)
    rec: dict[str, Any] = {
        "split": "train",
        "step": step,
        "tokens": tokens,
        "lr": lr,
        "grad_norm": s.get("grad_norm_sum", 0.0) / d.world / steps,
    }
    rec.update(ratios(s))
    return rec


@torch.no_grad()
def evaluate(model, data, cfg, d, specials, autocast, step, micro_batch) -> dict[str, Any]:
    """Metrics on the first `eval_batches` validation batches, with fixed masking: comparable across steps."""
    model.eval()
    # Zeros for every key, so a rank whose shard has run out of validation rows still joins the reductions.
    acc: dict[str, torch.Tensor] = {k: torch.zeros((), device=d.device) for k in STAT_KEYS}
    hist = torch.zeros(2, BINS, device=d.device) if cfg.objective == "electra" else None
    n = len(data.val)
    for b in range(cfg.eval_batches):
        lo = (b * d.world + d.rank) * micro_batch
        if lo >= n:
            break
        idx = np.arange(lo, min(lo + micro_batch, n))
        batch = load_rows(data.val, idx, d.device)
        rng = torch.Generator(device=d.device).manual_seed(_seed_for(cfg.seed + 1, 0, b * d.world + d.rank))
        with autocast:
            out = model(batch, rng)
        for k, v in out.stats.items():
            acc[k] = acc[k] + v.float()
        if hist is not None and out.disc_logits is not None and out.disc_labels is not None:
            hist += logit_histograms(out.disc_logits, out.disc_labels)
    model.train()
    sums = _reduce_sums(acc, d)
    if hist is not None and d.world > 1:
        dist.all_reduce(hist)
    if not sums["num_tokens"]:
        return {}
    rec = {"split": "val", "step": step, **ratios(sums)}
    if hist is not None:
        rec["disc_auc"] = auc_from_histograms(hist)
    return rec


def _reduce_sums(acc: dict[str, torch.Tensor], d: Dist) -> dict[str, float]:
    """Sum the accumulated statistics over ranks in one all-reduce (one host sync)."""
    keys = sorted(acc)
    values = torch.stack([torch.as_tensor(acc[k], dtype=torch.float32, device=d.device) for k in keys])
    if d.world > 1:
        dist.all_reduce(values)
    return dict(zip(keys, values.tolist(), strict=True))


def export_hf(model: nn.Module, tok: Any, out: Path) -> None:
    """Write the final models in Hugging Face format with the tokenizer files beside them."""
    import tempfile

    from electra.hf_format import save_hf_dir
    from electra.tokenizer import save_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        save_tokenizer(tok, Path(tmp))
        files = {p.name: p.read_bytes() for p in Path(tmp).iterdir()}
    targets = (
        [("discriminator", model.discriminator), ("generator", model.generator)]
        if isinstance(model, ElectraPretrainer)
        else [("mlm", model.mlm)]
    )
    for name, sub in targets:
        save_hf_dir(sub, out / name, overwrite=True, extra_files=files)


def _append_jsonl(path: Path, record: dict[str, Any]) -> None:
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(clean) + "\n")


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, drop records past the checkpoint so the curves have no duplicated steps."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                keep.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill -9
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


def _postfix(r: dict[str, Any]) -> str:
    parts = [f"mlm {r['mlm_loss']:.3f}"]
    if "disc_loss" in r:
        parts += [
            f"disc {r['disc_loss']:.3f}",
            f"acc {r['disc_accuracy']:.3f}",
            f"rec {r['disc_recall']:.2f}",
        ]
    parts.append(f"{r['tokens_per_s']:,.0f} tok/s")
    return " ".join(parts)
