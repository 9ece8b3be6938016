"""Aggregates over scored traces: bootstrap intervals, leaderboard,
first-error histogram (spec: "Aggregates")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["bootstrap_ci", "first_error_histogram", "leaderboard", "to_records", "LEADERBOARD_COLUMNS"]

LEADERBOARD_COLUMNS = [
    "traces",
    "answer_accuracy",
    "s_hcrs_mean",
    "s_hcrs_ci",
    "process_mean",
    "process_ci",
    "s_prm_mean",
    "holistic_mean",
    "holistic_ci",
    "lucky_guess_rate",
    "svr",
    "vsr",
]

# Max. number of gathered values held in memory per bootstrap chunk.
_CHUNK_ELEMS = 4_000_000


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


def _boot_stats(values: np.ndarray, stat: Callable, n_resamples: int, seed: int | None) -> np.ndarray:
    """Bootstrap distribution of ``stat`` for each column of ``values`` (n, m),
    resampling rows with one shared index matrix.  Returns (n_resamples, m).

    Indices are drawn chunk by chunk from one seeded generator; the stream is
    identical to drawing the whole (n_resamples, n) matrix at once, so the
    result does not depend on the chunk size.
    """
    n, m = values.shape
    cols = [np.ascontiguousarray(values[:, j]) for j in range(m)]
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, m))
    k = max(1, _CHUNK_ELEMS // max(1, n))
    for start in range(0, n_resamples, k):
        stop = min(n_resamples, start + k)
        idx = rng.integers(0, n, size=(stop - start, n))
        for j, col in enumerate(cols):
            out[start:stop, j] = _apply_stat(stat, np.take(col, idx))
    return out


def _percentile_ci(stats: np.ndarray, level: float) -> tuple[float, float] | None:
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.nanpercentile(stats, [tail, 100.0 - tail], axis=0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return float(lo), float(hi)


def _check_level(level: float, n_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be within (0, 1), got {level!r}")
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples!r}")


def bootstrap_ci(
    values,
    stat: Callable = np.mean,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat(values)``.

    NaN/None values are dropped first; returns None when fewer than 2 values
    remain.  ``n_resamples`` samples of the same size are drawn with
    replacement using ``numpy.random.default_rng(seed)``; the interval is
    the ((1-level)/2, (1+level)/2) percentiles (numpy's linear
    interpolation) of the resampled statistics.  ``stat`` should accept an
    ``axis`` keyword (numpy reductions do) for speed; other callables are
    applied sample by sample.
    """
    _check_level(level, n_resamples)
    arr = np.asarray(values) if not isinstance(values, pd.Series) else values.to_numpy()
    if arr.dtype.kind in "fiub":
        v = arr.astype(float).ravel()
    else:
        v = pd.to_numeric(pd.Series(arr.ravel(), dtype=object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    v = v[~np.isnan(v)]
    if len(v) < 2:
        return None
    stats = _boot_stats(v.reshape(-1, 1), stat, int(n_resamples), seed)[:, 0]
    return _percentile_ci(stats, level)


def _mean_or_none(v: np.ndarray) -> float | None:
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else None


def _group_row(g: pd.DataFrame, n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    a = g["answer_correct"].to_numpy(dtype=bool)
    n_steps = g["n_steps"].to_numpy()
    nonempty = n_steps >= 1
    row: dict[str, Any] = {"traces": int(len(g)), "answer_accuracy": float(a.mean()) if len(g) else None}

    # Bootstrap: metrics with the same non-null pattern share one index
    # matrix; each interval equals bootstrap_ci(non-null values, seed=seed).
    metrics = {m: g[m].to_numpy(dtype=float, na_value=np.nan) for m in ("s_hcrs", "process", "holistic")}
    by_mask: dict[bytes, list[str]] = {}
    for m, v in metrics.items():
        by_mask.setdefault((~np.isnan(v)).tobytes(), []).append(m)
    for names in by_mask.values():
        mask = ~np.isnan(metrics[names[0]])
        block = np.column_stack([metrics[m][mask] for m in names])
        if len(block) >= 2:
            stats = _boot_stats(block, np.mean, n_resamples, seed)
            for j, m in enumerate(names):
                row[f"{m}_ci"] = _percentile_ci(stats[:, j], level)
        else:
            for m in names:
                row[f"{m}_ci"] = None
    for m, v in metrics.items():
        row[f"{m}_mean"] = _mean_or_none(v)
        if row[f"{m}_ci"] is not None:
            row[f"{m}_ci"] = list(row[f"{m}_ci"])
    row["s_prm_mean"] = _mean_or_none(g["s_prm"].to_numpy(dtype=float, na_value=np.nan))

    correct = int(a.sum())
    row["lucky_guess_rate"] = float(g["lucky_guess"].to_numpy(dtype=bool)[a].sum() / correct) if correct else None
    if nonempty.any():
        row["svr"] = float(np.mean(g["validity_rate"].to_numpy(dtype=float, na_value=np.nan)[nonempty]))
        row["vsr"] = float(np.mean(g["all_valid"].to_numpy(dtype=float, na_value=np.nan)[nonempty]))
    else:
        row["svr"] = row["vsr"] = None
    return row


def leaderboard(
    scored: pd.DataFrame,
    group_col: str | None = "model",
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """One row per group (e.g. model) of a score table.

    ``scored`` is the output of ``score_traces`` plus the ``group_col``
    column.  Rows are sorted by group; with ``group_col=None`` there is one
    row for the whole table.  Columns: <group_col>, traces,
    answer_accuracy, s_hcrs_mean, s_hcrs_ci, process_mean, process_ci,
    s_prm_mean, holistic_mean, holistic_ci, lucky_guess_rate, svr, vsr.

    * means ignore nulls (s_hcrs is null when L = 0); a mean over no value
      is None;
    * ``*_ci`` = [low, high] percentile bootstrap interval over the group's
      traces (non-null values), ``n_resamples`` resamples, seeded with
      ``seed`` for every group and metric (so each interval equals
      ``bootstrap_ci(values, seed=seed)``); None with fewer than 2 values;
    * lucky_guess_rate = lucky guesses / traces with a correct answer
      (None if there is none);
    * svr = mean validity_rate, vsr = mean all_valid, both over traces with
      N >= 1 (None if there is none).

    The caller decides which traces count (e.g. only completely labelled
    ones); everything passed is aggregated.
    """
    _check_level(level, n_resamples)
    need = [
        "n_steps",
        "answer_correct",
        "s_hcrs",
        "process",
        "s_prm",
        "holistic",
        "lucky_guess",
        "validity_rate",
        "all_valid",
    ]
    missing = [c for c in need + ([group_col] if group_col else []) if c not in scored.columns]
    if missing:
        raise ValueError(f"scored: missing column(s) {missing}")
    rows = []
    if group_col is None:
        rows.append(_group_row(scored, int(n_resamples), seed, level))
        cols = LEADERBOARD_COLUMNS
    else:
        for key, g in scored.groupby(group_col, sort=True, dropna=False):
            row = {group_col: key}
            row.update(_group_row(g, int(n_resamples), seed, level))
            rows.append(row)
        cols = [group_col] + LEADERBOARD_COLUMNS
    out = pd.DataFrame(rows, columns=cols)
    # Keep None (not NaN) for undefined values so rows serialise to null.
    return out.astype(object).where(out.notna(), None)


def first_error_histogram(scored: pd.DataFrame, group_col: str | None = None) -> pd.DataFrame:
    """Counts of first-error steps over non-empty traces.

    Columns [group_col,] first_error, traces, fraction: one row per step
    1..(largest first error in the group) including zero counts, then one row
    with first_error = NA for traces without error.  fraction = traces /
    non-empty traces of the group.
    """
    cols = ([group_col] if group_col else []) + ["first_error", "traces", "fraction"]
    df = scored.loc[scored["n_steps"].to_numpy() >= 1]
    groups = [(None, df)] if group_col is None else list(df.groupby(group_col, sort=True, dropna=False))
    parts = []
    for key, g in groups:
        fe = g["first_error"].to_numpy(dtype=float, na_value=np.nan)
        fe = np.nan_to_num(fe, nan=0.0).astype(np.int64)
        counts = np.bincount(fe, minlength=1)
        steps = np.arange(1, len(counts))
        part = pd.DataFrame(
            {
                "first_error": pd.array(list(steps) + [pd.NA], dtype="Int64"),
                "traces": np.concatenate([counts[1:], [counts[0]]]).astype(np.int64),
            }
        )
        part["fraction"] = part["traces"] / max(1, len(g))
        if group_col is not None:
            part.insert(0, group_col, key)
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True)[cols]


def _native(x: Any) -> Any:
    if x is None or x is pd.NA or x is pd.NaT:
        return None
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_native(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def _column_values(s: pd.Series) -> list:
    if s.dtype == object:
        return [_native(v) for v in s.tolist()]
    obj = s.astype(object)
    return obj.where(s.notna().to_numpy(), None).tolist()


def to_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: native Python types, None for NaN/NA,
    tuples and arrays as lists."""
    cols = [str(c) for c in df.columns]
    values = [_column_values(df.iloc[:, j]) for j in range(df.shape[1])]
    return (
        [dict(zip(cols, row, strict=True)) for row in zip(*values, strict=True)]
        if cols
        else [{} for _ in range(len(df))]
    )
