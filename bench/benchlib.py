"""What the benchmarks (and the experiments) share: the header every results file opens with, where results
go and how paths are recorded, commands run under a time limit, random-weight models and bundles to measure,
and the alternating rounds whose per-round ratios a benchmark reports the median of (so a machine whose speed
drifts moves both sides)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from electra.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results"


# ------------------------------------------------------------------------------------------------ results


def git_commit(root: Path = ROOT) -> str:
    """The short commit of this project's checkout, recorded with every result.

    Only the project's own git metadata counts: a copy of the tree without it, inside another repository (a
    GPU host's scratch folder, say), would otherwise record that repository's commit. Without metadata of its
    own, the commit is ELECTRA_COMMIT from the environment (set by whoever copied the tree), else "unknown".
    """
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True
        )
        if top.returncode == 0 and Path(top.stdout.strip()).resolve() == Path(root).resolve():
            out = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
            )
            if out.stdout.strip():
                return out.stdout.strip()
    except OSError:
        pass
    return os.environ.get("ELECTRA_COMMIT", "").strip() or "unknown"


def cpu_name() -> str:
    # platform.processor() is often just "x86_64" on Linux; the model name says which machine this was.
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def usable_cores() -> int:
    # The affinity mask, not os.cpu_count(): a container or taskset may give us fewer cores than the host has.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def result_header(name: str, device: str | None = None) -> dict[str, Any]:
    """What every results file opens with: its name, the date (UTC), the commit, the machine (and the
    accelerator it ran on, if any) and the load average when the header was made."""
    machine = {
        "cpu": cpu_name(),
        "cores": usable_cores(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    if device is not None:
        machine["device"] = device
    return {
        "benchmark": name,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": machine,
        "load_average": list(os.getloadavg()),
    }


def write_result(record: dict, out: Path | None, default_name: str) -> Path:
    """Write a results record as JSON to `out`, or bench/results/<default_name>.json; returns the path.

    Written whole to a temporary file of its own and renamed, so an interrupted run never leaves half a
    result, and two runs writing one file (an experiment split between invocations) never share a
    temporary file.
    """
    path = out or RESULTS / f"{default_name}.json"
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def portable_path(path: str | os.PathLike[str], work: str | os.PathLike[str] | None = None) -> str:
    """`path` as a result records it: the same on any machine, never this machine's absolute paths.

    In the repository: relative to its root ("bench/naive_server.py"); under the shared data:
    "<shared data>/glue/SST-2/dev.tsv"; under `work` (the run's own scratch directory):
    "<work>/detector-fp32"; anywhere else (a model or run directory given on the command line): "<work>/"
    and its last name.
    """
    p = Path(os.path.abspath(path))
    for base, label in ((work, "<work>"), (SHARED_DATA, "<shared data>"), (ROOT, "")):
        if base is not None and p.is_relative_to(os.path.abspath(base)):
            rel = p.relative_to(os.path.abspath(base)).as_posix()
            if not label:
                return rel
            return label if rel == "." else f"{label}/{rel}"
    return f"<work>/{p.name}"


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


# ------------------------------------------------------------------------------------ commands with limits


def run_limited(
    cmd: Sequence[str],
    limit_s: float,
    log: Path,
    env: Mapping[str, str] | None = None,
    grace_s: float = 20.0,
) -> dict[str, Any]:
    """Run `cmd` (its output into `log`) for at most `limit_s` seconds: then SIGTERM, which a pre-training run
    answers with a checkpoint and exit 0, and SIGKILL after `grace_s` more. Never raises for the command's
    failure: returns {"status": "passed" | "failed" | "timed out", "returncode", "seconds", "log_tail"}."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("wb") as out:
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                start_new_session=True,  # the whole group is signalled: a server it started stops too
            )
        except OSError as e:
            return {"status": "failed", "returncode": None, "seconds": 0.0, "log_tail": str(e)}
        timed_out = False
        try:
            proc.wait(timeout=max(limit_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
    status = "timed out" if timed_out else "passed" if proc.returncode == 0 else "failed"
    return {
        "status": status,
        "returncode": proc.returncode,
        "seconds": round(time.monotonic() - start, 2),
        "log_tail": log.read_text(encoding="utf-8", errors="replace")[-3000:],
    }


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, sig)


# ------------------------------------------------------------------------------------- what is measured


def random_models(
    work: Path, models: dict[str, tuple[str, Any]], tokenizer: Any, seed: int = 0, jitter: float = 0.0
) -> dict[str, Path]:
    """Random-weight Hugging Face directories with the tokenizer: {name: (kind, ElectraConfig)}, built in
    that order from one seeded generator (the same weights on every machine), saved under work/NAME-hf.
    `jitter` moves every parameter off the init's zero biases and unit LayerNorms, so that parity numbers
    compare every parameter."""
    import torch

    from electra.hf_format import save_hf_dir
    from electra.model import build_model
    from electra.tokenizer import save_tokenizer

    torch.manual_seed(seed)
    dirs = {}
    for name, (kind, cfg) in models.items():
        model = build_model(kind, cfg)
        if jitter:
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * jitter)
        dirs[name] = save_hf_dir(model, work / f"{name}-hf")
        save_tokenizer(tokenizer, dirs[name])
    return dirs


# -------------------------------------------------------------------------------------- rounds and ratios


# What a results file says of a model's shape (its ElectraConfig's fields of these names).
SHAPE_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "embedding_size",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)


def model_shape(cfg: Any) -> dict[str, int]:
    """A config's SHAPE_FIELDS, for a results file."""
    return {name: getattr(cfg, name) for name in SHAPE_FIELDS}


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """The configurations' order in round `round_index`: rotated by one per round, so over len(names)
    rounds each one runs in every position once (none always runs first, just after a rival, or last)."""
    if not names:
        return []
    k = round_index % len(names)
    return [*names[k:], *names[:k]]


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def median_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize_ratio(values: Sequence[float | None]) -> dict[str, Any]:
    """Per-round ratios (None where a side is missing) as a benchmark reports them: their median, range and
    every round's value."""
    present = [v for v in values if v is not None]
    return {
        "median": median_or_none(values),
        "min": min(present) if present else None,
        "max": max(present) if present else None,
        "per_round": list(values),
    }


# --- the demo's JSON log (electra --log-format json) ------------------------------------------------------


def log_records(log: str) -> list[dict[str, Any]]:
    """The JSON log lines of a run's stderr (anything else a library printed is left out)."""
    records = []
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "message" in record and "time" in record:
            records.append(record)
    return records


def stage_seconds(records: list[dict[str, Any]], first: int, last: int) -> float | None:
    """Seconds from the demo's "[first/7]" stage line to its "[last/7]" one (None when one is missing)."""
    times: dict[int, datetime] = {}
    for record in records:
        found = re.match(r"\[(\d+)/\d+\]", str(record["message"]))
        if found:
            times[int(found.group(1))] = datetime.fromisoformat(record["time"])
    if first not in times or last not in times:
        return None
    return (times[last] - times[first]).total_seconds()
