"""Pearson r and Spearman rho with percentile bootstrap intervals that
resample traces (pairs) jointly: between two sources' process scores, and
between annotators' holistic ratings and a source's scores
(docs/agreement.md). The resampling draws come from ``scoring.core.bootstrap``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from agreement.core.pairs import paired_traces, require, score_table, sorted_frame
from scoring.core.bootstrap import check_level, index_chunks, percentile_interval

# Max. number of (resample x trace) cells per bootstrap block: small enough
# for the working arrays to stay in the CPU cache (measured fastest).
_CHUNK_ELEMS = 100_000


def _boot_correlations(
    x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap distributions of Pearson r and Spearman rho of (x, y).

    Each resample draws n trace indices with replacement (one seeded
    generator; index matrix drawn chunk by chunk, the same stream as one
    (n_resamples, n) matrix).  Per resample, with x and y centred on their
    full-sample means (for numerical accuracy):

    * the counts of every distinct x (and y) value in the resample give
      sum x, sum x^2 (sum y, sum y^2) as small matrix products, and
      sum x*y is one gather of the products x_i*y_i; Pearson r is the
      centred dot product cov / sqrt(var_x * var_y) of the resample;
    * Spearman: the average rank of a distinct value within the resample
      is (#resampled values below it) + (its count + 1) / 2, a cumulative
      sum of those counts; Pearson of the ranks then gives rho - identical
      to ``scipy.stats.rankdata`` on each resample, without sorting.

    Resamples in which x or y is constant give NaN.
    """
    n = len(x)
    vals_x, ux = np.unique(x - x.mean(), return_inverse=True)
    vals_y, uy = np.unique(y - y.mean(), return_inverse=True)
    ux, uy = ux.astype(np.int64).ravel(), uy.astype(np.int64).ravel()
    kx, ky = len(vals_x), len(vals_y)
    pxy = vals_x[ux] * vals_y[uy]
    mid = (n + 1) / 2.0
    pear = np.empty(n_resamples)
    spear = np.empty(n_resamples)
    for start, stop, idx in index_chunks(n, n_resamples, seed, _CHUNK_ELEMS):
        k = stop - start
        row = np.arange(k, dtype=np.int64)[:, None]
        fx = ux[idx]
        fx += row * kx  # flat index into the (k, kx) class-count matrix
        fy = uy[idx]
        fy += row * ky
        cnt_x = np.bincount(fx.ravel(), minlength=k * kx).reshape(k, kx).astype(float)
        cnt_y = np.bincount(fy.ravel(), minlength=k * ky).reshape(k, ky).astype(float)
        degenerate = (cnt_x.max(axis=1) == n) | (cnt_y.max(axis=1) == n)

        sx, sxx = cnt_x @ vals_x, cnt_x @ (vals_x * vals_x)
        sy, syy = cnt_y @ vals_y, cnt_y @ (vals_y * vals_y)
        sxy = np.take(pxy, idx).sum(axis=1)
        cov, vx, vy = sxy - sx * sy / n, sxx - sx * sx / n, syy - sy * sy / n
        with np.errstate(invalid="ignore", divide="ignore"):
            pear[start:stop] = np.where(degenerate, np.nan, np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0))

        # centred average rank of each distinct value: cum count - (count - 1)/2 - (n + 1)/2
        ax = np.cumsum(cnt_x, axis=1)
        ax -= 0.5 * cnt_x
        ax += 0.5 - mid
        ay = np.cumsum(cnt_y, axis=1)
        ay -= 0.5 * cnt_y
        ay += 0.5 - mid
        r_xy = np.einsum("ij,ij->i", np.take(ax, fx), np.take(ay, fy))
        r_xx = np.einsum("ij,ij,ij->i", cnt_x, ax, ax)
        r_yy = np.einsum("ij,ij,ij->i", cnt_y, ay, ay)
        with np.errstate(invalid="ignore", divide="ignore"):
            spear[start:stop] = np.where(degenerate, np.nan, np.clip(r_xy / np.sqrt(r_xx * r_yy), -1.0, 1.0))
    return pear, spear


def _interval(stats_: np.ndarray, level: float) -> tuple[list[float] | None, str | None]:
    ci = percentile_interval(stats_, level)
    return (None, "every bootstrap resample was constant") if ci is None else (ci, None)


