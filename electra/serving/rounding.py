"""Scores as answers carry them: rounded to 6 decimals.

A float32 model's probability holds about 7 significant digits; printed from a float64 it would show 17
(0.9154459781096238), which no one can read and which the model never computed. 6 decimals keep every digit
a float32 probability holds near 1 and differ from the unrounded score by at most 5e-7. The tensor protocol
(KServe v2, electra.serving.open_inference) returns the model's float32 tensors as they are.
"""

from __future__ import annotations

import numpy as np

DECIMALS = 6


def rounded(values: np.ndarray) -> list[float]:
    """Every value rounded, as Python floats (one conversion, not a numpy scalar per value)."""
    return np.round(np.asarray(values, dtype=np.float64), DECIMALS).tolist()


def rounded_one(value: float) -> float:
    return round(float(value), DECIMALS)
