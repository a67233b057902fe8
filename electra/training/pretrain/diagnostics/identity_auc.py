"""The identity-only AUC: the best replaced-token detection ROC AUC a detector could reach that sees only
each token's identity, never its context.

Early in a run the discriminator's AUC comes from identity alone: while the generator samples rare words more
often than the corpus holds them, "a rare word is probably replaced" ranks replaced tokens above originals
without reading anything around them. As the generator's samples approach the corpus's unigram frequencies
that cue vanishes, and a discriminator that has not yet learned context falls back with it: the early "peak"
and the "collapse" after it are the first phase of replaced-token detection, not learning lost. Logged beside
the discriminator's AUC, this bound says which phase a run is in: at or below it, the discriminator may be
reading identity only; clearly above it, it reads context.

Per vocabulary entry w, over the maskable tokens of the batches evaluated (padding, [CLS] and [SEP] left out),
in expectation over the generator's sampling:

    replaced(w) = sum over masked slots i of q_i(w), less q_i(w) where w is the slot's original o_i
    original(w) = count of w at the maskable positions left unmasked + sum over slots with o_i = w of q_i(w)

where q_i is the generator's softmax at slot i (a sample equal to the original is labelled original, as in
the objective). The masses add up over batches and ranks, like the detection histograms.

The best identity-only detector scores w by its likelihood ratio: how often the generator samples w against
how often the corpus holds it, q(w) / p(w), with p the unigram distribution of the training data (maskable
tokens) and q(w) = sum over slots of q_i(w), the generator's sampling mass (the third row of the masses). Its
AUC is then read off the validation masses. The ranking takes nothing from the validation tokens' labels or
counts: ranked by replaced(w) / original(w) on the same tokens, every word the validation set happens to hold
few times looks replaced, and the bound is optimistic (0.646 against 0.509 for the official arm at 25% of its
budget, seed 1).

A sample equal to the original is labelled original, so the ratio of replaced to original mass is not
q(w) / p(w) once the generator often restores the original: the words it predicts well, sampled often
and mostly as themselves, rank too high, and the ranking's AUC can fall below 0.5 (the official arm's did
from half its budget on, with 15% of its samples equal to the original: 0.462 at the end). The same ranking
reversed is an identity-only detector too, so `identity_auc` returns the better of the two, never below 0.5
(the official arm's 0.462 reads 0.538: its often-sampled words are then more often original than not).

Neither ranking is the best identity-only detector once the generator restores originals often: that ranks
each word by its own share of replaced tokens. `held_apart_auc` estimates it without the optimism of
ranking the tokens scored by their own counts: the validation batches are split into folds (alternate
batches), each word's replaced share is estimated on the other folds (smoothed towards the overall share by
one token's worth, so a word seen once there is not ranked first or last on that alone) and each fold's
tokens are ranked by it; the folds' AUCs are averaged. With few tokens per word that estimate is pessimistic
(noise in the shares lowers the AUC), so `identity_bound` takes the better of the two estimates, each free
of the scored tokens' labels.
A detector of identity and position together is not what it bounds (positions are drawn uniformly among
the maskable ones, so a position carries no cue by itself); and q is the generator's distribution at the
step evaluated, which a detector trained over earlier steps only tracks with a lag.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

# The discriminator's AUC must exceed the identity-only AUC by this much for the run to be "reading context":
# well beyond the sampling error of an AUC over a few thousand validation tokens of each class (~0.005).
CONTEXT_MARGIN = 0.02
PHASE_IDENTITY = "identity"
PHASE_CONTEXT = "reading context"


def identity_masses(
    gen_logits: Tensor,
    targets: Tensor,
    valid: Tensor,
    input_ids: Tensor,
    candidates: Tensor,
    positions: Tensor,
    temperature: float = 1.0,
) -> Tensor:
    """(3, V) float64: row 0 the expected original mass of each token id, row 1 its expected replaced mass,
    row 2 the generator's sampling mass of it (the sum of its probability over the slots).

    gen_logits (B, K, V) are the generator's logits at the K slots, targets (B, K) the originals there, valid
    (B, K) which slots are real, input_ids and candidates (B, L) the uncorrupted ids and which positions are
    maskable, positions (B, K) the slots' positions.
    """
    vocab = gen_logits.shape[-1]
    q = torch.softmax(gen_logits.float() / temperature, dim=-1) * valid.unsqueeze(-1)
    q = q.reshape(-1, vocab)
    flat_targets = targets.reshape(-1)
    # q_i(o_i): the sample equals the original, which the objective labels original.
    kept_own = q.gather(1, flat_targets.unsqueeze(1)).squeeze(1).double()
    sampled = q.sum(0).double()
    replaced = sampled.clone().index_add_(0, flat_targets, -kept_own)
    # Maskable positions not selected: originals for certain. Invalid slots point at position 0, which may be
    # a valid slot of the same row: they are sent to an extra column instead.
    B, L = candidates.shape
    target = torch.where(valid, positions, torch.full_like(positions, L))
    selected = torch.zeros(B, L + 1, dtype=torch.bool, device=candidates.device)
    selected.scatter_(1, target, True)
    unmasked = candidates & ~selected[:, :L]
    original = torch.bincount(input_ids[unmasked].reshape(-1), minlength=vocab).double()
    original.index_add_(0, flat_targets, kept_own)
    return torch.stack([original, replaced.clamp_min(0.0), sampled])


def corpus_counts(
    input_ids: np.ndarray, lengths: np.ndarray, special_ids: tuple[int, ...], vocab_size: int
) -> np.ndarray:
    """Counts of each token id among the maskable tokens of the rows given (padding and `special_ids` left
    out): the corpus's unigram frequencies the identity-only detector ranks by."""
    valid = np.arange(input_ids.shape[1])[None, :] < np.asarray(lengths)[:, None]
    tokens = np.asarray(input_ids)[valid & ~np.isin(input_ids, special_ids)]
    return np.bincount(tokens.astype(np.int64), minlength=vocab_size)[:vocab_size]


