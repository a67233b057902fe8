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
the objective). The best identity-only detector scores w by its likelihood ratio replaced(w) / original(w)
(Neyman-Pearson: ranking by the ratio maximises the ROC curve at every threshold); its AUC follows from the
two mass vectors. The masses add up over batches and ranks, like the detection histograms.

What it does not account for: it is computed on the same tokens it is compared with, in expectation rather
than from the samples the discriminator saw, so for words seen a few times it is an optimistic bound; and it
bounds detectors of identity alone (positions are drawn uniformly among the maskable ones, so a position
carries no cue by itself, but a detector of identity and position together is not what it bounds).
"""

from __future__ import annotations

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
    """(2, V) float64: row 0 the expected original mass of each token id, row 1 its expected replaced mass.

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
    replaced = q.sum(0).double()
    replaced.index_add_(0, flat_targets, -kept_own)
    # Maskable positions not selected: originals for certain. Invalid slots point at position 0, which may be
    # a valid slot of the same row: they are sent to an extra column instead.
    B, L = candidates.shape
    target = torch.where(valid, positions, torch.full_like(positions, L))
    selected = torch.zeros(B, L + 1, dtype=torch.bool, device=candidates.device)
    selected.scatter_(1, target, True)
    unmasked = candidates & ~selected[:, :L]
    original = torch.bincount(input_ids[unmasked].reshape(-1), minlength=vocab).double()
    original.index_add_(0, flat_targets, kept_own)
    return torch.stack([original, replaced.clamp_min(0.0)])


def identity_auc(masses: Tensor) -> float:
    """The ROC AUC of scoring each token by its id's likelihood ratio replaced(w) / original(w); ties (one id,
    or ids of equal ratio) count half. nan without both kinds of mass."""
    original, replaced = masses.double().cpu()
    n_orig, n_repl = float(original.sum()), float(replaced.sum())
    if n_orig <= 0 or n_repl <= 0:
        return float("nan")
    # The share replaced(w) / (original(w) + replaced(w)) orders ids as the ratio does and is finite.
    total = original + replaced
    seen = total > 0
    share = replaced[seen] / total[seen]
    original, replaced = original[seen], replaced[seen]
    order = torch.argsort(share)
    share, original, replaced = share[order], original[order], replaced[order]
    # Group equal shares so that ties between ids count half, as ties within one id do.
    _, group = torch.unique_consecutive(share, return_inverse=True)
    groups = int(group.max()) + 1
    orig_g = torch.zeros(groups, dtype=torch.float64).index_add_(0, group, original)
    repl_g = torch.zeros(groups, dtype=torch.float64).index_add_(0, group, replaced)
    below = torch.cumsum(orig_g, 0) - orig_g
    wins = (repl_g * below).sum() + 0.5 * (repl_g * orig_g).sum()
    return float(wins) / (n_orig * n_repl)


def phase(disc_auc: float, identity: float) -> str:
    """ "reading context" once the discriminator's AUC is clearly above what identity alone allows, else
    "identity" (it may still be reading identity only)."""
    return PHASE_CONTEXT if disc_auc > identity + CONTEXT_MARGIN else PHASE_IDENTITY
