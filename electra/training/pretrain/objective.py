"""The pre-training objectives: ELECTRA's replaced token detection and the BERT-style MLM baseline.

Follows google-research/electra (pretrain_helpers.mask, run_pretraining.PretrainingModel):

  1. pick ~mask_prob of the maskable tokens of each row; 85% of them become [MASK], 15% keep their token;
  2. the generator predicts the originals at those positions only (MLM loss);
  3. its softmax is sampled (Gumbel-max) and the samples replace the selected tokens;
  4. the discriminator labels every non-padding token original (0) or replaced (1), where a sample that
     happens to equal the original counts as original;
  5. loss = mlm_loss + disc_weight * disc_loss.

Two deliberate departures from the TF code, both from the spec of this project: positions are drawn without
replacement among the candidates (TF samples with replacement, so duplicates shrink its effective mask rate),
and the number per row is counted over the candidates (TF counts [CLS]/[SEP] too).

Everything stays on the device with static shapes: the per-row selections are padded to K =
max_predictions(L, mask_prob) slots with a `valid` flag, and statistics are returned as 0-d tensors of
sums and counts, so a training loop can accumulate them over micro-batches and all-reduce them across
ranks before the single host sync that turns them into ratios. The losses too are returned as sums:
StepOutput.loss divides them by counts, the loss's one definition. Every random draw of a step can be made
before it (StepNoise), so that the step itself draws nothing and can be compiled whole or replayed as a CUDA
graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from electra.errors import InputError
from electra.training.pretrain.config import DEFAULT_DISC_WEIGHT
from electra.training.pretrain.diagnostics.identity_auc import identity_masses

# The TF code's epsilon in -log(-log(u + eps) + eps): keeps u == 0 (possible from torch.rand) finite.
_GUMBEL_EPS = 1e-9
# Gumbel noise is transformed this many floats at a time on the CPU (2 MB: a block stays in cache for its
# passes).
_CPU_BLOCK_ELEMENTS = 1 << 19

STAT_KEYS = (
    "mlm_loss_sum",
    "mlm_correct",
    "mlm_count",
    "disc_loss_sum",
    "disc_correct",
    "disc_count",
    "replaced_true_pos",
    "replaced_pred_pos",
    "replaced_actual_pos",
    "sampled_equals_original",
    "num_tokens",
)


@dataclass(frozen=True)
class ObjectiveConfig:
    mask_prob: float = 0.15  # the paper uses 0.25 for ELECTRA-Large; the caller decides
    # Of the selected positions: this share becomes [MASK], random_token_prob a random token, the rest stays.
    mask_token_prob: float = 0.85
    random_token_prob: float = 0.0  # ELECTRA: 0; the BERT baseline 0.1 (see MLM_BASELINE)
    disc_weight: float = DEFAULT_DISC_WEIGHT
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_prob <= 1.0:
            raise InputError(f"mask_prob must be in (0, 1], got {self.mask_prob}")
        if self.mask_token_prob < 0 or self.random_token_prob < 0:
            raise InputError("mask_token_prob and random_token_prob must not be negative")
        if self.mask_token_prob + self.random_token_prob > 1.0 + 1e-9:
            raise InputError(
                f"mask_token_prob + random_token_prob must be at most 1, got "
                f"{self.mask_token_prob} + {self.random_token_prob}"
            )
        if self.disc_weight < 0:
            raise InputError(f"disc_weight must not be negative, got {self.disc_weight}")
        if self.temperature <= 0:
            raise InputError(f"temperature must be positive, got {self.temperature}")


MLM_BASELINE = ObjectiveConfig(mask_token_prob=0.8, random_token_prob=0.1)


@dataclass(frozen=True)
class SpecialTokens:
    """Token ids. [UNK] is deliberately absent: it is ordinary text as far as masking is concerned."""

    pad: int
    cls: int
    sep: int
    mask: int


@dataclass
class StepNoise:
    """Every random draw of one step's corruption, made before the step from its seeded generator in the order
    the step consumes them (the same draws the step would make itself, so the same corruption).

    A compiled step cannot take a torch.Generator and a CUDA graph replays into fixed buffers: the trainer
    draws into these (draw_) and the step reads them. K = max_predictions(L, mask_prob), V the vocabulary.
    """

    vocab_size: int
    scores: Tensor  # (B, L) uniform: each row's top-n candidates by score are selected
    choice: Tensor  # (B, K) uniform: [MASK], a random token or the original, per slot
    random_ids: Tensor | None  # (B, K) ids in [0, V - 1) (cfg.random_token_prob > 0 only)
    gumbel: Tensor | None  # (B * K, V) uniform for Gumbel-max sampling (ELECTRA only; consumed in place)

    @classmethod
    def empty(
        cls,
        shape: tuple[int, int],
        vocab_size: int,
        cfg: ObjectiveConfig,
        sample: bool,
        device: torch.device | str,
    ) -> StepNoise:
        """Buffers for batches of `shape` (B, L); `sample`: the step samples replacements (ELECTRA)."""
        B, L = shape
        K = max_predictions(L, cfg.mask_prob)
        return cls(
            vocab_size=vocab_size,
            scores=torch.empty(B, L, device=device),
            choice=torch.empty(B, K, device=device),
            random_ids=(
                torch.empty(B, K, dtype=torch.long, device=device) if cfg.random_token_prob > 0 else None
            ),
            gumbel=torch.empty(B * K, vocab_size, device=device) if sample else None,
        )

    def draw_(self, generator: torch.Generator | None) -> StepNoise:
        """Fill every buffer from `generator`, as the step's own draws would be (no host sync)."""
        self.scores.uniform_(generator=generator)
        self.choice.uniform_(generator=generator)
        if self.random_ids is not None:
            # Uniform over the vocabulary less [PAD]: V - 1 ids, mask_inputs steps over the pad id.
            self.random_ids.random_(0, self.vocab_size - 1, generator=generator)
        if self.gumbel is not None:
            self.gumbel.uniform_(generator=generator)
        return self


