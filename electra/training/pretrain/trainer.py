"""`electra pretrain`: joint generator + discriminator pre-training (or the masked-LM baseline).

Multi-GPU and multi-node through torchrun (DistributedDataParallel): every rank reads its own slice of each
global batch from the memory-mapped data, rank 0 logs and checkpoints.

Losses are normalised by the token and prediction counts of the *global* batch (known before the forward pass:
they depend on the data only), so the gradient of a step is the same for any split into ranks and micro-steps.
The masking randomness of each micro-batch is seeded from (seed, step, slice), so a run is reproducible, and
a resumed run continues exactly where it stopped: a checkpoint holds every stateful part of the run
(checkpoint_manager.TrainState). The step itself (step.StepRunner) runs eagerly, compiled, or as a CUDA graph,
and reads nothing back from the device: the host waits for it only when a record, an evaluation or a
checkpoint is due.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from electra.errors import InputError
from electra.files import DATA_MANIFEST_JSON, METRICS_JSONL
from electra.progress import progress
from electra.training.data.dataset import PretrainingData
from electra.training.device import autocast, enable_tf32, resolve_precision
from electra.training.optim import adam, build_scheduler, device_learning_rates
from electra.training.pretrain.config import PretrainConfig
from electra.training.pretrain.diagnostics.detection_auc import BINS, auc_from_histograms, logit_histograms
from electra.training.pretrain.diagnostics.flops import electra_step_flops, peak_flops
from electra.training.pretrain.diagnostics.identity_auc import FOLDS, identity_bound, phase, training_counts
from electra.training.pretrain.diagnostics.meter import TrainMeter, progress_postfix
from electra.training.pretrain.diagnostics.metrics_log import MetricsLog
from electra.training.pretrain.hf_models import export_hf, init_from_hf
from electra.training.pretrain.models import build_pretrainer, optimizer_groups
from electra.training.pretrain.objective import STAT_KEYS, SpecialTokens, ratios
from electra.training.pretrain.state.checkpoint_manager import CheckpointManager, Progress, TrainState
from electra.training.pretrain.state.distributed import init_distributed, leave_distributed
from electra.training.pretrain.state.loader import GlobalBatchOrder, batch_counts, load_rows, micro_slice
from electra.training.pretrain.state.run_dir import check_out_dir, prepare_out_dir, write_run_config
from electra.training.pretrain.state.signals import StopSignal
from electra.training.pretrain.step import StepRunner, StepShape, plan_step

if TYPE_CHECKING:
    import tokenizers

__all__ = ["PretrainConfig", "PretrainTrainer", "pretrain"]

logger = logging.getLogger("electra.pretrain")


def pretrain(cfg: PretrainConfig) -> dict[str, Any]:
    """Train as `cfg` says; returns {"step", "stopped", "last" (the last train record), "out"}."""
    try:
        return PretrainTrainer(cfg).fit()
    finally:
        leave_distributed()


def masking_seed(seed: int, step: int, slice_index: int) -> int:
    """The seed of one micro-batch's masking: the same whatever the number of ranks, and on resume."""
    return (seed * 1_000_003 + step) * 10_007 + slice_index


def data_tokenizer(data: PretrainingData) -> tuple[tokenizers.Tokenizer, SpecialTokens]:
    """The tokenizer the data was prepared with, checked against the one its manifest records."""
    from electra.tokenizer import load_tokenizer, special_ids, tokenizer_fingerprint

    tok = load_tokenizer(data.tokenizer_dir)
    if tokenizer_fingerprint(tok) != data.manifest["tokenizer"]["fingerprint"]:
        raise InputError(
            f"{data.tokenizer_dir} does not match the tokenizer recorded in "
            f"{data.directory / DATA_MANIFEST_JSON}; re-run `electra data prepare`"
        )
    s = special_ids(tok)
    return tok, SpecialTokens(pad=s.pad, cls=s.cls, sep=s.sep, mask=s.mask)


