"""Aggregates over scored traces: leaderboard (with bootstrap intervals from
``scoring.core.bootstrap``), first-error histogram (spec: "Aggregates"), the box
statistics of a score's distribution and the answer x process quadrants."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from scoring.core.bootstrap import bootstrap_distribution, check_level, percentile_interval
from scoring.core.scores import LUCKY_EPS

__all__ = ["answer_process_quadrants", "box_statistics", "first_error_histogram", "leaderboard", "to_records",
           "LEADERBOARD_COLUMNS"]

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

def _mean_or_none(v: np.ndarray) -> float | None:
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else None


def _group_row(g: pd.DataFrame, n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    a = g["answer_correct"].to_numpy(dtype=bool)
    n_steps = g["n_steps"].to_numpy()
    nonempty = n_steps >= 1
    row: dict[str, Any] = {"traces": int(len(g)), "answer_accuracy": float(a.mean()) if len(g) else None}

    # Bootstrap: metrics with the same non-null pattern share one index
    # matrix; each interval equals bootstrap.bootstrap_ci(non-null values, seed=seed).
    metrics = {m: g[m].to_numpy(dtype=float, na_value=np.nan) for m in ("s_hcrs", "process", "holistic")}
    by_mask: dict[bytes, list[str]] = {}
    for m, v in metrics.items():
        by_mask.setdefault((~np.isnan(v)).tobytes(), []).append(m)
    for names in by_mask.values():
        mask = ~np.isnan(metrics[names[0]])
        block = np.column_stack([metrics[m][mask] for m in names])
        if len(block) >= 2:
            stats = bootstrap_distribution(block, np.mean, n_resamples, seed)
            for j, m in enumerate(names):
                row[f"{m}_ci"] = percentile_interval(stats[:, j], level)
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
      ``scoring.core.bootstrap.bootstrap_ci(values, seed=seed)``); None with fewer than 2 values;
    * lucky_guess_rate = lucky guesses / traces with a correct answer
      (None if there is none);
    * svr = mean validity_rate, vsr = mean all_valid, both over traces with
      N >= 1 (None if there is none).

    The caller decides which traces count (e.g. only completely labelled
    ones); everything passed is aggregated.
    """
    check_level(level, n_resamples)
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


def box_statistics(values: np.ndarray) -> dict[str, Any] | None:
    """A box plot's numbers for ``values`` (NaN left out; None when nothing is left): n, min, quartiles by
    numpy's linear interpolation, max, mean, and the whiskers' ends (Tukey's fences: the most extreme values
    within 1.5 IQR of the quartiles)."""
    v = values[~np.isnan(values)]
    if len(v) == 0:
        return None
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    iqr = q3 - q1
    lo = float(v[v >= q1 - 1.5 * iqr].min())
    hi = float(v[v <= q3 + 1.5 * iqr].max())
    return {"n": int(len(v)), "min": float(v.min()), "q1": float(q1), "median": float(med), "q3": float(q3),
            "max": float(v.max()), "mean": float(v.mean()), "lowerfence": lo, "upperfence": hi}


def answer_process_quadrants(answer_correct: np.ndarray, process: np.ndarray, tau: float) -> dict[str, int]:
    """Traces by answer (correct / wrong) and process score (low: at most ``tau``, as a lucky guess counts it;
    high: above)."""
    a = answer_correct.astype(bool)
    low = process <= tau + LUCKY_EPS
    return {"correct_low": int((a & low).sum()), "correct_high": int((a & ~low).sum()),
            "wrong_low": int((~a & low).sum()), "wrong_high": int((~a & ~low).sum())}


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