def correlation(
    x,
    y,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
    names: tuple[str, str] = ("x", "y"),
) -> dict[str, Any]:
    """Pearson r and Spearman rho of paired values, each with a percentile
    bootstrap interval (pairs resampled jointly).

    Pairs with a missing value are dropped.  Keys: n, pearson_r,
    pearson_ci, spearman_rho, spearman_ci ([low, high] or None), undefined.
    Undefined with fewer than 3 pairs or when either side is constant.
    Resamples that happen to be constant are left out of the percentiles
    (as NaN values are in ``aggregate.bootstrap_ci``).
    """
    # Imported here, not at the top: the pages import this module, and SciPy
    # and scikit-learn must not load at every process's start-up.
    from scipy import stats as sps

    check_level(level, n_resamples)
    xa = pd.to_numeric(pd.Series(np.asarray(x, dtype=object).ravel()), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    ya = pd.to_numeric(pd.Series(np.asarray(y, dtype=object).ravel()), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    if len(xa) != len(ya):
        raise ValueError(f"correlation: {len(xa)} {names[0]} values but {len(ya)} {names[1]} values")
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    n = len(xa)
    out: dict[str, Any] = {
        "n": int(n),
        "pearson_r": None,
        "pearson_ci": None,
        "spearman_rho": None,
        "spearman_ci": None,
    }
    undefined: dict[str, str] = {}
    reason = None
    if n < 3:
        reason = f"fewer than 3 paired values (n = {n})"
    elif np.all(xa == xa[0]):
        reason = f"the {names[0]} values are constant"
    elif np.all(ya == ya[0]):
        reason = f"the {names[1]} values are constant"
    if reason:
        for k in ("pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"):
            undefined[k] = reason
        out["undefined"] = undefined
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = float(sps.pearsonr(xa, ya)[0])
        rho = float(sps.spearmanr(xa, ya)[0])
    out["pearson_r"] = max(-1.0, min(1.0, r))
    out["spearman_rho"] = max(-1.0, min(1.0, rho))
    pear, spear = _boot_correlations(xa, ya, int(n_resamples), seed)
    for key, dist in (("pearson_ci", pear), ("spearman_ci", spear)):
        ci, why = _interval(dist, level)
        out[key] = ci
        if why:
            undefined[key] = why
    out["undefined"] = undefined
    return out


def score_correlation(
    reference_scores: pd.DataFrame,
    candidate_scores: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Pearson / Spearman between the two sources' process scores on
    :func:`paired_traces` (see :func:`correlation` for the keys)."""
    p = paired_traces(reference_scores, candidate_scores)
    return score_correlation_of_pairs(p, n_resamples, seed, level)


def score_correlation_of_pairs(pairs: pd.DataFrame, n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    return _correlate_or_explain(
        pairs["reference_process"], pairs["candidate_process"], ("reference process scores", "candidate process scores"),
        "no trace with N >= 1 was labelled completely by both sources", n_resamples, seed, level,
    )


def _correlate_or_explain(x: pd.Series, y: pd.Series, names: tuple[str, str], empty_reason: str,
                          n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    """:func:`correlation`, with ``empty_reason`` as the reason when nothing was paired."""
    out = correlation(x.to_numpy(dtype=float), y.to_numpy(dtype=float), n_resamples=n_resamples, seed=seed,
                      level=level, names=names)
    if len(x) == 0:
        for k in out["undefined"]:
            out["undefined"][k] = empty_reason
    return out


def mean_ratings(ratings: pd.DataFrame) -> pd.Series:
    """Mean 0-10 holistic rating per trace (over annotators).

    ``ratings``: trace_id, rating[, annotator]; null ratings are ignored,
    values outside 0..10 raise ValueError.  Returns a float Series indexed
    by trace_id (sorted), named ``rating``.
    """
    require(ratings, ["trace_id", "rating"], "ratings")
    v = pd.to_numeric(ratings["rating"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    raw_missing = ratings["rating"].isna().to_numpy()
    if (np.isnan(v) & ~raw_missing).any():
        raise ValueError(
            f"ratings: rating must be a number, got {ratings['rating'][np.isnan(v) & ~raw_missing].iloc[0]!r}"
        )
    bad = ~np.isnan(v) & ((v < 0) | (v > 10))
    if bad.any():
        raise ValueError(f"ratings: rating must be within [0, 10], got {v[bad][0]!r}")
    d = pd.DataFrame({"trace_id": ratings["trace_id"].to_numpy(), "rating": v}).dropna(subset=["rating"])
    return d.groupby("trace_id", sort=True)["rating"].mean().rename("rating")


def rating_correlation(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Pearson / Spearman between annotators' holistic ratings (mean per
    trace, :func:`mean_ratings`) and one source's process score.

    Uses the traces with a rating, ``N >= 1`` and complete labels (if
    ``scores`` has a ``complete`` column); keys as :func:`correlation`.
    """
    mr = mean_ratings(ratings)
    s = score_table(scores, "scores")
    s = s.loc[s["complete"].to_numpy() & (s["n"].to_numpy() >= 1)]
    m = pd.DataFrame({"trace_id": mr.index.to_numpy(), "rating": mr.to_numpy()}).merge(
        s[["trace_id", "process"]], on="trace_id", how="inner"
    )
    m = sorted_frame(m, ["trace_id"])
    return _correlate_or_explain(
        m["rating"], m["process"], ("ratings", "process scores"),
        "no rated trace with N >= 1 and complete labels from this source", n_resamples, seed, level,
    )
