"""The modules pre-training trains: ELECTRA's generator + discriminator pair, or the masked-LM baseline.

Both take (batch, rng), or (batch, noise=...) with the step's random draws made beforehand, and return the
objective's StepOutput; both say which of their parts are the Hugging Face models of the run (`hf_models`) and
which one `--init` loads (`encoder`).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING

import torch
from torch import nn

from electra.config import ElectraConfig, generator_config
from electra.files import DISCRIMINATOR_DIR, GENERATOR_DIR, MLM_DIR
from electra.training.optim import param_groups
from electra.training.pretrain.config import DEFAULT_EMBEDDING_SHARING, DEFAULT_GENERATOR_LR_SCOPE
from electra.training.pretrain.embedding_sharing import build_pair, plain_discriminator
from electra.training.pretrain.objective import (
    MLM_BASELINE,
    ObjectiveConfig,
    SpecialTokens,
    StepNoise,
    StepOutput,
    electra_step,
    mlm_step,
)

if TYPE_CHECKING:
    from electra.training.pretrain.config import PretrainConfig


class ElectraPretrainer(nn.Module):
    """Generator + discriminator, their embeddings shared as `embedding_sharing` says (embedding_sharing.py);
    forward runs the replaced-token objective."""

    def __init__(
        self,
        disc_cfg: ElectraConfig,
        gen_cfg: ElectraConfig,
        specials: SpecialTokens,
        objective: ObjectiveConfig,
        embedding_sharing: str = DEFAULT_EMBEDDING_SHARING,
    ) -> None:
        super().__init__()
        self.discriminator, self.generator = build_pair(disc_cfg, gen_cfg, embedding_sharing)
        self.embedding_sharing = embedding_sharing
        self.specials, self.objective = specials, objective
        # Start the discriminator at the class prior (about mask_prob of the tokens are replaced). From a zero
        # bias the quickest way to the prior is to collapse the top layers onto one vector: ELECTRA-Small on
        # Wikipedia sat at the all-original baseline for 750+ steps with its last layer's token states at
        # cosine 0.94 to each other. (--init overwrites this with the loaded model's bias.)
        p = min(max(objective.mask_prob, 1e-3), 1 - 1e-3)
        with torch.no_grad():
            self.discriminator.discriminator_predictions.dense_prediction.bias.fill_(math.log(p / (1 - p)))

    @property
    def encoder(self) -> nn.Module:
        return self.discriminator

    @property
    def samples(self) -> bool:
        """Whether the step samples replacements (and so draws Gumbel noise)."""
        return True

    def hf_models(self) -> dict[str, nn.Module]:
        return {DISCRIMINATOR_DIR: plain_discriminator(self.discriminator), GENERATOR_DIR: self.generator}

    def forward(
        self,
        batch: dict[str, torch.Tensor],
        rng: torch.Generator | None = None,
        diagnostics: bool = False,
        *,
        noise: StepNoise | None = None,
        padding: bool = True,
    ) -> StepOutput:
        return electra_step(
            self.generator,
            self.discriminator,
            batch,
            self.specials,
            self.objective,
            rng,
            diagnostics,
            noise=noise,
            padding=padding,
        )


class MlmPretrainer(nn.Module):
    """The BERT-style baseline: the discriminator-sized encoder with a masked-LM head."""

    def __init__(self, cfg: ElectraConfig, specials: SpecialTokens, objective: ObjectiveConfig) -> None:
        from electra.model import ElectraGenerator

        super().__init__()
        self.mlm = ElectraGenerator(cfg)
        self.specials, self.objective = specials, objective

    @property
    def encoder(self) -> nn.Module:
        return self.mlm

    def hf_models(self) -> dict[str, nn.Module]:
        return {MLM_DIR: self.mlm}

    def forward(
        self,
        batch: dict[str, torch.Tensor],
        rng: torch.Generator | None = None,
        diagnostics: bool = False,
        *,
        noise: StepNoise | None = None,
        padding: bool = True,
    ) -> StepOutput:
        # The masked LM has no discriminator: nothing to diagnose beyond its loss.
        return mlm_step(
            self.mlm,
            batch,
            self.specials,
            self.objective,
            rng,
            self.mlm.config.vocab_size,
            noise=noise,
            padding=padding,
        )

    @property
    def samples(self) -> bool:
        """Whether the step samples replacements (and so draws Gumbel noise)."""
        return False


Pretrainer = ElectraPretrainer | MlmPretrainer


def build_pretrainer(
    cfg: PretrainConfig, vocab_size: int, seq_len: int, specials: SpecialTokens
) -> tuple[Pretrainer, ElectraConfig, ElectraConfig]:
    """The model of a resolved config, with the discriminator's and the generator's configs (the generator's
    is returned for the baseline too: run_config.json records both)."""
    dropout = (
        {}
        if cfg.dropout is None
        else {"hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout}
    )
    disc_cfg = ElectraConfig.from_size(
        cfg.size,
        vocab_size=vocab_size,
        max_position_embeddings=max(512, seq_len),
        pad_token_id=specials.pad,
        **dropout,
    )
    gen_cfg = generator_config(disc_cfg, cfg.generator_size)
    model: Pretrainer
    if cfg.objective == "electra":
        objective = ObjectiveConfig(mask_prob=cfg.mask_prob, disc_weight=cfg.disc_weight)
        model = ElectraPretrainer(disc_cfg, gen_cfg, specials, objective, cfg.embedding_sharing)
    else:
        objective = ObjectiveConfig(**{**asdict(MLM_BASELINE), "mask_prob": cfg.mask_prob})
        model = MlmPretrainer(disc_cfg, specials, objective)
    return model, disc_cfg, gen_cfg


def optimizer_groups(
    model: Pretrainer,
    lr: float,
    weight_decay: float,
    generator_lr_scale: float,
    generator_lr_scope: str = DEFAULT_GENERATOR_LR_SCOPE,
) -> list[dict]:
    """Adam's parameter groups (weight decay off for biases and LayerNorm); with a generator_lr_scale other
    than 1, the generator's own parameters learn at that fraction of the learning rate: under gdes and none
    its embedding block too with scope "all", its layers and head only with scope "layers" (DeBERTaV3 trains
    the shared E_G at the full rate). A tied block is the discriminator's and keeps the full rate."""
    named = list(model.named_parameters())
    if generator_lr_scale == 1.0 or not isinstance(model, ElectraPretrainer):
        return param_groups(named, weight_decay)
    generator = {id(p) for p in model.generator.parameters()} - {
        id(p) for p in model.discriminator.parameters()
    }
    if generator_lr_scope == "layers":
        generator -= {id(p) for p in model.generator.electra.embeddings.parameters()}
    slow = param_groups([(n, p) for n, p in named if id(p) in generator], weight_decay)
    for group in slow:
        group["lr"] = lr * generator_lr_scale
    return param_groups([(n, p) for n, p in named if id(p) not in generator], weight_decay) + slow
