"""Every file and directory name the pipeline writes or reads, defined once.

The stages meet only through files on disk (data -> run -> model -> bundle -> server), so these names are the
contract between them: a reader and its writer import the same constant.
"""

from __future__ import annotations

# Hugging Face model directories (transformers' names).
CONFIG_JSON = "config.json"
MODEL_SAFETENSORS = "model.safetensors"
PYTORCH_MODEL_BIN = "pytorch_model.bin"
# transformers' remote code for the official linear classifier head (electra/modeling_electra_linear.py),
# saved next to such a classifier's weights and named in its config.json's auto_map.
LINEAR_HEAD_CODE = "modeling_electra_linear.py"

# Tokenizer files (a Hugging Face tokenizer directory).
TOKENIZER_JSON = "tokenizer.json"
VOCAB_TXT = "vocab.txt"
TOKENIZER_CONFIG_JSON = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_JSON = "special_tokens_map.json"

# Prepared pre-training data (`electra data prepare`).
DATA_MANIFEST_JSON = "manifest.json"
DATA_TOKENIZER_DIR = "tokenizer"

# A pre-training run (`electra pretrain --out`).
RUN_CONFIG_JSON = "run_config.json"
METRICS_JSONL = "metrics.jsonl"
CURVES_PNG = "curves.png"
CHECKPOINTS_DIR = "checkpoints"
DISCRIMINATOR_DIR = "discriminator"
GENERATOR_DIR = "generator"
MLM_DIR = "mlm"

# A fine-tuned model (`electra finetune --out`): a Hugging Face directory plus its results.
EVAL_RESULTS_JSON = "eval_results.json"

# An ONNX bundle (`electra export --out`).
BUNDLE_JSON = "bundle.json"
MODEL_ONNX = "model.onnx"
