"""FLOP counts of a pre-training step, for model FLOPs utilisation (MFU), and accelerator peaks."""

from __future__ import annotations

from electra.config import ElectraConfig


def encoder_flops_per_token(cfg: ElectraConfig, seq_len: int) -> float:
    """Forward FLOPs per token of embeddings projection + encoder (multiply-add = 2 FLOPs)."""
    h, f = cfg.hidden_size, cfg.intermediate_size
    per_layer = 2 * (4 * h * h + 2 * h * f) + 2 * 2 * seq_len * h  # QKV+out proj, FFN; scores and mix
    proj = 2 * cfg.embedding_size * h if cfg.embedding_size != h else 0
    return cfg.num_hidden_layers * per_layer + proj


def electra_step_flops(
    disc: ElectraConfig, gen: ElectraConfig | None, tokens: int, seq_len: int, masked: int
) -> float:
    """Training FLOPs (forward + backward = 3x forward) of one step over `tokens` real tokens.

    The generator head runs on the `masked` positions only; the discriminator head on every token. With
    `gen=None` this is the masked-LM baseline: the discriminator-sized encoder with an MLM head.
    """
    fwd = tokens * (encoder_flops_per_token(disc, seq_len))
    if gen is not None:
        fwd += tokens * encoder_flops_per_token(gen, seq_len)
        fwd += tokens * 2 * (disc.hidden_size * disc.hidden_size + disc.hidden_size)  # discriminator head
        mlm = gen
    else:
        mlm = disc
    fwd += masked * 2 * (mlm.hidden_size * mlm.embedding_size + mlm.embedding_size * mlm.vocab_size)
    return 3.0 * fwd


# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, SXM parts.
_PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12, "L4": 121e12}


def peak_flops(device_name: str) -> float | None:
    for key, value in _PEAK_BF16.items():
        if key in device_name:
            if key == "H100" and "PCIe" in device_name:
                return 756e12
            return value
    return None
