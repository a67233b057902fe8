"""The run directory (`--out`): refusing to mix two runs in it, and recording the run's configuration."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from electra.atomic import inside
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


def check_out_dir(out: Path, resume: bool, overwrite: bool, inputs: Sequence[Path] = ()) -> None:
    """Refuse an `out` that holds a run unless resuming it or starting over (--overwrite), and, starting
    over, one whose outputs hold an input (the data, --init): clearing them would delete it."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    has_run = (out / CHECKPOINTS_DIR).exists() or (out / METRICS_JSONL).exists()
    if not resume and has_run and not overwrite:
        raise InputError(
            f"{out} already holds a run; pass --resume to continue it or --overwrite to start over"
        )
    if not resume and overwrite:
        for given in inputs:
            for name in RUN_OUTPUTS:
                if given.exists() and (out / name).exists() and inside(given, out / name):
                    raise InputError(
                        f"{given} is in {out / name}, which --overwrite deletes; copy it elsewhere or "
                        "choose another --out"
                    )


def prepare_out_dir(out: Path, resume: bool, overwrite: bool, inputs: Sequence[Path] = ()) -> None:
    """Create `out`, checked (check_out_dir); clear the run it holds for --overwrite. Called once the run's
    setup has succeeded, so a mistake in it (a wrong --init, say) leaves the old run in place."""
    check_out_dir(out, resume, overwrite, inputs)
    if out.exists() and not resume and overwrite:
        for name in RUN_OUTPUTS:
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_run_config(out: Path, config: dict[str, Any]) -> None:
    (out / RUN_CONFIG_JSON).write_text(json.dumps(config, indent=2) + "\n")
