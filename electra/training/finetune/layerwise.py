"""Layer-wise learning-rate decay: one optimizer parameter group per depth of the classifier.

Both rules count depth from the input: the embeddings (and embeddings_project) at 0, encoder layer i at i+1.

* "official" is google-research/electra `model/optimization.py` _get_layer_lrs: the task head at depth n+2
  and lr x decay^(n+2-depth), so the head trains at lr, the top layer at decay^2 (no layer at decay^1) and
  the embeddings at decay^(n+2). The code that produced the paper's numbers.
* "intended" is the rule the maintainers say was meant (google-research/electra issue #51: the extra factor
  is left over from a pooler that was removed): the head counts as one more layer, at depth n+1, and
  lr x decay^(n+1-depth): head lr, top layer decay^1, embeddings decay^(n+1).
"""

from __future__ import annotations

from torch import nn

from electra.training.finetune.recipe import LayerwiseRule
from electra.training.optim import uses_weight_decay

_LAYER_PREFIX = "electra.encoder.layer."
_EMBEDDING_PREFIXES = ("electra.embeddings.", "electra.embeddings_project.")


def depth(name: str, n_layers: int, rule: LayerwiseRule) -> int:
    """A parameter's depth: 0 for the embeddings, i+1 for layer i, the rule's head depth otherwise."""
    if name.startswith(_LAYER_PREFIX):
        return int(name[len(_LAYER_PREFIX) :].split(".")[0]) + 1
    if name.startswith(_EMBEDDING_PREFIXES):
        return 0
    return top_depth(n_layers, rule)  # the task head (classifier.*)


def top_depth(n_layers: int, rule: LayerwiseRule) -> int:
    """The head's depth, where the learning rate is undecayed."""
    return n_layers + 2 if rule == "official" else n_layers + 1


def lr_scale(name: str, n_layers: int, decay: float, rule: LayerwiseRule) -> float:
    return decay ** (top_depth(n_layers, rule) - depth(name, n_layers, rule))


def layerwise_groups(
    model: nn.Module, lr: float, decay: float, weight_decay: float, rule: LayerwiseRule
) -> list[dict]:
    """A group per (depth, decayed or not): lr x lr_scale, weight decay off for biases and LayerNorm."""
    n = model.config.num_hidden_layers
    groups: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, p in model.named_parameters():
        no_decay = not uses_weight_decay(name)
        groups.setdefault((lr_scale(name, n, decay, rule), no_decay), []).append(p)
    return [
        {"params": params, "lr": lr * scale, "weight_decay": 0.0 if no_decay else weight_decay}
        for (scale, no_decay), params in sorted(groups.items(), key=lambda kv: (-kv[0][0], kv[0][1]))
    ]
