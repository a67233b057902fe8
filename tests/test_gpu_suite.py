"""bench.gpu_suite: every step recorded whatever happens to the others (failure, time limit, nothing left of
the budget), and the whole suite at toy sizes on the CPU, as CI runs it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.benchlib import ROOT, SHARED_DATA
from bench.gpu_pipeline import MODELS, loaded_lines, on_device
from bench.gpu_suite import CALLS, Step, Suite, adjusted, cuda_plan, quick_plan


def python_step(name: str, code: str, limit_s: float) -> Step:
    """A step running `code`, whose last argument is its results file (the suite appends --out FILE)."""
    return Step(name, ("-c", textwrap.dedent(code)), limit_s)


def suite(tmp_path: Path, steps: list[Step], budget_s: float) -> dict:
    args = argparse.Namespace(
        device="cpu",
        quick=True,
        budget_s=budget_s,
        shared_data=SHARED_DATA,
        limit_scale=1.0,
        out=tmp_path / "out",
    )
    args.out.mkdir()
    return Suite(args, steps, tmp_path / "work").run()


def test_each_step_is_recorded_whatever_the_others_do(tmp_path: Path) -> None:
    writes = "import json, sys; json.dump({'value': 1}, open(sys.argv[-1], 'w'))"
    skips = "import json, sys; json.dump({'skipped': 'no data here'}, open(sys.argv[-1], 'w'))"
    steps = [
        python_step("fails", "import sys; print('boom'); sys.exit(3)", 30),
        python_step("slow", "import time; time.sleep(60)", 1),
        python_step("writes", writes, 30),
        python_step("skips", skips, 30),
    ]
    start = time.monotonic()
    record = suite(tmp_path, steps, budget_s=120)
    assert time.monotonic() - start < 60
    by_name = {s["name"]: s for s in record["steps"]}
    assert list(by_name) == ["environment", "fails", "slow", "writes", "skips"]
    assert by_name["environment"]["status"] == "passed"
    assert record["environment"]["packages"]["torch"]
    assert by_name["fails"]["status"] == "failed" and by_name["fails"]["returncode"] == 3
    assert "boom" in by_name["fails"]["log_tail"]
    assert by_name["slow"]["status"] == "timed out" and by_name["slow"]["seconds"] < 30
    assert by_name["writes"]["status"] == "passed" and by_name["writes"]["result"] == {"value": 1}
    assert by_name["writes"]["results"] == "writes.json"
    assert by_name["skips"]["status"] == "skipped" and by_name["skips"]["reason"] == "no data here"
    # suite.json holds the same record, with the commit and the command of every step.
    saved = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert saved["steps"] == json.loads(json.dumps(record["steps"]))
    assert saved["commit"] and all(s["command"].startswith("python -c") for s in saved["steps"][1:])


def test_a_step_gets_what_is_left_of_the_budget_and_none_when_it_is_spent(tmp_path: Path) -> None:
    steps = [
        python_step("long", "import time; time.sleep(60)", 600),
        python_step("after", "pass", 30),
    ]
    # The budget counts the environment step too (seconds on a loaded machine): 30 s leaves the long step
    # more than MIN_STEP_S.
    record = suite(tmp_path, steps, budget_s=30)
    long, after = record["steps"][1:]
    assert long["status"] == "timed out" and long["limit_s"] <= 30
    assert after["status"] == "not run" and "budget" in after["reason"]


def test_the_quick_plan_names_every_step_of_the_cuda_plan(tmp_path: Path) -> None:
    assert [s.name for s in quick_plan(tmp_path)] == [s.name for s in cuda_plan(tmp_path)]
    # Each call's steps fit the default budget, under the device's 10 minutes a call; every step is in one.
    limits = {s.name: s.limit_s for s in cuda_plan(tmp_path)}
    assert sorted(n for steps in CALLS.values() for n in steps) == sorted(limits)
    for steps in CALLS.values():
        assert sum(limits[n] for n in steps) <= 570


def test_limit_scale_multiplies_every_limit_and_reaches_the_real_runs_stages(tmp_path: Path) -> None:
    plan = cuda_plan(tmp_path)
    shared = tmp_path / "data"
    scaled = adjusted(plan, shared, 2.5)
    assert [s.limit_s for s in scaled] == [2.5 * s.limit_s for s in plan]
    for before, after in zip(plan, scaled, strict=True):
        if before.name == "pipeline":
            # The pipeline's stages have limits of their own inside the step's: they scale with it.
            assert after.argv == (*before.argv, "--shared-data", str(shared), "--limit-scale", "2.5")
        else:
            assert after.argv == before.argv


# The server's load lines (electra.serving.http.server) as the 2026-11-27 H100 run logged them.
CUDA_LOG = """\
2026-11-27 09:11:34 INFO electra.serving: loaded detect: work/bundle-detect (discriminator, fp16) on \
CUDAExecutionProvider, CPUExecutionProvider
2026-11-27 09:11:34 INFO electra.serving: loaded sst2: work/bundle-sst2 (classifier, fp16) on \
CUDAExecutionProvider, CPUExecutionProvider
2026-11-27 09:11:35 INFO uvicorn.error: Application startup complete.
"""


def test_the_real_run_checks_every_model_was_served_on_the_device() -> None:
    loaded = loaded_lines(CUDA_LOG)
    assert len(loaded) == 2
    assert on_device(loaded, MODELS, "cuda")
    # ONNX Runtime fell back to the CPU for one model: the server answers, the check fails.
    fell_back = CUDA_LOG.replace(
        "sst2 (classifier, fp16) on CUDAExecutionProvider, ", "sst2 (classifier, fp16) on "
    )
    assert not on_device(loaded_lines(fell_back), MODELS, "cuda")
    assert on_device(loaded_lines(fell_back), MODELS, "cpu")
    # A model with no load line (the log's format changed, or it was never loaded) does not pass by default.
    assert not on_device(loaded_lines(CUDA_LOG.split("\n", 1)[1]), MODELS, "cuda")
    assert not on_device([], MODELS, "cpu")
    # A worker's prefix ("worker 0: loaded ...") still counts.
    worker = CUDA_LOG.replace("electra.serving: loaded", "electra.serving: worker 0: loaded")
    assert on_device(loaded_lines(worker), MODELS, "cuda")


@pytest.mark.slow
def test_the_quick_suite_runs_every_step_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    # Limits 4x the plan's: CI shares its cores with the rest of the suite; a step that hangs still stops.
    cmd = [sys.executable, "-m", "bench.gpu_suite", "--device", "cpu", "--quick", "--limit-scale", "4"]
    argv = [*cmd, "--out", str(out), "--work", str(tmp_path / "work")]  # scratch in tmp_path, not /tmp
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=10_000)
    record = json.loads((out / "suite.json").read_text())
    statuses = {s["name"]: s["status"] for s in record["steps"]}
    assert done.returncode == 0, (statuses, done.stdout[-3000:], done.stderr[-3000:])
    assert list(statuses) == ["environment", *(s.name for s in quick_plan(tmp_path))]
    pipeline = "skipped" if not SHARED_DATA.is_dir() else "passed"
    assert all(v == "passed" for k, v in statuses.items() if k != "pipeline"), statuses
    assert statuses["pipeline"] == pipeline
    steps = {s["name"]: s for s in record["steps"]}
    check = steps["train_step_check"]["result"]
    assert (
        check["passed"] and check["sync_free"]["eager"]["passed"] and check["sync_free"]["compiled"]["passed"]
    )
    small = steps["pretrain_small"]["result"]["results"][0]
    assert {"eager", "compiled", "naive_hf"} <= set(small) and small["eager"]["top_kernels"]
    assert small["compiled"]["first_call_s"] > 0
    if pipeline == "passed":
        stages = steps["pipeline"]["result"]["stages"]
        assert all(stage["status"] == "passed" for stage in stages.values()), stages
        served = [line.split(" loaded ")[1].split(":")[0] for line in stages["serve"]["loaded"]]
        assert served == list(MODELS)
