"""A reranker's figures over queries (sentence-transformers' CrossEncoderRerankingEvaluator reports the same):
each query's passages sorted by the model's score, then NDCG@10, MRR@10 and mean average precision, averaged
over the queries that have a relevant passage (a query without one cannot be ranked well or badly).

NDCG uses the relevance itself as the gain (sklearn.metrics.ndcg_score's linear gain), so graded relevance
counts; MRR and average precision count a passage as relevant when its relevance is above 0. Ties in score
keep the passages' order in the file.
"""

from __future__ import annotations

import numpy as np


def _ranked(scores: np.ndarray, relevance: np.ndarray) -> np.ndarray:
    """The relevance of the passages in the order the scores rank them (highest first, stable on ties)."""
    return relevance[np.argsort(-scores, kind="stable")]


def ndcg_at(ranked: np.ndarray, ideal: np.ndarray, k: int) -> float:
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = float(np.sum(ranked[:k] * discounts[: len(ranked[:k])]))
    best = np.sort(ideal)[::-1][:k]
    idcg = float(np.sum(best * discounts[: len(best)]))
    return dcg / idcg if idcg > 0 else 0.0


def reciprocal_rank_at(ranked: np.ndarray, k: int) -> float:
    hits = np.flatnonzero(ranked[:k] > 0)
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


def average_precision(ranked: np.ndarray) -> float:
    relevant = ranked > 0
    if not relevant.any():
        return 0.0
    precision_at = np.cumsum(relevant) / np.arange(1, len(ranked) + 1)
    return float(np.sum(precision_at[relevant]) / relevant.sum())


def ranking_metrics(
    scores: np.ndarray, relevance: np.ndarray, groups: np.ndarray, k: int = 10
) -> dict[str, float]:
    """{"ndcg@k", "mrr@k", "map"} averaged over the groups (queries) that have a relevant passage."""
    scores, relevance, groups = np.asarray(scores, float), np.asarray(relevance, float), np.asarray(groups)
    if not (scores.shape == relevance.shape == groups.shape):
        raise ValueError(f"{scores.size} scores, {relevance.size} relevances and {groups.size} groups")
    ndcg, mrr, ap = [], [], []
    for g in np.unique(groups):
        mine = groups == g
        rel = relevance[mine]
        if not (rel > 0).any():
            continue
        ranked = _ranked(scores[mine], rel)
        ndcg.append(ndcg_at(ranked, rel, k))
        mrr.append(reciprocal_rank_at(ranked, k))
        ap.append(average_precision(ranked))
    if not ndcg:
        raise ValueError("no query has a relevant passage: nothing to rank")
    return {f"ndcg@{k}": float(np.mean(ndcg)), f"mrr@{k}": float(np.mean(mrr)), "map": float(np.mean(ap))}
