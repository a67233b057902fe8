"""ELECTRA model configuration: the paper's sizes, the generator sizing rule, Hugging Face config.json I/O.

Field names are exactly those of `transformers.ElectraConfig`, so a config.json written here is read by
transformers and one written by transformers is read here (unknown HF keys are ignored).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from electra.errors import InputError
from electra.linear_head import LINEAR_MODEL_TYPE
from electra.sizes import SIZES, generator_fraction

AttnImpl = Literal["sdpa", "math"]
ProblemType = Literal["single_label_classification", "multi_label_classification", "regression"]

# Activations the model implements; the names are transformers' ACT2FN keys so configs stay interchangeable.
ACTIVATIONS = ("gelu", "relu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "silu", "swish", "tanh")
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
ATTN_IMPLS = ("sdpa", "math")

# The keys HF architectures map to our four heads (see electra.model).
ARCHITECTURES = {
    "ElectraForPreTraining": "discriminator",
    "ElectraForMaskedLM": "generator",
    "ElectraForSequenceClassification": "classifier",
    "ElectraForTokenClassification": "tagger",
}

# Fields without which a config.json cannot describe the weights next to it: HF would silently fill in its
# defaults (ELECTRA-Small), and the load would then fail later with a confusing shape mismatch.
REQUIRED_HF_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


# A classifier with the official linear head is saved under a model type of its own (electra.linear_head);
# it is still ELECTRA.
MODEL_TYPES = ("electra", LINEAR_MODEL_TYPE)


# Labels of a classifier or tagger: far above any real task's, low enough that a config.json's num_labels
# cannot make the default label names (one per label) or the head out of proportion to the file.
MAX_LABELS = 100_000


def parameters_at_least(cfg: ElectraConfig) -> int:
    """A lower bound on the parameters of a model of `cfg` (embeddings, the encoder's weight matrices, a
    head of num_labels outputs), from the config alone: what building it would allocate, at least."""
    embeddings = (cfg.vocab_size + cfg.max_position_embeddings + cfg.type_vocab_size) * cfg.embedding_size
    layer = 4 * cfg.hidden_size * cfg.hidden_size + 2 * cfg.hidden_size * cfg.intermediate_size
    return embeddings + cfg.num_hidden_layers * layer + cfg.hidden_size * cfg.num_labels


@dataclass
class ElectraConfig:
    # Defaults are transformers' ElectraConfig defaults (the ELECTRA-Small discriminator).
    vocab_size: int = 30522
    embedding_size: int = 128
    hidden_size: int = 256
    num_hidden_layers: int = 12
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    # Sequence classification (ignored by the discriminator and generator heads).
    classifier_dropout: float | None = None  # None: hidden_dropout_prob, as in transformers
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: ProblemType | None = None
    # A multi-label classifier's threshold per label (chosen on its dev set by `electra finetune`): ours, kept
    # in config.json beside the labels (transformers keeps unknown keys as attributes); None elsewhere.
    label_thresholds: dict[str, float] | None = None
    # Runtime only, never written to config.json: "sdpa" for training/serving in PyTorch, "math" for the
    # explicit matmul/softmax graph that ONNX Runtime's transformer optimizer fuses into Attention nodes.
    attn_impl: AttnImpl = field(default="sdpa", compare=False)

    def __post_init__(self) -> None:
        # As in transformers, id2label (when given) decides num_labels.
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            self.num_labels = len(self.id2label)
        else:
            if isinstance(self.num_labels, int) and self.num_labels > MAX_LABELS:
                raise InputError(f"num_labels must be at most {MAX_LABELS:,}, got {self.num_labels:,}")
            self.id2label = {i: f"LABEL_{i}" for i in range(self.num_labels)}
        if self.label2id is not None:
            self.label2id = {str(k): int(v) for k, v in self.label2id.items()}
        else:
            self.label2id = {v: k for k, v in self.id2label.items()}
        self.validate()

    def validate(self) -> None:
        """Raise InputError (without a file name; callers that read a file add it) for an unusable config."""
        positive = (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_labels",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise InputError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}); change one of them"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise InputError(f"{name} must be in [0, 1), got {value!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise InputError(
                f"hidden_act {self.hidden_act!r} is not supported; use one of {', '.join(ACTIVATIONS)}"
            )
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise InputError(
                f"problem_type {self.problem_type!r} is not supported; use one of {', '.join(PROBLEM_TYPES)}"
            )
        if self.attn_impl not in ATTN_IMPLS:
            raise InputError(
                f"attn_impl {self.attn_impl!r} is not supported; use one of {', '.join(ATTN_IMPLS)}"
            )
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise InputError(
                f"pad_token_id ({self.pad_token_id}) must be in [0, vocab_size={self.vocab_size})"
            )
        if self.initializer_range <= 0 or self.layer_norm_eps <= 0:
            raise InputError("initializer_range and layer_norm_eps must be positive")
        if sorted(self.id2label) != list(range(self.num_labels)):
            raise InputError(f"id2label keys must be 0..{self.num_labels - 1}, got {sorted(self.id2label)}")
        if {self.label2id[v] for v in self.id2label.values() if v in self.label2id} != set(self.id2label):
            raise InputError("label2id must be the inverse of id2label")
        if self.label_thresholds is not None:
            known = set(self.id2label.values())
            bad = {k: v for k, v in self.label_thresholds.items() if k not in known or not 0.0 <= v <= 1.0}
            if bad:
                raise InputError(f"label_thresholds must be labels' thresholds in [0, 1], got {bad}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_size(cls, name: str, vocab_size: int = 30522, **overrides: Any) -> ElectraConfig:
        """A preset discriminator config: "tiny", "small", "base" or "large", fields optionally replaced."""
        if name not in SIZES:
            raise InputError(f"unknown model size {name!r}; use one of {', '.join(SIZES)}")
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InputError(f"unknown ElectraConfig field(s) {', '.join(sorted(unknown))}")
        return cls(**{**SIZES[name].architecture(), "vocab_size": vocab_size, **overrides})

    def replace(self, **changes: Any) -> ElectraConfig:
        """A copy with fields changed; a new num_labels without new id2label gets default LABEL_i names.

        (id2label decides num_labels, as in transformers, so the old mapping must not survive.)
        """
        if "num_labels" in changes and "id2label" not in changes:
            changes = {**changes, "id2label": None, "label2id": None}
        return dataclasses.replace(self, **changes)

    # ----- Hugging Face config.json -----

    def to_hf_dict(self, architecture: str, dtype: str = "float32") -> dict[str, Any]:
        """A config.json dict that transformers' ElectraConfig reads, for the given HF architecture name."""
        if architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
        d: dict[str, Any] = {
            "architectures": [architecture],
            "model_type": "electra",
            **{
                f.name: getattr(self, f.name)
                for f in dataclasses.fields(self)
                if f.name not in _NOT_HF_ALWAYS
            },
            "position_embedding_type": "absolute",
            "tie_word_embeddings": True,
            # "dtype" is what transformers >= 4.56 reads; "torch_dtype" what older releases read.
            "dtype": dtype,
            "torch_dtype": dtype,
        }
        if architecture in ("ElectraForSequenceClassification", "ElectraForTokenClassification"):
            # JSON object keys are strings; transformers converts id2label keys back to int when reading.
            d["id2label"] = {str(k): v for k, v in self.id2label.items()}
            d["label2id"] = dict(self.label2id)
        if architecture == "ElectraForSequenceClassification":
            d["problem_type"] = self.problem_type
            if self.label_thresholds is not None:
                d["label_thresholds"] = dict(self.label_thresholds)
        return d

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], source: str | Path = "config.json") -> ElectraConfig:
        """Read a transformers config dict; `source` names the file in error messages."""
        if not isinstance(d, dict):
            raise InputError(f"{source}: expected a JSON object; pass an ELECTRA config.json")
        if d.get("model_type") not in MODEL_TYPES:
            raise InputError(
                f"{source}: model_type is {d.get('model_type')!r}, not 'electra'; pass an ELECTRA checkpoint"
            )
        missing = [k for k in REQUIRED_HF_FIELDS if k not in d]
        if missing:
            raise InputError(
                f"{source}: missing required field(s) {', '.join(missing)}; add them to the file"
            )
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise InputError(
                f"{source}: position_embedding_type {d['position_embedding_type']!r} is not supported; "
                "only 'absolute' ELECTRA checkpoints can be loaded"
            )
        kwargs = {
            f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d and f.name not in _RUNTIME
        }
        if kwargs.get("id2label") is None and "num_labels" in d:
            kwargs["num_labels"] = d["num_labels"]
        kwargs = {k: v for k, v in kwargs.items() if v is not None or k in _NULLABLE}
        try:
            return cls(**kwargs)
        except InputError as e:
            raise InputError(f"{source}: {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise InputError(f"{source}: invalid ELECTRA config ({e}); fix the file") from None

    @classmethod
    def from_json_file(cls, path: str | Path) -> ElectraConfig:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: file not found; pass the path of an ELECTRA config.json") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: not a readable JSON file ({e}); pass an ELECTRA config.json") from None
        return cls.from_hf_dict(d, source=path)


_RUNTIME = frozenset({"attn_impl"})
# Label fields go only into a classifier's config.json (transformers derives num_labels from id2label).
_NOT_HF_ALWAYS = _RUNTIME | {"id2label", "label2id", "problem_type", "num_labels", "label_thresholds"}
_NULLABLE = frozenset({"pad_token_id", "classifier_dropout", "problem_type"})


def generator_config(disc: ElectraConfig, fraction: float | None = None) -> ElectraConfig:
    """The generator for a discriminator: same depth and embeddings, a fraction of the width.

    As in the original implementation: hidden = round(fraction * disc hidden), heads = max(1, hidden // 64),
    FFN = 4 * hidden. Heads are lowered until they divide hidden (tiny: hidden 16 -> 1 head). embedding_size
    stays the discriminator's because the two models share one embedding block during pre-training.
    """
    if fraction is None:
        fraction = generator_fraction(disc.hidden_size)
    if not 0.0 < fraction <= 1.0:
        raise InputError(f"generator fraction must be in (0, 1], got {fraction}")
    hidden = max(1, round(disc.hidden_size * fraction))
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    return disc.replace(hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)
