"""The pre-training objectives: position selection, masking, Gumbel sampling, labels, losses, statistics."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from electra.config import ElectraConfig, generator_config
from electra.errors import InputError
from electra.model import ElectraDiscriminator, ElectraGenerator
from electra.training.pretrain.objective import (
    MLM_BASELINE,
    STAT_KEYS,
    ObjectiveConfig,
    SpecialTokens,
    corrupt_inputs,
    electra_step,
    gumbel_sample,
    mask_inputs,
    max_predictions,
    mlm_step,
    ratios,
    scatter_rows,
    select_positions,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = SpecialTokens(pad=PAD, cls=CLS, sep=SEP, mask=MASK)
FIRST_WORD = 5  # ids below are special
VOCAB = 40


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make_batch(lengths: list[int], seq_len: int, seed: int = 0, vocab: int = VOCAB) -> dict[str, Tensor]:
    """[CLS] words [SEP] [PAD]...; a row's length counts [CLS] and [SEP]. Words include [UNK]."""
    g = seeded(seed)
    input_ids = torch.full((len(lengths), seq_len), PAD, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for r, n in enumerate(lengths):
        words = torch.randint(FIRST_WORD, vocab, (n - 2,), generator=g)
        words[:: max(1, n // 3)] = UNK  # [UNK] is ordinary text for masking
        input_ids[r, :n] = torch.cat([torch.tensor([CLS]), words, torch.tensor([SEP])])
        attention_mask[r, :n] = 1
    return {
        "input_ids": input_ids,
        "token_type_ids": torch.zeros_like(input_ids),
        "attention_mask": attention_mask,
    }


def make_models(seed: int = 0, vocab: int = VOCAB) -> tuple[ElectraGenerator, ElectraDiscriminator]:
    """A tiny discriminator and its generator sharing one embedding block; no dropout, for determinism."""
    torch.manual_seed(seed)
    cfg = ElectraConfig.from_size(
        "tiny",
        vocab_size=vocab,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    disc = ElectraDiscriminator(cfg)
    gen = ElectraGenerator(generator_config(cfg), embeddings=disc.electra.embeddings)
    return gen, disc


def expected_count(n: int, p: float) -> int:
    return max(1, round(n * p)) if n else 0


# ----- select_positions -----


@pytest.mark.parametrize(
    ("seq_len", "p", "k"), [(128, 0.15, 19), (512, 0.15, 77), (128, 0.25, 32), (4, 0.15, 1)]
)
def test_max_predictions(seq_len: int, p: float, k: int) -> None:
    assert max_predictions(seq_len, p) == k


def test_max_predictions_bounds_every_row() -> None:
    for seq_len, p in itertools.product([1, 2, 7, 10, 30, 64, 128, 333], [0.1, 0.15, 0.25, 0.5, 1.0]):
        k = max_predictions(seq_len, p)
        assert 1 <= k <= seq_len
        assert max(expected_count(n, p) for n in range(seq_len + 1)) <= k


@pytest.mark.parametrize("p", [0.1, 0.15, 0.25])
def test_select_positions_exact_distinct_counts(p: float) -> None:
    seq_len = 64
    # Candidates per row: length - 2, so 0 (only [CLS][SEP]) up to 62, hitting every rounding case.
    lengths = list(range(2, seq_len + 1))
    batch = make_batch(lengths, seq_len)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    positions, valid = select_positions(ids, attn, SPECIALS, p, seeded(1))
    k = max_predictions(seq_len, p)
    assert positions.shape == valid.shape == (len(lengths), k)
    assert positions.dtype == torch.long and valid.dtype == torch.bool
    for r, n in enumerate(lengths):
        count = expected_count(n - 2, p)
        assert valid[r].sum() == count
        assert valid[r, :count].all()  # valid slots first
        chosen = positions[r, valid[r]]
        assert len(set(chosen.tolist())) == count
        assert (attn[r, chosen] == 1).all()
        assert not torch.isin(ids[r, chosen], torch.tensor([PAD, CLS, SEP])).any()
        assert (positions[r, ~valid[r]] == 0).all()


def test_select_positions_unk_is_a_candidate_and_row_without_candidates() -> None:
    ids = torch.tensor([[CLS, UNK, UNK, SEP, PAD, PAD], [CLS, SEP, PAD, PAD, PAD, PAD]])
    attn = (ids != PAD).long()
    positions, valid = select_positions(ids, attn, SPECIALS, 0.5, seeded(0))
    assert valid.sum(1).tolist() == [1, 0]
    assert positions[0, 0].item() in (1, 2)
    assert (positions[1] == 0).all()


def test_select_positions_bool_mask_and_padding_ids_inside_the_mask() -> None:
    # Padding outside attention and a pad id inside it are both excluded.
    ids = torch.tensor([[CLS, 7, PAD, 8, SEP, 9]])
    attn = torch.tensor([[True, True, True, True, True, False]])
    positions, valid = select_positions(ids, attn, SPECIALS, 1.0, seeded(0))
    assert sorted(positions[valid].tolist()) == [1, 3]


def test_select_positions_roughly_uniform() -> None:
    rows, n, p = 4000, 20, 0.15
    batch = make_batch([n + 2] * rows, n + 2)
    positions, valid = select_positions(batch["input_ids"], batch["attention_mask"], SPECIALS, p, seeded(3))
    assert (valid.sum(1) == 3).all()
    counts = torch.bincount(positions[valid], minlength=n + 2).float()
    assert counts[0] == 0 and counts[n + 1] == 0  # [CLS], [SEP]
    observed = counts[1 : n + 1]
    expected = rows * 3 / n
    chi2 = ((observed - expected) ** 2 / expected).sum().item()
    assert (observed > 0).all()
    assert chi2 < 60.0  # 19 degrees of freedom: P(chi2 > 60) < 1e-5


def test_select_positions_deterministic_by_seed() -> None:
    batch = make_batch([10, 20, 30, 32], 32)
    a = select_positions(batch["input_ids"], batch["attention_mask"], SPECIALS, 0.15, seeded(5))
    b = select_positions(batch["input_ids"], batch["attention_mask"], SPECIALS, 0.15, seeded(5))
    c = select_positions(batch["input_ids"], batch["attention_mask"], SPECIALS, 0.15, seeded(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


# ----- mask_inputs -----


def _split(cfg: ObjectiveConfig, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    vocab = 1000
    batch = make_batch([62] * 400, 64, seed=seed, vocab=vocab)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    positions, valid = select_positions(ids, attn, SPECIALS, cfg.mask_prob, seeded(seed))
    masked = mask_inputs(ids, positions, valid, SPECIALS, cfg, vocab, seeded(seed + 1))
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected.scatter_(1, positions, valid)
    return ids, masked, selected, attn


def test_mask_inputs_electra_85_15() -> None:
    ids, masked, selected, _ = _split(ObjectiveConfig())
    assert torch.equal(masked[~selected], ids[~selected])
    new = masked[selected]
    assert selected.sum() == 400 * 9
    assert abs((new == MASK).float().mean().item() - 0.85) < 0.02
    assert torch.equal(new[new != MASK], ids[selected][new != MASK])  # no random tokens at all


def test_mask_inputs_bert_80_10_10() -> None:
    ids, masked, selected, _ = _split(MLM_BASELINE, seed=7)
    assert torch.equal(masked[~selected], ids[~selected])
    new, old = masked[selected], ids[selected]
    is_mask = new == MASK
    assert abs(is_mask.float().mean().item() - 0.8) < 0.02
    # A random draw equals the original (or [MASK]) once in ~1000: "changed" undercounts "random" negligibly.
    assert abs(((new != old) & ~is_mask).float().mean().item() - 0.1) < 0.015
    assert abs((new == old).float().mean().item() - 0.1) < 0.015


def test_mask_inputs_random_tokens_cover_vocab_but_never_pad() -> None:
    vocab = 12
    cfg = ObjectiveConfig(mask_prob=1.0, mask_token_prob=0.0, random_token_prob=1.0)
    batch = make_batch([62] * 50, 64, vocab=vocab)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    positions, valid = select_positions(ids, attn, SPECIALS, cfg.mask_prob, seeded(0))
    masked = mask_inputs(ids, positions, valid, SPECIALS, cfg, vocab, seeded(1))
    drawn = torch.gather(masked, 1, positions)[valid]
    assert set(drawn.tolist()) == set(range(vocab)) - {PAD}


def test_scatter_rows_ignores_invalid_slots_that_alias_a_valid_position_zero() -> None:
    # A row without [CLS] may select position 0 while its invalid slots also point there.
    base = torch.tensor([[10, 11, 12], [20, 21, 22]])
    positions = torch.tensor([[0, 0, 0], [2, 0, 0]])
    valid = torch.tensor([[True, False, False], [True, False, False]])
    values = torch.tensor([[99, 98, 97], [96, 95, 94]])
    assert scatter_rows(base, positions, valid, values).tolist() == [[99, 11, 12], [20, 21, 96]]
    assert base.tolist() == [[10, 11, 12], [20, 21, 22]]  # a copy


# ----- labels -----


def test_corrupt_inputs_labels_compare_tokens() -> None:
    ids = torch.tensor([[CLS, 7, 8, 9, SEP, PAD]])
    positions = torch.tensor([[1, 2, 0]])
    valid = torch.tensor([[True, True, False]])
    sampled = torch.tensor([[7, 5, 6]])  # position 1: sampled == original -> original
    corrupted, labels = corrupt_inputs(ids, positions, valid, sampled)
    assert corrupted.tolist() == [[CLS, 7, 5, 9, SEP, PAD]]
    assert labels.tolist() == [[0, 0, 1, 0, 0, 0]]


def test_electra_step_labels_with_a_certain_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    # Words are 7, 8 or [UNK] and the generator always samples 7: a selected 7 stays original (label 0), any
    # other selected token is replaced (label 1).
    gen, disc = make_models()
    with torch.no_grad():
        gen.generator_lm_head.bias[7] = 1e4
    batch = make_batch([30, 24, 16], 32)
    words = batch["input_ids"] >= FIRST_WORD
    batch["input_ids"][words] = torch.where(torch.rand(int(words.sum()), generator=seeded(0)) < 0.5, 7, 8)
    ids = batch["input_ids"]

    seen: dict[str, Tensor] = {}
    disc_forward = disc.forward

    def spy(input_ids: Tensor, *args: Tensor) -> Tensor:
        seen["corrupted"] = input_ids
        return disc_forward(input_ids, *args)

    monkeypatch.setattr(disc, "forward", spy)
    out = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(1))
    positions, valid = select_positions(ids, batch["attention_mask"], SPECIALS, 0.15, seeded(1))
    selected = torch.zeros_like(ids, dtype=torch.bool).scatter_(1, positions, valid)
    corrupted = seen["corrupted"]
    assert (corrupted[selected] == 7).all()
    assert torch.equal(corrupted[~selected], ids[~selected])
    replaced = selected & (ids != 7)
    assert (selected & (ids == 8)).any() and (selected & (ids == 7)).any()
    assert out.stats["replaced_actual_pos"] == replaced.sum()
    with torch.no_grad():
        logits = disc_forward(corrupted, batch["attention_mask"], batch["token_type_ids"])
    real = batch["attention_mask"].bool()
    want = F.binary_cross_entropy_with_logits(logits[real], replaced[real].float())
    torch.testing.assert_close(out.disc_loss.detach(), want)
    assert out.stats["sampled_equals_original"] == (selected & (ids == 7)).sum()


# ----- gumbel_sample -----


@pytest.mark.parametrize(
    ("dtype", "temperature"), [(torch.float32, 1.0), (torch.bfloat16, 1.0), (torch.float32, 2.0)]
)
def test_gumbel_sample_matches_softmax(dtype: torch.dtype, temperature: float) -> None:
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5, -3.0]).to(dtype)
    n = 200_000
    ids = gumbel_sample(logits.expand(n, -1), seeded(0), temperature)
    assert ids.shape == (n,) and ids.dtype == torch.long
    empirical = torch.bincount(ids, minlength=6).float() / n
    want = torch.softmax(logits.float() / temperature, -1)
    assert torch.allclose(empirical, want, atol=0.006)


def test_gumbel_sample_deterministic_and_no_grad() -> None:
    logits = torch.randn(4, 5, 30, requires_grad=True)
    a, b = gumbel_sample(logits, seeded(1)), gumbel_sample(logits, seeded(1))
    assert torch.equal(a, b) and a.shape == (4, 5) and not a.requires_grad


def test_gumbel_sample_in_blocks_equals_the_official_formula() -> None:
    # 3 x 7 rows of a 100k vocabulary: several CPU blocks, the last one short. The official code's formula
    # on the whole tensor, from the same seed, must give the very same samples.
    logits = torch.randn(3, 7, 100_000)
    u = torch.rand(logits.shape, generator=seeded(5))
    want = torch.argmax(logits / 0.7 - torch.log(-torch.log(u + 1e-9) + 1e-9), dim=-1)
    got = gumbel_sample(logits, seeded(5), temperature=0.7)
    assert got.shape == (3, 7) and torch.equal(got, want)


# ----- electra_step -----


def test_gathered_generator_equals_full_logits() -> None:
    gen, _ = make_models()
    gen.eval()
    batch = make_batch([32, 20, 9, 2], 32)
    ids, attn, tt = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    positions, _ = select_positions(ids, attn, SPECIALS, 0.15, seeded(0))
    gathered = gen(ids, attn, tt, masked_positions=positions)
    full = gen(ids, attn, tt)
    want = torch.gather(full, 1, positions.unsqueeze(-1).expand(-1, -1, full.shape[-1]))
    torch.testing.assert_close(gathered, want)


def test_electra_step_mlm_loss_equals_full_logits_reference() -> None:
    gen, disc = make_models()
    batch = make_batch([32, 20, 9, 2], 32)
    ids, attn, tt = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    cfg = ObjectiveConfig()
    out = electra_step(gen, disc, batch, SPECIALS, cfg, seeded(4))
    # Same seed, same draw order (positions, then masking): the same corruption.
    rng = seeded(4)
    positions, valid = select_positions(ids, attn, SPECIALS, cfg.mask_prob, rng)
    masked = mask_inputs(ids, positions, valid, SPECIALS, cfg, VOCAB, rng)
    with torch.no_grad():
        full = gen(masked, attn, tt)
    rows = torch.arange(len(ids)).unsqueeze(1).expand_as(positions)
    want = F.cross_entropy(full[rows[valid], positions[valid]], ids[rows[valid], positions[valid]])
    torch.testing.assert_close(out.mlm_loss.detach(), want)


def test_electra_step_loss_and_stats_are_consistent() -> None:
    gen, disc = make_models()
    batch = make_batch([32, 20, 9, 2], 32)
    attn = batch["attention_mask"]
    cfg = ObjectiveConfig()
    out = electra_step(gen, disc, batch, SPECIALS, cfg, seeded(2))
    torch.testing.assert_close(out.loss(), out.mlm_loss + 50.0 * out.disc_loss)
    assert out.loss().dim() == 0 and out.loss().requires_grad
    # The sums divided by the counts given (the trainer's global batch's), the micro-batch's own by default.
    torch.testing.assert_close(
        out.loss(torch.tensor(40.0), torch.tensor(200.0)),
        out.mlm_loss_sum / 40.0 + 50.0 * out.disc_loss_sum / 200.0,
    )
    assert out.disc_weight == 50.0
    s = out.stats
    assert set(s) == set(STAT_KEYS)
    assert all(v.dim() == 0 and v.dtype == torch.float32 and not v.requires_grad for v in s.values())
    n_valid = sum(expected_count(n - 2, 0.15) for n in [32, 20, 9, 2])
    assert s["mlm_count"] == n_valid
    assert s["disc_count"] == s["num_tokens"] == attn.sum()
    # Distinct positions: each selected token is either resampled as itself or replaced.
    assert s["sampled_equals_original"] + s["replaced_actual_pos"] == s["mlm_count"]
    assert s["replaced_true_pos"] <= min(s["replaced_pred_pos"], s["replaced_actual_pos"])
    assert 0 <= s["disc_correct"] <= s["disc_count"] and 0 <= s["mlm_correct"] <= s["mlm_count"]
    torch.testing.assert_close(s["mlm_loss_sum"] / s["mlm_count"], out.mlm_loss.detach())
    torch.testing.assert_close(s["disc_loss_sum"] / s["disc_count"], out.disc_loss.detach())
    metrics = ratios(s)
    assert 0.0 <= metrics["disc_accuracy"] <= 1.0 and 0.0 <= metrics["replaced_fraction"] <= 1.0
    assert metrics["all_original_accuracy"] == pytest.approx(1.0 - metrics["replaced_fraction"])
    # The per-token outputs evaluation ranks: -1 exactly where nothing can be replaced (padding, [CLS],
    # [SEP]), labels summing to the replaced count.
    assert out.disc_logits is not None and not out.disc_logits.requires_grad
    assert out.disc_labels is not None and out.disc_labels.shape == attn.shape
    unreplaceable = (attn == 0) | (batch["input_ids"] == CLS) | (batch["input_ids"] == SEP)
    assert unreplaceable.sum() > (attn == 0).sum()
    assert torch.equal(out.disc_labels < 0, unreplaceable)
    assert out.identity_masses is None  # asked for by evaluation only
    assert out.disc_labels.clamp_min(0).sum() == s["replaced_actual_pos"]
    predicted = (out.disc_logits > 0) & (out.disc_labels == 1)
    assert predicted.sum() == s["replaced_true_pos"]

    weighted = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(disc_weight=3.0), seeded(2))
    torch.testing.assert_close(weighted.loss(), out.mlm_loss + 3.0 * out.disc_loss)


def test_electra_step_deterministic_by_seed() -> None:
    gen, disc = make_models()
    batch = make_batch([32, 20, 9], 32)
    a = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(9))
    b = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(9))
    assert torch.equal(a.loss(), b.loss())
    assert all(torch.equal(a.stats[k], b.stats[k]) for k in STAT_KEYS)


def _grads(params: list[nn.Parameter]) -> list[bool]:
    return [p.grad is not None and bool(p.grad.abs().sum() > 0) for p in params]


def test_disc_loss_does_not_reach_the_generator() -> None:
    gen, disc = make_models()
    shared = {id(p) for p in disc.electra.embeddings.parameters()}
    gen_only = [p for p in gen.parameters() if id(p) not in shared]
    disc_only = [p for p in disc.parameters() if id(p) not in shared]
    word_emb = disc.electra.embeddings.word_embeddings.weight
    assert gen.generator_lm_head.weight is word_emb  # tied, so it is shared, not generator-only
    batch = make_batch([32, 20, 9], 32)

    out = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(0))
    out.disc_loss.backward()
    assert not any(_grads(gen_only))
    assert all(_grads(disc_only))
    assert word_emb.grad is not None and word_emb.grad.abs().sum() > 0

    for p in itertools.chain(gen.parameters(), disc.parameters()):
        p.grad = None
    out = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(0))
    out.mlm_loss.backward()
    assert all(_grads(gen_only))
    assert not any(_grads(disc_only))


