"""Every GPU check in two commands, one per device call: `python -m bench.gpu_suite --only serve --out DIR`
and `--only train` (CALLS; without --only, every step, within one budget).

The steps, in order (each a command of its own with its own time limit and results file; a step that fails or
runs out of time is recorded and the next one runs):

    environment       the GPU (nvidia-smi), the packages' versions, ONNX Runtime's providers, the commit
    train_step_check  the compiled and CUDA-graphed training steps against the eager one (equal losses,
                      dropout too), and no host synchronisation between records (bench.train_step_check)
    pretrain_small    ELECTRA-Small pre-training throughput at batch 128: eager, graphs, compiled + graphs,
                      the naive transformers assembly; MFU, compile time, the top kernels
    pretrain_base     the same for ELECTRA-Base (bench.pretrain_throughput)
    pipeline          a real run on the shared Wikipedia sample: prepare, pre-train with a stop and a resume,
                      fine-tune SST-2, export fp16, serve on the device and answer /detect and /classify
                      (bench.gpu_pipeline)
    inference         PyTorch fp32 / fp16 / bf16 against ONNX Runtime fused fp16 with IO binding
                      (bench.inference)
    serve             the server's throughput on the device against the naive and bare servers
                      (bench.serve_throughput --quick)
    serve_workers     --workers 4 (model instances on one GPU), with batches in length order (the
                      default) and in arrival order (--batch-order arrival), and with metric updates
                      written at once (--metrics-flush-ms 0), against one worker, at 64 and 256
                      concurrent clients on /classify and /detect (bench.serve_throughput --quick;
                      8 workers about matched 4 on the 2026-11-28 H100)
    serve_warmup      the first request of each input length after ready, with and without length buckets
                      (bench.serve_warmup)
    pretrain_sweep    batch sizes 256 and 512 for Small, the CUDA-graphed step

The suite installs nothing: what the machine lacks (onnxruntime-gpu, say) makes the steps that need it fail
with their reason. It runs in at most --budget-s seconds (default 570: under the device's 10 minutes a
call): a step's limit is cut to what is left, and a step that no time is left for is recorded as not run.
DIR receives suite.json (every step's command, status, time and log tail, with its results file embedded,
rewritten after every step), each step's results file and logs/. Commits: the tree's own, else
ELECTRA_COMMIT (bench.benchlib.git_commit), passed on to every step.

`--device cpu --quick` runs the same steps at toy sizes (CI runs it: a few minutes on 2 cores); `--only`
runs some steps, or a call's (serve: the steps that need onnxruntime-gpu; train); `--limit-scale X`
multiplies every limit, the real run's stages' limits and the default budget by X (a machine slower than the
one they were set for, or one shared with other jobs).

    python -m bench.gpu_suite --only serve --out /tmp/gpu-suite/serve
    python -m bench.gpu_suite --only train --out /tmp/gpu-suite/train
    python -m bench.gpu_suite --device cpu --quick --out /tmp/gpu-suite-cpu
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.benchlib import (
    SHARED_DATA,
    git_commit,
    portable_path,
    result_header,
    run_limited,
    usable_cores,
    write_result,
)

PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "numpy",
    "litestar",
)
# Below this many seconds left, a step is not started: it could not do anything worth recording.
MIN_STEP_S = 10.0


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]  # run as `python ARGV --out DIR/NAME.json`
    limit_s: float


def step(name: str, module: str, args: str, limit_s: float, *paths: str) -> Step:
    """`python -m bench.MODULE ARGS PATHS` under `limit_s`."""
    return Step(name, ("-m", f"bench.{module}", *shlex.split(args), *paths), limit_s)


# The device runs a command for at most 10 minutes, so the suite is two calls: the steps that need
# onnxruntime-gpu, then the training steps. Each call's steps' limits add up to at most the default budget.
CALLS = {
    "serve": ("inference", "serve", "serve_workers", "serve_warmup"),
    "train": ("train_step_check", "pretrain_small", "pretrain_base", "pretrain_sweep", "pipeline"),
}


def cuda_plan(work: Path) -> list[Step]:
    """The full suite on one GPU, in two calls (CALLS). The limits leave room for a fresh machine's first
    torch.compile (on the 2026-11-28 H100, train_step_check, pretrain_small and pretrain_base ran out of 70,
    100 and 75 s with no result; run again with the compile cache the first tries left, they took 20-60 s)."""
    small = "--device cuda --sizes small --batch-sizes 128 --rounds 3 --steps 10"
    base = "--device cuda --sizes base --batch-sizes 128 --rounds 2 --steps 10"
    serve = "--device cuda --quick --configs ours_batched,naive,bare --endpoints detect,classify"
    workers = "--device cuda --quick --configs ours_batched,ours_workers4,ours_workers4_arrival"
    workers += ",ours_workers4_unbuffered"
    workers += " --endpoints classify,detect --client-processes 4"
    return [
        step("train_step_check", "train_step_check", "--device cuda --seq-len 128", 110),
        step(
            "pretrain_small",
            "pretrain_throughput",
            f"{small} --variants eager,graphs,compiled_graphs,naive_hf",
            140,
        ),
        step(
            "pretrain_base",
            "pretrain_throughput",
            f"{base} --variants eager,graphs,compiled_graphs,naive_hf",
            140,
        ),
        step("pipeline", "gpu_pipeline", "--device cuda --work", 150, str(work / "pipeline")),
        step(
            "inference",
            "inference",
            "--device cuda --size small --batch-sizes 1,32 --seq-lens 128,512 --rounds 3"
            " --budget-minutes 0.5",
            60,
        ),
        step("serve", "serve_throughput", f"{serve} --concurrency 1,64 --work-dir", 150, str(work / "serve")),
        step(
            "serve_workers",
            "serve_throughput",
            f"{workers} --concurrency 64,256 --work-dir",
            150,
            str(work / "serve_workers"),
        ),
        step("serve_warmup", "serve_warmup", "--device cuda --rounds 2", 90),
        step(
            "pretrain_sweep",
            "pretrain_throughput",
            "--device cuda --sizes small --batch-sizes 256,512 --variants graphs --rounds 2 --steps 5"
            " --no-profile",
            30,
        ),
    ]


def quick_plan(work: Path) -> list[Step]:
    """The same steps at toy sizes on the CPU (torch.compile traced with aot_eager: no C++ to build). The
    limits leave room for a CI machine under load; on two idle cores the whole takes minutes."""
    toy = "--device cpu --seq-len 32 --rounds 2 --steps 1 --compile-backend aot_eager"
    serve = "--device cpu --quick --size tiny --configs ours_batched,naive,bare --endpoints detect,classify"
    check = "--device cpu --batch-size 4 --seq-len 32 --vocab-size 1000 --compile-backend aot_eager"
    return [
        step("train_step_check", "train_step_check", check, 300),
        step(
            "pretrain_small",
            "pretrain_throughput",
            f"{toy} --sizes tiny --batch-sizes 4 --variants eager,compiled,naive_hf",
            240,
        ),
        step(
            "pretrain_base",
            "pretrain_throughput",
            f"{toy} --sizes micro --batch-sizes 4 --variants eager,naive_hf",
            180,
        ),
        step("pipeline", "gpu_pipeline", "--device cpu --quick --work", 900, str(work / "pipeline")),
        step(
            "inference",
            "inference",
            "--device cpu --size tiny --batch-sizes 1 --seq-lens 16 --rounds 2 --block-seconds 0.1"
            " --budget-minutes 1 --max-iters 20",
            180,
        ),
        step("serve", "serve_throughput", f"{serve} --concurrency 1,4 --work-dir", 300, str(work / "serve")),
        step(
            "serve_workers",
            "serve_throughput",
            "--device cpu --quick --size tiny --configs ours_batched,ours_workers2 --endpoints classify"
            " --concurrency 4 --work-dir",
            300,
            str(work / "serve_workers"),
        ),
        step("serve_warmup", "serve_warmup", "--device cpu --rounds 1 --max-seq-len 64", 180),
        step(
            "pretrain_sweep",
            "pretrain_throughput",
            f"{toy} --sizes tiny --batch-sizes 2,8 --variants eager --no-profile",
            120,
        ),
    ]


def adjusted(steps: list[Step], shared_data: Path, scale: float) -> list[Step]:
    """The plan with every limit times `scale`, and the real run pointed at `shared_data` with its stages'
    limits scaled too."""
    out = []
    for s in steps:
        argv = s.argv
        if "bench.gpu_pipeline" in argv:
            argv = (*argv, "--shared-data", str(shared_data), "--limit-scale", str(scale))
        out.append(Step(s.name, argv, s.limit_s * scale))
    return out


def environment(device: str, shared_data: Path) -> dict[str, Any]:
    """What the machine has: no torch import here (the steps own the GPU), subprocesses with timeouts."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    env: dict[str, Any] = {
        "device_type": device,
        "python": platform.python_version(),
        "cores": usable_cores(),
        "packages": versions,
        "shared_data": shared_data.is_dir(),
        "onnxruntime_providers": _output(
            [sys.executable, "-c", "import onnxruntime as o; print(','.join(o.get_available_providers()))"]
        ),
    }
    if device == "cuda":
        query = "--query-gpu=name,memory.total,driver_version,clocks.max.sm"
        env["nvidia_smi"] = _output(["nvidia-smi", query, "--format=csv,noheader"])
    return env


