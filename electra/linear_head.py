"""The official recipe's linear classifier head as transformers knows it: the model type a classifier with
that head is saved under, and config.json's `auto_map` to the remote code saved beside it
(modeling_electra_linear.py, which registers that model type). transformers' own ELECTRA class has the
two-layer head; under a model type of its own, a plain `AutoModelForSequenceClassification` or `pipeline`
call stops with transformers' "pass trust_remote_code=True" instead of loading weights of the wrong shape."""

from __future__ import annotations

from electra.files import LINEAR_HEAD_CODE

LINEAR_MODEL_TYPE = "electra_linear"
LINEAR_HEAD_MODULE = LINEAR_HEAD_CODE.removesuffix(".py")
LINEAR_HEAD_AUTO_MAP = {
    "AutoConfig": f"{LINEAR_HEAD_MODULE}.ElectraLinearConfig",
    "AutoModelForSequenceClassification": f"{LINEAR_HEAD_MODULE}.ElectraForSequenceClassification",
}
