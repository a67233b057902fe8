"""Folders to carry to a lent GPU machine: the Python wheels its image lacks, ours included.

The device machine (see /work/.library/device) reaches no package index and starts bare on every lease. Its
image has Python 3.12 with torch, transformers, tokenizers, safetensors, numpy, onnx and onnxruntime (CPU),
but not msgspec, seqeval, litestar, uvicorn or onnxruntime-gpu; a call carries at most 64 MiB of
git-ignored paths. This writes, under .carry/ (git-ignored):

  .carry/train/       our wheel, msgspec and seqeval: what `electra data/pretrain/finetune/export` need
                      beyond the image (checked on a Python 3.12 environment with the image's versions)
  .carry/serve/       the same, plus litestar, uvicorn, httptools, swagger-ui-py and their dependencies
  .carry/ort-gpu-N/   onnxruntime-gpu in parts of 60 MB, one folder per call (calls back to back keep the
                      machine, and what earlier calls left outside the work tree)

Each folder holds manifest.json (every file's size and sha256) and install.py, run there with the image's
python3:

  python3 .carry/train/install.py           installs every carried wheel whose project the image lacks
                                            (--no-deps, --no-index; never replaces one of the image's)
  python3 .carry/ort-gpu-1/install.py       keeps part 1 in /root/ort-gpu-parts; the last part's call joins
                                            the parts, checks the sha256 and installs the wheel with
                                            --target /root/ort-gpu, which goes first on PYTHONPATH (the
                                            image's CPU onnxruntime stays, shadowed)

    python bench/gpu_carry.py train         # then run(carry=[".carry/train"], ...)
    python bench/gpu_carry.py serve --ort   # also the onnxruntime-gpu parts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".carry"
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# Beyond the image, for each purpose. seqeval ships only a source archive: it is built into a wheel here.
NEEDS = {
    "train": {"wheels": ["msgspec>=0.18"], "built": ["seqeval>=1.2"]},
    "serve": {
        "wheels": [
            "msgspec>=0.18",
            "litestar>=2.12",
            "uvicorn>=0.30",
            "httptools>=0.6",
            "swagger-ui-py>=25.7",
            "prometheus-client>=0.20",
        ],
        "built": ["seqeval>=1.2"],
    },
}
ORT_GPU = "onnxruntime-gpu==1.31.1"  # constraints.txt's
PART_BYTES = 60 * 1000 * 1000
CALL_LIMIT_BYTES = 64 * 1024 * 1024
MANIFEST = "manifest.json"

INSTALL_PY = r'''"""Install this carried folder (bench/gpu_carry.py wrote it; see its docstring)."""
import hashlib, json, os, re, subprocess, sys
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Outside the work tree, so the parts and the install outlive the call (while the machine stays warm).
PARTS = Path(os.environ.get("ELECTRA_CARRY_PARTS", "/root/ort-gpu-parts"))
TARGET = Path(os.environ.get("ELECTRA_CARRY_TARGET", "/root/ort-gpu"))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def project(wheel_name):
    return re.sub(r"[-_.]+", "-", wheel_name.split("-")[0]).lower()


def installed(name):
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def pip(*args):
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", *args]
    subprocess.run(command, check=True)


manifest = json.loads((HERE / "manifest.json").read_text())
for name, entry in manifest["files"].items():
    if sha256(HERE / name) != entry["sha256"]:
        sys.exit(f"{HERE / name}: sha256 differs from the manifest; carry it again")
if "ort_gpu" in manifest:
    ort = manifest["ort_gpu"]
    PARTS.mkdir(parents=True, exist_ok=True)
    for name in manifest["files"]:
        (PARTS / name).write_bytes((HERE / name).read_bytes())
    have = sorted(p.name for p in PARTS.iterdir() if p.name in ort["parts"])
    if have != sorted(ort["parts"]):
        print(f"onnxruntime-gpu: {len(have)} of {len(ort['parts'])} parts here; carry the next folder now")
        sys.exit(0)
    wheel = PARTS / ort["wheel"]
    with open(wheel, "wb") as out:
        for part in ort["parts"]:
            out.write((PARTS / part).read_bytes())
    if sha256(wheel) != ort["sha256"]:
        sys.exit(f"{wheel}: the joined parts' sha256 differs from the wheel's; carry the parts again")
    pip("--target", str(TARGET), str(wheel))
    print(f"onnxruntime-gpu installed in {TARGET}: export PYTHONPATH={TARGET}:$PYTHONPATH")
else:
    wheels = sorted(HERE.glob("*.whl"))
    ours = [w for w in wheels if project(w.name) == "electra"]
    missing = [w for w in wheels if w not in ours and not installed(project(w.name))]
    if missing:
        pip(*map(str, missing))
    pip("--force-reinstall", *map(str, ours))
    print(f"installed {len(missing)} missing wheel(s) and electra; kept the image's for the rest")
'''


def run(*args: str, cwd: Path | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, cwd=cwd)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_args(dest: Path) -> list[str]:
    """`pip download` for the device machine's interpreter and platform, binary wheels only."""
    args = ["download", "-q", "--only-binary=:all:", "--python-version", PYTHON_VERSION]
    args += ["--implementation", "cp"]
    for platform in PLATFORMS:
        args += ["--platform", platform]
    return [*args, "-d", str(dest)]