def _output(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable: {e}"
    return (done.stdout.strip() or done.stderr.strip()[-500:]) if done.returncode == 0 else done.stderr[-500:]


class Suite:
    def __init__(self, args: argparse.Namespace, steps: list[Step], work: Path) -> None:
        self.args, self.steps, self.out, self.work = args, steps, args.out, work
        self.start = time.monotonic()
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        commit = git_commit()
        if commit != "unknown":
            self.env["ELECTRA_COMMIT"] = commit
        self.record: dict[str, Any] = {
            **result_header("gpu_suite"),
            "device_type": args.device,
            "quick": args.quick,
            "budget_s": args.budget_s,
            "limit_scale": args.limit_scale,
            "command": " ".join(["python -m bench.gpu_suite", *sys.argv[1:]]),
            "steps": [],
        }

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        self.record["environment"] = environment(self.args.device, self.args.shared_data)
        self.add({"name": "environment", "status": "passed", "seconds": round(time.monotonic() - started, 2)})
        for step in self.steps:
            self.add(self.run_step(step))
        self.record["total_s"] = round(time.monotonic() - self.start, 1)
        self.save()
        return self.record

    def run_step(self, step: Step) -> dict[str, Any]:
        results = self.out / f"{step.name}.json"
        cmd = [sys.executable, *step.argv, "--out", str(results)]
        entry: dict[str, Any] = {
            "name": step.name,
            "command": " ".join(
                ["python", *(portable_path(a, self.work) if "/" in a else a for a in step.argv)]
            ),
            "limit_s": step.limit_s,
        }
        left = self.args.budget_s - (time.monotonic() - self.start)
        if left < MIN_STEP_S:
            return {
                **entry,
                "status": "not run",
                "reason": f"the suite's budget of {self.args.budget_s:.0f} s is spent",
            }
        limit = min(step.limit_s, left)
        print(f"[{time.monotonic() - self.start:5.0f} s] {step.name} (limit {limit:.0f} s)", flush=True)
        outcome = run_limited(cmd, limit, self.out / "logs" / f"{step.name}.log", env=self.env, grace_s=10)
        entry.update(outcome, limit_s=round(limit, 1), results=results.name if results.is_file() else None)
        if results.is_file():
            entry["result"] = json.loads(results.read_text())
            if entry["result"].get("skipped"):
                entry["status"], entry["reason"] = "skipped", entry["result"]["skipped"]
        return entry

    def add(self, entry: dict[str, Any]) -> None:
        self.record["steps"].append(entry)
        print(f"        {entry['name']}: {entry['status']} ({entry.get('seconds', 0):.0f} s)", flush=True)
        self.save()

    def save(self) -> None:
        write_result(self.record, self.out / "suite.json", "suite")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="directory for suite.json, results and logs")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--quick", action="store_true", help="toy sizes (for a CPU; CI runs it)")
    ap.add_argument(
        "--only",
        default=None,
        help="comma-separated step names, or a call's name (serve, train: the device's 10 minutes each)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="seconds in all (default 570, 2400 with --quick, either times --limit-scale)",
    )
    ap.add_argument(
        "--work", type=Path, default=None, help="scratch: data, runs, bundles (default: a temp dir)"
    )
    ap.add_argument("--shared-data", type=Path, default=SHARED_DATA, help="where the shared data lives")
    ap.add_argument(
        "--limit-scale",
        type=float,
        default=1.0,
        help="multiply every time limit and the budget (a machine slower than the one they are set for)",
    )
    args = ap.parse_args()
    if args.device == "cuda" and args.quick:
        ap.error("--quick is the CPU rehearsal: use it with --device cpu")
    if args.limit_scale <= 0:
        ap.error("--limit-scale must be positive")
    # A budget given on the command line is taken as it is; the default one scales with the limits.
    args.budget_s = args.budget_s or (2400.0 if args.quick else 570.0) * args.limit_scale
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="electra-gpu-suite-"))
    steps = adjusted(quick_plan(work) if args.quick else cuda_plan(work), args.shared_data, args.limit_scale)
    if args.only:
        names = {step for n in args.only.split(",") for step in CALLS.get(n.strip(), (n.strip(),))}
        unknown = names - {s.name for s in steps}
        if unknown:
            ap.error(
                f"--only: no step {', '.join(sorted(unknown))}; steps: {', '.join(s.name for s in steps)}; "
                f"calls: {', '.join(CALLS)}"
            )
        steps = [s for s in steps if s.name in names]
    record = Suite(args, steps, work).run()
    width = max(len(s["name"]) for s in record["steps"])
    for s in record["steps"]:
        print(f"{s['name']:<{width}}  {s['status']:<9}  {s.get('seconds', 0):6.1f} s  {s.get('reason', '')}")
    print(f"-> {args.out / 'suite.json'} ({record['total_s']:.0f} s)")
    return 0 if all(s["status"] in ("passed", "skipped") for s in record["steps"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
