"""Triton's classification extension: an output returned as its top classes instead of its tensor.

Specification: triton-inference-server/server, `docs/protocol/extension_classification.md`. A request asks
for it with the output parameter `classification` (tritonclient's `InferRequestedOutput(name,
class_count=N)`); the answer is a BYTES tensor [batch, min(N, classes)] whose elements read
"<value>:<index>:<label>" (without ":<label>" when the output has no labels), highest value first. Values are
written as Triton writes them (C++ `std::to_string` of the float: six decimals).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def top_classes(values: np.ndarray, count: int, labels: Sequence[str] | None) -> np.ndarray:
    """Each row's `count` highest values (fewer when the row is shorter) as classification strings."""
    rows = values.reshape(values.shape[0], -1)
    k = min(count, rows.shape[1])
    out = np.empty((rows.shape[0], k), dtype=object)
    for i, row in enumerate(rows):
        # Stable, so equal values keep index order: the same answer every time.
        for j, index in enumerate(np.argsort(-row, kind="stable")[:k]):
            label = "" if labels is None else f":{labels[index]}"
            out[i, j] = f"{float(row[index]):f}:{index}{label}"
    return out
