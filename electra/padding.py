"""Right padding of token id rows into model inputs, shared by fine-tuning, export parity and serving.

Right padding with an attention mask is what the fused ONNX attention expects (per-row lengths), so every
stage pads the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PADDING_SIDE = "right"


def pad_rows(
    ids: Sequence[Sequence[int] | np.ndarray],
    type_ids: Sequence[Sequence[int] | np.ndarray],
    pad_id: int,
    width: int | None = None,
) -> dict[str, np.ndarray]:
    """int64 `input_ids`, `attention_mask` and `token_type_ids`, padded on the right to `width` (default, or
    when shorter: the longest row)."""
    width = max(width or 0, max((len(row) for row in ids), default=0))
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    token_types = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for r, (row, types) in enumerate(zip(ids, type_ids, strict=True)):
        n = len(row)
        input_ids[r, :n] = row
        token_types[r, :n] = types
        mask[r, :n] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": token_types}
