"""The identity-only AUC: the expected masses per token id, the AUC of ranking ids by their likelihood ratio,
and the phase it gives a run, checked against hand-computed values and against sampling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from electra.training.pretrain.diagnostics.identity_auc import (
    CONTEXT_MARGIN,
    PHASE_CONTEXT,
    PHASE_IDENTITY,
    corpus_counts,
    held_apart_auc,
    identity_auc,
    identity_bound,
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


def test_the_auc_ranks_ids_by_sampling_over_corpus_frequency_with_ties_half() -> None:
    # Integer masses, so the AUC can be checked on the explicit tokens they stand for. The score of an id is
    # the generator's sampling mass over the corpus's frequency; ids 1 and 3 tie (1.0): a tie across ids,
    # counted half like the ties within one id.
    original = [5, 2, 0, 4, 1]
    replaced = [1, 1, 3, 2, 0]
    sampled = [2.0, 2.0, 3.0, 4.0, 0.5]
    corpus = [10.0, 2.0, 1.0, 4.0, 2.0]
    masses = torch.tensor([original, replaced, sampled], dtype=torch.float64)
    samples = [(i, 0) for i, n in enumerate(original) for _ in range(n)]
    samples += [(i, 1) for i, n in enumerate(replaced) for _ in range(n)]
    ratio = {i: sampled[i] / corpus[i] for i in range(5)}
    expected = brute_force_auc(samples, ratio)
    assert expected > 0.5  # the ratio's own ranking, not its reverse (next test)
    assert identity_auc(masses, corpus) == pytest.approx(expected, abs=1e-12)
    # An id neither counted nor in the corpus changes nothing; one kind of mass missing leaves it undefined.
    padded = torch.cat([masses, torch.zeros(3, 3, dtype=torch.float64)], dim=1)
    assert identity_auc(padded, [*corpus, 0, 0, 0]) == pytest.approx(identity_auc(masses, corpus), abs=1e-12)
    assert math.isnan(identity_auc(torch.tensor([[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]), [1, 1]))


def test_identity_gives_chance_when_sampling_follows_the_corpus_and_one_when_disjoint() -> None:
    corpus = torch.tensor([50.0, 30.0, 15.0, 5.0])
    # Replacements at the corpus's own frequencies: every id has the same ratio, nothing to rank by.
    assert identity_auc(torch.stack([corpus, corpus * 0.15, corpus * 0.15]), corpus) == pytest.approx(0.5)
    # Replacements only ever of ids the corpus never holds: identity tells them apart perfectly.
    disjoint = torch.tensor([[50.0, 30.0, 0.0, 0.0], [0.0, 0.0, 4.0, 1.0], [0.0, 0.0, 4.0, 1.0]])
    assert identity_auc(disjoint, [50.0, 30.0, 0.0, 0.0]) == pytest.approx(1.0)


def test_a_generator_that_mostly_restores_its_often_sampled_word_gets_the_reverse_ranking() -> None:
    """Late in a run the generator samples some words often and mostly as themselves (labelled original): the
    likelihood ratio then ranks them above the words it does replace, an AUC below 0.5. The reverse ranking
    is an identity-only detector too, and the value is that one's."""
    original, replaced, sampled, corpus = [12, 10], [1, 3], [5.0, 3.0], [10.0, 10.0]
    masses = torch.tensor([original, replaced, sampled], dtype=torch.float64)
    samples = [(i, 0) for i, n in enumerate(original) for _ in range(n)]
    samples += [(i, 1) for i, n in enumerate(replaced) for _ in range(n)]
    by_ratio = brute_force_auc(samples, {0: 0.5, 1: 0.3})
    assert by_ratio == pytest.approx(31 / 88)  # below chance
    assert identity_auc(masses, corpus) == pytest.approx(brute_force_auc(samples, {0: -0.5, 1: -0.3}))
    assert identity_auc(masses, corpus) == pytest.approx(1 - 31 / 88)


def test_the_ranking_takes_nothing_from_the_counts_it_is_scored_on() -> None:
    """A generator that samples every word at its corpus frequency gives identity nothing to rank by, however
    lumpy the few validation tokens of each word happen to be. Ranked by the validation counts themselves
    (replaced over original on the same tokens), the same masses would look far better than chance."""
    torch.manual_seed(0)
    corpus = torch.full((400,), 1.0)
    sampled = corpus * 0.3
    original = torch.poisson(torch.full((400,), 2.0))  # a handful of validation tokens per word
    masses = torch.stack([original, sampled, sampled]).double()
    assert identity_auc(masses, corpus) == pytest.approx(0.5)
    assert identity_auc(masses, original.clamp_min(1e-9)) > 0.65  # what ranking by the counts scored on does


