"""Inference latency and throughput: PyTorch eager vs ONNX Runtime (unfused, fused), per batch x length.

One random-weight classifier (ELECTRA-Small by default: 12 layers, hidden 256, embedding 128, 2 labels) is
saved as a model directory and exported with `export_bundle` once per precision. Variants:

  CPU:  pytorch_fp32          our model, SDPA attention, torch.inference_mode
        ort_unfused_fp32      the raw TorchScript export (before optimize_model), session at ORT_ENABLE_BASIC
                              (constant folding and redundant-node removal only, so neither the transformer
                              optimizer's nor ORT's own extended fusions run; checked: no Attention node)
        ort_fused_fp32        the fp32 bundle's model.onnx (fused Attention, SkipLayerNorm, BiasGelu)
        ort_fused_int8        the int8 bundle (dynamic quantisation of the fused graph)
  CUDA: pytorch_fp32, pytorch_fp16_autocast, pytorch_bf16_autocast, ort_unfused_fp32, ort_fused_fp32,
        ort_fused_fp16; ORT on the CUDAExecutionProvider with inputs and output bound on the GPU (IO binding),
        so the timed call is the graph, not host<->device copies. No int8 on CUDA: the dynamic-quantisation
        ops (MatMulInteger, DynamicQuantizeMatMul) have no CUDA kernels and would fall back to the CPU.

Each round visits every cell and, within a cell, every variant back to back (the order rotates per round), so
a noisy stretch of time hits all variants alike; medians across rounds are quoted. Every call is timed on its
own (p50 is the median over rounds of each round's median; p99 pools all calls of all rounds). Speed-ups vs
pytorch_fp32 are paired: the ratio of p50s within each round, median over rounds.

    python -m bench.inference                                   # CPU, every core, ~8 minutes on 2 cores
    python -m bench.inference --device cuda --out bench/results/inference_cuda.json
    python -m bench.inference --size tiny --batch-sizes 1 --seq-lens 16 --rounds 2 --block-seconds 0.1
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.benchlib import (
    ROOT,
    int_list,
    model_shape,
    random_models,
    result_header,
    usable_cores,
    write_result,
)
from electra.bundle import INPUT_NAMES, read_bundle
from electra.config import ElectraConfig
from electra.files import MODEL_ONNX
from electra.hf_format import load_hf_dir
from electra.model import ElectraClassifier
from electra.onnx.export import export_bundle
from electra.onnx.fusion import FUSED_OPS
from electra.onnx.torchscript import export_torchscript
from electra.sizes import SIZES
from electra.tokenizer import SPECIAL_TOKENS, load_tokenizer, special_ids

BERT_VOCAB = ROOT.parent / "shared" / "data" / "models" / "bert-uncased-vocab" / "vocab.txt"
VOCAB = 30522
LABELS = {0: "negative", 1: "positive"}
OPSET = 17  # export_bundle's default, so the unfused graph comes from the same exporter settings
REFERENCE = "pytorch_fp32"
# The CPU target: the int8 bundle at least twice as fast as PyTorch fp32 for one 128-token request.
TARGETS = {"cpu": {"variant": "ort_fused_int8", "batch_size": 1, "seq_len": 128, "min_speedup": 2.0}}
# A warm-up call before each timed block wakes this variant's thread pool (the previous variant's may still
# be spinning) and refills caches; above this latency one call is long enough that the effect is noise.
BLOCK_WARMUP_BELOW_S = 0.25
MAX_BLOCK_S = 5.0  # with time to spare, more rounds say more about the noise than longer blocks do
FP32_PARITY_WARN = 1e-3
ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}

log = logging.getLogger("bench.inference")


class BenchError(Exception):
    """A setup problem the run cannot continue past; printed as one line."""


# ----------------------------------------------------------------------------------------------------------
# Model, bundles, inputs
# ----------------------------------------------------------------------------------------------------------


def build_model_dir(work: Path, size: str, max_seq: int) -> Path:
    """A random-weight classifier directory with a tokenizer, ready for export_bundle."""
    vocab = BERT_VOCAB
    if not vocab.is_file():
        # Any WordPiece vocabulary of BERT's size does: inputs are random ids, the text is never read.
        vocab = work / "vocab.txt"
        filler = [f"tok{i}" for i in range(VOCAB - len(SPECIAL_TOKENS))]
        vocab.write_text("\n".join([*SPECIAL_TOKENS, *filler]) + "\n", encoding="utf-8")
    tokenizer = load_tokenizer(vocab)
    cfg = ElectraConfig.from_size(size, vocab_size=tokenizer.get_vocab_size(), id2label=LABELS)
    if cfg.max_position_embeddings < max_seq:
        raise BenchError(
            f"--seq-lens goes to {max_seq} but the model has {cfg.max_position_embeddings} positions"
        )
    return random_models(work, {"model": ("classifier", cfg)}, tokenizer, jitter=0.05)["model"]


def random_inputs(batch: int, seq: int, cls_id: int, sep_id: int, vocab: int, seed: int) -> dict[str, Any]:
    """Random ids framed by [CLS] ... [SEP], one segment, every position real (a full attention mask)."""
    rng = np.random.default_rng(seed)
    # Above BERT's [unusedN] and special rows, so the ids look like ordinary word pieces.
    ids = rng.integers(min(1000, vocab // 2), vocab, size=(batch, seq), dtype=np.int64)
    ids[:, 0] = cls_id
    ids[:, -1] = sep_id
    return {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "token_type_ids": np.zeros_like(ids),
    }


def op_histogram(model_path: Path) -> dict[str, int]:
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(str(model_path), load_external_data=False).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


def check_unfused(raw_path: Path, work: Path, ort: Any, layers: int) -> dict[str, int]:
    """The graph ORT actually runs for the unfused variant, as op counts; refuses any fused attention.

    Basic-level optimisations run before the graph is partitioned between providers, so what a CPU session
    saves here is what the CUDA session starts from too.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    saved = work / "unfused_after_basic.onnx"
    options.optimized_model_filepath = str(saved)
    ort.InferenceSession(str(raw_path), options, providers=["CPUExecutionProvider"])
    counts = op_histogram(saved)
    fused = {op: counts[op] for op in FUSED_OPS if op in counts and op != "LayerNormalization"}
    if fused:
        raise BenchError(f"the unfused graph holds fused ops after ORT_ENABLE_BASIC: {fused}")
    if counts.get("Softmax", 0) != layers:
        raise BenchError(
            f"expected {layers} Softmax nodes (one per layer) in the unfused graph, got {counts}"
        )
    return counts


