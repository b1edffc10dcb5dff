"""Re-identification figures from a ranking, each person weighing once (decision 0027).

Rank-1 and mAP are computed per query as Market-1501 computes them (Zheng et al. 2015), then averaged per test
person, and the figure is the mean over people with a 95% bootstrap interval over people. The field's query sets
hold about one query per person and camera (Market-1501, DukeMTMC-reID, MARS); a clip's tracks do not: one person
walking slowly gives 66 queries, another 1. Averaged over queries, the few long tracks are most of the figure,
its chance is the gallery's imbalance (sum of squared shares, 10.7% on walkway's 17 people) and not 1/N, and the
interval is as wide as whether those few people are drawn. Averaged per person, chance is 1/N exactly.

Folds (``pool_folds``): the audit runs twice, each part of the clip once the attacker's training people and once
its test people, as small re-identification sets are measured over several splits (VIPeR, PRID, iLIDS-VID). Every
person is then a test person once, and the folds' people are pooled into one figure.
"""
from __future__ import annotations

import numpy as np

BOOTSTRAP = 1000


def ranking_scores(similarity: np.ndarray, query_ids: np.ndarray, gallery_ids: np.ndarray) -> tuple:
    """Per query: rank-1 hit (bool) and average precision of the gallery ranked by ``similarity``."""
    order = np.argsort(-similarity, axis=1, kind="stable")
    match = gallery_ids[order] == query_ids[:, None]
    hits = np.cumsum(match, axis=1)
    precision = hits / np.arange(1, match.shape[1] + 1)
    ap = (precision * match).sum(1) / np.maximum(match.sum(1), 1)
    return match[:, 0], ap