def test_held_apart_ranks_each_fold_by_the_other_folds_replaced_shares() -> None:
    """Fold 0's tokens ranked by each word's replaced share in fold 1, smoothed by one token at fold 1's
    overall share, and the other way round; the AUCs averaged. Checked on explicit tokens."""
    fold0 = [[6, 1, 3], [1, 2, 0], [9.0, 9.0, 9.0]]  # (original, replaced, sampled) per word
    fold1 = [[2, 4, 1], [2, 0, 1], [9.0, 9.0, 9.0]]
    folds = torch.tensor([fold0, fold1], dtype=torch.float64)

    def share(other: list[list[float]]) -> dict[int, float]:
        o, r = other[0], other[1]
        overall = sum(r) / (sum(o) + sum(r))
        return {w: (r[w] + overall) / (o[w] + r[w] + 1) for w in range(3)}

    def tokens(fold: list[list[float]]) -> list[tuple[int, int]]:
        return [(w, label) for label in (0, 1) for w in range(3) for _ in range(int(fold[label][w]))]

    want = (brute_force_auc(tokens(fold0), share(fold1)) + brute_force_auc(tokens(fold1), share(fold0))) / 2
    assert held_apart_auc(folds) == pytest.approx(want, abs=1e-12)
    # A fold without replaced tokens is left out of the mean; none left: undefined.
    empty = folds.clone()
    empty[1, 1] = 0.0
    assert held_apart_auc(empty) == pytest.approx(brute_force_auc(tokens(fold0), share(empty[1].tolist())))
    assert math.isnan(held_apart_auc(torch.zeros(2, 3, 3, dtype=torch.float64)))


def test_held_apart_finds_the_words_the_generator_replaces_where_the_ratio_cannot() -> None:
    """The generator samples word 0 often and mostly as itself: the likelihood ratio ranks it above word 1,
    which it replaces more often (by_ratio below 0.5, hence reversed). Each word's replaced share, read on
    the other fold, ranks them the right way round: the best identity-only AUC, which the bound takes."""
    masses = torch.tensor([[120, 100], [10, 30], [50.0, 30.0]], dtype=torch.float64)
    folds = torch.stack([masses, masses])
    samples = [(w, 0) for w in (0, 1) for _ in range(int(masses[0, w]))]
    samples += [(w, 1) for w in (0, 1) for _ in range(int(masses[1, w]))]
    best = brute_force_auc(samples, {0: 10 / 130, 1: 30 / 130})
    assert held_apart_auc(folds) == pytest.approx(best, abs=1e-12)
    corpus = [10.0, 10.0]
    bound, by_ratio, held_apart = identity_bound(folds, corpus)
    assert by_ratio == pytest.approx(identity_auc(masses * 2, corpus)) and held_apart == pytest.approx(best)
    assert bound == max(by_ratio, held_apart)
    # One fold: nothing held apart, the ratio's estimate alone.
    assert identity_bound(masses.unsqueeze(0), corpus)[0] == pytest.approx(identity_auc(masses, corpus))
    assert math.isnan(identity_bound(masses.unsqueeze(0), corpus)[2])


def test_held_apart_takes_nothing_from_the_counts_it_is_scored_on() -> None:
    """Every word replaced at the same rate: nothing to rank by. A handful of tokens per word makes each
    fold's shares lumpy; ranked by its own shares a fold looks far better than chance, ranked by the other
    fold's it does not."""
    gen = torch.Generator().manual_seed(0)
    words = 2000
    folds = torch.stack(
        [
            torch.stack(
                [
                    torch.poisson(torch.full((words,), 3.0), generator=gen),
                    torch.poisson(torch.full((words,), 1.0), generator=gen),
                    torch.ones(words),
                ]
            )
            for _ in range(2)
        ]
    ).double()
    assert abs(held_apart_auc(folds) - 0.5) < 0.03
    own = torch.stack([folds[0], folds[0]])  # fold 0 ranked by its own shares
    assert held_apart_auc(own) > 0.65


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
    # Sampled: the generator's mass over the valid slots, originals included.
    torch.testing.assert_close(masses[0], want_original, atol=1e-6, rtol=0)
    torch.testing.assert_close(masses[1], want_replaced, atol=1e-6, rtol=0)
    torch.testing.assert_close(masses[2], (q1 + q2).double(), atol=1e-6, rtol=0)


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
    corpus = torch.bincount(input_ids[candidates], minlength=vocab)
    counts = torch.zeros(2, vocab, dtype=torch.float64)
    draws = 3000
    for _ in range(draws):
        sampled = gumbel_sample(logits, rng)
        corrupted, labels = corrupt_inputs(input_ids, positions, valid, sampled)
        counts.index_put_(
            (labels[candidates], corrupted[candidates]), torch.ones(()).double(), accumulate=True
        )
    torch.testing.assert_close(counts / draws, masses[:2], atol=0.05, rtol=0.03)
    assert masses[:2].sum() == pytest.approx(float(candidates.sum()))
    assert masses[2].sum() == pytest.approx(float(valid.sum()))
    assert 0.6 < identity_auc(masses, corpus) < 1.0
    sampled_masses = torch.cat([counts, masses[2:]])  # the sampled labels, ranked the same way
    assert identity_auc(sampled_masses, corpus) == pytest.approx(identity_auc(masses, corpus), abs=0.01)


def test_the_phase_needs_the_auc_clearly_above_identity() -> None:
    assert phase(0.80, 0.82) == PHASE_IDENTITY
    assert phase(0.82, 0.82) == PHASE_IDENTITY
    assert phase(0.82 + CONTEXT_MARGIN / 2, 0.82) == PHASE_IDENTITY
    assert phase(0.82 + 2 * CONTEXT_MARGIN, 0.82) == PHASE_CONTEXT


def test_corpus_counts_count_the_maskable_tokens_of_each_row() -> None:
    ids = np.array([[1, 5, 6, 5, 2, 0], [1, 7, 2, 0, 0, 0]])
    lengths = np.array([5, 3])
    want = np.zeros(9, dtype=np.int64)
    want[[5, 6, 7]] = [2, 1, 1]
    np.testing.assert_array_equal(corpus_counts(ids, lengths, (0, 1, 2), 9), want)
