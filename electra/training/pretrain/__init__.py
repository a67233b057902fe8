"""Stage 2: joint generator + discriminator pre-training (and the masked-LM baseline)."""
