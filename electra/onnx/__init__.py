"""Export of discriminators and classifiers to fused ONNX bundles."""
