"""The input shapes a model meets: each batch's length rounded up to a multiple (`--pad-to-multiple-of`), and
the shapes warm-up runs before the server turns ready.

On a GPU the first call of each new input shape is slow (kernels chosen and loaded for it, memory grown), many
times a later call's time (bench/serve_warmup.py measures it). Rounding lengths up to a multiple bounds the
lengths a model can meet (max_seq_len / multiple of them), so warm-up can run every one, at one row, at the
most rows the token budget allows and at half that, and no request pays for a new shape.
On a CPU a new shape costs little and padding costs compute in proportion, so there the multiple is 1 (each
batch padded to its longest row, as before) and warm-up runs a few shapes only.
"""

from __future__ import annotations

# With a multiple of 1 lengths are unbounded: warm-up runs these shapes (rows, tokens), the ones a server
# meets first, and two rows of the model's full length.
FEW_SHAPES = ((1, 16), (4, 16))


def padded_length(length: int, multiple: int, limit: int) -> int:
    """`length` rounded up to a multiple of `multiple`, but not past `limit` (the model's length)."""
    if multiple <= 1:
        return length
    return max(length, min(limit, -(-length // multiple) * multiple))


def bucket_lengths(limit: int, multiple: int) -> list[int]:
    """Every length a batch can be padded to with `multiple` > 1: its multiples up to `limit`, and `limit`."""
    return sorted({*range(multiple, limit + 1, multiple), limit})


def warm_up_shapes(
    limit: int, multiple: int, max_batch_size: int, max_batch_tokens: int
) -> list[tuple[int, int]]:
    """(rows, tokens) of each call warm-up makes: with buckets, every bucket's length at one row, half the
    most rows and the most rows a batch of that length can have; else FEW_SHAPES and two rows of the model's
    length."""
    if multiple <= 1:
        return [(rows, min(tokens, limit)) for rows, tokens in FEW_SHAPES] + [(2, limit)]
    shapes = []
    for tokens in bucket_lengths(limit, multiple):
        most = max(1, min(max_batch_size, max_batch_tokens // tokens))
        shapes += [(rows, tokens) for rows in sorted({1, max(1, most // 2), most})]
    return shapes
