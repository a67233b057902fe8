"""What an export starts from: the model directory (model, weights, config.json, tokenizer) and the export's
arguments, checked before anything slow runs, so a typo fails in milliseconds with a one-line InputError."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from electra.atomic import check_output_dir
from electra.bundle import EXPORTABLE_KINDS, PRECISIONS
from electra.errors import InputError
from electra.files import CONFIG_JSON
from electra.onnx.parity import DevSet, prediction_kind
from electra.onnx.torchscript import MAX_OPSET, MIN_OPSET

if TYPE_CHECKING:
    import tokenizers

    from electra.config import ElectraConfig
    from electra.model import ElectraHeadModel


@dataclass(frozen=True)
class SourceModel:
    """A loaded model directory."""

    model_dir: Path
    model: ElectraHeadModel  # fp32, eval
    weights_file: Path
    config_text: str  # config.json, copied into the bundle verbatim
    tokenizer: tokenizers.Tokenizer

    @property
    def config(self) -> ElectraConfig:
        return self.model.config


def check_arguments(
    model_dir: Path, out: Path, precision: str, opset: int, overwrite: bool, parity_texts: list[str] | None
) -> None:
    """The arguments that need nothing loaded."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if not isinstance(opset, int) or isinstance(opset, bool) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise InputError(
            f"opset {opset!r} is not supported; use {MIN_OPSET}..{MAX_OPSET} (the TorchScript exporter's)"
        )
    check_output_dir(out, overwrite)
    if out.resolve() == model_dir.resolve():
        raise InputError(f"{out} is the model directory itself; choose another output directory")
    if parity_texts is not None and (
        not parity_texts or not all(isinstance(t, str) and t.strip() for t in parity_texts)
    ):
        raise InputError("parity_texts must be a non-empty list of non-empty strings")


def load_source(model_dir: Path) -> SourceModel:
    """The model of `model_dir` (a discriminator, or a classifier or tagger with a trained head) and its
    tokenizer."""
    from electra.hf_format import load_hf_dir_with_report
    from electra.tokenizer import load_tokenizer

    model, report = load_hf_dir_with_report(model_dir)
    if model.kind not in EXPORTABLE_KINDS:
        raise InputError(
            f"{model_dir / CONFIG_JSON}: a {model.kind} ({report.source_architecture}) cannot be exported; "
            "export the discriminator, a fine-tuned classifier or a fine-tuned tagger"
        )
    if report.newly_initialized:
        # The head would be random: an export of it would pass parity and still be useless.
        raise InputError(
            f"{report.weights_file}: has no weights for {', '.join(report.newly_initialized[:3])}; "
            f"the {model.kind} head is untrained -- fine-tune it first"
        )
    tokenizer = load_tokenizer(model_dir)
    n = tokenizer.get_vocab_size(with_added_tokens=True)
    if n > model.config.vocab_size:
        raise InputError(
            f"{model_dir}: the tokenizer has {n} tokens but the model's vocab_size is "
            f"{model.config.vocab_size}; put the tokenizer the model was trained with next to it"
        )
    config_text = (model_dir / CONFIG_JSON).read_text(encoding="utf-8")
    return SourceModel(model_dir, model, report.weights_file, config_text, tokenizer)


def check_max_seq_len(max_seq_len: int | None, cfg: ElectraConfig) -> int:
    """The bundle's token limit: `max_seq_len`, or the model's max_position_embeddings when None."""
    if max_seq_len is None:
        return cfg.max_position_embeddings
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 2:
        raise InputError(f"max_seq_len must be an integer >= 2 ([CLS] and [SEP]), got {max_seq_len!r}")
    if max_seq_len > cfg.max_position_embeddings:
        raise InputError(
            f"max_seq_len {max_seq_len} exceeds the model's max_position_embeddings "
            f"({cfg.max_position_embeddings}); pass at most that"
        )
    return max_seq_len


def check_dev_set(dev_set: DevSet, model: ElectraHeadModel) -> None:
    """A dev set scores a single-label classifier: as many labels as examples, each a label id."""
    if model.kind != "classifier":
        raise InputError("dev_set is only for classifiers; a discriminator has no labels to score")
    if prediction_kind(model.config) != "single_label":
        raise InputError(
            f"dev_set accuracy needs a single-label classifier, this one is {model.config.problem_type}"
        )
    examples, labels = dev_set
    if not examples or len(examples) != len(labels):
        raise InputError(
            f"dev_set needs as many labels as examples (got {len(examples)} examples, {len(labels)} labels)"
        )
    bad = [y for y in labels if not isinstance(y, int) or not 0 <= y < model.config.num_labels]
    if bad:
        raise InputError(f"dev_set label {bad[0]!r} is not in 0..{model.config.num_labels - 1}")
