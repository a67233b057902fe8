"""A compact ELECTRA in plain PyTorch: embeddings, a post-LN Transformer encoder and four heads.

Module and parameter names mirror transformers' `ElectraForPreTraining`, `ElectraForMaskedLM`,
`ElectraForSequenceClassification` and `ElectraForTokenClassification` one for one
(`electra.encoder.layer.0.attention.self.query.weight`, ...), so their state dicts load into these classes
unchanged and vice versa. That is why some attributes carry HF's odd names (`LayerNorm`, `self`, `output`).
The one exception is the classifier's optional "linear" head (the official ELECTRA head), which
transformers has no class for.

Attention has two interchangeable paths (`attn_impl`): "sdpa" (torch's fused kernels, the default) and
"math", the explicit BERT-shaped graph that ONNX Runtime's transformer optimizer pattern-matches into fused
`Attention` nodes. SDPA takes no mask for a batch without padding (so that it may run its flash kernel) and
a boolean one otherwise; the explicit graph takes the additive float mask the fusion expects. Both agree to
float rounding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from electra.config import ATTN_IMPLS, AttnImpl, ElectraConfig

Kind = Literal["discriminator", "generator", "classifier", "tagger"]
ClassifierHead = Literal["hf", "linear"]
CLASSIFIER_HEADS: tuple[ClassifierHead, ...] = ("hf", "linear")


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """transformers' ACT2FN semantics: "gelu" is exact (erf), "gelu_new" & co. the tanh approximation."""
    if name == "gelu":
        return F.gelu
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return functools.partial(F.gelu, approximate="tanh")
    return {"relu": F.relu, "silu": F.silu, "swish": F.silu, "tanh": torch.tanh}[name]