@dataclass
class StepOutput:
    # This micro-batch's sums, still carrying the graph: loss() makes the loss from them.
    mlm_loss_sum: Tensor
    disc_loss_sum: Tensor
    disc_weight: float
    # 0-d float32 sums and counts (keys: STAT_KEYS), never ratios: add them over micro-batches and ranks,
    # then divide (see ratios()).
    stats: dict[str, Tensor] = field(default_factory=dict)
    # Detached per-token discriminator logits and replaced labels (0/1; -1 where nothing can be replaced:
    # padding, [CLS] and [SEP]), for threshold-free evaluation (detection_auc); None for the masked-LM
    # baseline.
    disc_logits: Tensor | None = None
    disc_labels: Tensor | None = None
    # (3, V) expected original / replaced / sampled mass per token id (diagnostics.identity_auc), when asked
    # for.
    identity_masses: Tensor | None = None

    def loss(
        self, mlm_count: Tensor | float | None = None, disc_count: Tensor | float | None = None
    ) -> Tensor:
        """The pre-training loss, defined here only: the masked-LM loss per prediction plus disc_weight times
        the discriminator's loss per token.

        Each sum is divided by a count: by default this micro-batch's own; the trainer passes its global
        batch's (known from the data before the forward pass), so that a step's gradient is the same however
        the batch is split over micro-steps and ranks. A count of 0 (nothing to predict) divides by 1.
        """
        mlm = _per(self.mlm_loss_sum, self.stats["mlm_count"] if mlm_count is None else mlm_count)
        disc = _per(self.disc_loss_sum, self.stats["disc_count"] if disc_count is None else disc_count)
        return mlm + self.disc_weight * disc

    @property
    def mlm_loss(self) -> Tensor:
        """The masked-LM loss per prediction of this micro-batch (carries the graph)."""
        return _per(self.mlm_loss_sum, self.stats["mlm_count"])

    @property
    def disc_loss(self) -> Tensor:
        """The discriminator's loss per token of this micro-batch (carries the graph; 0 for the masked LM)."""
        return _per(self.disc_loss_sum, self.stats["disc_count"])


def _per(total: Tensor, count: Tensor | float) -> Tensor:
    # clamp_min rather than a branch: a batch with nothing to predict gives 0 without a host sync.
    return total / (count.clamp_min(1.0) if isinstance(count, Tensor) else max(float(count), 1.0))


