"""Hugging Face model directories in and out of a pre-training run: `--init DIR` and the final export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from electra.errors import InputError
from electra.files import CONFIG_JSON, DISCRIMINATOR_DIR, GENERATOR_DIR
from electra.training.data.dataset import PretrainingData
from electra.training.pretrain.embedding_sharing import settle_loaded_embeddings
from electra.training.pretrain.models import ElectraPretrainer, Pretrainer

if TYPE_CHECKING:
    import tokenizers


def init_from_hf(
    model: Pretrainer, init: Path, vocab_size: int, data: PretrainingData, log: Callable[[str], None]
) -> None:
    """Start from a Hugging Face ELECTRA discriminator (and its generator when `init/generator` exists)."""
    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer, tokenizer_fingerprint

    disc_dir = init / DISCRIMINATOR_DIR if (init / DISCRIMINATOR_DIR / CONFIG_JSON).is_file() else init
    src = load_hf_dir(disc_dir, kind="discriminator")
    if src.config.vocab_size != vocab_size:
        raise InputError(
            f"--init {disc_dir} has a vocabulary of {src.config.vocab_size} but the data was prepared with "
            f"{vocab_size}; prepare the data with that model's tokenizer (--tokenizer {disc_dir})"
        )
    try:
        tok = load_tokenizer(disc_dir)
    except InputError:
        tok = None  # a model directory without tokenizer files: the vocabulary size is all we can check
    if tok is not None and tokenizer_fingerprint(tok) != data.manifest["tokenizer"]["fingerprint"]:
        raise InputError(
            f"--init {disc_dir} uses a different tokenizer than the data in {data.directory}; prepare the "
            f"data with --tokenizer {disc_dir}"
        )
    # The heads may differ (a discriminator's weights into the baseline's MLM encoder); the encoder may not.
    missing, _ = model.encoder.load_state_dict(src.state_dict(), strict=False)
    if any(not k.startswith(("discriminator_predictions", "generator_")) for k in missing):
        raise InputError(f"--init {disc_dir} does not match --size (missing weights: {missing[:3]})")
    log(f"initialised the discriminator from {disc_dir}")
    if not isinstance(model, ElectraPretrainer):
        return
    gen_dir = init / GENERATOR_DIR
    gen_state = None
    if (gen_dir / CONFIG_JSON).is_file():
        gen_state = load_hf_dir(gen_dir, kind="generator").state_dict()
        # Its embedding block (and the output layer tied to it) is settled below, as the sharing mode says.
        own = {
            k: v
            for k, v in gen_state.items()
            if not k.startswith("electra.embeddings.") and k != "generator_lm_head.weight"
        }
        model.generator.load_state_dict(own, strict=False)
        log(f"initialised the generator from {gen_dir}")
    settle_loaded_embeddings(model.discriminator, model.generator, gen_state)


def export_hf(model: Pretrainer, tok: tokenizers.Tokenizer, out: Path) -> None:
    """Write the final models in Hugging Face format with the tokenizer files beside them."""
    from electra.hf_format import save_hf_dir
    from electra.tokenizer import tokenizer_files

    files = tokenizer_files(tok)
    for name, sub in model.hf_models().items():
        save_hf_dir(sub, out / name, overwrite=True, extra_files=files)
