"""The demo on a machine other jobs share: the threads electra now picks for pre-training (one per free core,
electra/threads.py) against torch's default of one per core (what the demo did before), in alternating rounds.

Nothing here makes the load: run it while the other jobs run, and the results file records the load average
of every run. Set-up, once: `electra demo --no-serve --steps 1` in the work directory, which builds the demo
corpus, tokenizer and packed data the runs then reuse. A run: `electra demo --no-serve --steps N` in a fresh
process with its pre-training, bundle and example removed first, so it pre-trains, exports and checks the
example as the demo does; "torch_default" with OMP_NUM_THREADS set to the threads torch takes by itself
(which the demo obeys, as it did not choose before), "electra_choice" without it (the demo chooses, and its
line saying what it chose is recorded). Each round runs both, the order rotated per round; reported: the
pre-training stage's seconds (from the demo's own log lines) and the whole command's, the median of the
per-round ratios torch_default / electra_choice of each. The results file is written after every round.

    python -m bench.demo_threads --steps 40 --rounds 3      # writes bench/results/demo_threads_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.benchlib import (
    log_records,
    ratio,
    result_header,
    round_order,
    stage_seconds,
    summarize_ratio,
    write_result,
)

CONFIGS = ("torch_default", "electra_choice")
THREADS_ENV = "OMP_NUM_THREADS"
_CHOSEN = re.compile(r"pre-training on (\d+) CPU threads?")


def torch_default_threads() -> int:
    """How many threads torch takes when nothing tells it (OMP_NUM_THREADS unset): one per core."""
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def demo_command(work: Path, steps: int) -> list[str]:
    electra = [sys.executable, "-m", "electra", "--log-format", "json"]
    return [*electra, "demo", "--no-serve", "--quiet", "--workdir", str(work), "--steps", str(steps)]


def threads_line(records: list[dict[str, Any]]) -> tuple[str | None, int | None]:
    """The demo's line saying how many threads pre-training took, and that number."""
    for record in records:
        if chosen := _CHOSEN.match(str(record["message"])):
            return record["message"], int(chosen.group(1))
    return None, None


def one_run(config: str, work: Path, steps: int, default_threads: int) -> dict[str, Any]:
    """One demo run from its pre-training on: its times, the threads it ran on and the load around it."""
    for stage_output in ("pretrain", "bundle", "example.json"):
        path = work / stage_output
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    if config == "torch_default":
        env[THREADS_ENV] = str(default_threads)
    load_start = list(os.getloadavg())
    start = time.perf_counter()
    done = subprocess.run(demo_command(work, steps), env=env, capture_output=True, text=True)
    total = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{config}: the demo failed ({done.returncode}):\n{done.stderr[-3000:]}")
    records = log_records(done.stderr)
    pretrain = stage_seconds(records, 4, 5)
    line, threads = threads_line(records)
    return {
        "config": config,
        "threads": threads,
        "threads_line": line,
        "pretrain_s": pretrain,
        "pretrain_steps_per_s": steps / pretrain if pretrain else None,
        "total_s": total,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
    }


def summary(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Each configuration's median times and the median of the per-round ratios default / choice."""
    out: dict[str, Any] = {}
    for key in ("pretrain_s", "total_s"):
        out[f"{key}_ratio_default_over_choice"] = summarize_ratio(
            [ratio(r["torch_default"][key], r["electra_choice"][key]) for r in rounds]
        )
        for config in CONFIGS:
            values = sorted(r[config][key] for r in rounds if r[config][key] is not None)
            out[f"{config}_{key}_median"] = values[len(values) // 2] if values else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="pre-training steps per run (the demo: 600)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--work", type=Path, help="work directory, reused between invocations (default: a temp one)"
    )
    ap.add_argument("--out", type=Path, help="result JSON (default: bench/results/demo_threads_cpu.json)")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1:
        ap.error("--steps and --rounds must be at least 1")
    default_threads = torch_default_threads()
    with tempfile.TemporaryDirectory(prefix="demo-threads-") as tmp:
        work = args.work or Path(tmp) / "demo"
        setup = subprocess.run(demo_command(work, 1), capture_output=True, text=True)
        if setup.returncode != 0:
            raise SystemExit(f"building the demo's data failed:\n{setup.stderr[-3000:]}")
        record: dict[str, Any] = {
            **result_header("demo_threads"),
            "steps": args.steps,
            "rounds": args.rounds,
            "torch_default_threads": default_threads,
            "runs": [],
        }
        rounds: list[dict[str, dict[str, Any]]] = []
        for r in range(args.rounds):
            runs = {}
            for config in round_order(CONFIGS, r):
                run = one_run(config, work, args.steps, default_threads)
                load = run["load_average_end"][0]
                print(
                    f"round {r + 1}/{args.rounds} {config}: {run['threads']} threads, pre-training "
                    f"{run['pretrain_s']:.1f} s, demo {run['total_s']:.1f} s (load {load:.2f})",
                    flush=True,
                )
                runs[config] = run
                record["runs"].append({"round": r, **run})
            rounds.append(runs)
            # Written after every round, so a run cut short keeps the rounds it finished.
            record["summary"] = summary(rounds)
            path = write_result(record, args.out, "demo_threads_cpu")
    print(json.dumps(record["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