def ratios(stats: dict[str, Tensor | float]) -> dict[str, float]:
    """Turn (accumulated, all-reduced) sums into the logged metrics. Syncs with the device: call rarely.

    The discriminator's entries appear only when it saw tokens (not for the masked-LM baseline).
    """
    s = {k: float(v) for k, v in stats.items()}

    def div(a: str, b: str) -> float:
        return s.get(a, 0.0) / s[b] if s.get(b) else float("nan")

    rec = {"mlm_loss": div("mlm_loss_sum", "mlm_count"), "mlm_accuracy": div("mlm_correct", "mlm_count")}
    if s.get("disc_count"):
        rec.update(
            disc_loss=div("disc_loss_sum", "disc_count"),
            disc_accuracy=div("disc_correct", "disc_count"),
            disc_precision=div("replaced_true_pos", "replaced_pred_pos"),
            disc_recall=div("replaced_true_pos", "replaced_actual_pos"),
            replaced_fraction=div("replaced_actual_pos", "disc_count"),
            # The official sampled_masked_lm_accuracy: how often the generator's sample is the original.
            sampled_accuracy=div("sampled_equals_original", "mlm_count"),
        )
        # What a discriminator answering "original" everywhere scores: the bar its accuracy has to clear.
        rec["all_original_accuracy"] = 1.0 - rec["replaced_fraction"]
    return rec


def max_predictions(seq_len: int, mask_prob: float) -> int:
    """K, the prediction slots for rows of length seq_len: the count for a row made only of candidates.

    The per-row count max(1, round(n * mask_prob)) grows with n and n <= seq_len, so K always suffices; it
    depends on seq_len only, so torch.compile sees one shape per sequence length.
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    return min(seq_len, max(1, round(seq_len * mask_prob)))


def num_predictions(num_candidates: Tensor, mask_prob: float) -> Tensor:
    """Per-row prediction count max(1, round(n * mask_prob)), 0 for rows without a candidate.

    The trainer uses it too, to normalise losses by the global batch's count before the forward pass.
    """
    # Float64 so that the product, and torch.round's half-to-even, agree exactly with Python's round() used
    # by max_predictions: n_b can then never exceed K.
    n = torch.round(num_candidates.double() * mask_prob).long().clamp_min(1)
    return torch.where(num_candidates > 0, n, torch.zeros_like(n))


def candidate_mask(input_ids: Tensor, attention_mask: Tensor, specials: SpecialTokens) -> Tensor:
    """(B, L) bool: real tokens that may be masked (not padding, [CLS] or [SEP])."""
    special = (input_ids == specials.pad) | (input_ids == specials.cls) | (input_ids == specials.sep)
    return attention_mask.bool() & ~special


def select_positions(
    input_ids: Tensor,
    attention_mask: Tensor,
    specials: SpecialTokens,
    mask_prob: float,
    generator: torch.Generator | None = None,
    scores: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Pick max(1, round(n_b * mask_prob)) distinct positions uniformly among the n_b candidates of each row.

    Returns positions (B, K) long and valid (B, K) bool with K = max_predictions(L, mask_prob); the valid
    slots come first, invalid ones (rows with fewer candidates, or none) point at position 0. `scores` (B, L)
    uniform, drawn beforehand (StepNoise), else drawn here from `generator`.
    """
    B, L = input_ids.shape
    K = max_predictions(L, mask_prob)
    candidates = candidate_mask(input_ids, attention_mask, specials)
    n = num_predictions(candidates.sum(dim=1), mask_prob)
    # The top n of i.i.d. uniform scores is a uniform random n-subset; non-candidates get -1 so they rank
    # below every candidate, and n <= num_candidates keeps them out of the valid slots.
    if scores is None:
        scores = torch.rand(B, L, generator=generator, device=input_ids.device)
    scores = scores.masked_fill(~candidates, -1.0)
    positions = scores.topk(K, dim=1).indices
    valid = torch.arange(K, device=input_ids.device) < n.unsqueeze(1)
    positions = torch.where(valid, positions, torch.zeros_like(positions))
    return positions, valid


