"""Layer-wise learning-rate decay: one optimizer parameter group per depth of the classifier.

The classifier head and the top encoder layer train at the full learning rate and each layer below at `decay`
times the one above; the embeddings sit below layer 0. The official code (`_get_layer_lrs`) puts the head at
depth n+2 and the top layer at n, so its top layer already gets decay^2 and its embeddings decay^(n+2); we use
decay^0 for the top layer and decay^n for the embeddings, which is what the paper describes.
"""

from __future__ import annotations

from torch import nn

from electra.training.optim import uses_weight_decay


def layerwise_groups(model: nn.Module, lr: float, decay: float, weight_decay: float) -> list[dict]:
    """A group per depth: head and top layer at lr, each layer below x decay, embeddings lowest."""
    n = model.config.num_hidden_layers
    groups: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, p in model.named_parameters():
        if name.startswith("electra.encoder.layer."):
            depth = int(name.split(".")[3])
            scale = decay ** (n - 1 - depth)
        elif name.startswith("electra.embeddings"):
            scale = decay**n
        else:
            scale = 1.0  # the classifier head
        no_decay = not uses_weight_decay(name)
        groups.setdefault((scale, no_decay), []).append(p)
    return [
        {"params": params, "lr": lr * scale, "weight_decay": 0.0 if no_decay else weight_decay}
        for (scale, no_decay), params in sorted(groups.items(), key=lambda kv: -kv[0][0])
    ]