def per_person(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The mean of ``values`` for each person of ``ids`` (in the order of np.unique)."""
    people, index = np.unique(ids, return_inverse=True)
    return np.bincount(index, weights=values.astype(float), minlength=len(people)) / np.bincount(index)


def person_interval(values, seed: int) -> dict:
    """Mean of one value per person, with a 95% bootstrap interval over people."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng([seed, 95])
    means = values[rng.integers(len(values), size=(BOOTSTRAP, len(values)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": float(values.mean()), "low": float(low), "high": float(high)}


def grouped_interval(values: np.ndarray, groups: np.ndarray, seed: int) -> dict:
    """Mean of ``values`` over all rows, with a 95% bootstrap interval over ``groups`` (rows of one group are not
    independent: the bank search's substitutes cut from one source row)."""
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    rng = np.random.default_rng([seed, 95])
    means = [values[np.concatenate([members[k] for k in rng.integers(len(members), size=len(members))])].mean()
             for _ in range(BOOTSTRAP)]
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": float(values.mean()), "low": float(low), "high": float(high)}


def figures_from_similarity(similarity: np.ndarray, query_ids: np.ndarray, gallery_ids: np.ndarray,
                            seed: int) -> dict:
    """Rank-1 and mAP of the ranking, each person weighing once; ``per_person`` keeps each person's values, so
    folds pool and a page can show how they spread."""
    hit, ap = ranking_scores(similarity, query_ids, gallery_ids)
    rank1, precision = per_person(hit, query_ids), per_person(ap, query_ids)
    return {"rank1": person_interval(rank1, seed), "mAP": person_interval(precision, seed),
            "queries": int(len(query_ids)), "people": int(len(rank1)),
            "per_person": {"rank1": rank1.round(4).tolist(), "mAP": precision.round(4).tolist()}}


def chance_scores(query_ids: np.ndarray, gallery_ids: np.ndarray, seed: int, draws: int = 20) -> dict:
    """A random ranking of the same gallery, each person weighing once: rank-1 is exact (a person whose share of
    the gallery is s is ranked first with probability s, and the shares of the N people add up to 1, so 1/N when
    every test person is in the gallery); mAP is the mean of ``draws`` random rankings."""
    people = np.unique(query_ids)
    share = np.array([np.mean(gallery_ids == p) for p in people])
    rng = np.random.default_rng([seed, 1])
    ap = [per_person(ranking_scores(rng.random((len(query_ids), len(gallery_ids))), query_ids, gallery_ids)[1],
                     query_ids).mean() for _ in range(draws)]
    return {"rank1": float(share.mean()), "mAP": float(np.mean(ap)), "people": int(len(people))}


def pooled(features: np.ndarray, ids: np.ndarray) -> tuple:
    """(people, one L2-normalised feature each): the mean of each person's features, renormalised."""
    people, index = np.unique(ids, return_inverse=True)
    sums = np.zeros((len(people), features.shape[1]), np.float64)
    np.add.at(sums, index, features)
    return people, sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def multi_shot(gallery: np.ndarray, gallery_ids: np.ndarray, raw: np.ndarray, released: np.ndarray,
               query_ids: np.ndarray, seed: int) -> dict:
    """Each test person's queries pooled into one, ranked against the people's pooled galleries: rank-1 and
    mAP of the raw pool (power) and the released pool, with chance for one query per person."""
    people, gallery_pool = pooled(gallery, gallery_ids)
    result = {}
    for name, queries in (("raw", raw), ("released", released)):
        query_people, query_pool = pooled(queries, query_ids)
        result[name] = figures_from_similarity(query_pool @ gallery_pool.T, query_people, people, seed)
    result["chance"] = chance_scores(np.unique(query_ids), people, seed)
    return result


def trajectory_linkage(timeline: np.ndarray, gallery_rows: np.ndarray, query_rows: np.ndarray, track: np.ndarray,
                       seed: int) -> dict:
    """The release's timeline alone (frame, box centre x): each query ranked against the gallery by distance in
    time and place (frames plus pixels), as an attacker with timestamped raw crops of the camera would."""
    q, g = timeline[query_rows], timeline[gallery_rows]
    distance = np.abs(q[:, None, 0] - g[None, :, 0]) + np.abs(q[:, None, 1] - g[None, :, 1])
    return figures_from_similarity(-distance, track[query_rows], track[gallery_rows], seed)


def pool_figures(figures: list, seed: int) -> dict:
    """One figure over the people of every fold (their per-person values concatenated)."""
    rank1 = np.concatenate([f["per_person"]["rank1"] for f in figures])
    precision = np.concatenate([f["per_person"]["mAP"] for f in figures])
    return {"rank1": person_interval(rank1, seed), "mAP": person_interval(precision, seed),
            "queries": int(sum(f["queries"] for f in figures)), "people": int(len(rank1)),
            "per_person": {"rank1": rank1.tolist(), "mAP": precision.tolist()}}


def pool_chance(chances: list) -> dict:
    """Chance over the people of every fold: each fold's chance weighted by its people."""
    people = np.array([c["people"] for c in chances], dtype=float)
    return {"rank1": float(np.dot(people, [c["rank1"] for c in chances]) / people.sum()),
            "mAP": float(np.dot(people, [c["mAP"] for c in chances]) / people.sum()), "people": int(people.sum())}


def pool_folds(folds: list, seed: int) -> dict:
    """The figures of several folds (identity_audit's results on disjoint test people) as one: raw, released,
    chance, multi-shot and trajectory linkage over all their test people."""
    result = {name: pool_figures([f[name] for f in folds], seed) for name in ("raw", "released")}
    result["chance"] = pool_chance([f["chance"] for f in folds])
    shots = [f["multi_shot"] for f in folds]
    result["multi_shot"] = {name: pool_figures([s[name] for s in shots], seed) for name in ("raw", "released")}
    result["multi_shot"]["chance"] = pool_chance([s["chance"] for s in shots])
    if all("trajectory_linkage" in f for f in folds):
        result["trajectory_linkage"] = pool_figures([f["trajectory_linkage"] for f in folds], seed)
    return result