def scatter_rows(base: Tensor, positions: Tensor, valid: Tensor, values: Tensor) -> Tensor:
    """A copy of base (B, L) with values (B, K) written at the valid positions only.

    Invalid slots point at position 0, which may also be a valid slot of the same row when a row does not
    start with [CLS]; scattering both there would race. They are sent to an extra column, dropped after.
    """
    L = base.shape[1]
    target = torch.where(valid, positions, torch.full_like(positions, L))
    out = torch.cat([base, base[:, :1]], dim=1)
    out.scatter_(1, target, values.to(base.dtype))
    return out[:, :L]


def mask_inputs(
    input_ids: Tensor,
    positions: Tensor,
    valid: Tensor,
    specials: SpecialTokens,
    cfg: ObjectiveConfig,
    vocab_size: int,
    generator: torch.Generator | None = None,
    choice: Tensor | None = None,
    random_ids: Tensor | None = None,
) -> Tensor:
    """A copy of input_ids with each valid position turned into [MASK] (cfg.mask_token_prob), a random token
    other than padding (cfg.random_token_prob), or left as it is (the rest). `choice` (B, K) uniform and
    `random_ids` (B, K) in [0, V - 1), drawn beforehand (StepNoise), else drawn here from `generator`."""
    originals = torch.gather(input_ids, 1, positions)
    u = (
        choice
        if choice is not None
        else torch.rand(positions.shape, generator=generator, device=input_ids.device)
    )
    values = torch.where(u < cfg.mask_token_prob, torch.full_like(originals, specials.mask), originals)
    if cfg.random_token_prob > 0:
        # Uniform over the vocabulary less [PAD]: draw from V - 1 ids and step over the pad id.
        if random_ids is None:
            random_ids = torch.randint(
                0, vocab_size - 1, positions.shape, generator=generator, device=input_ids.device
            )
        random_ids = random_ids + (random_ids >= specials.pad).long()
        use_random = (u >= cfg.mask_token_prob) & (u < cfg.mask_token_prob + cfg.random_token_prob)
        values = torch.where(use_random, random_ids, values)
    return scatter_rows(input_ids, positions, valid, values)


