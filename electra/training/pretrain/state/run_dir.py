"""The run directory (`--out`): refusing to mix two runs in it, and recording the run's configuration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from electra.errors import InputError
from electra.files import (
    CHECKPOINTS_DIR,
    DISCRIMINATOR_DIR,
    GENERATOR_DIR,
    METRICS_JSONL,
    MLM_DIR,
    RUN_CONFIG_JSON,
)

# What a run writes, so --overwrite removes exactly that and leaves anything else the user keeps there.
RUN_OUTPUTS = (CHECKPOINTS_DIR, METRICS_JSONL, DISCRIMINATOR_DIR, GENERATOR_DIR, MLM_DIR, RUN_CONFIG_JSON)


def prepare_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """Create `out`; refuse one that holds a run unless resuming it, or clear it for --overwrite."""
    if out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out} exists and is not a directory")
        has_run = (out / CHECKPOINTS_DIR).exists() or (out / METRICS_JSONL).exists()
        if not resume and has_run and not overwrite:
            raise InputError(
                f"{out} already holds a run; pass --resume to continue it or --overwrite to start over"
            )
        if not resume and overwrite:
            for name in RUN_OUTPUTS:
                target = out / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_run_config(out: Path, config: dict[str, Any]) -> None:
    (out / RUN_CONFIG_JSON).write_text(json.dumps(config, indent=2) + "\n")