def write_manifest(folder: Path, extra: dict | None = None) -> int:
    """manifest.json and install.py in `folder`; the folder's total size in bytes."""
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(folder.iterdir())
        if p.name not in (MANIFEST, "install.py")
    }
    (folder / MANIFEST).write_text(json.dumps({"files": files, **(extra or {})}, indent=1) + "\n")
    (folder / "install.py").write_text(INSTALL_PY)
    return sum(p.stat().st_size for p in folder.iterdir())


def build_wheels(purpose: str, folder: Path) -> None:
    needs = NEEDS[purpose]
    run("wheel", "-q", "--no-deps", "-w", str(folder), str(ROOT))
    # Serving pulls its dependencies' closure; the installer skips what the image already has.
    deps = [] if purpose == "serve" else ["--no-deps"]
    run(*download_args(folder), *deps, *needs["wheels"])
    run("wheel", "-q", "--no-deps", "-w", str(folder), *needs["built"])


def split_parts(wheel: Path, out: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """`wheel` cut into .carry/ort-gpu-N folders of one part each, with their manifests."""
    parts = []
    with wheel.open("rb") as f:
        while chunk := f.read(part_bytes):
            folder = out / f"ort-gpu-{len(parts) + 1}"
            folder.mkdir(parents=True)
            part = folder / f"{wheel.name}.part-{len(parts) + 1:02d}"
            part.write_bytes(chunk)
            parts.append(part)
    info = {"wheel": wheel.name, "sha256": sha256(wheel), "parts": [p.name for p in parts]}
    for part in parts:
        write_manifest(part.parent, {"ort_gpu": info})
    return parts


def build(purpose: str, ort: bool, out: Path = CARRY) -> list[Path]:
    """The folders for `purpose`, written whole or not at all (each built in a temporary folder first)."""
    out.mkdir(exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        staged = Path(tmp) / purpose
        staged.mkdir()
        build_wheels(purpose, staged)
        size = write_manifest(staged)
        if size > CALL_LIMIT_BYTES:
            raise SystemExit(f"{purpose}: {size / 2**20:.1f} MiB, over a call's {CALL_LIMIT_BYTES >> 20} MiB")
        folders = [staged]
        if ort:
            wheels = Path(tmp) / "ort"
            run(*download_args(wheels), "--no-deps", ORT_GPU)
            folders += [p.parent for p in split_parts(next(wheels.glob("*.whl")), Path(tmp))]
        for folder in folders:
            final = out / folder.name
            if final.exists():
                shutil.rmtree(final)
            folder.rename(final)
            made.append(final)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("purpose", choices=sorted(NEEDS))
    ap.add_argument("--ort", action="store_true", help="also onnxruntime-gpu, in 60 MB parts")
    args = ap.parse_args(argv)
    for folder in build(args.purpose, args.ort):
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"{folder.relative_to(ROOT)}: {len(list(folder.iterdir()))} files, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
