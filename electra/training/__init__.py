"""Pre-training data pipeline, pre-training and fine-tuning (PyTorch)."""
