"""How long the main job takes: `electra demo` from nothing to a checked bundle, timed stage by stage.

Each round runs `electra demo --fresh --no-serve` in a fresh work directory, in a process of its own, as a
user's first run does after the install (every stage built: corpus, tokenizer, data, pre-training, bundle,
example; serving is left out, as it waits for Ctrl-C). Reported per round: the whole command's seconds
(interpreter start and imports included), each stage's seconds from the demo's own log lines (from a stage's
`[k/7]` line to the next one, the last to its "built in" line), the threads pre-training took, what
pre-training reached (the demo's accuracy line) and the swapped-word check (`example.json`, and the lines
the demo printed about it), with the load average around the run; with several rounds, the median of each
time. Nothing here makes or stops other load: the file records the load average, which says what the machine
was doing.

    python -m bench.demo_time                      # writes bench/results/demo_time_cpu.json
    python -m bench.demo_time --steps 5 --corpus-mb 1 --out /tmp/demo_time.json   # a quick look
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.benchlib import log_records, result_header, write_result

STAGES = 6  # the demo's stages before serving
_TRAINED = re.compile(
    r"pre-trained (\d+) steps: discriminator accuracy ([\d.]+) \(all-original baseline ([\d.]+)\), "
    r"replaced-token recall ([\d.]+)"
)
_THREADS = re.compile(r"pre-training on (\d+) CPU threads?")
# What the results file keeps of the demo's example.json (the sentence and its check).
EXAMPLE_KEYS = ("text", "word", "replaced", "score", "flagged", "checked", "detected", "clean", "threshold")


def demo_command(work: Path, steps: int | None, corpus_mb: int | None) -> list[str]:
    command = [sys.executable, "-m", "electra", "--log-format", "json", "demo", "--fresh", "--no-serve"]
    command += ["--quiet", "--workdir", str(work)]
    if steps is not None:
        command += ["--steps", str(steps)]
    if corpus_mb is not None:
        command += ["--corpus-mb", str(corpus_mb)]
    return command


def stage_times(records: list[dict[str, Any]]) -> dict[str, float]:
    """Each stage's seconds, named by its title, from its `[k/7]` line to the next stage's line (the last
    stage's to the "built in" line)."""
    marks: list[tuple[str, datetime]] = []
    for record in records:
        message = str(record["message"])
        when = datetime.fromisoformat(record["time"])
        if found := re.match(r"\[(\d+)/\d+\] (.*)", message):
            marks.append((found.group(2), when))
        elif message.startswith("built in ") and marks:
            marks.append(("", when))
    return {title: (after - when).total_seconds() for (title, when), (_, after) in itertools.pairwise(marks)}


def trained(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The threads pre-training took and what it reached, from the demo's own lines."""
    out: dict[str, Any] = {}
    for record in records:
        message = str(record["message"])
        if found := _THREADS.match(message):
            out["threads"] = int(found.group(1))
            out["threads_line"] = message
        elif found := _TRAINED.match(message):
            steps, accuracy, baseline, recall = found.groups()
            out.update(
                steps=int(steps),
                discriminator_accuracy=float(accuracy),
                all_original_baseline=float(baseline),
                replaced_recall=float(recall),
            )
    return out


def check_report(records: list[dict[str, Any]]) -> list[str]:
    """What the demo printed about its swapped-word check: its lines from the last stage's to "built in"."""
    lines: list[str] = []
    for record in records:
        message = str(record["message"])
        if message.startswith(f"[{STAGES}/"):
            lines = []
        elif message.startswith("built in "):
            break
        elif record.get("logger") == "electra.demo":
            lines.append(message)
    return lines


def one_round(steps: int | None, corpus_mb: int | None) -> dict[str, Any]:
    """One fresh demo build, timed (SystemExit with its log's end when it fails)."""
    with tempfile.TemporaryDirectory(prefix="demo-time-") as tmp:
        work = Path(tmp) / "demo"
        load_start = list(os.getloadavg())
        start = time.perf_counter()
        done = subprocess.run(demo_command(work, steps, corpus_mb), capture_output=True, text=True)
        total = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"the demo failed ({done.returncode}):\n{done.stderr[-3000:]}")
        records = log_records(done.stderr)
        example = json.loads((work / "example.json").read_text(encoding="utf-8"))
    stages = stage_times(records)
    if len(stages) != STAGES:
        raise SystemExit(f"expected {STAGES} stages in the demo's log, found {sorted(stages)}")
    return {
        "total_s": total,
        "stages_s": stages,
        "pretraining": trained(records),
        "example": {key: example.get(key) for key in EXAMPLE_KEYS},
        "check_report": check_report(records),
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
    }


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over rounds of the whole command's seconds and of each stage's."""
    titles = rounds[0]["stages_s"]
    return {
        "total_s": statistics.median(r["total_s"] for r in rounds),
        "stages_s": {t: statistics.median(r["stages_s"][t] for r in rounds) for t in titles},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="fresh builds, one after another (default 1)")
    ap.add_argument("--steps", type=int, default=None, help="pre-training steps (default: the demo's)")
    ap.add_argument("--corpus-mb", type=int, default=None, help="cut the corpus (default: the demo's, whole)")
    ap.add_argument("--out", type=Path, help="result JSON (default: bench/results/demo_time_cpu.json)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    record: dict[str, Any] = {
        **result_header("demo_time"),
        "command": demo_command(Path("<work>"), args.steps, args.corpus_mb)[1:],
        "rounds": [],
    }
    for r in range(args.rounds):
        result = one_round(args.steps, args.corpus_mb)
        record["rounds"].append(result)
        record["median"] = medians(record["rounds"])
        # Written after every round, so a run cut short keeps the rounds it finished.
        path = write_result(record, args.out, "demo_time_cpu")
        stages = ", ".join(f"{t} {s:.0f} s" for t, s in result["stages_s"].items())
        load = result["load_average_end"][0]
        print(f"round {r + 1}/{args.rounds}: {result['total_s']:.0f} s ({stages}; load {load:.2f})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
