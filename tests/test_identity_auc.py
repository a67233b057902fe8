"""The identity-only AUC: the expected masses per token id, the AUC of ranking ids by their likelihood ratio,
and the phase it gives a run, checked against hand-computed values and against sampling."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from electra.training.pretrain.diagnostics.identity_auc import (
    CONTEXT_MARGIN,
    PHASE_CONTEXT,
    PHASE_IDENTITY,
    identity_auc,
    identity_masses,
    phase,
)
from electra.training.pretrain.objective import (
    ObjectiveConfig,
    SpecialTokens,
    candidate_mask,
    corrupt_inputs,
    gumbel_sample,
    select_positions,
)


def brute_force_auc(samples: list[tuple[int, int]], score: dict[int, float]) -> float:
    """P(score of a replaced token > score of an original one), ties half, over explicit (id, label) pairs."""
    pos = [score[i] for i, label in samples if label == 1]
    neg = [score[i] for i, label in samples if label == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_the_auc_ranks_ids_by_their_replaced_share_with_ties_half() -> None:
    # Integer masses, so the AUC can be checked on the explicit tokens they stand for. Ids 1 and 3 have the
    # same share (1/3): a tie across ids, counted half like the ties within one id.
    original = [5, 2, 0, 4, 1]
    replaced = [1, 1, 3, 2, 0]
    masses = torch.tensor([original, replaced], dtype=torch.float64)
    samples = [(i, 0) for i, n in enumerate(original) for _ in range(n)]
    samples += [(i, 1) for i, n in enumerate(replaced) for _ in range(n)]
    share = {i: replaced[i] / (original[i] + replaced[i]) for i in range(5)}
    assert identity_auc(masses) == pytest.approx(brute_force_auc(samples, share), abs=1e-12)
    # An id never seen changes nothing; one kind of mass missing leaves the AUC undefined.
    padded = torch.cat([masses, torch.zeros(2, 3, dtype=torch.float64)], dim=1)
    assert identity_auc(padded) == pytest.approx(identity_auc(masses), abs=1e-12)
    assert math.isnan(identity_auc(torch.tensor([[3.0, 1.0], [0.0, 0.0]])))


def test_identity_gives_chance_when_replacements_follow_the_corpus_and_one_when_disjoint() -> None:
    corpus = torch.tensor([50.0, 30.0, 15.0, 5.0])
    # Replacements at the corpus's own frequencies: every id has the same share, nothing to rank by.
    assert identity_auc(torch.stack([corpus, corpus * 0.15])) == pytest.approx(0.5)
    # Replacements only ever of ids the corpus never holds: identity tells them apart perfectly.
    assert identity_auc(torch.tensor([[50.0, 30.0, 0.0, 0.0], [0.0, 0.0, 4.0, 1.0]])) == pytest.approx(1.0)


def test_masses_by_hand() -> None:
    """One row of five tokens: [CLS] a b c [SEP], positions 1 and 3 selected (b unmasked), a fixed generator
    distribution at each slot."""
    input_ids = torch.tensor([[0, 3, 4, 5, 1]])
    candidates = torch.tensor([[False, True, True, True, False]])
    positions = torch.tensor([[1, 3, 0]])  # the third slot is padding: invalid, pointing at position 0
    valid = torch.tensor([[True, True, False]])
    targets = torch.tensor([[3, 5, 0]])
    q1 = torch.tensor([0.0, 0.0, 0.1, 0.6, 0.3, 0.0])  # keeps its original (3) with 0.6
    q2 = torch.tensor([0.0, 0.0, 0.5, 0.0, 0.25, 0.25])  # keeps its original (5) with 0.25
    q3 = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # invalid: must count for nothing
    logits = torch.stack([q1, q2, q3]).clamp_min(1e-30).log().unsqueeze(0)
    masses = identity_masses(logits, targets, valid, input_ids, candidates, positions)
    # Originals: b (id 4) unmasked, plus each slot's chance of sampling its own original.
    want_original = torch.tensor([0.0, 0.0, 0.0, 0.6, 1.0, 0.25], dtype=torch.float64)
    # Replaced: every sampled id that differs from the slot's original.
    want_replaced = torch.tensor([0.0, 0.0, 0.1 + 0.5, 0.0, 0.3 + 0.25, 0.0], dtype=torch.float64)
    torch.testing.assert_close(masses[0], want_original, atol=1e-6, rtol=0)
    torch.testing.assert_close(masses[1], want_replaced, atol=1e-6, rtol=0)


SPECIALS = SpecialTokens(pad=0, cls=1, sep=2, mask=3)


def test_the_masses_are_the_expectation_of_what_the_objective_labels() -> None:
    """Counted from the objective's own sampling and labels over many draws, each id's original and replaced
    tokens (at maskable positions) average to the masses, and the AUC of the replaced-share score on the
    sampled labels converges to the identity-only AUC."""
    torch.manual_seed(0)
    vocab, rows, length = 12, 6, 20
    input_ids = torch.randint(4, vocab, (rows, length))
    input_ids[:, 0], input_ids[:, -1] = SPECIALS.cls, SPECIALS.sep
    attention = torch.ones_like(input_ids)
    cfg = ObjectiveConfig()
    rng = torch.Generator().manual_seed(1)
    positions, valid = select_positions(input_ids, attention, SPECIALS, cfg.mask_prob, rng)
    targets = torch.gather(input_ids, 1, positions)
    # A generator skewed towards the rare ids 10 and 11, as an untrained one is skewed.
    logits = torch.randn(rows, positions.shape[1], vocab) * 0.5
    logits[..., 10:] += 2.0
    logits[..., :4] = -30.0
    candidates = candidate_mask(input_ids, attention, SPECIALS)
    masses = identity_masses(logits, targets, valid, input_ids, candidates, positions)
    counts = torch.zeros(2, vocab, dtype=torch.float64)
    draws = 3000
    for _ in range(draws):
        sampled = gumbel_sample(logits, rng)
        corrupted, labels = corrupt_inputs(input_ids, positions, valid, sampled)
        counts.index_put_(
            (labels[candidates], corrupted[candidates]), torch.ones(()).double(), accumulate=True
        )
    torch.testing.assert_close(counts / draws, masses, atol=0.05, rtol=0.03)
    assert masses.sum() == pytest.approx(float(candidates.sum()))
    assert 0.6 < identity_auc(masses) < 1.0
    assert identity_auc(counts) == pytest.approx(identity_auc(masses), abs=0.01)


def test_the_phase_needs_the_auc_clearly_above_identity() -> None:
    assert phase(0.80, 0.82) == PHASE_IDENTITY
    assert phase(0.82, 0.82) == PHASE_IDENTITY
    assert phase(0.82 + CONTEXT_MARGIN / 2, 0.82) == PHASE_IDENTITY
    assert phase(0.82 + 2 * CONTEXT_MARGIN, 0.82) == PHASE_CONTEXT
