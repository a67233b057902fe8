"""How many threads PyTorch gets for CPU work: one per core that is free when a training command starts.

torch's default is one thread per core, and its OpenMP threads wait for each other at the end of every
parallel operation, spinning at first. On cores that other jobs hold, the OS runs only some of those threads
at a time and the others spin away their time slices waiting: the demo's pre-training on 2 cores shared with
other jobs took 7.1x as long on 2 threads as on 1 (`bench/demo_threads.py`, median of per-round ratios in
`bench/results/demo_threads_cpu.json`). So `electra demo`, `pretrain` and `finetune` look at how busy the
cores are (half a second of /proc/stat, this process left out) and take the free ones, at least one, and say
so in one line. OMP_NUM_THREADS, when set, wins: it is the standard way to choose, torch reads it too, and
torchrun sets it to 1 for each of several processes on one machine.

The count is chosen once, when the command starts: a job that starts later on the same cores is not seen.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from electra.logs import say

THREADS_ENV = "OMP_NUM_THREADS"
SAMPLE_SECONDS = 0.5
_PROC_STAT = Path("/proc/stat")
_CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1 = Path("/sys/fs/cgroup/cpu")


@dataclass(frozen=True)
class ThreadChoice:
    """The threads chosen, and what they were chosen from."""

    threads: int
    cores: int  # the cores this process may use (affinity, and a cgroup's CPU quota)
    busy: float | None  # cores' worth of CPU time other processes used during the sample; None: not measured
    from_env: bool = False  # OMP_NUM_THREADS chose

    def line(self, what: str) -> str:
        """One line saying how many threads `what` runs on and why."""
        threads = f"{self.threads} CPU thread{'s' if self.threads != 1 else ''}"
        if self.from_env:
            return f"{what} on {threads} ({THREADS_ENV}={self.threads})"
        choose = f"set {THREADS_ENV} to choose"
        if self.busy is None:
            return (
                f"{what} on {threads}, one per core (how busy they are cannot be read without "
                f"{_PROC_STAT}; {choose})"
            )
        free = max(0.0, self.cores - self.busy)
        return (
            f"{what} on {threads}: {free:.1f} of {self.cores} cores free (other processes use "
            f"{self.busy:.1f}); one thread per free core, at least one ({choose})"
        )


def threads_for(cores: int, busy: float) -> int:
    """One thread per free core, rounded to the nearest, and at least one."""
    return max(1, min(cores, math.floor(cores - busy + 0.5)))


def usable_cores() -> int:
    """The cores this process may run on: its affinity mask, capped by a cgroup CPU quota (a container's
    --cpus), which os.cpu_count() knows nothing of."""
    cpus = _affinity()
    cores = len(cpus) if cpus else os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cores, math.floor(quota))) if quota is not None else cores


def _affinity() -> set[int] | None:
    """The CPUs this process may run on, or None where the OS does not say (not Linux)."""
    try:
        return os.sched_getaffinity(0)
    except AttributeError:
        return None


def _cgroup_quota() -> float | None:
    """The CPU quota in cores (cgroup v2's cpu.max, else v1's cfs quota), or None when there is none."""
    try:
        fields = _CGROUP_V2_MAX.read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((_CGROUP_V1 / "cpu.cfs_quota_us").read_text())
        period = int((_CGROUP_V1 / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _cpu_ticks(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) clock ticks so far over the CPUs `cpus`, from /proc/stat; None when it is unreadable."""
    try:
        lines = _PROC_STAT.read_text().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split() or [""]
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        # user nice system idle iowait irq softirq steal (guest time is already in user): steal counts as
        # busy, since the hypervisor gave that time to someone else.
        ticks = [int(v) for v in fields[:8]]
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return (busy, total) if total else None


def busy_cores(seconds: float = SAMPLE_SECONDS) -> float | None:
    """Cores' worth of CPU time that other processes used over `seconds` on the cores we may run on (this
    process's own time left out), or None where /proc/stat cannot be read."""
    cpus = _affinity()
    if not cpus:
        return None
    before, own_before, start = _cpu_ticks(cpus), _own_cpu_seconds(), time.monotonic()
    if before is None:
        return None
    time.sleep(seconds)
    after, own_after, elapsed = _cpu_ticks(cpus), _own_cpu_seconds(), time.monotonic() - start
    if after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / (after[1] - before[1])  # of all the cores' time, busy
    own = (own_after - own_before) / elapsed if elapsed > 0 else 0.0
    return max(0.0, share * len(cpus) - own)


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def choose_threads(seconds: float = SAMPLE_SECONDS) -> ThreadChoice:
    """OMP_NUM_THREADS when it is a whole number >= 1, else one thread per free core."""
    cores = usable_cores()
    env = os.environ.get(THREADS_ENV, "").strip()
    if env.isdigit() and int(env) >= 1:
        return ThreadChoice(int(env), cores, None, from_env=True)
    busy = busy_cores(seconds)
    return ThreadChoice(cores if busy is None else threads_for(cores, busy), cores, busy)


def use_free_cores(what: str, logger: str = "electra.threads") -> ThreadChoice:
    """Choose the threads for `what` ("pre-training"), give them to torch and say so in one line. With
    OMP_NUM_THREADS set, torch took it when it was imported; it is only named."""
    choice = choose_threads()
    if not choice.from_env:
        import torch

        torch.set_num_threads(choice.threads)
    say(logger, choice.line(what))
    return choice
