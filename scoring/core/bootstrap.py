"""The one percentile bootstrap of ReasonAudit (pure NumPy; spec: "Aggregates").

Every interval in the product -- leaderboard means (``scoring.core.aggregate``),
correlations and agreement metrics (``agreement.core``) -- resamples the same
way, so a seed means the same draws everywhere:

* ``numpy.random.default_rng(seed)``, one generator per interval;
* resample r is row r of an ``(n_resamples, n)`` matrix of indices drawn with
  ``rng.integers(0, n, ...)``; :func:`index_chunks` draws that matrix a block
  of rows at a time (the stream is the same as one draw, so results do not
  depend on the block size, only memory does);
* the interval is the ``(1-level)/2`` and ``(1+level)/2`` percentiles of the
  resampled statistics (NumPy's linear interpolation), leaving out resamples
  where the statistic is undefined (NaN).

That is the ``method="percentile"`` interval of ``scipy.stats.bootstrap``
given the same generator (checked in tests/scoring_core/test_bootstrap.py);
this module exists for speed: callers compute a whole block of resamples at
once from sums (e.g. :func:`resample_counts` turns a block into weights).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

__all__ = ["bootstrap_ci", "bootstrap_distribution", "check_level", "index_chunks", "percentile_interval",
           "resample_counts"]

#: Default max. number of (resample x item) indices held per block.
CHUNK_ELEMS = 4_000_000


def check_level(level: float, n_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be within (0, 1), got {level!r}")
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples!r}")


def index_chunks(n: int, n_resamples: int, seed: int | None,
                 chunk_elems: int | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield ``(start, stop, idx)``: rows ``start:stop`` of the resample index
    matrix, ``idx`` of shape ``(stop - start, n)``, at most about
    ``chunk_elems`` indices per block (default :data:`CHUNK_ELEMS`, read at
    call time so a test can shrink it)."""
    rng = np.random.default_rng(seed)
    step = max(1, int(CHUNK_ELEMS if chunk_elems is None else chunk_elems) // max(1, n))
    for start in range(0, n_resamples, step):
        stop = min(n_resamples, start + step)
        yield start, stop, rng.integers(0, n, size=(stop - start, n))


def resample_counts(idx: np.ndarray, n: int) -> np.ndarray:
    """How often each of the ``n`` items occurs in each resample of a block:
    float ``(k, n)``; ``counts @ per_item_sums`` gives every resample's sums."""
    k = idx.shape[0]
    flat = (idx + np.arange(k, dtype=np.int64)[:, None] * n).ravel()
    return np.bincount(flat, minlength=k * n).reshape(k, n).astype(float)


def percentile_interval(stats: np.ndarray, level: float) -> list[float] | None:
    """[low, high] percentile interval of a bootstrap distribution, NaN
    resamples left out; None when no resample is defined."""
    ok = np.asarray(stats, dtype=float)
    ok = ok[~np.isnan(ok)]
    if len(ok) == 0:
        return None
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(ok, [tail, 100.0 - tail])
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return [float(lo), float(hi)]


def _apply_stat(stat: Callable, samples: np.ndarray) -> np.ndarray:
    """stat over axis 1 of a (k, n) sample block -> (k,)."""
    if stat is np.mean:
        return samples.sum(axis=1) / samples.shape[1]
    try:
        r = np.asarray(stat(samples, axis=1), dtype=float)
        if r.shape == (samples.shape[0],):
            return r
    except TypeError:
        pass
    return np.array([float(stat(row)) for row in samples])


def bootstrap_distribution(values: np.ndarray, stat: Callable, n_resamples: int, seed: int | None,
                           chunk_elems: int | None = None) -> np.ndarray:
    """Bootstrap distribution of ``stat`` for each column of ``values`` (n, m),
    resampling rows with one shared index matrix.  Returns (n_resamples, m)."""
    n, m = values.shape
    cols = [np.ascontiguousarray(values[:, j]) for j in range(m)]
    out = np.empty((n_resamples, m))
    for start, stop, idx in index_chunks(n, n_resamples, seed, chunk_elems):
        for j, col in enumerate(cols):
            out[start:stop, j] = _apply_stat(stat, np.take(col, idx))
    return out


def bootstrap_ci(
    values,
    stat: Callable = np.mean,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat(values)``.

    NaN/None values are dropped first; returns None when fewer than 2 values
    remain.  ``stat`` should accept an ``axis`` keyword (numpy reductions
    do) for speed; other callables are applied sample by sample.
    """
    # pandas here, not with the module: the faithfulness runs' kinds import this module at every process's
    # start-up (a command that never computes an interval paid half a second of CPU for it).
    import pandas as pd

    check_level(level, n_resamples)
    arr = np.asarray(values) if not isinstance(values, pd.Series) else values.to_numpy()
    if arr.dtype.kind in "fiub":
        v = arr.astype(float).ravel()
    else:
        v = pd.to_numeric(pd.Series(arr.ravel(), dtype=object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    v = v[~np.isnan(v)]
    if len(v) < 2:
        return None
    ci = percentile_interval(bootstrap_distribution(v.reshape(-1, 1), stat, int(n_resamples), seed)[:, 0], level)
    return None if ci is None else (ci[0], ci[1])