def extended_attention_mask(attention_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """(B, L) 0/1 padding mask -> additive (B, 1, 1, L): 0 to attend, the dtype's minimum to ignore.

    Same form as transformers' get_extended_attention_mask, which ONNX Runtime's fusion expects upstream of
    the attention Add.
    """
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


def attention_mask_for(attention_mask: Tensor | None, impl: AttnImpl, dtype: torch.dtype) -> Tensor | None:
    """What attention takes for a (B, L) 0/1 padding mask: None without one; for SDPA a boolean (B, 1, 1, L),
    True where it attends (a float mask rules out the flash kernel and costs a cast and an add per layer); for
    the explicit graph the additive float mask (extended_attention_mask)."""
    if attention_mask is None:
        return None
    if impl == "sdpa":
        return attention_mask[:, None, None, :].bool()
    return extended_attention_mask(attention_mask, dtype)


class ElectraEmbeddings(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, dropout (width embedding_size)."""

    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.embedding_size, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.embedding_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.embedding_size)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        # A slice of a constant buffer, as transformers does, rather than arange: ONNX Runtime's
        # EmbedLayerNormalization fusion matches this pattern. Non-persistent: not part of any checkpoint.
        self.register_buffer(
            "position_ids", torch.arange(cfg.max_position_embeddings).unsqueeze(0), persistent=False
        )

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = self.position_ids[:, : input_ids.shape[1]]
        # Summation order as in transformers, so fp32 results match bit for bit.
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        # transformers saved the index buffers position_ids/token_type_ids in older releases (non-persistent
        # since 4.31). They hold no weights, so accept and drop them: strict loading works with both.
        for name in ("position_ids", "token_type_ids"):
            state_dict.pop(prefix + name, None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class ElectraSelfAttention(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.num_heads, self.head_dim = cfg.num_attention_heads, cfg.head_dim
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.attention_probs_dropout_prob)
        self.attn_impl: AttnImpl = cfg.attn_impl

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        B, _, H = x.shape
        q = self.query(x).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)  # (B, nh, L, hd)
        k = self.key(x).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
        # Training on the CPU with attention dropout, SDPA falls back to its reference implementation plus
        # checks, which measured 5-8% slower per step than the explicit graph (bench/tagger_vs_hf.py).
        cpu_dropout = self.training and self.dropout.p > 0 and x.device.type == "cpu"
        if self.attn_impl == "sdpa" and not cpu_dropout:
            # Without a mask SDPA may pick its flash kernel on GPU; a boolean one leaves it the
            # memory-efficient kernel.
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout.p if self.training else 0.0
            )
        else:
            # Keep this exact op sequence: ONNX Runtime's BERT attention fusion matches it.
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if mask is not None and mask.dtype == torch.bool:
                # SDPA's boolean mask on the CPU dropout path: the same scores as the additive mask gives.
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            elif mask is not None:
                scores = scores + mask
            probs = self.dropout(F.softmax(scores, dim=-1))
            y = torch.matmul(probs, v)
        return y.permute(0, 2, 1, 3).contiguous().view(B, -1, H)


class ElectraResidualOutput(nn.Module):
    """HF's *Output blocks (post-LN): LayerNorm(dropout(dense(h)) + residual)."""

    def __init__(self, d_in: int, cfg: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, h: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class ElectraAttention(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.self = ElectraSelfAttention(cfg)
        self.output = ElectraResidualOutput(cfg.hidden_size, cfg)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.output(self.self(x, mask), x)


class ElectraIntermediate(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = activation(cfg.hidden_act)

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class ElectraLayer(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.attention = ElectraAttention(cfg)
        self.intermediate = ElectraIntermediate(cfg)
        self.output = ElectraResidualOutput(cfg.intermediate_size, cfg)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class ElectraEncoder(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(ElectraLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class ElectraModel(nn.Module):
    """The backbone (HF's ElectraModel): embeddings -> [projection to hidden_size] -> encoder -> (B, L, H)."""

    def __init__(self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None = None) -> None:
        super().__init__()
        self.embeddings = embeddings if embeddings is not None else ElectraEmbeddings(cfg)
        # Identity holds no parameters, so the state dict has embeddings_project.* exactly when HF's does.
        self.embeddings_project: nn.Module = (
            nn.Linear(cfg.embedding_size, cfg.hidden_size)
            if cfg.embedding_size != cfg.hidden_size
            else nn.Identity()
        )
        self.encoder = ElectraEncoder(cfg)
        # The model's config (set_attention_impl edits its attn_impl), for the form of the attention mask.
        self.config = cfg

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """attention_mask None: every position is a token (no padding), attention runs unmasked."""
        x = self.embeddings_project(self.embeddings(input_ids, token_type_ids))
        return self.encoder(x, attention_mask_for(attention_mask, self.config.attn_impl, x.dtype))


class ElectraPreTrainedModel(nn.Module):
    """Shared plumbing of the three heads: HF-style init, attention switch, embedding sharing."""

    kind: ClassVar[Kind]
    hf_architecture: ClassVar[str]

    def __init__(self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None) -> None:
        super().__init__()
        if embeddings is not None:
            _check_embeddings(embeddings, cfg)
        self.config = cfg.replace()  # own copy: set_attention_impl edits it
        self.electra = ElectraModel(self.config, embeddings)

    def _init_weights(self, skip: Iterable[nn.Parameter] = ()) -> None:
        """transformers' _init_weights: N(0, initializer_range) weights, zero biases, unit LayerNorms.

        Each Parameter is initialised once (a tied output weight keeps its embedding's values, including the
        zeroed padding row), and `skip` (a borrowed, already trained embedding block) is left alone.
        """
        done = {id(p) for p in skip}
        std = self.config.initializer_range
        with torch.no_grad():
            for m in self.modules():
                for name, p in m.named_parameters(recurse=False):
                    if id(p) in done:
                        continue
                    done.add(id(p))
                    if name == "bias":
                        p.zero_()
                    elif isinstance(m, nn.LayerNorm):
                        p.fill_(1.0)
                    else:
                        p.normal_(0.0, std)
                        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                            p[m.padding_idx].zero_()

    def _post_init(self, embeddings: ElectraEmbeddings | None) -> None:
        self._tie_output_weights()
        self._init_weights(skip=embeddings.parameters() if embeddings is not None else ())

    def _tie_output_weights(self) -> None:
        """Re-point any output weight at the word embeddings (the generator overrides this)."""

    def tie_embeddings_to(self, other: ElectraPreTrainedModel | ElectraEmbeddings) -> None:
        """Use `other`'s embedding block (the same Parameter objects) from now on, as the ELECTRA generator
        does with the discriminator's. Call before building the optimizer: this model's own block is dropped.
        """
        emb = other.electra.embeddings if isinstance(other, ElectraPreTrainedModel) else other
        _check_embeddings(emb, self.config)
        self.electra.embeddings = emb
        self._tie_output_weights()

    def set_attention_impl(self, impl: AttnImpl) -> None:
        """Switch every attention layer between "sdpa" (default) and "math" (for ONNX export)."""
        if impl not in ATTN_IMPLS:
            raise ValueError(f"attention impl must be one of {ATTN_IMPLS}, got {impl!r}")
        self.config.attn_impl = impl
        for m in self.modules():
            if isinstance(m, ElectraSelfAttention):
                m.attn_impl = impl

    def num_parameters(self) -> int:
        """Unique parameters (a tied output weight counts once)."""
        return sum(p.numel() for p in self.parameters())


class ElectraDiscriminator(ElectraPreTrainedModel):
    """HF's ElectraForPreTraining: one replaced-token logit per position, (B, L)."""

    kind = "discriminator"
    hf_architecture = "ElectraForPreTraining"

    def __init__(self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None = None) -> None:
        super().__init__(cfg, embeddings)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(cfg)
        self._post_init(embeddings)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        return self.discriminator_predictions(self.electra(input_ids, attention_mask, token_type_ids))


class ElectraDiscriminatorPredictions(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.dense_prediction = nn.Linear(cfg.hidden_size, 1)

    def forward(self, h: Tensor) -> Tensor:
        return self.dense_prediction(self.act(self.dense(h))).squeeze(-1)


class ElectraGenerator(ElectraPreTrainedModel):
    """HF's ElectraForMaskedLM: the MLM generator, output projection tied to the word embeddings.

    forward(..., masked_positions) computes the head only where it is needed:
      * None: logits for every position, (B, L, V), as transformers does;
      * 1-D LongTensor (N,): flat indices into the B*L positions (e.g. `mask.flatten().nonzero().squeeze(1)`),
        logits (N, V) -- no padding, variable count per row;
      * 2-D LongTensor (B, K): per-row positions (a fixed number of predictions per sequence, static shapes
        for torch.compile), logits (B, K, V).
    """

    kind = "generator"
    hf_architecture = "ElectraForMaskedLM"

    def __init__(self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None = None) -> None:
        super().__init__(cfg, embeddings)
        self.generator_predictions = ElectraGeneratorPredictions(cfg)
        self.generator_lm_head = nn.Linear(cfg.embedding_size, cfg.vocab_size)
        self._post_init(embeddings)

    def _tie_output_weights(self) -> None:
        self.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        masked_positions: Tensor | None = None,
    ) -> Tensor:
        h = self.electra(input_ids, attention_mask, token_type_ids)
        if masked_positions is not None:
            # Gather first: the vocabulary projection is the costliest part of the generator.
            if masked_positions.dim() == 1:
                h = h.flatten(0, 1).index_select(0, masked_positions)
            else:
                h = torch.gather(h, 1, masked_positions.unsqueeze(-1).expand(-1, -1, h.shape[-1]))
        return self.generator_lm_head(self.generator_predictions(h))


class ElectraGeneratorPredictions(nn.Module):
    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.embedding_size)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)

    def forward(self, h: Tensor) -> Tensor:
        return self.LayerNorm(F.gelu(self.dense(h)))  # always exact gelu, whatever hidden_act says (as HF)


class ElectraClassifier(ElectraPreTrainedModel):
    """(B, num_labels) logits from the first ([CLS]) position, with one of two heads (`head`):

    * "hf": transformers' ElectraClassificationHead (dropout, dense, GELU, dropout, dense), so the model is
      HF's ElectraForSequenceClassification and loads there unchanged;
    * "linear": the head of the official code (google-research/electra finetune/classification/
      classification_tasks.py, get_prediction_module): dropout on the [CLS] vector, one dense layer to the
      labels. transformers has no such class; see ElectraLinearClassificationHead for how it refuses one.
    """

    kind = "classifier"
    hf_architecture = "ElectraForSequenceClassification"

    def __init__(
        self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None = None, head: ClassifierHead = "hf"
    ) -> None:
        super().__init__(cfg, embeddings)
        if head not in CLASSIFIER_HEADS:
            raise ValueError(f"classifier head must be one of {CLASSIFIER_HEADS}, got {head!r}")
        self.head: ClassifierHead = head
        self.classifier: ElectraClassificationHead | ElectraLinearClassificationHead = (
            ElectraClassificationHead(cfg) if head == "hf" else ElectraLinearClassificationHead(cfg)
        )
        self._post_init(embeddings)

    @property
    def output_layer(self) -> nn.Linear:
        """The head's last dense layer, the one whose outputs are the logits."""
        c = self.classifier
        return c.out_proj if isinstance(c, ElectraClassificationHead) else c.dense

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        return self.classifier(self.electra(input_ids, attention_mask, token_type_ids))


class ElectraClassificationHead(nn.Module):
    """transformers' ElectraClassificationHead. Not what ELECTRA's authors used (that is the linear head);
    Hugging Face added the extra dense + GELU layer in place of BERT's tanh pooler."""

    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        p = cfg.classifier_dropout if cfg.classifier_dropout is not None else cfg.hidden_dropout_prob
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(p)
        self.out_proj = nn.Linear(cfg.hidden_size, cfg.num_labels)

    def forward(self, h: Tensor) -> Tensor:
        x = self.dropout(h[:, 0])
        x = self.dropout(F.gelu(self.dense(x)))
        return self.out_proj(x)


class ElectraLinearClassificationHead(nn.Module):
    """The official head: dropout (0.1 in ELECTRA's configs) on the [CLS] vector, one dense layer.

    Its layer is called `dense` on purpose: saved as classifier.dense.weight of shape (num_labels, hidden), it
    clashes with the (hidden, hidden) layer of that name in transformers' head, so
    ElectraForSequenceClassification.from_pretrained refuses the directory (size mismatch) instead of loading
    it with a random head. (With num_labels == hidden_size it would not clash: the fine-tuning trainer
    refuses that combination.)
    """

    def __init__(self, cfg: ElectraConfig) -> None:
        super().__init__()
        p = cfg.classifier_dropout if cfg.classifier_dropout is not None else cfg.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.dense = nn.Linear(cfg.hidden_size, cfg.num_labels)

    def forward(self, h: Tensor) -> Tensor:
        return self.dense(self.dropout(h[:, 0]))


class ElectraTagger(ElectraPreTrainedModel):
    """HF's ElectraForTokenClassification: (B, L, num_labels) logits, one row per token.

    Dropout (`classifier_dropout`, else the hidden dropout), then one dense layer. With `classifier_dropout`
    0 it is the official head (google-research/electra finetune/tagging/tagging_tasks.py: tf.layers.dense on
    the sequence output, no dropout of its own), which the official fine-tuning recipe trains.
    """

    kind = "tagger"
    hf_architecture = "ElectraForTokenClassification"

    def __init__(self, cfg: ElectraConfig, embeddings: ElectraEmbeddings | None = None) -> None:
        super().__init__(cfg, embeddings)
        p = cfg.classifier_dropout if cfg.classifier_dropout is not None else cfg.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(cfg.hidden_size, cfg.num_labels)
        self._post_init(embeddings)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        return self.classifier(self.dropout(self.electra(input_ids, attention_mask, token_type_ids)))


ElectraHeadModel = ElectraDiscriminator | ElectraGenerator | ElectraClassifier | ElectraTagger
MODEL_CLASSES: dict[str, type[ElectraHeadModel]] = {
    "discriminator": ElectraDiscriminator,
    "generator": ElectraGenerator,
    "classifier": ElectraClassifier,
    "tagger": ElectraTagger,
}


def build_model(kind: Kind, cfg: ElectraConfig, head: ClassifierHead = "hf") -> ElectraHeadModel:
    """A freshly initialised model of the given kind (`head`: a classifier's head, ignored otherwise)."""
    if kind == "classifier":
        return ElectraClassifier(cfg, head=head)
    return MODEL_CLASSES[kind](cfg)


def _check_embeddings(emb: ElectraEmbeddings, cfg: ElectraConfig) -> None:
    want = {
        "word_embeddings": (cfg.vocab_size, cfg.embedding_size),
        "position_embeddings": (cfg.max_position_embeddings, cfg.embedding_size),
        "token_type_embeddings": (cfg.type_vocab_size, cfg.embedding_size),
    }
    for name, shape in want.items():
        got = tuple(getattr(emb, name).weight.shape)
        if got != shape:
            raise ValueError(f"cannot share embeddings: {name} is {got}, this config needs {shape}")
