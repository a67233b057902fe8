"""What an export starts from: the model directory (model, weights, config.json, tokenizer), the generator to
bundle with a discriminator, and the export's arguments, checked before anything slow runs, so a typo fails in
milliseconds with a one-line InputError."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from electra.atomic import check_output_dir
from electra.bundle import EXPORTABLE_KINDS, POOLINGS, PRECISIONS
from electra.errors import InputError
from electra.files import CONFIG_JSON, TOKENIZER_JSON, VOCAB_TXT
from electra.linear_head import LINEAR_MODEL_TYPE
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
    config_text: str  # config.json, copied into the bundle (bundle_config_text)
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
    check_output_dir(out, overwrite, [model_dir])
    if out.resolve() == model_dir.resolve():
        raise InputError(f"{out} is the model directory itself; choose another output directory")
    if parity_texts is not None and (
        not parity_texts or not all(isinstance(t, str) and t.strip() for t in parity_texts)
    ):
        raise InputError("parity_texts must be a non-empty list of non-empty strings")


def check_pooling(pooling: str) -> None:
    """The pooling bundle.json records for sentence vectors."""
    if pooling not in POOLINGS:
        raise InputError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLINGS)}")


def load_source(model_dir: Path) -> SourceModel:
    """The model of `model_dir` (a discriminator, or a classifier or tagger with a trained head) and its
    tokenizer."""
    from electra.hf_format import load_hf_dir_with_report
    from electra.tokenizer import load_tokenizer

    model, report = load_hf_dir_with_report(model_dir)
    if model.kind not in EXPORTABLE_KINDS:
        generator = model.kind == "generator"
        also = "; a generator goes beside its discriminator (--generator)" if generator else ""
        raise InputError(
            f"{model_dir / CONFIG_JSON}: a {model.kind} ({report.source_architecture}) cannot be exported; "
            f"export the discriminator, a fine-tuned classifier or a fine-tuned tagger{also}"
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


def load_generator(generator_dir: Path, discriminator: SourceModel, max_seq_len: int) -> SourceModel:
    """The generator (a masked LM, transformers' ElectraForMaskedLM) to bundle with `discriminator`: it
    must read the discriminator's token ids, so its vocabulary (and tokenizer, when it has one) must be the
    same."""
    from electra.hf_format import load_hf_dir_with_report
    from electra.tokenizer import load_tokenizer

    if discriminator.model.kind != "discriminator":
        raise InputError(
            f"--generator goes with a discriminator, and {discriminator.model_dir} is a "
            f"{discriminator.model.kind}; drop --generator or export the discriminator"
        )
    model, report = load_hf_dir_with_report(generator_dir)
    if model.kind != "generator":
        raise InputError(
            f"{generator_dir / CONFIG_JSON}: a {model.kind} ({report.source_architecture}), not a generator "
            "(ElectraForMaskedLM); pass the generator/ of a pre-training run or e.g. "
            "google/electra-small-generator"
        )
    if report.newly_initialized:
        raise InputError(
            f"{report.weights_file}: has no weights for {', '.join(report.newly_initialized[:3])}; "
            "the generator's masked-LM head is untrained"
        )
    disc_cfg, cfg = discriminator.config, model.config
    if cfg.vocab_size != disc_cfg.vocab_size:
        raise InputError(
            f"{generator_dir}: the generator's vocab_size is {cfg.vocab_size}, the discriminator's "
            f"{disc_cfg.vocab_size}; pass the generator pre-trained with this discriminator"
        )
    if cfg.max_position_embeddings < max_seq_len:
        raise InputError(
            f"{generator_dir}: the generator takes {cfg.max_position_embeddings} positions, the bundle "
            f"{max_seq_len}; pass --max-seq-len {cfg.max_position_embeddings} or less"
        )
    tokenizer = discriminator.tokenizer
    if any((generator_dir / name).is_file() for name in (TOKENIZER_JSON, VOCAB_TXT)):
        own = load_tokenizer(generator_dir)
        if own.get_vocab(with_added_tokens=True) != tokenizer.get_vocab(with_added_tokens=True):
            raise InputError(
                f"{generator_dir}: its tokenizer's vocabulary differs from the discriminator's; the "
                "generator must read the same token ids (pass the generator pre-trained with this "
                "discriminator)"
            )
    config_text = (generator_dir / CONFIG_JSON).read_text(encoding="utf-8")
    return SourceModel(generator_dir, model, report.weights_file, config_text, tokenizer)


def bundle_config_text(config_text: str) -> str:
    """A model's config.json as its bundle holds it: as saved, but for a linear-head classifier's, whose
    model_type and auto_map point transformers at the head's Python code. The bundle's graph already holds
    the head, so its config is a plain ELECTRA one that optimum's ORTModel classes read without
    trust_remote_code."""
    config = json.loads(config_text)
    if config.get("model_type") != LINEAR_MODEL_TYPE:
        return config_text
    config["model_type"] = "electra"
    config.pop("auto_map", None)
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
