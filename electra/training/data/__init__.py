"""Stage 1: corpus reading, tokenizer training, packing and the memory-mapped pre-training data (no torch)."""