@torch.no_grad()
def gumbel_sample(
    logits: Tensor,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    noise: Tensor | None = None,
) -> Tensor:
    """Token ids drawn from softmax(logits / temperature) over the last axis, by Gumbel-max.

    `noise`: uniform floats of shape (rows, V), drawn beforehand (StepNoise.gumbel) and overwritten here;
    else drawn from `generator`. In float32 whatever the logits' dtype: bf16 noise has 8 bits of mantissa,
    which visibly biases the argmax between near-tied tokens. Eagerly the noise is transformed in place, and
    on the CPU a block of rows at a time: the (B, K, V) temporaries of the plain formula cost 3.5x the time at
    V = 30,522 (a third of a small model's step). Compiled, the plain formula fuses into one pass.
    """
    scaled = (logits.float() / temperature).reshape(-1, logits.shape[-1])
    if noise is None:
        noise = torch.empty_like(scaled).uniform_(generator=generator)
    if torch.compiler.is_compiling():
        # -log(-log(u + eps) + eps) + logits, as the official code writes it.
        gumbel = -torch.log(-torch.log(noise + _GUMBEL_EPS) + _GUMBEL_EPS)
        return (gumbel + scaled).argmax(dim=-1).view(logits.shape[:-1])
    rows = scaled.shape[0] if scaled.device.type != "cpu" else max(1, _CPU_BLOCK_ELEMENTS // scaled.shape[1])
    out = torch.empty(scaled.shape[0], dtype=torch.long, device=scaled.device)
    for start in range(0, scaled.shape[0], rows):
        block = scaled[start : start + rows]
        u = noise[start : start + rows]
        u.add_(_GUMBEL_EPS).log_().neg_().add_(_GUMBEL_EPS).log_().neg_().add_(block)
        out[start : start + rows] = u.argmax(dim=-1)
    return out.view(logits.shape[:-1])


def corrupt_inputs(
    input_ids: Tensor, positions: Tensor, valid: Tensor, sampled: Tensor
) -> tuple[Tensor, Tensor]:
    """The discriminator's input (sampled tokens at the valid positions) and its labels (B, L) long.

    Labels compare tokens, not positions: a sample equal to the original is labelled original (0), as in the
    paper and the official code.
    """
    corrupted = scatter_rows(input_ids, positions, valid, sampled)
    return corrupted, (corrupted != input_ids).long()


def _masked_lm_sums(logits: Tensor, targets: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """The cross-entropy summed over the valid slots (float32, carrying the graph), and the count of correct
    argmaxes."""
    logits = logits.float()
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
    loss_sum = (ce * valid.float()).sum()
    correct = ((logits.argmax(-1) == targets) & valid).float().sum()
    return loss_sum, correct


def _zero(device: torch.device) -> Tensor:
    return torch.zeros((), device=device, dtype=torch.float32)


def draw_noise(
    generator: torch.Generator | None,
    shape: tuple[int, int],
    vocab_size: int,
    cfg: ObjectiveConfig,
    sample: bool,
    device: torch.device | str,
) -> StepNoise:
    """Fresh noise for one step over batches of `shape` (B, L), drawn from `generator` (see StepNoise)."""
    return StepNoise.empty(shape, vocab_size, cfg, sample, device).draw_(generator)


def electra_step(
    generator_model: nn.Module,
    discriminator_model: nn.Module,
    batch: dict[str, Tensor],
    specials: SpecialTokens,
    cfg: ObjectiveConfig,
    rng: torch.Generator | None = None,
    diagnostics: bool = False,
    noise: StepNoise | None = None,
    padding: bool = True,
) -> StepOutput:
    """One forward pass of replaced token detection; call backward() on the returned output's loss().

    rng drives every random draw (positions, masking, sampling), so a seed reproduces the corruption; it
    must live on the batch's device (torch.Generator(device="cuda") for CUDA batches). `noise` gives those
    draws made beforehand instead (the same ones for the same seed), so that the step draws nothing itself.
    Dropout still uses torch's global generator. `padding` False promises that every position is a token:
    attention then runs without a mask (the caller knows from the data's lengths, with no device sync).
    `diagnostics` adds the identity-only masses (evaluation: a softmax over the vocabulary at every slot,
    which training does not need).
    """
    input_ids = batch["input_ids"]
    attention_mask = batch["attention_mask"]
    token_type_ids = batch.get("token_type_ids")
    vocab_size = _vocab_size(generator_model)
    if noise is None:
        noise = draw_noise(rng, input_ids.shape, vocab_size, cfg, True, input_ids.device)
    model_mask = attention_mask if padding else None

    positions, valid, masked_ids, targets = _masked(
        input_ids, attention_mask, specials, cfg, vocab_size, noise
    )

    gen_logits = generator_model(masked_ids, model_mask, token_type_ids, masked_positions=positions)
    mlm_loss_sum, mlm_correct = _masked_lm_sums(gen_logits, targets, valid)

    # Integer samples under no_grad: the discriminator loss cannot reach the generator except through the
    # embeddings the two share on purpose.
    sampled = gumbel_sample(gen_logits.detach(), temperature=cfg.temperature, noise=noise.gumbel)
    corrupted, labels = corrupt_inputs(input_ids, positions, valid, sampled)

    disc_logits = discriminator_model(corrupted, model_mask, token_type_ids).float()
    real = attention_mask.bool()
    weights = real.float()
    bce = F.binary_cross_entropy_with_logits(disc_logits, labels.float(), reduction="none")
    disc_loss_sum = (bce * weights).sum()

    with torch.no_grad():
        maskable = candidate_mask(input_ids, attention_mask, specials)
        identity = None
        if diagnostics:
            identity = identity_masses(
                gen_logits.detach(), targets, valid, input_ids, maskable, positions, cfg.temperature
            )
        stats = {
            "mlm_loss_sum": mlm_loss_sum.detach(),
            "mlm_correct": mlm_correct,
            "mlm_count": valid.float().sum(),
            "disc_loss_sum": disc_loss_sum.detach(),
            **_detection_counts(disc_logits, labels, real),
            "sampled_equals_original": ((sampled == targets) & valid).float().sum(),
        }
    return StepOutput(
        mlm_loss_sum=mlm_loss_sum,
        disc_loss_sum=disc_loss_sum,
        disc_weight=cfg.disc_weight,
        stats=stats,
        disc_logits=disc_logits.detach(),
        # Detection is ranked over the tokens that can be replaced: [CLS] and [SEP] are originals by
        # construction, and counting them lifts a chance-level AUC above 0.5.
        disc_labels=torch.where(maskable, labels.long(), -1),
        identity_masses=identity,
    )


def _detection_counts(disc_logits: Tensor, labels: Tensor, real: Tensor) -> dict[str, Tensor]:
    """The discriminator's counts over the real tokens (logit > 0 read as "replaced"): its accuracy's and
    the replaced class's precision and recall's."""
    predicted = (disc_logits > 0) & real
    actual = labels.bool() & real
    num_tokens = real.float().sum()
    return {
        "disc_correct": ((predicted == actual) & real).float().sum(),
        "disc_count": num_tokens,
        "replaced_true_pos": (predicted & actual).float().sum(),
        "replaced_pred_pos": predicted.float().sum(),
        "replaced_actual_pos": actual.float().sum(),
        "num_tokens": num_tokens,
    }


def mlm_step(
    model: nn.Module,
    batch: dict[str, Tensor],
    specials: SpecialTokens,
    cfg: ObjectiveConfig = MLM_BASELINE,
    rng: torch.Generator | None = None,
    vocab_size: int | None = None,
    noise: StepNoise | None = None,
    padding: bool = True,
) -> StepOutput:
    """One forward pass of the masked-LM baseline (BERT's 80/10/10 with MLM_BASELINE): the loss covers the
    selected positions only; the discriminator entries of the output are zeros. rng, noise and padding as
    for electra_step."""
    input_ids = batch["input_ids"]
    attention_mask = batch["attention_mask"]
    token_type_ids = batch.get("token_type_ids")
    if vocab_size is None:
        vocab_size = _vocab_size(model)
    if noise is None:
        noise = draw_noise(rng, input_ids.shape, vocab_size, cfg, False, input_ids.device)

    positions, valid, masked_ids, targets = _masked(
        input_ids, attention_mask, specials, cfg, vocab_size, noise
    )
    logits = model(
        masked_ids, attention_mask if padding else None, token_type_ids, masked_positions=positions
    )
    mlm_loss_sum, mlm_correct = _masked_lm_sums(logits, targets, valid)

    # A tensor per key: a caller accumulating in place must not add into a zero shared by several keys.
    stats = {key: _zero(input_ids.device) for key in STAT_KEYS}
    stats.update(
        mlm_loss_sum=mlm_loss_sum.detach(),
        mlm_correct=mlm_correct,
        mlm_count=valid.float().sum(),
        num_tokens=attention_mask.bool().float().sum(),
    )
    return StepOutput(
        mlm_loss_sum=mlm_loss_sum,
        disc_loss_sum=_zero(input_ids.device),
        disc_weight=cfg.disc_weight,
        stats=stats,
    )


def _masked(
    input_ids: Tensor,
    attention_mask: Tensor,
    specials: SpecialTokens,
    cfg: ObjectiveConfig,
    vocab_size: int,
    noise: StepNoise,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The masking both objectives share: the selected positions and which are real, the generator's (or
    masked LM's) input, and the originals at the positions."""
    positions, valid = select_positions(
        input_ids, attention_mask, specials, cfg.mask_prob, scores=noise.scores
    )
    masked_ids = mask_inputs(
        input_ids,
        positions,
        valid,
        specials,
        cfg,
        vocab_size,
        choice=noise.choice,
        random_ids=noise.random_ids,
    )
    return positions, valid, masked_ids, torch.gather(input_ids, 1, positions)


def _vocab_size(model: nn.Module) -> int:
    # Works on a torch.compile'd or DDP-wrapped generator too (both keep the original under an attribute).
    inner = getattr(model, "_orig_mod", model)
    inner = getattr(inner, "module", inner)
    return int(inner.config.vocab_size)
