"""The Litestar inference server (ONNX Runtime + tokenizers; no torch, no transformers)."""
