"""bench/gpu_carry.py without a network: onnxruntime-gpu's parts, split here and joined by the generated
install.py as on the device machine (sha256 checked, installed with --target), and the manifests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_carry  # noqa: E402


def tiny_wheel(folder: Path) -> Path:
    """A valid wheel of one module, `carried`, big enough to need several parts."""
    wheel = folder / "carried-0.1-py3-none-any.whl"
    files = {
        "carried/__init__.py": "VALUE = 42\n" + "# padding\n" * 3000,
        "carried-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: carried\nVersion: 0.1\n",
        "carried-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{name},," for name in files] + ["carried-0.1.dist-info/RECORD,,"]
    files["carried-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


def install(folder: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELECTRA_CARRY_PARTS": str(tmp / "parts")}
    env["ELECTRA_CARRY_TARGET"] = str(tmp / "target")
    return subprocess.run(
        [sys.executable, str(folder / "install.py")], env=env, capture_output=True, text=True, timeout=120
    )


def test_parts_join_check_and_install_on_the_last_call(tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path)
    carry = tmp_path / "carry"
    parts = gpu_carry.split_parts(wheel, carry, part_bytes=10_000)
    assert len(parts) == 4
    assert b"".join(p.read_bytes() for p in parts) == wheel.read_bytes()
    manifest = json.loads((parts[0].parent / gpu_carry.MANIFEST).read_text())
    assert manifest["ort_gpu"]["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert list(manifest["files"]) == [parts[0].name]

    for i, part in enumerate(parts):  # one call per folder, in order
        done = install(part.parent, tmp_path)
        assert done.returncode == 0, done.stderr
        if i < len(parts) - 1:
            assert f"{i + 1} of {len(parts)} parts here" in done.stdout
    assert "onnxruntime-gpu installed" in done.stdout
    check = [sys.executable, "-c", "import carried; print(carried.VALUE)"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "target")}
    assert subprocess.run(check, env=env, capture_output=True, text=True).stdout.strip() == "42"


def test_a_damaged_part_is_refused_with_a_reason(tmp_path: Path) -> None:
    parts = gpu_carry.split_parts(tiny_wheel(tmp_path), tmp_path / "carry", part_bytes=10_000)
    damaged = bytearray(parts[1].read_bytes())
    damaged[100] ^= 0xFF
    parts[1].write_bytes(bytes(damaged))
    assert install(parts[0].parent, tmp_path).returncode == 0
    refused = install(parts[1].parent, tmp_path)
    assert refused.returncode != 0 and "sha256 differs from the manifest" in refused.stderr
    assert not (tmp_path / "target").exists()