# ----------------------------------------------------------------------------------------------------------
# Variants: each turns one cell's inputs into a zero-argument call that runs the model to completion
# ----------------------------------------------------------------------------------------------------------

Call = Callable[[], Any]
Cell = tuple[int, int]  # (batch size, sequence length)


@dataclass
class Variant:
    name: str
    info: dict[str, Any]
    make_call: Callable[[dict[str, Any]], Call]
    parity_max_abs_diff: float = 0.0
    calls: dict[tuple[int, int], Call] = field(default_factory=dict)


def torch_variant(
    name: str, model: torch.nn.Module, device: torch.device, amp_dtype: torch.dtype | None
) -> Variant:
    def autocast() -> AbstractContextManager[Any]:
        return torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else nullcontext()

    def make_call(inputs: dict[str, Any]) -> Call:
        args = [torch.from_numpy(inputs[n]).to(device) for n in INPUT_NAMES]

        def call() -> Any:
            with torch.inference_mode(), autocast():
                out = model(*args)
            if device.type == "cuda":
                # Kernels are queued asynchronously: without this the timer would stop at launch.
                torch.cuda.synchronize(device)
            return out

        return call

    info = {
        "runtime": "pytorch eager",
        "attention": "sdpa",
        "precision": "fp32" if amp_dtype is None else f"{str(amp_dtype).removeprefix('torch.')} autocast",
        "inference_mode": True,
    }
    if device.type == "cuda":
        info["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32  # left at torch's default (off)
    return Variant(name, info, make_call)


def ort_session(
    ort: Any, path: Path, device: torch.device, threads: int, level: Any, provider_options: dict[str, Any]
) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    # One graph, one request at a time: a second pool would only compete with the first for the same cores.
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = level
    if device.type == "cuda":
        providers: list[Any] = [("CUDAExecutionProvider", provider_options), "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    session = ort.InferenceSession(str(path), options, providers=providers)
    if device.type == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
        # ORT falls back to the CPU with only a logged warning when the CUDA provider cannot load (missing
        # CUDA/cuDNN libraries); a CPU timing labelled cuda would be worse than no timing.
        raise BenchError(
            f"onnxruntime created {path.name}'s session on {session.get_providers()}, not CUDA: the CUDA "
            "provider failed to load (see the warning above; CUDA 12 / cuDNN 9 libraries must be findable, "
            "e.g. via a CUDA build of torch imported first)"
        )
    return session


class BoundCall:
    """One cell's inputs and output bound to the session's device once; a call is then only the graph.

    Inputs are OrtValues on the device: the ids are copied there here, not inside every timed call (on the
    CPU an OrtValue wraps the numpy buffer, so this object keeps the arrays alive). The output is preallocated
    too: binding it by name alone would make ORT allocate a fresh buffer on every run.
    """

    def __init__(
        self, ort: Any, session: Any, inputs: dict[str, Any], ort_device: str, device_id: int
    ) -> None:
        self.session = session
        self.binding = session.io_binding()
        names = [i.name for i in session.get_inputs()]
        self.arrays = [np.ascontiguousarray(inputs[n]) for n in names]
        self.values = [ort.OrtValue.ortvalue_from_numpy(a, ort_device, device_id) for a in self.arrays]
        for name, value in zip(names, self.values, strict=True):
            self.binding.bind_ortvalue_input(name, value)
        output = session.get_outputs()[0]
        batch, seq = self.arrays[0].shape
        # Dynamic axes are named strings: the first is the batch, any other the sequence (a discriminator's).
        shape = [batch if i == 0 else d if isinstance(d, int) else seq for i, d in enumerate(output.shape)]
        self.result = ort.OrtValue.ortvalue_from_shape_and_type(
            shape, ORT_DTYPES[output.type], ort_device, device_id
        )
        self.binding.bind_ortvalue_output(output.name, self.result)
        self.binding.synchronize_inputs()

    def __call__(self) -> Any:
        self.session.run_with_iobinding(self.binding)
        # Run waits for the provider's stream before returning; synchronizing the outputs as well makes "the
        # logits are ready" explicit instead of resting on that default.
        self.binding.synchronize_outputs()
        return self.binding


def ort_variant(
    ort: Any,
    name: str,
    path: Path,
    device: torch.device,
    threads: int,
    level_name: str,
    io_binding: bool,
    info: dict[str, Any],
) -> Variant:
    device_id = device.index or 0
    provider_options = {"device_id": device_id}
    session = ort_session(
        ort, path, device, threads, getattr(ort.GraphOptimizationLevel, level_name), provider_options
    )
    input_names = [i.name for i in session.get_inputs()]
    output = session.get_outputs()[0]
    ort_device = "cuda" if device.type == "cuda" else "cpu"

    def make_call(inputs: dict[str, Any]) -> Call:
        if not io_binding:
            feed = {n: inputs[n] for n in input_names}
            return lambda: session.run([output.name], feed)[0]
        return BoundCall(ort, session, inputs, ort_device, device_id)

    info = {
        **info,
        "runtime": f"onnxruntime {ort.__version__}",
        "providers": session.get_providers(),
        "graph_optimization_level": level_name,
        "intra_op_num_threads": threads,
        "inter_op_num_threads": 1,
        "io_binding": io_binding,
    }
    if device.type == "cuda":
        info["provider_options"] = session.get_provider_options().get("CUDAExecutionProvider", {})
    return Variant(name, info, make_call)


def to_numpy(out: Any) -> np.ndarray:
    if isinstance(out, torch.Tensor):
        return out.float().cpu().numpy()
    if isinstance(out, np.ndarray):
        return out.astype(np.float32)
    return out.copy_outputs_to_cpu()[0].astype(np.float32)  # a BoundCall's IOBinding, maybe on the device


# ----------------------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------------------


def time_block(call: Call, iters: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    latencies = []
    for _ in range(iters):
        t = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - t)
    return latencies


def summarise(
    batch: int, seq: int, iters: int, warmup: int, per_round: dict[str, list[list[float]]]
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "batch_size": batch,
        "seq_len": seq,
        "iters_per_round": iters,
        "warmup_calls_per_block": warmup,
        "variants": {},
    }
    ref_p50 = [statistics.median(lat) for lat in per_round[REFERENCE]]
    for name, rounds in per_round.items():
        p50s = [statistics.median(lat) for lat in rounds]
        seq_s = [batch * len(lat) / sum(lat) for lat in rounds]
        pooled = [x for lat in rounds for x in lat]
        entry["variants"][name] = {
            "p50_ms": 1e3 * statistics.median(p50s),
            "p99_ms": 1e3 * float(np.percentile(pooled, 99)),
            "calls": len(pooled),
            "p50_ms_per_round": [1e3 * x for x in p50s],
            "throughput_seq_per_s": statistics.median(seq_s),
            "throughput_tokens_per_s": seq * statistics.median(seq_s),
            "speedup_vs_pytorch_fp32": statistics.median(r / v for r, v in zip(ref_p50, p50s, strict=True)),
        }
    return entry


def print_tables(results: list[dict[str, Any]], names: list[str]) -> None:
    width = max(len(n) for n in names) + 1
    head = f"{'batch':>5} {'seq':>4} | " + " ".join(f"{n:>{width}}" for n in names)
    print("\np50 latency, ms (median over rounds)")
    print(head)
    for e in results:
        cells = " ".join(f"{e['variants'][n]['p50_ms']:>{width}.2f}" for n in names)
        print(f"{e['batch_size']:>5} {e['seq_len']:>4} | {cells}")
    print(f"\nspeed-up vs {REFERENCE} (paired p50 ratio, median over rounds; >1 is faster)")
    print(head)
    for e in results:
        cells = " ".join(f"{e['variants'][n]['speedup_vs_pytorch_fp32']:>{width}.2f}" for n in names)
        print(f"{e['batch_size']:>5} {e['seq_len']:>4} | {cells}")


# ----------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--size", default="small", choices=list(SIZES))
    ap.add_argument("--batch-sizes", type=int_list, default=[1, 8, 32])
    ap.add_argument("--seq-lens", type=int_list, default=[16, 128, 512])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--iters",
        type=int,
        default=None,
        help="timed calls per variant per cell per round, every cell (default: sized per cell from its "
        "warm-up latency, see --budget-minutes)",
    )
    ap.add_argument(
        "--block-seconds",
        type=float,
        default=None,
        help="seconds one variant's block of calls should take, giving each cell ceil(this / its latency) "
        "calls (default: the largest that fits --budget-minutes)",
    )
    ap.add_argument(
        "--budget-minutes",
        type=float,
        default=8.0,
        help="whole run, setup included: the timed rounds get what export and warm-up leave (default 8)",
    )
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument(
        "--threads", type=int, default=None, help="torch and ORT intra-op threads (default: cores)"
    )
    ap.add_argument(
        "--io-binding",
        choices=["auto", "on", "off"],
        default="auto",
        help="ORT IO binding (auto: on for CUDA; on the CPU session.run with numpy, as a server calls it)",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.rounds < 1 or (args.iters is not None and args.iters < 1) or args.max_iters < 1:
        ap.error("--rounds, --iters and --max-iters must be positive")
    if (args.block_seconds is not None and args.block_seconds <= 0) or args.budget_minutes <= 0:
        ap.error("--block-seconds and --budget-minutes must be positive")
    return args


def check_cuda(ort: Any) -> None:
    if not torch.cuda.is_available():
        raise BenchError(
            f"--device cuda, but torch {torch.__version__} sees no CUDA device "
            f"(built with CUDA {torch.version.cuda}); run on a GPU machine with a CUDA build of torch"
        )
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise BenchError(
            f"--device cuda, but onnxruntime {ort.__version__} has no CUDAExecutionProvider "
            f"({ort.get_available_providers()}); install onnxruntime-gpu (never next to onnxruntime)"
        )


def build_variants(
    ort: Any, work: Path, args: argparse.Namespace, device: torch.device, threads: int, io_binding: bool
) -> tuple[list[Variant], ElectraClassifier, Path]:
    """Export the bundles and the raw graph, then one Variant per runtime/precision (PyTorch's first)."""
    precisions = ["fp32", "fp16"] if device.type == "cuda" else ["fp32", "int8"]
    model_dir = build_model_dir(work, args.size, max(args.seq_lens))
    bundles = {p: work / f"bundle-{p}" for p in precisions}
    for precision, bundle in bundles.items():
        export_bundle(model_dir, bundle, precision=precision, opset=OPSET)
    model = load_hf_dir(model_dir, kind="classifier")
    assert isinstance(model, ElectraClassifier)
    raw_path = work / "raw.onnx"
    # export_bundle's own first step, stopped before optimize_model: the graph ORT would run unfused.
    export_torchscript(model, raw_path, OPSET)
    model.set_attention_impl("sdpa")  # the exporter restores it as well; the PyTorch variant relies on it
    unfused_ops = check_unfused(raw_path, work, ort, model.config.num_hidden_layers)

    model.to(device)
    variants = [torch_variant(REFERENCE, model, device, None)]
    if device.type == "cuda":
        variants.append(torch_variant("pytorch_fp16_autocast", model, device, torch.float16))
        variants.append(torch_variant("pytorch_bf16_autocast", model, device, torch.bfloat16))
    unfused_info = {
        "graph": "raw TorchScript export (math attention), before optimize_model",
        "precision": "fp32",
        "op_counts_after_basic_optimization": unfused_ops,
    }
    variants.append(
        ort_variant(
            ort, "ort_unfused_fp32", raw_path, device, threads, "ORT_ENABLE_BASIC", io_binding, unfused_info
        )
    )
    for precision, bundle in bundles.items():
        meta = read_bundle(bundle).to_dict()
        info = {
            "graph": f"export_bundle {precision} bundle (optimize_model, model_type bert)",
            "precision": precision,
            "fused_operators": {k: v for k, v in meta["fused_operators"].items() if v},
            "bundle_parity": meta["parity"],
        }
        # ORT_ENABLE_ALL is ORT's default level: what a server session gets without asking for anything.
        path = bundle / MODEL_ONNX
        variants.append(
            ort_variant(
                ort, f"ort_fused_{precision}", path, device, threads, "ORT_ENABLE_ALL", io_binding, info
            )
        )
    return variants, model, model_dir


def warm_up(
    variants: list[Variant], cells: list[Cell], inputs: dict[Cell, dict[str, Any]]
) -> dict[Cell, list[float]]:
    """Untimed round: every session meets every shape once (ORT grows its arenas, torch its allocator
    caches), every output is checked against PyTorch's, and each call is timed to size the timed blocks.
    Returns every variant's latency (in order) per cell."""
    estimate = {}
    for cell in cells:
        reference = None
        latencies = []
        for v in variants:
            v.calls[cell] = v.make_call(inputs[cell])
            # The first call at a shape pays for allocations; a second one, where it is cheap, is the better
            # estimate.
            for _ in range(2):
                t = time.perf_counter()
                out = v.calls[cell]()
                latency = time.perf_counter() - t
                if latency >= 1.0:
                    break
            latencies.append(latency)
            logits = to_numpy(out)
            if not np.isfinite(logits).all():
                raise BenchError(f"{v.name} gave non-finite logits at batch {cell[0]}, seq {cell[1]}")
            if reference is None:
                reference = logits
            v.parity_max_abs_diff = max(v.parity_max_abs_diff, float(np.abs(logits - reference).max()))
        estimate[cell] = latencies
        timings = ", ".join(f"{v.name} {1e3 * x:.1f}" for v, x in zip(variants, latencies, strict=True))
        print(f"warm-up batch {cell[0]:>3} seq {cell[1]:>4} (ms): {timings}", flush=True)
    for v in variants:
        if v.info["precision"] == "fp32" and v.parity_max_abs_diff > FP32_PARITY_WARN:
            log.warning("%s differs from %s by %.3g", v.name, REFERENCE, v.parity_max_abs_diff)
    return estimate


def plan_blocks(
    estimate: dict[Cell, list[float]],
    rounds: int,
    seconds: float,
    block_s: float | None,
    iters: int | None,
    max_iters: int,
) -> tuple[dict[Cell, tuple[int, int]], float | None, float]:
    """(calls, untimed warm-up calls) per block for every cell, the block time used and the expected time.

    Every variant of a cell gets the same number of calls: `iters` when given, else ceil(block time / the
    cell's median latency), 1 at least, so a cell whose one call outlasts the block (batch 32 x 512 on a CPU)
    runs once per round. Without an explicit block time, the largest one whose rounds fit in `seconds`.
    """

    def plan_for(block: float) -> dict[Cell, tuple[int, int]]:
        plan = {}
        for cell, latencies in estimate.items():
            typical = statistics.median(latencies)
            calls = iters or max(1, min(max_iters, math.ceil(block / typical)))
            plan[cell] = (calls, 1 if typical < BLOCK_WARMUP_BELOW_S else 0)
        return plan

    def cost(plan: dict[Cell, tuple[int, int]]) -> float:
        return rounds * sum((n + w) * sum(estimate[cell]) for cell, (n, w) in plan.items())

    if iters:
        block_s = None
    elif block_s is None:
        lo, hi = 0.0, MAX_BLOCK_S
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cost(plan_for(mid)) <= seconds else (lo, mid)
        block_s = lo
    plan = plan_for(block_s or 0.0)
    return plan, block_s, cost(plan)


def time_rounds(
    variants: list[Variant], cells: list[Cell], plan: dict[Cell, tuple[int, int]], rounds: int
) -> dict[Cell, dict[str, list[list[float]]]]:
    """Per cell, per variant, one list of call latencies per round."""
    per_round: dict[Cell, dict[str, list[list[float]]]] = {c: {v.name: [] for v in variants} for c in cells}
    for r in range(rounds):
        t = time.perf_counter()
        # Rotated so that no variant always runs first, or always right after the same other one.
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for cell in cells:
            iters, warm = plan[cell]
            for v in order:
                per_round[cell][v.name].append(time_block(v.calls[cell], iters, warm))
        print(f"round {r + 1}/{rounds} done in {time.perf_counter() - t:.0f}s", flush=True)
    return per_round


def check_target(device_type: str, results: list[dict[str, Any]]) -> dict[str, Any] | None:
    target = TARGETS.get(device_type)
    if target is None:
        return None
    cell = (target["batch_size"], target["seq_len"])
    entry = next((e for e in results if (e["batch_size"], e["seq_len"]) == cell), None)
    if entry is None:
        return {**target, "measured": None, "met": None}
    measured = entry["variants"][target["variant"]]["speedup_vs_pytorch_fp32"]
    met = measured >= target["min_speedup"]
    print(
        f"\ntarget: {target['variant']} >= {target['min_speedup']}x {REFERENCE} at batch {cell[0]}, seq "
        f"{cell[1]}: {measured:.2f}x ({'met' if met else 'NOT met'})"
    )
    return {**target, "measured": measured, "met": met}


def model_record(size: str, model: Any) -> dict[str, Any]:
    """What the results file says of the model timed."""
    cfg = model.config
    return {
        "size": size,
        "kind": "classifier",
        **model_shape(cfg),
        "num_labels": cfg.num_labels,
        "parameters": model.num_parameters(),
        "weights": "random: HF-style init plus N(0, 0.05) noise",
        "opset": OPSET,
    }


def timing_record(args: argparse.Namespace, block_s: float | None) -> dict[str, Any]:
    """How the calls were timed and what each figure is."""
    return {
        "rounds": args.rounds,
        "budget_minutes": args.budget_minutes,
        "block_seconds": block_s,
        "iters": args.iters,
        "p50_ms": "median over rounds of each round's median per-call latency",
        "p99_ms": "99th percentile of all calls of all rounds (with few calls: close to the max)",
        "throughput": "batch_size x calls / time of those calls, per round; median over rounds",
        "speedup_vs_pytorch_fp32": "pytorch_fp32 p50 / variant p50 in each round; median over rounds",
        "order": (
            "cells in turn within a round; variants back to back within a cell, order rotated every "
            f"round; one untimed call before a block when the cell's call takes < {BLOCK_WARMUP_BELOW_S}s"
        ),
    }


def versions(ort: Any) -> dict[str, str]:
    """The libraries the timed calls ran on."""
    return {
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    # Imported after torch on purpose: a CUDA build of torch loads the CUDA and cuDNN libraries that
    # onnxruntime-gpu's CUDA provider then finds already in the process.
    import onnxruntime as ort

    started = time.perf_counter()
    load_start = os.getloadavg()
    device = torch.device(args.device)
    if device.type == "cuda":
        check_cuda(ort)
        device = torch.device("cuda", torch.cuda.current_device())
    threads = args.threads or usable_cores()
    torch.set_num_threads(threads)
    io_binding = args.io_binding == "on" or (args.io_binding == "auto" and device.type == "cuda")
    cells = [(b, s) for b in args.batch_sizes for s in args.seq_lens]

    with tempfile.TemporaryDirectory(prefix="electra-bench-") as tmp:
        work = Path(tmp)
        variants, model, model_dir = build_variants(ort, work, args, device, threads, io_binding)
        export_s = time.perf_counter() - started
        print(f"model, bundles and raw graph ready in {export_s:.0f}s", flush=True)
        specials = special_ids(load_tokenizer(model_dir))
        cfg = model.config
        inputs = {
            (b, s): random_inputs(b, s, specials.cls, specials.sep, cfg.vocab_size, seed=1000 * b + s)
            for b, s in cells
        }
        estimate = warm_up(variants, cells, inputs)
        left_s = 60 * args.budget_minutes - (time.perf_counter() - started)
        plan, block_s, expected_s = plan_blocks(
            estimate, args.rounds, left_s, args.block_seconds, args.iters, args.max_iters
        )
        if expected_s > max(left_s, 0.0) * 1.05:
            log.warning(
                "the timed rounds need ~%.0fs, more than the %.0fs left of --budget-minutes %g",
                expected_s,
                left_s,
                args.budget_minutes,
            )
        blocks = f"{args.iters} calls" if block_s is None else f"~{block_s:.2f}s"
        print(
            f"timing {len(cells)} cells x {len(variants)} variants x {args.rounds} rounds, "
            f"blocks of {blocks}: ~{expected_s:.0f}s",
            flush=True,
        )
        per_round = time_rounds(variants, cells, plan, args.rounds)

    names = [v.name for v in variants]
    results = [summarise(b, s, *plan[(b, s)], per_round[(b, s)]) for b, s in cells]
    print_tables(results, names)
    target = check_target(device.type, results)
    return {
        **result_header("inference", torch.cuda.get_device_name(device) if device.type == "cuda" else None),
        "device_type": device.type,
        "threads": {
            "cores": usable_cores(),
            "torch_num_threads": torch.get_num_threads(),
            "ort_intra_op_num_threads": threads,
            "ort_inter_op_num_threads": 1,
        },
        "versions": versions(ort),
        "model": model_record(args.size, model),
        "inputs": (
            "random token ids framed by [CLS]/[SEP], token type 0, full attention mask (every row "
            "seq_len long). Note: with padded rows the fused ORT attention reads per-row lengths (and "
            "can skip padding on GPU) while PyTorch's SDPA computes every position; not measured here."
        ),
        "timing": timing_record(args, block_s),
        "variants": {
            v.name: {**v.info, "max_abs_logit_diff_vs_pytorch_fp32": v.parity_max_abs_diff} for v in variants
        },
        "target": target,
        "results": results,
        "setup_s": export_s,
        "wall_s": time.perf_counter() - started,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args()
    try:
        record = run(args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = write_result(record, args.out, f"inference_{args.device}")
    print(f"-> {out} ({record['wall_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
