"""Scores as answers carry them: rounded to 6 decimals.

A float32 model's probability holds about 7 significant digits; printed from a float64 it would show 17
(0.9154459781096238), which no one can read and which the model never computed. 6 decimals keep every digit
a float32 probability holds near 1 and differ from the unrounded score by at most 5e-7. The tensor protocol
(KServe v2, electra.serving.http.open_inference) returns the model's float32 tensors as they are, and
text-embeddings-inference's routes (electra.serving.http.tei) the float32 scores as TEI writes them
(`as_float32`).
"""

from __future__ import annotations

import numpy as np

DECIMALS = 6


def rounded(values: np.ndarray) -> list[float]:
    """Every value rounded, as Python floats (one conversion, not a numpy scalar per value)."""
    return np.round(np.asarray(values, dtype=np.float64), DECIMALS).tolist()


def rounded_one(value: float) -> float:
    return round(float(value), DECIMALS)


def as_float32(values: list[float]) -> list[float]:
    """Every value as the float32 it rounds to, written as its shortest decimal (0.99712443, 4.5e-07): what
    text-embeddings-inference's JSON (serde's f32) writes; no digit beyond what a float32 holds, and a small
    score stays a small score rather than 0.0."""
    return [float(str(v)) for v in np.asarray(values, dtype=np.float32)]
