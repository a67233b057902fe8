"""The training commands' threads: one per core that other processes leave free, at least one, unless
OMP_NUM_THREADS says; and the one line that says which and why."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from electra import threads
from electra.threads import THREADS_ENV, ThreadChoice, busy_cores, choose_threads, threads_for, usable_cores


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)


@pytest.mark.parametrize(
    ("cores", "busy", "expected"),
    [
        (2, 0.0, 2),  # idle: every core
        (2, 0.3, 2),
        (2, 1.0, 1),  # one core held by another job
        (2, 1.97, 1),  # both held: still one thread, never none
        (2, 5.0, 1),
        (16, 3.2, 13),
        (16, 3.6, 12),
        (1, 0.0, 1),
    ],
)
def test_one_thread_per_free_core(cores: int, busy: float, expected: int) -> None:
    assert threads_for(cores, busy) == expected


def fake_stat(path: Path, per_cpu: dict[int, tuple[int, int]]) -> None:
    """/proc/stat with each CPU's (busy, idle) ticks; busy spread over user, system and steal, idle over
    idle and iowait (both of which mean free)."""
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
    for cpu, (busy, idle) in per_cpu.items():
        user, system, steal = busy - 2 * (busy // 3), busy // 3, busy // 3
        lines.append(f"cpu{cpu} {user} 0 {system} {idle - idle // 4} {idle // 4} 0 0 {steal} 7 0")
    lines += ["intr 1 2 3", "ctxt 99", "btime 1"]
    path.write_text("\n".join(lines) + "\n")


def test_busy_cores_from_proc_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unset: None) -> None:
    """Busy time over the sample, summed over the CPUs this process may use (others are not ours to count),
    less this process's own CPU time in that sample."""
    stat = tmp_path / "stat"
    fake_stat(stat, {0: (1000, 5000), 1: (2000, 4000), 2: (0, 0)})
    monkeypatch.setattr(threads, "_PROC_STAT", stat)
    monkeypatch.setattr(threads, "_affinity", lambda: {0, 1})
    own = iter([10.0, 10.1])  # this process used 0.1 s of CPU during the sample
    monkeypatch.setattr(threads, "_own_cpu_seconds", lambda: next(own))
    clock = iter([100.0, 100.5])

    def sleep(seconds: float) -> None:
        # Over the sample: cpu0 90 of 100 ticks busy, cpu1 40 of 100; cpu2 (not ours) fully busy.
        fake_stat(stat, {0: (1090, 5010), 1: (2040, 4060), 2: (500, 0)})

    monkeypatch.setattr(threads, "time", SimpleNamespace(monotonic=lambda: next(clock), sleep=sleep))
    # (90 + 40) / 200 of 2 cores = 1.3, less our own 0.1 s / 0.5 s = 0.2.
    assert busy_cores() == pytest.approx(1.1)


def test_no_proc_stat_means_no_measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unset: None) -> None:
    monkeypatch.setattr(threads, "_PROC_STAT", tmp_path / "absent")
    assert busy_cores() is None
    choice = choose_threads()
    assert (choice.threads, choice.busy) == (usable_cores(), None)
    assert "one per core" in choice.line("pre-training")


def test_a_cgroup_quota_caps_the_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's --cpus 1.5 on a many-core host: one core's worth to spend, whatever the affinity."""
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(threads, "_CGROUP_V2_MAX", cpu_max)
    monkeypatch.setattr(threads, "_affinity", lambda: set(range(64)))
    cpu_max.write_text("150000 100000\n")
    assert usable_cores() == 1
    cpu_max.write_text("800000 100000\n")
    assert usable_cores() == 8
    cpu_max.write_text("max 100000\n")
    assert usable_cores() == 64


def test_omp_num_threads_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.5: pytest.fail("measured despite the env"))
    monkeypatch.setenv(THREADS_ENV, "3")
    choice = choose_threads()
    assert (choice.threads, choice.from_env) == (3, True)
    assert choice.line("pre-training") == "pre-training on 3 CPU threads (OMP_NUM_THREADS=3)"


@pytest.mark.parametrize("value", ["", "0", "two", "-1"])
def test_an_unusable_omp_num_threads_is_measured_over(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(THREADS_ENV, value)
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.5: 0.0)
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    assert choose_threads() == ThreadChoice(4, 4, 0.0)


def test_the_line_says_how_many_and_why() -> None:
    busy = ThreadChoice(1, 2, 1.94)
    assert busy.line("pre-training") == (
        "pre-training on 1 CPU thread: 0.1 of 2 cores free (other processes use 1.9); one thread per free "
        "core, at least one (set OMP_NUM_THREADS to choose)"
    )
    assert (
        ThreadChoice(2, 2, 0.04)
        .line("fine-tuning")
        .startswith("fine-tuning on 2 CPU threads: 2.0 of 2 cores free (other processes use 0.0)")
    )


def test_use_free_cores_sets_torch_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], unset: None
) -> None:
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.5: 0.0)
    monkeypatch.setattr(threads, "usable_cores", lambda: 1)
    try:
        choice = threads.use_free_cores("pre-training")
        assert choice.threads == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert "pre-training on 1 CPU thread: 1.0 of 1 cores free" in capsys.readouterr().err


def test_a_process_spinning_on_a_core_counts_as_busy(unset: None) -> None:
    """The real measure: a child process that keeps one core busy is seen (on any machine: a loaded one
    only adds to it)."""
    if busy_cores(0.05) is None:
        pytest.skip("no /proc/stat here")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        assert busy_cores(0.5) >= 0.8  # type: ignore[operator]
    finally:
        spinner.kill()
        spinner.wait()