# Rows of the training data the corpus's unigram counts are taken from (evenly spaced): 25M tokens of 128,
# a second or two of counting, far more than the counts of the ids that matter need.
CORPUS_ROWS = 200_000


def training_counts(split: Any, special_ids: tuple[int, ...], vocab_size: int) -> np.ndarray:
    """corpus_counts over up to CORPUS_ROWS evenly spaced rows of a prepared split (input_ids, lengths)."""
    n = len(split)
    rows = np.unique(np.linspace(0, n - 1, min(n, CORPUS_ROWS)).round().astype(np.int64)) if n else []
    ids = np.asarray(split.input_ids[rows]) if n else np.zeros((0, 1), dtype=np.int64)
    lengths = np.asarray(split.lengths[rows]) if n else np.zeros(0, dtype=np.int64)
    return corpus_counts(ids, lengths, special_ids, vocab_size)


def identity_auc(masses: Tensor, corpus: Tensor | np.ndarray) -> float:
    """The ROC AUC, on the tokens the masses count, of scoring each token by its id's likelihood ratio: the
    generator's sampling mass of the id over the corpus's frequency of it (ties, within an id or between ids
    of equal ratio, count half), or of the reverse ranking when that is higher. nan without both kinds of
    mass."""
    original, replaced, sampled = masses.double().cpu()
    n_orig, n_repl = float(original.sum()), float(replaced.sum())
    if n_orig <= 0 or n_repl <= 0:
        return float("nan")
    frequency = torch.as_tensor(np.asarray(corpus), dtype=torch.float64)
    seen = (original + replaced) > 0
    # An id the corpus never holds but the generator samples: infinitely more often replaced than original.
    ratio = torch.where(
        frequency > 0, sampled / frequency.clamp_min(1e-300), torch.full_like(sampled, math.inf)
    )
    auc = _auc_by_score(original[seen], replaced[seen], ratio[seen], n_orig, n_repl)
    # The reversed ranking is an identity-only detector as well (see the module's docstring).
    return max(auc, 1.0 - auc)


# Folds the validation batches are split into for held_apart_auc (alternate batches).
FOLDS = 2
# Pseudo-tokens at the overall replaced share added to each word's held-apart counts (see the module).
SHARE_PRIOR_TOKENS = 1.0


def held_apart_auc(folds: Tensor) -> float:
    """(F, 3, V) masses per fold (identity_masses summed over each fold's batches) -> the mean over folds of
    the AUC of ranking that fold's tokens by each word's replaced share on the other folds (see the module).
    nan when no fold has both kinds of mass."""
    folds = folds.double().cpu()
    every = folds.sum(0)
    aucs = []
    for f in range(folds.shape[0]):
        original, replaced = folds[f, 0], folds[f, 1]
        n_orig, n_repl = float(original.sum()), float(replaced.sum())
        others = every - folds[f]
        total = float(others[0].sum() + others[1].sum())
        if n_orig <= 0 or n_repl <= 0 or total <= 0:
            continue
        overall = float(others[1].sum()) / total
        share = (others[1] + SHARE_PRIOR_TOKENS * overall) / (others[0] + others[1] + SHARE_PRIOR_TOKENS)
        seen = (original + replaced) > 0
        aucs.append(_auc_by_score(original[seen], replaced[seen], share[seen], n_orig, n_repl))
    return float(np.mean(aucs)) if aucs else float("nan")


def identity_bound(folds: Tensor, corpus: Tensor | np.ndarray) -> tuple[float, float, float]:
    """(the identity-only AUC logged, the likelihood ratio's, the held-apart shares') for (F, 3, V) masses
    per fold: the logged value is the better of the two estimates (nan-aware)."""
    by_ratio = identity_auc(folds.sum(0), corpus)
    held_apart = held_apart_auc(folds)  # nan with one fold: nothing held apart
    best = max((v for v in (by_ratio, held_apart) if not math.isnan(v)), default=float("nan"))
    return best, by_ratio, held_apart


def _auc_by_score(original: Tensor, replaced: Tensor, score: Tensor, n_orig: float, n_repl: float) -> float:
    order = torch.argsort(score)
    score, original, replaced = score[order], original[order], replaced[order]
    # Ids of equal score form one group, so that ties between ids count half, as ties within one id do.
    _, group = torch.unique_consecutive(score, return_inverse=True)
    groups = int(group.max()) + 1
    orig_g = torch.zeros(groups, dtype=torch.float64).index_add_(0, group, original)
    repl_g = torch.zeros(groups, dtype=torch.float64).index_add_(0, group, replaced)
    below = torch.cumsum(orig_g, 0) - orig_g
    wins = (repl_g * below).sum() + 0.5 * (repl_g * orig_g).sum()
    return float(wins) / (n_orig * n_repl)


def phase(disc_auc: float, identity: float) -> str:
    """`reading context` once the discriminator's AUC is clearly above what identity alone allows, else
    `identity` (it may still be reading identity only)."""
    return PHASE_CONTEXT if disc_auc > identity + CONTEXT_MARGIN else PHASE_IDENTITY
