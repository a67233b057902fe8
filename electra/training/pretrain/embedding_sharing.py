"""How the generator and the discriminator share their embeddings during pre-training (`--embedding-sharing`).

* `tied` (ELECTRA, the default): one embedding block, the same Parameters in both models; the MLM loss and the
  replaced-token loss both update it.
* `gdes` (gradient-disentangled embedding sharing, He et al. 2023, DeBERTaV3 Section 3): the generator owns
  the tables E_G; the discriminator's are stop_gradient(E_G) + E_delta, E_delta zero-initialised. The MLM loss
  updates E_G and never E_delta; the replaced-token loss updates E_delta and never E_G. As in the reference
  implementation (microsoft/DeBERTa, ReplacedTokenDetectionModel.register_discriminator_fw_hook) the word and
  position tables are shared this way; ELECTRA also shares its token-type table, so it is shared the same way;
  the embedding LayerNorm is each model's own (DeBERTa's embeddings keep theirs too).
* `none`: two independent blocks (the paper's "no weight tying" row).

The discriminator a run saves is always a plain ELECTRA: under `gdes` its tables are folded (E_G + E_delta),
so it loads in transformers, fine-tunes, exports and serves like any other.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from electra.config import ElectraConfig
from electra.model import ElectraDiscriminator, ElectraEmbeddings, ElectraGenerator
from electra.training.pretrain.config import EMBEDDING_SHARINGS

TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


class DisentangledEmbeddings(ElectraEmbeddings):
    """The discriminator's embedding block under `gdes`.

    Its own tables (the usual parameter names, so a checkpoint keeps them where a plain block keeps its
    tables) hold E_delta, zero at the start; forward adds the generator's tables, detached. The generator's
    block is referenced, not registered: it belongs to the generator and is saved there once.
    """

    def __init__(self, cfg: ElectraConfig, shared: ElectraEmbeddings) -> None:
        super().__init__(cfg)
        self.config = cfg
        self._shared = (shared,)  # a tuple keeps nn.Module from registering it as a submodule
        with torch.no_grad():
            for name in TABLES:
                getattr(self, name).weight.zero_()

    @property
    def shared(self) -> ElectraEmbeddings:
        return self._shared[0]

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = self.position_ids[:, : input_ids.shape[1]]
        # lookup(E_G.detach()) + lookup(E_delta) is lookup(E_G.detach() + E_delta) without building the sum
        # of the whole vocabulary table every step.
        x = self._lookup("word_embeddings", input_ids) + self._lookup("token_type_embeddings", token_type_ids)
        x = x + self._lookup("position_embeddings", positions)
        return self.dropout(self.LayerNorm(x))

    def _lookup(self, name: str, ids: Tensor) -> Tensor:
        own: nn.Embedding = getattr(self, name)
        base = getattr(self.shared, name).weight.detach()
        return F.embedding(ids, base, own.padding_idx) + own(ids)

    @torch.no_grad()
    def folded(self) -> ElectraEmbeddings:
        """A plain block with the tables the discriminator actually uses (E_G + E_delta) and its LayerNorm."""
        plain = ElectraEmbeddings(self.config).to(self.LayerNorm.weight.device)
        state = {k: v.clone() for k, v in self.state_dict().items()}
        for name in TABLES:
            state[f"{name}.weight"] += getattr(self.shared, name).weight
        plain.load_state_dict(state)
        return plain


def build_pair(
    disc_cfg: ElectraConfig, gen_cfg: ElectraConfig, sharing: str
) -> tuple[ElectraDiscriminator, ElectraGenerator]:
    """The discriminator and the generator, their embeddings shared as `sharing` says."""
    if sharing not in EMBEDDING_SHARINGS:
        raise ValueError(f"embedding sharing must be one of {EMBEDDING_SHARINGS}, got {sharing!r}")
    if sharing == "tied":
        discriminator = ElectraDiscriminator(disc_cfg)
        return discriminator, ElectraGenerator(gen_cfg, embeddings=discriminator.electra.embeddings)
    generator = ElectraGenerator(gen_cfg)
    if sharing == "none":
        return ElectraDiscriminator(disc_cfg), generator
    embeddings = DisentangledEmbeddings(disc_cfg, generator.electra.embeddings)
    # A borrowed block is left as it is by the discriminator's initialisation: E_delta stays zero.
    return ElectraDiscriminator(disc_cfg, embeddings=embeddings), generator


def plain_discriminator(discriminator: ElectraDiscriminator) -> ElectraDiscriminator:
    """The discriminator as a plain ELECTRA: itself, or under `gdes` a copy with the tables folded in."""
    emb = discriminator.electra.embeddings
    if not isinstance(emb, DisentangledEmbeddings):
        return discriminator
    state = {k: v for k, v in discriminator.state_dict().items() if not k.startswith("electra.embeddings.")}
    state.update({f"electra.embeddings.{k}": v for k, v in emb.folded().state_dict().items()})
    plain = ElectraDiscriminator(discriminator.config).to(emb.LayerNorm.weight.device)
    plain.load_state_dict(state)
    return plain.train(discriminator.training)


@torch.no_grad()
def settle_loaded_embeddings(
    discriminator: ElectraDiscriminator,
    generator: ElectraGenerator,
    generator_state: dict[str, Tensor] | None,
) -> None:
    """After `--init` loaded a plain discriminator's weights into `discriminator`: give the generator its
    embedding block and keep the discriminator's effective tables equal to the loaded ones.

    The generator's block comes from its own directory when there is one, else from the discriminator (the
    released pairs share theirs). Under `tied` there is one block and nothing to do; under `gdes` the loaded
    tables sit in the E_delta slots, so E_delta becomes loaded - E_G.
    """
    emb, gen_emb = discriminator.electra.embeddings, generator.electra.embeddings
    if emb is gen_emb:
        return
    prefix = "electra.embeddings."
    source = (
        {k[len(prefix) :]: v for k, v in generator_state.items() if k.startswith(prefix)}
        if generator_state is not None
        else {k: v.clone() for k, v in emb.state_dict().items()}
    )
    gen_emb.load_state_dict(source)
    if isinstance(emb, DisentangledEmbeddings):
        for name in TABLES:
            getattr(emb, name).weight.sub_(getattr(gen_emb, name).weight)
