"""A file's SHA-256, the one digest the pipeline records (checkpoint manifests, bundle provenance, result
files), read in blocks so a multi-gigabyte weights file never sits in memory whole."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