def test_electra_step_under_bf16_autocast() -> None:
    gen, disc = make_models()
    batch = make_batch([32, 20, 9], 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = electra_step(gen, disc, batch, SPECIALS, ObjectiveConfig(), seeded(0))
    assert out.loss().dtype == out.mlm_loss.dtype == out.disc_loss.dtype == torch.float32
    assert torch.isfinite(out.loss())
    out.loss().backward()


@pytest.mark.slow
def test_tiny_models_overfit_a_fixed_batch() -> None:
    # Tokens follow the position (offset by row parity), so context determines them and 150 steps suffice.
    # With lr=0 each of the three checks below fails (checked when the thresholds were chosen).
    seq_len, lengths = 32, [32, 30, 28, 26, 24, 20, 18, 16]
    ids = torch.full((len(lengths), seq_len), PAD)
    for r, n in enumerate(lengths):
        ids[r, :n] = torch.tensor([CLS] + [FIRST_WORD + (t + r % 2) % 35 for t in range(n - 2)] + [SEP])
    attn = (ids != PAD).long()
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": attn}
    gen, disc = make_models(seed=1)
    params = list({id(p): p for p in itertools.chain(gen.parameters(), disc.parameters())}.values())
    opt = torch.optim.AdamW(params, lr=1e-3)
    cfg = ObjectiveConfig()

    def evaluate() -> dict[str, float]:
        total = {k: 0.0 for k in STAT_KEYS}
        with torch.no_grad():
            for s in range(10):
                out = electra_step(gen, disc, batch, SPECIALS, cfg, seeded(10_000 + s))
                for k in STAT_KEYS:
                    total[k] += out.stats[k].item()
        return ratios(total)

    before = evaluate()
    for step in range(150):
        out = electra_step(gen, disc, batch, SPECIALS, cfg, seeded(step))
        opt.zero_grad()
        out.loss().backward()
        opt.step()
    after = evaluate()
    all_original = 1.0 - after["replaced_fraction"]
    assert after["disc_accuracy"] > all_original + 0.05, (before, after)
    assert after["disc_recall"] > 0.5 and after["disc_precision"] > 0.5, (before, after)
    assert after["mlm_loss"] < 0.75 * before["mlm_loss"], (before, after)


# ----- mlm_step -----


class RecordingGenerator(nn.Module):
    """Wraps a generator and keeps the inputs it was given."""

    def __init__(self, inner: ElectraGenerator) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config
        self.inputs: list[Tensor] = []

    def forward(self, input_ids: Tensor, *args: Tensor | None, **kwargs: Tensor) -> Tensor:
        self.inputs.append(input_ids)
        return self.inner(input_ids, *args, **kwargs)


def test_mlm_step_loss_on_selected_positions_only() -> None:
    gen, _ = make_models()
    model = RecordingGenerator(gen)
    batch = make_batch([32, 20, 9, 2], 32)
    ids, attn, tt = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    out = mlm_step(model, batch, SPECIALS, MLM_BASELINE, seeded(3), VOCAB)
    rng = seeded(3)
    positions, valid = select_positions(ids, attn, SPECIALS, MLM_BASELINE.mask_prob, rng)
    masked = mask_inputs(ids, positions, valid, SPECIALS, MLM_BASELINE, VOCAB, rng)
    assert torch.equal(model.inputs[0], masked)
    with torch.no_grad():
        full = gen(masked, attn, tt)
    rows = torch.arange(len(ids)).unsqueeze(1).expand_as(positions)
    want = F.cross_entropy(full[rows[valid], positions[valid]], ids[rows[valid], positions[valid]])
    torch.testing.assert_close(out.loss().detach(), want)
    torch.testing.assert_close(out.loss(), out.mlm_loss)
    assert out.loss().requires_grad
    assert out.disc_loss == 0
    s = out.stats
    assert set(s) == set(STAT_KEYS)
    assert s["mlm_count"] == valid.sum() and s["num_tokens"] == attn.sum()
    for k in ("disc_loss_sum", "disc_correct", "disc_count", "replaced_true_pos", "sampled_equals_original"):
        assert s[k] == 0
    assert out.disc_logits is None and out.disc_labels is None
    assert set(ratios(s)) == {"mlm_loss", "mlm_accuracy"}
    out.loss().backward()


def test_mlm_step_uses_80_10_10() -> None:
    gen, _ = make_models()
    model = RecordingGenerator(gen)
    batch = make_batch([62] * 200, 64)
    ids = batch["input_ids"]
    with torch.no_grad():
        mlm_step(model, batch, SPECIALS, rng=seeded(0))
    changed = model.inputs[0] != ids
    n_selected = 200 * 9
    assert abs((model.inputs[0] == MASK).sum().item() / n_selected - 0.8) < 0.03
    assert abs((changed & (model.inputs[0] != MASK)).sum().item() / n_selected - 0.1) < 0.03


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mask_prob": 0.0},
        {"mask_prob": 1.5},
        {"mask_token_prob": 0.9, "random_token_prob": 0.2},
        {"random_token_prob": -0.1},
        {"temperature": 0.0},
        {"disc_weight": -1.0},
    ],
)
def test_objective_config_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError):
        ObjectiveConfig(**kwargs)
