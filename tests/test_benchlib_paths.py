"""Results name no machine's paths: bench/benchlib.portable_path, and a scan of bench/results and
experiments/results."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench.benchlib import SHARED_DATA, portable_path

ROOT = Path(__file__).resolve().parents[1]

MACHINE_PATH = re.compile(r"/(?:work|tmp|root|home|Users)/")


def test_a_path_in_the_repository_is_relative_to_its_root() -> None:
    assert portable_path(ROOT / "bench" / "naive_server.py") == "bench/naive_server.py"
    assert portable_path(str(ROOT / "bench" / "results")) == "bench/results"
    assert portable_path(ROOT) == "."


def test_a_shared_data_path_is_relative_to_the_data_root() -> None:
    assert portable_path(SHARED_DATA / "glue" / "SST-2" / "dev.tsv") == "<shared data>/glue/SST-2/dev.tsv"
    assert portable_path(SHARED_DATA / "corpus" / "*" / "wiki_0*") == "<shared data>/corpus/*/wiki_0*"
    assert portable_path(SHARED_DATA) == "<shared data>"


def test_a_path_in_the_work_dir_keeps_its_place_there(tmp_path: Path) -> None:
    assert portable_path(tmp_path / "detector-fp32", work=tmp_path) == "<work>/detector-fp32"
    assert portable_path(tmp_path / "a" / "b", work=str(tmp_path)) == "<work>/a/b"


@pytest.mark.parametrize(
    "path",
    ["/tmp/runs/sbwork/detector-fp32", "/home/someone/x/detector-fp32", "/work/runs/detector-fp32/"],
)
def test_any_other_path_keeps_only_its_name(path: str) -> None:
    assert portable_path(path) == "<work>/detector-fp32"


def test_no_tracked_result_names_a_machine_path() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "bench/results", "experiments/results"], cwd=ROOT, capture_output=True
    )
    files = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    if listed.returncode != 0 or not files:
        pytest.skip("not a git checkout")
    found = []
    for f in files:
        data = f.read_bytes() if f.is_file() else b""
        if b"\0" in data:  # a picture
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE_PATH.search(line):
                found.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:160]}")
    assert not found, "machine paths in results (record them with benchlib.portable_path):\n" + "\n".join(
        found
    )