class PretrainTrainer:
    """One pre-training run: set up in the constructor (resuming when asked), trained by `fit()`."""

    def __init__(self, cfg: PretrainConfig) -> None:
        self.cfg = cfg = cfg.resolved()
        self.dist = init_distributed(cfg.device)
        self.precision = resolve_precision(cfg.precision, self.dist.device)
        self._open_data()
        inputs = [cfg.data, *([Path(cfg.init)] if cfg.init else [])]
        if self.dist.main:
            check_out_dir(cfg.out, cfg.resume, cfg.overwrite, inputs)
        self._build_model()
        # Only once the setup has succeeded: --overwrite clears the old run here.
        if self.dist.main:
            prepare_out_dir(cfg.out, cfg.resume, cfg.overwrite, inputs)
        self.dist.barrier()
        self.progress = Progress()
        self.batches = GlobalBatchOrder(len(self.data.train), cfg.batch_size, cfg.seed)
        self.state = TrainState(
            self.model, self.optimizer, self.scheduler, self.scaler, self.batches, self.progress
        )
        self.checkpoints = CheckpointManager(
            cfg.out, self.run_info, cfg.to_json(), cfg.keep_checkpoints, log=self.log
        )
        if cfg.resume:
            self.checkpoints.restore(self.state)
        self.metrics = MetricsLog(cfg.out / METRICS_JSONL)
        if self.dist.main:
            self._write_run_config()
            self.metrics.truncate_after(self.progress.step)
        device = self.dist.device
        self.meter = TrainMeter(
            self.dist, peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        )
        self.runner = self._step_runner()
        self.bar: Any = None
        self.last_record: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------------ setup

    def log(self, msg: str) -> None:
        """An INFO line of the `electra.pretrain` logger, on rank 0 only."""
        if self.dist.main:
            logger.info("%s", msg)

    def _open_data(self) -> None:
        cfg, d = self.cfg, self.dist
        self.data = PretrainingData.open(cfg.data)
        self.tokenizer, self.specials = data_tokenizer(self.data)
        self.special_ids = (self.specials.pad, self.specials.cls, self.specials.sep)
        self.vocab_size = self.tokenizer.get_vocab_size()
        # What the identity-only AUC ranks token ids by: their frequency in the training data.
        self.corpus_counts = (
            training_counts(self.data.train, self.special_ids, self.vocab_size)
            if cfg.objective == "electra"
            else None
        )
        self.seq_len = self.data.max_seq_len
        micro_batch, rem = divmod(cfg.batch_size, d.world * cfg.grad_accum)
        if rem or micro_batch == 0:
            raise InputError(
                f"--batch-size {cfg.batch_size} is not divisible by world size {d.world} x --grad-accum "
                f"{cfg.grad_accum}; choose a multiple of {d.world * cfg.grad_accum}"
            )
        if len(self.data.train) < cfg.batch_size:
            raise InputError(
                f"{cfg.data} holds {len(self.data.train)} training examples, fewer than one batch of "
                f"{cfg.batch_size}; lower --batch-size or prepare more data"
            )
        self.micro_batch = micro_batch

    def _build_model(self) -> None:
        cfg, device = self.cfg, self.dist.device
        enable_tf32(device)
        self.autocast = autocast(device, self.precision)
        # fp16's narrow range needs loss scaling; bf16 has fp32's range and does not.
        self.scaler = torch.amp.GradScaler(device.type) if self.precision == "fp16" else None
        torch.manual_seed(cfg.seed)
        self.model, self.disc_cfg, self.gen_cfg = build_pretrainer(
            cfg, self.vocab_size, self.seq_len, self.specials
        )
        if cfg.init:
            init_from_hf(self.model, cfg.init, self.vocab_size, self.data, self.log)
        self.model.to(device)
        self.plan = plan_step(device, self.dist.world, self.precision, cfg.compile, cfg.cuda_graphs)
        groups = optimizer_groups(
            self.model, cfg.lr, cfg.weight_decay, cfg.generator_lr_scale, cfg.generator_lr_scope
        )
        self.optimizer = adam(groups, cfg.lr, cfg.adam, eps=1e-6, capturable=self.plan.graphs)
        self.scheduler = build_scheduler(self.optimizer, cfg.warmup_steps, cfg.steps, cfg.schedule)
        device_learning_rates(self.optimizer)

    @property
    def run_info(self) -> dict[str, Any]:
        """What a resumed run must share with the checkpoint it resumes."""
        return {
            "size": self.cfg.size,
            "objective": self.cfg.objective,
            "embedding_sharing": self.cfg.embedding_sharing,
            "generator_lr_scale": self.cfg.generator_lr_scale,
            "generator_lr_scope": self.cfg.generator_lr_scope,
            "batch_size": self.cfg.batch_size,
            "seq_len": self.seq_len,
            "vocab_size": self.vocab_size,
        }

    def _write_run_config(self) -> None:
        write_run_config(
            self.cfg.out,
            {
                **self.cfg.to_json(),
                "run": self.run_info,
                "discriminator": asdict(self.disc_cfg),
                "generator": asdict(self.gen_cfg),
            },
        )

    def _step_runner(self) -> StepRunner:
        """The training step over the module it calls: the model, or DDP around it (compiled inside DDP when
        --compile runs on several ranks). Evaluation, checkpoints and the export use the plain model, whose
        parameters these wrappers share."""
        cfg, d = self.cfg, self.dist
        step_module: nn.Module = self.model
        if d.world > 1:
            inner = torch.compile(self.model) if cfg.compile else self.model
            step_module = nn.parallel.DistributedDataParallel(
                inner, device_ids=[d.local_rank] if d.device.type == "cuda" else None
            )
        shape = StepShape(
            micro_batches=cfg.grad_accum,
            rows=self.micro_batch,
            seq_len=self.seq_len,
            vocab_size=self.vocab_size,
            objective=self.model.objective,
            samples=self.model.samples,
        )
        return StepRunner(
            model=self.model,
            step_module=step_module,
            optimizer=self.optimizer,
            scaler=self.scaler,
            meter=self.meter,
            plan=self.plan,
            shape=shape,
            device=d.device,
            precision=self.precision,
            world=d.world,
            max_grad_norm=cfg.max_grad_norm,
            log=self.log,
        )

    # --------------------------------------------------------------------------------------------- training

    def train_step(self) -> None:
        """One optimizer step on the next global batch: this rank's micro-batches, then the update."""
        cfg = self.cfg
        global_idx = self.batches.next_global_batch()
        n_tokens, n_masked = batch_counts(self.data.train, global_idx, self.special_ids, cfg.mask_prob)
        batches, seeds = self.micro_batches(global_idx)
        # Known from the data's lengths: a batch of full rows runs attention without a mask.
        padding = n_tokens < cfg.batch_size * self.seq_len
        self.runner.run(batches, seeds, n_masked, n_tokens, padding)
        self.scheduler.step()
        self.progress.step += 1
        self.progress.tokens += n_tokens
        gen_cfg = self.gen_cfg if cfg.objective == "electra" else None
        flops = electra_step_flops(self.disc_cfg, gen_cfg, n_tokens, self.seq_len, n_masked)
        self.meter.add_step(n_tokens, flops)

    def micro_batches(self, global_idx: np.ndarray) -> tuple[list[dict[str, torch.Tensor]], list[int]]:
        """This rank's micro-batches of a global batch, on the device, and the seed of each one's masking."""
        cfg, d = self.cfg, self.dist
        batches, seeds = [], []
        for micro in range(cfg.grad_accum):
            rows = micro_slice(global_idx, micro, d.rank, d.world, self.micro_batch)
            batches.append(load_rows(self.data.train, rows, d.device))
            seeds.append(masking_seed(cfg.seed, self.progress.step, micro * d.world + d.rank))
        return batches, seeds

    @torch.no_grad()
    def evaluate(self) -> dict[str, Any]:
        """Metrics on the first `eval_batches` validation batches, with fixed masking: comparable across
        steps; for ELECTRA the detection AUC over maskable tokens, the identity-only AUC beside it and the
        phase they give (diagnostics.identity_auc). {} when no rank had a validation token."""
        cfg, d = self.cfg, self.dist
        self.model.eval()
        # Zeros for every key: a rank whose shard has run out of validation rows still joins the reductions.
        acc: dict[str, torch.Tensor] = {k: torch.zeros((), device=d.device) for k in STAT_KEYS}
        electra = cfg.objective == "electra"
        hist = torch.zeros(2, BINS, device=d.device) if electra else None
        # Per fold of alternate batches (identity_auc.held_apart_auc).
        identity = (
            torch.zeros(FOLDS, 3, self.vocab_size, dtype=torch.float64, device=d.device) if electra else None
        )
        n = len(self.data.val)
        for b in range(cfg.eval_batches):
            lo = (b * d.world + d.rank) * self.micro_batch
            if lo >= n:
                break
            batch = load_rows(self.data.val, np.arange(lo, min(lo + self.micro_batch, n)), d.device)
            rng = torch.Generator(device=d.device).manual_seed(
                masking_seed(cfg.seed + 1, 0, b * d.world + d.rank)
            )
            with self.autocast:
                out = self.model(batch, rng, diagnostics=True)
            for k, v in out.stats.items():
                acc[k] = acc[k] + v.float()
            if hist is not None and out.disc_logits is not None and out.disc_labels is not None:
                hist += logit_histograms(out.disc_logits, out.disc_labels)
            if identity is not None and out.identity_masses is not None:
                identity[b % FOLDS] += out.identity_masses
        self.model.train()
        sums = d.reduce_sums(acc)
        if hist is not None and identity is not None:
            d.sum_(hist)
            d.sum_(identity)
        if not sums["num_tokens"]:
            return {}
        rec = {"split": "val", "step": self.progress.step, **ratios(sums)}
        if hist is not None and identity is not None:
            rec["disc_auc"] = auc_from_histograms(hist)
            best, by_ratio, held_apart = identity_bound(identity, self.corpus_counts)
            rec["identity_auc"] = best
            rec["identity_auc_ratio"], rec["identity_auc_held_apart"] = by_ratio, held_apart
            rec["phase"] = phase(rec["disc_auc"], rec["identity_auc"])
        return rec

    def log_metrics(self, record: dict[str, Any]) -> None:
        """Append a record to metrics.jsonl (rank 0; records are the same on every rank)."""
        if not self.dist.main or not record:
            return
        for level, message in self.state.collapse.observe(record):
            logger.log(level, "%s", message)
        self.metrics.append(record)
        if self.bar is not None and record["split"] == "train":
            self.bar.set_postfix_str(progress_postfix(record), refresh=False)

    def save(self, reason: str) -> None:
        """Checkpoint the whole run state (rank 0 writes; every rank waits for it)."""
        if self.dist.main:
            path = self.checkpoints.save(self.progress.step, self.state)
            self.log(f"checkpoint {path} ({reason})")
        self.dist.barrier()

    # ------------------------------------------------------------------------------------------------- loop

    def fit(self) -> dict[str, Any]:
        """Train to --steps or until a stop, checkpointing on the way; export the models at the end.

        Returns {"step", "stopped", "last" (the last train record), "out"}."""
        cfg = self.cfg
        stopped = False
        self.bar = self._progress_bar()
        self.meter.start_window()
        self.model.train()
        with StopSignal() as stop:
            while self.progress.step < cfg.steps:
                self.train_step()
                self._report()
                reason = self._stop_reason(stop)
                if reason is not None:
                    self.save(reason)
                    stopped = True
                    break
                if self.progress.step % cfg.checkpoint_every == 0 and self.progress.step < cfg.steps:
                    self.save("periodic")
        if self.bar is not None:
            self.bar.close()
        if not stopped:
            self.save("end of training")
            if self.dist.main:
                export_hf(self.model, self.tokenizer, cfg.out)
        self.dist.barrier()
        return {"step": self.progress.step, "stopped": stopped, "last": self.last_record, "out": str(cfg.out)}

    def _report(self) -> None:
        """After a step: its train record and a validation pass, when they are due."""
        cfg, step = self.cfg, self.progress.step
        if step % cfg.log_every == 0 or step == cfg.steps:
            lr = float(self.scheduler.get_last_lr()[0])
            self.last_record = self.meter.record(step, self.progress.tokens, lr)
            self.log_metrics(self.last_record)
        if self.bar is not None:
            self.bar.update(1)
        if len(self.data.val) and (step % cfg.eval_every == 0 or step == cfg.steps):
            self.log_metrics(self.evaluate())

    def _stop_reason(self, stop: StopSignal) -> str | None:
        """Why to stop after this step, or None. Every rank gets the same answer: a signal may reach one."""
        cfg, step = self.cfg, self.progress.step
        stop.requested = self.dist.any(stop.requested)
        if cfg.stop_at is not None and cfg.stop_at <= step < cfg.steps:
            stop.requested = True
        if not stop.requested:
            return None
        if cfg.stop_at is not None and step >= cfg.stop_at:
            return f"--stop-at {cfg.stop_at}"
        return "stopped by signal"

    def _progress_bar(self) -> Any:
        """A bar on a terminal, a line every 30 s elsewhere (electra.progress); None off rank 0 or quiet."""
        if not (self.dist.main and self.cfg.progress):
            return None
        return progress(total=self.cfg.steps, initial=self.progress.step, desc="pretrain", unit="step")
