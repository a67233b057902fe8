"""The official ELECTRA classifier head for transformers: remote code saved with every classifier that
`electra finetune` writes with the `linear` head (the `official` and `intended` recipes).

config.json names this file in `auto_map` and gives the directory a model type of its own ("electra_linear"),
so in transformers

    AutoModelForSequenceClassification.from_pretrained(model_dir, trust_remote_code=True)
    pipeline("text-classification", model=model_dir, trust_remote_code=True)

build this class and load the directory's weights unchanged, giving the logits electra computes (the head's
weights are `classifier.dense.*`, as electra.model.ElectraLinearClassificationHead saves them). Without
`trust_remote_code=True` transformers knows no class for that model type and refuses with its own message,
asking for `trust_remote_code=True`: never its own head at random, nor a size mismatch.

transformers copies this one file next to its cache of remote code, so it imports only torch and
transformers, never electra.
"""

from __future__ import annotations

from torch import Tensor, nn
from transformers import ElectraConfig
from transformers.models.electra import modeling_electra


class ElectraLinearClassificationHead(nn.Module):
    """google-research/electra's head (finetune/classification/classification_tasks.py): dropout on the
    [CLS] vector, then one dense layer to the labels."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.dense = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.dense(self.dropout(hidden[:, 0]))


class ElectraLinearConfig(ElectraConfig):
    """transformers' ElectraConfig under a model type of its own, which only this file's classes load."""

    model_type = "electra_linear"


# transformers' class with the official head in place of its own: the forward pass, the losses of every
# problem type and the outputs are transformers'. It keeps transformers' class name because the pipelines
# check the name against the classes they support and log an error for any other.
class ElectraForSequenceClassification(modeling_electra.ElectraForSequenceClassification):
    config_class = ElectraLinearConfig

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.classifier = ElectraLinearClassificationHead(config)
        self.post_init()
