"""electra: pre-train, fine-tune, export and serve ELECTRA text encoders."""

__version__ = "0.1.0"
